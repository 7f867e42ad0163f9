"""Timing shared by the PyTorch benchmarks: host cost per call with the stream kept busy."""
import statistics
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
