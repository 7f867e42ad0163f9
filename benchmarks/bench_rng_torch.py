"""PyTorch counterpart of bench_rng: host cost of CUDAGraph.replay() for a graph with
torch.rand in it against the same graph without RNG, with the stream kept busy. Writes
the figures as JSON."""
import sys

import torch
from torch_timing import capture, host_cost, write_figures

N = 1 << 20


def main():
    if not torch.cuda.is_available():
        print("bench_rng_torch: no CUDA device")
        return 77
    out = torch.empty(N, device="cuda")
    base = torch.rand(N, device="cuda")
    with_rng = capture(lambda: out.uniform_())
    without_rng = capture(lambda: out.copy_(base))
    a = host_cost(with_rng.replay, reps=80, sleep_cycles=2_000_000)
    b = host_cost(without_rng.replay, reps=80, sleep_cycles=2_000_000)
    print(f"torch replay host cost: with RNG {a:.3f} us, without {b:.3f} us: ratio {a / b:.3f}")
    figures = {"benchmark": "rng_torch", "torch": torch.__version__,
               "torch_replay_host_us_with_rng": a, "torch_replay_host_us_without_rng": b}
    write_figures(figures, "bench_rng_torch.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
