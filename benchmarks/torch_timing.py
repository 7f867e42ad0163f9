"""Shared by the PyTorch benchmarks: capture, host cost per call with the stream kept busy,
and the JSON figures."""
import json
import statistics
import sys
import time

import torch


def host_cost(call, batch=32, reps=60, warmup=5, sleep_cycles=3_000_000):
    """Median host microseconds per call over `reps` batches of `batch` calls, each batch
    queued behind a sleeping kernel so that no call waits for the device."""
    per = []
    for rep in range(reps + warmup):
        torch.cuda._sleep(sleep_cycles)
        t0 = time.perf_counter()
        for _ in range(batch):
            call()
        t = (time.perf_counter() - t0) / batch * 1e6
        torch.cuda.synchronize()
        if rep >= warmup:
            per.append(t)
    return statistics.median(per)


def capture(fn, warmup=3):
    """A CUDAGraph of fn(), after `warmup` eager calls on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def write_figures(figures, default_path):
    """Writes `figures` as JSON to the first command-line argument, else `default_path`."""
    path = sys.argv[1] if len(sys.argv) > 1 else default_path
    with open(path, "w") as fh:
        json.dump(figures, fh, indent=2)
    print(f"figures written to {path}")
