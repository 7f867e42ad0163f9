"""Timing helpers of bench_suite_torch.py, measured the way bench_suite measures cugraphs
(benchmarks/bench_common.hpp): host cost per call with the stream kept busy, medians, and
the same JSON layout."""
import json
import os
import statistics
import time

import torch

# torch.cuda._sleep counts GPU clock cycles; about 2 GHz on the H200. A wrong guess only
# changes how often a batch is retried with a longer sleep, never the figures.
CYCLES_PER_US = 2000
MIN_SLEEP_CYCLES = 1000 * CYCLES_PER_US  # 1 ms
MAX_SLEEP_CYCLES = 400_000_000  # 0.2 s


def reps(n, floor=3):
    """Repetition counts scaled by CUGRAPHS_BENCH_SCALE, as in bench_suite."""
    try:
        scale = float(os.environ.get("CUGRAPHS_BENCH_SCALE", "1"))
    except ValueError:
        scale = 1.0
    if scale <= 0:
        scale = 1.0
    return max(floor, round(n * scale))


class HostTimer:
    """Host microseconds per call, with each batch of calls queued behind a sleeping kernel
    so that no call waits for the device. An event recorded after the sleep tells whether
    the sleep ended before the batch did; such a batch runs once more behind a sleep four
    times as long (at least three times the failed batch), and if that is still too short it
    counts in `uncovered`. After a covered batch the sleep becomes three times that batch, or
    half the previous sleep if that is longer (at least 1 ms), as in bench_suite: an outlier
    is forgotten within a few batches, and an uncovered batch never changes it."""

    def __init__(self):
        self.sleep_cycles = MIN_SLEEP_CYCLES
        self.uncovered = 0
        self.after_sleep = torch.cuda.Event()

    def batch(self, call, n):
        us = 0.0
        for attempt in range(2):
            retry = max(self.sleep_cycles * 4, int(us * 3 * CYCLES_PER_US))
            torch.cuda._sleep(self.sleep_cycles if attempt == 0 else min(retry, MAX_SLEEP_CYCLES))
            self.after_sleep.record()
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            us = (time.perf_counter() - t0) * 1e6
            covered = not self.after_sleep.query()
            torch.cuda.synchronize()
            if covered:
                self.sleep_cycles = min(max(int(us * 3 * CYCLES_PER_US), self.sleep_cycles // 2, MIN_SLEEP_CYCLES),
                                        MAX_SLEEP_CYCLES)
                return us / n
        self.uncovered += 1
        return us / n

    def note_uncovered(self):
        if self.uncovered:
            print(f"  note: {self.uncovered} batch(es) outlasted their sleep twice: those host costs may include "
                  "waiting for the device")

    def medians(self, calls, n, count, warmup=3):
        """Median host microseconds per call of each of `calls`, in batches of `n` (one size,
        or a list of one per call), rotating which goes first from one round to the next."""
        sizes = list(n) if isinstance(n, (list, tuple)) else [n] * len(calls)
        if len(sizes) != len(calls):
            raise ValueError("medians: one batch size per call")
        samples = [[] for _ in calls]
        for r in range(warmup + count):
            for k in range(len(calls)):
                which = (k + r) % len(calls)
                us = self.batch(calls[which], sizes[which])
                if r >= warmup:
                    samples[which].append(us)
        return [statistics.median(s) for s in samples]


def to_done(call, calls=100, count=7):
    """Median microseconds per call of `calls` back-to-back calls, to completion."""
    per = []
    for r in range(count + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        if r > 0:
            per.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(per)


def warm_up(fn, iterations=3):
    """Runs fn() eagerly on a side stream, as PyTorch asks before a capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(iterations):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def capture(fn, warmup=3, pool=None):
    """A CUDAGraph of fn(), after `warmup` eager calls on a side stream."""
    if warmup:
        warm_up(fn, warmup)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        fn()
    return g


def write_figures(figures, path, quiet=False):
    """Writes `figures` (the bench_suite JSON layout) to `path`; non-finite numbers as null."""
    def clean(v):
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    with open(path, "w") as fh:
        json.dump(clean(figures), fh, indent=2)
        fh.write("\n")
    if not quiet:
        print(f"figures written to {path}")
