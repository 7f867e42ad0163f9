"""PyTorch counterpart of bench_suite: the same workloads through torch.cuda.graphs, measured
the same way, written in the same JSON layout (the same section names and x-axis keys;
every series name starts with torch_), so that tools/plot-perf can lay the two side by side.

    python3 benchmarks/bench_suite_torch.py [FIGURES.json [SECTION...]]

Sections: replay capture eager graphed rng memory training buckets (default: all). Exits 77 without PyTorch
or without a CUDA device. CUGRAPHS_BENCH_SCALE scales the repetitions, as in bench_suite.
"""
import gc
import statistics
import sys
import time

try:
    import torch
except ImportError:
    torch = None

NODE_COUNTS = [1, 10, 100, 1000, 10000]
INPUT_COUNTS = [1, 2, 4, 8, 16, 32, 64]
GRAPH_COUNTS = [1, 2, 4, 8, 16, 32, 64]
FLOATS = 1024  # 4 KiB: tiny kernels and graphed-callable inputs, as in bench_suite
SETS = 4  # graphed-callable input sets rotated from call to call
TEMP_FLOATS = 1 << 20  # 4 MiB temporaries in the memory section
MIB = 1024.0 * 1024.0


def batch_for(nodes):
    """Batch sizes of bench_suite's replay section."""
    return 4 if nodes >= 10000 else 16 if nodes >= 1000 else 32


def chain(x, nodes):
    """A step of `nodes` tiny in-place kernels."""
    def step():
        for _ in range(nodes):
            x.add_(1.0)
    return step


def replay_section(T):
    x = torch.zeros(FLOATS, device="cuda")
    timer = T.HostTimer()
    out = {"nodes": [], "torch_us": []}
    print("\n== torch: CUDAGraph.replay() host cost")
    for n in NODE_COUNTS:
        g = T.capture(chain(x, n))
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        count = T.reps(20 if n >= 10000 else 40 if n >= 1000 else 100)
        (us,) = timer.medians([g.replay], batch_for(n), count)
        print(f"{n:8d} nodes {us:10.3f} us")
        out["nodes"].append(n)
        out["torch_us"].append(us)
        del g
    timer.note_uncovered()
    out["torch_uncovered_batches"] = timer.uncovered
    return out


def capture_section(T):
    x = torch.zeros(FLOATS, device="cuda")
    out = {"nodes": [], "torch_us": [], "torch_record_us": [], "torch_first_replay_us": []}
    print("\n== torch: capture + instantiate (the torch.cuda.graph block, then a synchronize)")
    # torch.cuda.graph's __enter__ synchronizes and empties the allocator's cache (gc.collect
    # too, only under torch.compiler.config.force_cudagraph_gc): done just before the clock
    # starts, so that freeing the previous graph's pool (as cugraphs' previous Graph is
    # destroyed outside its timing) and waiting for earlier work stay out of the figures.
    for n in NODE_COUNTS:
        step = chain(x, n)
        T.warm_up(step)
        total, record, first = [], [], []
        count = T.reps(5 if n >= 10000 else 9 if n >= 1000 else 31)
        for r in range(count + 1):  # round 0 warms up
            g = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            t0 = time.perf_counter()
            with torch.cuda.graph(g):
                step()
                t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            # PyTorch uploads on the first replay, which cugraphs does in capture_end.
            g.replay()
            torch.cuda.synchronize()
            t3 = time.perf_counter()
            if r > 0:
                total.append((t2 - t0) * 1e6)
                record.append((t1 - t0) * 1e6)
                first.append((t3 - t2) * 1e6)
            del g
        med = statistics.median
        print(f"{n:8d} nodes {med(total):10.1f} us (recording {med(record):.1f} us; first replay to done {med(first):.1f} us)")
        out["nodes"].append(n)
        out["torch_us"].append(med(total))
        out["torch_record_us"].append(med(record))
        out["torch_first_replay_us"].append(med(first))
    return out


def eager_section(T):
    x = torch.zeros(FLOATS, device="cuda")
    out = {"nodes": [], "torch_eager_us": [], "torch_replay_us": []}
    print("\n== torch: eager vs replay, to completion")
    for n in NODE_COUNTS:
        step = chain(x, n)
        g = T.capture(step)
        eager, replay = [], []
        count = T.reps(7 if n >= 10000 else 21 if n >= 1000 else 101 if n >= 100 else 201)
        for r in range(count + 2):  # rounds 0 and 1 warm up
            for which in range(2):
                eager_now = (which == 0) == (r % 2 == 0)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                if eager_now:
                    step()
                else:
                    g.replay()
                torch.cuda.synchronize()
                us = (time.perf_counter() - t0) * 1e6
                if r >= 2:
                    (eager if eager_now else replay).append(us)
        med = statistics.median
        print(f"{n:8d} nodes eager {med(eager):10.1f} us  replay {med(replay):10.1f} us  {med(eager) / med(replay):7.2f}x")
        out["nodes"].append(n)
        out["torch_eager_us"].append(med(eager))
        out["torch_replay_us"].append(med(replay))
        del g
    return out


def graphed_section(T):
    timer = T.HostTimer()
    keys = ["torch_graphed_us", "torch_copy_replay_us", "torch_replay_us",
            "torch_graphed_done_us", "torch_copy_replay_done_us", "torch_replay_done_us"]
    out = {"inputs": [], **{k: [] for k in keys}}
    print("\n== torch: make_graphed_callables call vs copy_ per input + replay vs replay (host us per call)")

    def f(*xs):
        return torch.stack(xs).sum(0)

    for n in INPUT_COUNTS:
        sets = [[torch.randn(FLOATS, device="cuda") for _ in range(n)] for _ in range(SETS)]
        statics = [torch.randn(FLOATS, device="cuda") for _ in range(n)]
        g = T.capture(lambda: f(*statics))
        graphed = torch.cuda.make_graphed_callables(f, tuple(torch.randn(FLOATS, device="cuda") for _ in range(n)))
        turn = [0]

        def next_set():
            turn[0] += 1
            return sets[turn[0] % SETS]

        def copy_replay():
            for s, x in zip(statics, next_set()):
                s.copy_(x)
            g.replay()

        def call_graphed():
            graphed(*next_set())

        # As in bench_suite: batches of 16, and at most 256 queued copies a batch.
        copies = min(16, max(4, 256 // n))
        with torch.no_grad():
            a, b, c = timer.medians([call_graphed, copy_replay, g.replay], [copies, copies, 16], T.reps(40))
            da, db, dc = (T.to_done(fn, 100, T.reps(7)) for fn in (call_graphed, copy_replay, g.replay))
        print(f"{n:6d} inputs: callable {a:8.2f}  copy_+replay {b:8.2f}  replay {c:7.2f} | to done {da:.2f} / {db:.2f} / {dc:.2f}")
        out["inputs"].append(n)
        for k, v in zip(keys, (a, b, c, da, db, dc)):
            out[k].append(v)
        del g, graphed
    timer.note_uncovered()
    out["torch_uncovered_batches"] = timer.uncovered
    return out


def rng_section(T):
    n = 1 << 20
    out_t = torch.empty(n, device="cuda")
    base = torch.rand(n, device="cuda")
    with_rng = T.capture(lambda: out_t.uniform_())
    without_rng = T.capture(lambda: out_t.copy_(base))
    timer = T.HostTimer()
    a, b = timer.medians([with_rng.replay, without_rng.replay], 32, T.reps(80), warmup=5)
    da, db = T.to_done(with_rng.replay, 100, T.reps(9)), T.to_done(without_rng.replay, 100, T.reps(9))
    timer.note_uncovered()
    print(f"\n== torch: replay host cost with uniform_ {a:.3f} us, without {b:.3f} us: ratio {a / b:.3f}")
    return {"torch_with_rng_us": a, "torch_without_rng_us": b, "torch_with_rng_done_us": da,
            "torch_without_rng_done_us": db, "torch_uncovered_batches": timer.uncovered}


def memory_section(T):
    out = {"graphs": [], "temp_mib": TEMP_FLOATS * 4 / MIB, "torch_shared_mib": [], "torch_separate_mib": []}
    print("\n== torch: memory_reserved() growth for N graphs with a 4 MiB temporary: shared pool vs separate")

    def body():
        temp = torch.empty(TEMP_FLOATS, device="cuda")
        temp.fill_(2.0)
        del temp  # freed inside the capture, as in bench_suite

    def clean():
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    for n in GRAPH_COUNTS:
        clean()
        r0 = torch.cuda.memory_reserved()
        pool = torch.cuda.graph_pool_handle()
        shared = [T.capture(body, warmup=0, pool=pool) for _ in range(n)]
        r1 = torch.cuda.memory_reserved()
        separate = [T.capture(body, warmup=0) for _ in range(n)]
        r2 = torch.cuda.memory_reserved()
        for g in shared + separate:  # shared ones in capture order, as a shared pool requires
            g.replay()
        torch.cuda.synchronize()
        s, p = (r1 - r0) / MIB, (r2 - r1) / MIB
        print(f"{n:4d} graphs: shared {s:8.1f} MiB  separate {p:8.1f} MiB")
        out["graphs"].append(n)
        out["torch_shared_mib"].append(s)
        out["torch_separate_mib"].append(p)
        del shared, separate, pool, g  # g: the last graph replayed
    clean()
    return out


def training_section(T):
    """One SGD step of bench_suite's perceptron (32-128-128-8, batch 256, MSE loss): eager, with
    the module made by make_graphed_callables (forward and backward graphs; the loss and the
    optimizer step eager, as that API leaves them), and the whole step captured into one graph
    with torch.cuda.graph (PyTorch's fastest path, for reference)."""
    batch, d_in, hidden, d_out, lr, sets = 256, 32, 128, 8, 0.05, 4
    torch.manual_seed(0)

    def model():
        return torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                                   torch.nn.ReLU(), torch.nn.Linear(hidden, d_out)).cuda()

    xs = [torch.rand(batch, d_in, device="cuda") * 2 - 1 for _ in range(sets)]
    ts = [torch.randn(batch, d_out, device="cuda") for _ in range(sets)]
    turn = [0]

    def batch_data():
        turn[0] += 1
        i = turn[0] % sets
        return xs[i], ts[i]

    def stepper(module, opt):
        def step():
            x, t = batch_data()
            loss = torch.nn.functional.mse_loss(module(x), t)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    eager_model = model()
    eager_step = stepper(eager_model, torch.optim.SGD(eager_model.parameters(), lr=lr))
    graphed_model = model()
    graphed_opt = torch.optim.SGD(graphed_model.parameters(), lr=lr)
    graphed_module = torch.cuda.make_graphed_callables(graphed_model, (xs[0].clone(),))
    graphed_step = stepper(graphed_module, graphed_opt)

    # The whole step in one graph, as in PyTorch's "whole network capture" example.
    whole_model = model()
    whole_opt = torch.optim.SGD(whole_model.parameters(), lr=lr)
    static_x, static_t = xs[0].clone(), ts[0].clone()

    def whole_body():
        loss = torch.nn.functional.mse_loss(whole_model(static_x), static_t)
        loss.backward()
        whole_opt.step()

    whole_opt.zero_grad(set_to_none=True)
    T.warm_up(whole_body)
    whole_opt.zero_grad(set_to_none=True)
    whole_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(whole_graph):
        whole_body()

    def whole_step():
        x, t = batch_data()
        static_x.copy_(x)
        static_t.copy_(t)
        whole_graph.replay()

    for fn in (eager_step, graphed_step, whole_step):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    timer = T.HostTimer()
    a, b, c = timer.medians([eager_step, graphed_step, whole_step], [8, 8, 16], T.reps(40))
    da, db, dc = (T.to_done(fn, 100, T.reps(7)) for fn in (eager_step, graphed_step, whole_step))
    timer.note_uncovered()
    print(f"\n== torch: training step host cost: eager {a:.1f} us, make_graphed_callables {b:.1f} us, whole-step "
          f"graph {c:.1f} us | to done {da:.1f} / {db:.1f} / {dc:.1f} us")
    return {"torch_eager_us": a, "torch_graphed_us": b, "torch_whole_graph_us": c, "torch_eager_done_us": da,
            "torch_graphed_done_us": db, "torch_whole_graph_done_us": dc, "torch_uncovered_batches": timer.uncovered}


def buckets_section(T):
    """bench_suite's graph-cache workload: examples/toy_model.cuh's step (vocab 512, dim 256,
    hidden 1024) captured with torch.cuda.graph per bucket of vLLM's sizes (1, 2, 4, 8, 16,
    ..., 512), the N largest into one shared pool (graph_pool_handle, largest first, each
    graph's outputs held as PyTorch users hold static outputs) against the largest alone;
    and per bucket, the capture block and the first replay to completion."""
    vocab, dim, hidden, max_rows = 512, 256, 1024, 512
    buckets = [1, 2, 4] + list(range(8, max_rows + 1, 8))
    gen = torch.Generator(device="cuda").manual_seed(3)
    embed = torch.rand(vocab, dim, device="cuda", generator=gen) * 2 - 1
    w1 = (torch.rand(dim, hidden, device="cuda", generator=gen) * 2 - 1) * 0.0625
    b1 = (torch.rand(hidden, device="cuda", generator=gen) * 2 - 1) * 0.1
    w2 = (torch.rand(hidden, vocab, device="cuda", generator=gen) * 2 - 1) * 0.03
    b2 = (torch.rand(vocab, device="cuda", generator=gen) * 2 - 1) * 0.1
    tokens = (torch.arange(max_rows, device="cuda") * 37) % vocab

    def step(rows):
        x = embed[tokens[:rows]]
        h = torch.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        return logits, torch.argmax(logits, dim=1)

    def clean():
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    # One capture stream for every capture, warmed up on every bucket first: cuBLAS's
    # workspace for that stream, and every kernel, exist before anything is measured.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for b in buckets:
            step(b)
    torch.cuda.synchronize()

    def reserved_by(sizes):
        """Growth of memory_reserved() while `sizes` are captured, in that order, into one new
        pool, each graph's outputs held; everything is freed again before returning."""
        clean()
        r0 = torch.cuda.memory_reserved()
        pool = torch.cuda.graph_pool_handle()
        graphs, outputs = [], []
        for b in sizes:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=side):
                outputs.append(step(b))
            graphs.append(g)
        grown = (torch.cuda.memory_reserved() - r0) / MIB
        del graphs, outputs, pool, g
        clean()
        return grown

    out = {"graphs": [], "torch_shared_mib": [], "timed_buckets": [], "torch_capture_replay_us": []}
    print(f"\n== torch: the N largest of {len(buckets)} buckets in one pool, reserved MiB")
    alone = reserved_by([max_rows])
    for n in [1, 2, 4, 8, 16, 32, len(buckets)]:
        shared = reserved_by(list(reversed(buckets[-n:])))
        print(f"{n:4d} graphs: one pool {shared:8.1f} MiB (the largest alone {alone:.1f} MiB, {shared / alone:.2f}x)")
        out["graphs"].append(n)
        out["torch_shared_mib"].append(shared)
    out["torch_largest_alone_mib"] = alone
    clean()
    print("\n== torch: per bucket, the torch.cuda.graph block and the first replay to completion (us)")
    pool = torch.cuda.graph_pool_handle()
    for b in [1, 8, 64, 256, 512]:
        us = []
        for r in range(T.reps(21) + 1):
            g = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.cuda.graph(g, pool=pool, stream=side):
                result = step(b)
            g.replay()
            torch.cuda.synchronize()
            if r > 0:
                us.append((time.perf_counter() - t0) * 1e6)
            del g, result
        m = statistics.median(us)
        print(f"{b:8d} rows {m:10.1f} us")
        out["timed_buckets"].append(b)
        out["torch_capture_replay_us"].append(m)
    del pool
    clean()
    return out


SECTIONS = {  # name on the command line: (section in the JSON, function)
    "replay": ("replay_host", replay_section),
    "capture": ("capture", capture_section),
    "eager": ("eager_vs_replay", eager_section),
    "graphed": ("graphed", graphed_section),
    "rng": ("rng", rng_section),
    "memory": ("memory", memory_section),
    "training": ("training", training_section),
    "buckets": ("buckets", buckets_section),
}


def main(argv):
    if torch is None or not torch.cuda.is_available():
        print("bench_suite_torch: no PyTorch with a CUDA device; nothing to measure")
        return 77
    import torch_timing as T

    path = argv[1] if len(argv) > 1 else "bench_suite_torch.json"
    wanted = argv[2:] or list(SECTIONS)
    unknown = [w for w in wanted if w not in SECTIONS]
    if unknown:
        print(f"bench_suite_torch: unknown section(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    figures = {
        "benchmark": "bench_suite_torch",
        "meta": {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "cuda_runtime": torch.version.cuda},
        "sections": {},
    }
    print(f"bench_suite_torch on {figures['meta']['device']} (torch {torch.__version__}, CUDA {torch.version.cuda})")
    start = time.perf_counter()
    try:
        for name in SECTIONS:
            if name not in wanted:
                continue
            key, run = SECTIONS[name]
            t0 = time.perf_counter()
            figures["sections"][key] = run(T)
            print(f"({name}: {time.perf_counter() - t0:.1f} s)")
            figures["meta"]["seconds"] = time.perf_counter() - start
            # After each section: a run stopped later (timeout's SIGTERM skips `finally`)
            # still leaves what it measured.
            T.write_figures(figures, path, quiet=True)
    finally:
        figures["meta"]["seconds"] = time.perf_counter() - start
        T.write_figures(figures, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
