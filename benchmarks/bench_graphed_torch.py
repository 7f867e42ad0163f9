"""PyTorch counterpart of bench_graphed: host cost per call, with the stream kept busy, of
(1) static.copy_(x) per input + CUDAGraph.replay() and (2) a torch.cuda.make_graphed_callables
callable, for 1, 4 and 16 inputs of 1024 floats (4 KiB). Writes the figures as JSON."""
import sys

import torch
from torch_timing import capture, host_cost, write_figures

FLOATS = 1024


def run(n):
    inputs = [torch.randn(FLOATS, device="cuda") for _ in range(n)]
    statics = [torch.zeros(FLOATS, device="cuda") for _ in range(n)]

    def f(*xs):
        return torch.stack(xs).sum(0)

    g = capture(lambda: f(*statics))

    def copy_replay():
        for s, x in zip(statics, inputs):
            s.copy_(x)
        g.replay()

    graphed = torch.cuda.make_graphed_callables(f, tuple(torch.randn(FLOATS, device="cuda") for _ in range(n)))

    def call_graphed():
        graphed(*inputs)

    with torch.no_grad():
        a = host_cost(g.replay)
        b = host_cost(copy_replay)
        c = host_cost(call_graphed)
    print(f"{n:2d} inputs | torch host us/call: replay {a:7.2f}  copy_+replay {b:7.2f}  make_graphed_callables {c:7.2f}")
    return {f"torch_inputs_{n}_replay_host_us": a, f"torch_inputs_{n}_copy_replay_host_us": b,
            f"torch_inputs_{n}_graphed_callable_host_us": c}


def main():
    if not torch.cuda.is_available():
        print("bench_graphed_torch: no CUDA device")
        return 77
    figures = {"benchmark": "graphed_torch", "torch": torch.__version__}
    for n in (1, 4, 16):
        figures.update(run(n))
    write_figures(figures, "bench_graphed_torch.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
