"""Engine benchmark: what one decoding step costs, what scoring M tokens at once costs, and what
Python costs.

    # random weights of the 124M, 355M and tiny shapes, this machine
    python -m bench.engine
    python -m bench.engine --sizes tiny --max_M 8   # one shape
    python -m bench.engine --sizes 124M --device gpu

1. Decode latency of one new token after a 128-token cache, beside the memory-bandwidth roofline: a
   decode step must read every weight once, so it cannot beat weight_bytes / bandwidth. Bandwidth is
   measured in the same run, as the rate of a matrix-vector product over a matrix far larger than
   the caches (what a decode step does).
2. The cost of scoring M new tokens in one forward relative to one token, M = 1..max_M: speculative
   decoding verifies K drafts in one forward of K + 1 tokens and only pays off when that costs
   little more than one token.
3. The layouts tried, side by side at M = 1..8: the engine's default (LM head as a contiguous
   [n_embd, n_vocab] copy; where gpt2/fast/policy.py's panel_policy turns them on, weight panels
   (gpt2/fast/panels.py) in the form the kernels favour and no padding, else rows padded to a
   multiple of 4), each form of the panels forced, then without panels:
   as is, with the head as the transposed view wte.T, no padding, padding to a multiple of 8; and
   panels with padding to 4, panels 32 and 64 columns wide; and the static-shape step
   (gpt2/fast/static.py: on a GPU each pass shape replayed as a CUDA graph where CuPy records it;
   on the CPU it only adds work). On a GPU, no panels (host memory): the fused kernels against
   gpt2/model.py's formulas and ops.py's, the head as a contiguous copy, rows padded to 8. Then
   each weight matrix alone (on the CPU), in every formulation NumPy offers for M rows: x @ W as
   the engine does; (W^T x^T)^T on a transposed copy of W; the M rows one by one; the rows padded
   with zeros to 8; x times its column panels of 32, 64 and 128 columns; and each row times each
   panel (the panels' by-row form, gpt2/fast/panels.py's row_products).
4. Why: the GEMM rate by rows, [M, n_embd] @ [n_embd, 4 n_embd] alone, with its weight in cache and
   streaming from memory (GFLOP/s; a one-token forward is bound by the weights' bytes, an M-token
   one by these flops).
5. Python: the engine's own per-call work (prefix match, rollback, positions, mask, output copy),
   measured as an engine call whose forward is a stub that returns at once and whose LM head has one
   column; and the floor of NumPy dispatch, the same forward with n_embd = 8, where the arithmetic
   is nothing and only the calls remain.
6. Where an M-token call's time goes (M = 1, 2, 5, 8): each product by weight, layer norms, GELU,
   softmax, and the rest, each operation timed inside an engine call (TimedOps); on the CPU only
   (a clock around a GPU kernel sees its launch).
Every number is a median over --repeats, with all variants interleaved in one loop so that a shared
machine's load falls on them alike; times are CPU time of this thread (with --threads 1 it does all
the work), wall time beside it.
"""
import dataclasses
import os
import time

import numpy as np

from gpt2.backend import DEVICE_WORDS, DEVICES, aligned, get_xp, to_numpy
from picospec_cli import Option
from gpt2.engine import GPT2
from gpt2.weights import flatten
from tools.families import command
from tools.page import header, measured_command, page_of_output

GPT2_SHAPE = dict(n_vocab=50257, n_ctx=1024)
SHAPES = {"124M": dict(n_layer=12, n_embd=768, n_head=12),
          "355M": dict(n_layer=24, n_embd=1024, n_head=16),
          "774M": dict(n_layer=36, n_embd=1280, n_head=20),
          "1558M": dict(n_layer=48, n_embd=1600, n_head=25),
          # the built-in target's shape
          "tiny": dict(n_layer=6, n_embd=256, n_head=4, n_vocab=4097, n_ctx=256),
          # the built-in draft's
          "tiny-draft": dict(n_layer=2, n_embd=128, n_head=2, n_vocab=4097, n_ctx=256)}
LAYOUTS = {"default": {}, "no panels": {"panels": False},
           # the two forms of a few rows through the panels (gpt2/fast/panels.py), each forced
           "small products through panels": {"ops": "panels"},
           "rows one by one through panels": {"ops": "panel_rows"},
           "reference ops": {"ops": "reference"},  # gpt2/model.py's formulas as written
           "no panels, head wte.T": {"panels": False, "head_copy": False},
           "no panels, no padding": {"panels": False, "pad_rows": 1},
           "no panels, pad 8": {"panels": False, "pad_rows": 8},
           "panels, pad 4": {"panels": True, "pad_rows": 4},
           "panels of 32": {"panels": True, "panel_width": 32},
           "panels of 64": {"panels": True, "panel_width": 64},
           "static step": {"static": True}}  # gpt2/fast/static.py; on a GPU, CUDA graphs
# on a GPU no panels (they are host memory): the fused kernels (the default) against the formulas
# as written and ops.py's, the head as a contiguous copy, rows padded to 8, the static step
GPU_LAYOUTS = {"default": {}, "reference ops": {"ops": "reference"}, "cpu ops": {"ops": "cpu"},
               "head copy": {"head_copy": True}, "pad 8": {"pad_rows": 8},
               "static step": {"static": True}}
# the layouts measured at every M (the others up to M = 8)
CURVES = {"cpu": ("default", "no panels"), "gpu": ("default", "reference ops")}
WIDTHS = (32, 64, 128)  # panel widths tried in the panel grid
# the other formulations of M rows times W tried beside x @ W (panel_grid): name -> f(x, W, W^T)
FORMULATIONS = {"W^T copy": lambda x, w, wt: (wt @ x.T).T,
                "rows one by one": lambda x, w, wt: [x[i:i + 1] @ w for i in range(len(x))],
                "pad to 8": lambda x, w, wt: np.concatenate(
                    [x, np.zeros((-len(x) % 8, x.shape[1]), x.dtype)]) @ w}
ROW_WIDTH = "rows one by one through panels"  # the panel grid's by-row column (its own width)


# GPT-2's initialisation, generated on the device in float32
def random_params(hparams, xp, seed=0):
    rng = np.random.default_rng(seed)
    C, V = hparams["n_embd"], hparams["n_vocab"]

    def w(*shape):  # on a cache line's boundary, as an engine would copy it: engines share it
        return xp.asarray(aligned(rng.standard_normal(shape, dtype=np.float32) * 0.02))

    def ln():
        return {"g": xp.ones(C, dtype="float32"), "b": xp.zeros(C, dtype="float32")}

    def lin(i, o):
        return {"w": w(i, o), "b": xp.zeros(o, dtype="float32")}

    blocks = [{"ln_1": ln(), "attn": {"c_attn": lin(C, 3 * C), "c_proj": lin(C, C)}, "ln_2": ln(),
               "mlp": {"c_fc": lin(C, 4 * C), "c_proj": lin(4 * C, C)}}
               for _ in range(hparams["n_layer"])]
    return {"wte": w(V, C), "wpe": w(hparams["n_ctx"], C), "blocks": blocks, "ln_f": ln()}


def hparams_of(size):
    return {**GPT2_SHAPE, **SHAPES[size]}


def timed(f, sync):  # -> (CPU seconds of this thread, wall seconds)
    c, w = time.thread_time(), time.perf_counter()
    f()
    sync()
    return time.thread_time() - c, time.perf_counter() - w


# -> bytes/s (CPU time, wall) of a matrix-vector product over a 512 MiB matrix
def bandwidth(xp, sync, repeats):
    a = xp.ones((8192, 16384), dtype="float32")
    v = xp.ones(16384, dtype="float32")
    a @ v
    times = np.array([timed(lambda: a @ v, sync) for _ in range(repeats)])  # [repeats, 2]
    return a.nbytes / np.median(times, axis=0)


# -> {M: [GFLOP/s with the weight in cache, from memory]} (CPU time)
def gemm_rates(xp, sync, C, Ms, repeats):
    """The product an M-token forward is made of, [M, C] @ [C, 4C] (GPT-2's c_fc), alone: once with
    one weight used over and over (it stays in the last-level cache), once cycling through 64 MB of
    weights (they stream from memory as a forward's do)."""
    rng = np.random.default_rng(0)
    ws = [xp.asarray(rng.standard_normal((C, 4 * C), dtype=np.float32))
          for _ in range(max(2, 2 ** 24 // (4 * C * C)))]
    rates = {}
    for M in Ms:
        x = xp.asarray(rng.standard_normal((M, C), dtype=np.float32))
        hot = np.median([timed(lambda: x @ ws[0], sync)[0] for _ in range(repeats * 4)])
        cold = np.median([timed(lambda: [x @ w for w in ws], sync)[0]
                          for _ in range(repeats)]) / len(ws)
        rates[M] = [2 * M * C * 4 * C / t / 1e9 for t in (hot, cold)]
    return rates


# -> {(matrix, M): {"W": ratio, width: ratio}} (CPU time / one row by W)
def panel_grid(hparams, Ms, repeats):
    """Each weight matrix of the shape alone (QKV, MLP up, MLP down, LM head; random values): M rows
    times W, in each of FORMULATIONS, and times its column panels of each width in WIDTHS
    (gpt2/fast/panels.py), against one row times W. Cycling through enough copies of a matrix to
    fill 64 MB, so that the weights stream from memory as a forward's do."""
    from gpt2.fast import panels as P

    C, V = hparams["n_embd"], hparams["n_vocab"]
    rng = np.random.default_rng(0)
    grid = {}
    for name, (n_in, n_out) in {"QKV": (C, 3 * C), "MLP up": (C, 4 * C), "MLP down": (4 * C, C),
                                "LM head": (C, V)}.items():
        ws = [rng.standard_normal((n_in, n_out), dtype=np.float32)
              for _ in range(max(1, 2 ** 24 // (n_in * n_out)))]
        cut = {width: [P.panels(w, width) for w in ws] for width in WIDTHS}
        by_row = [P.panels(w, by_row=True) for w in ws]
        wts = [np.ascontiguousarray(w.T) for w in ws]  # [n_out, n_in] each
        one = rng.standard_normal((1, n_in), dtype=np.float32)
        base = np.median([timed(lambda: [one @ w for w in ws], lambda: None)[0]
                          for _ in range(repeats)])
        for M in Ms:
            x = rng.standard_normal((M, n_in), dtype=np.float32)
            row = {"W": [lambda: [x @ w for w in ws]]}
            row.update({name: [lambda f=f: [f(x, w, wt) for w, wt in zip(ws, wts)]]
                        for name, f in FORMULATIONS.items()})
            row.update({width: [lambda p=p: [P.panel_matmul(x, q, n_out) for q in p]] for width,
                        p in cut.items()})
            row[ROW_WIDTH] = [lambda: [P.row_products(x, q, n_out) for q in by_row]]
            times = {k: [] for k in row}
            for _ in range(repeats):  # interleaved: load falls on every variant alike
                for k, (f,) in row.items():
                    times[k].append(timed(f, lambda: None)[0])
            grid[(name, M)] = {k: float(np.median(t)) / base for k, t in times.items()}
    return grid


class TimedOps:
    """An engine's ops, each call timed: seconds per operation and, for products, per weight (named
    by its shape). The clocks' own cost is what an engine call with TimedOps takes beyond one
    without; breakdown reports it."""

    def __init__(self, ops, names):
        self.ops, self.names, self.seconds = ops, names, {}

    def timed(self, name, f):
        def call(*args, **kwargs):
            start = time.perf_counter()
            out = f(*args, **kwargs)
            key = self.names.get(args[1].shape, "other product") if name == "matmul" else name
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - start
            return out
        return call

    def value(self):
        return self.ops._replace(**{k: self.timed(k, f) for k, f in self.ops._asdict().items()})


BREAKDOWN = ("QKV", "attention out", "MLP up", "MLP down", "LM head", "layer_norm", "gelu",
             "softmax")


def breakdown(model, x, n_cache, Ms, repeats):
    """Where an M-token call's time goes, M in Ms: each product (by weight), each other operation,
    and the rest (attention's own products over the cache, reshapes, the cache, the engine's and
    model.py's Python between them: the timed call's time outside the timed operations, never
    below 0) -> {M: {part: wall seconds}}, medians, with "call" (the untimed call) and "clocks"
    (what timing every operation added: the timed call less the untimed, noise and all)."""
    C, V = model.hparams["n_embd"], model.hparams["n_vocab"]
    names = {(C, 3 * C): "QKV", (C, C): "attention out", (C, 4 * C): "MLP up",
             (4 * C, C): "MLP down", (C, V): "LM head"}
    plan = model.plan
    out = {}
    for M in Ms:
        parts, calls = {}, []
        model.logits(x[:n_cache + M], M)  # its weights in cache, as for the calls timed
        for _ in range(repeats):
            t = TimedOps(plan.ops, names)
            model.plan = model.engine.plan = dataclasses.replace(plan, ops=t.value())
            start = time.perf_counter()
            try:
                model.logits(x[:n_cache + M], M)
            finally:
                model.plan = model.engine.plan = plan
            whole = time.perf_counter() - start
            # the same call's own time outside its operations (the untimed call's median less
            # the parts' medians goes below 0 once the noise exceeds it)
            t.seconds["rest"] = whole - sum(t.seconds.values())
            t.seconds["timed call"] = whole
            calls.append(timed(lambda: model.logits(x[:n_cache + M], M), lambda: None)[1])
            for k, v in t.seconds.items():
                parts.setdefault(k, []).append(v)
        med = {k: float(np.median(v)) for k, v in parts.items()}
        call = float(np.median(calls))
        out[M] = {**{k: med.get(k, 0.0) for k in BREAKDOWN}, "call": call,
                  "clocks": med["timed call"] - call, "rest": med["rest"]}
    return out


class StubForward:
    """Stands in for gpt2.engine's gpt2_hidden: advances the cache as a forward would and returns
    zeros at once."""

    def __init__(self, xp, n_embd):
        self.h = xp.zeros((1, 64, n_embd), dtype="float32")

    def __call__(self, inputs, cache, **_):  # inputs [B, n_seq] -> [B, n_seq, n_embd]
        cache.advance(inputs.shape[1])
        return self.h[:, :inputs.shape[1]].repeat(len(inputs), 0)


# -> (CPU, wall) of an engine call that does only the engine's own work
def engine_overhead(model, x, n_cache, sync):
    """The forward replaced by StubForward and the LM head by a [n_embd, 1] one, so that what is
    left is the engine's own work: prefix match, rollback, positions and mask, bookkeeping, the copy
    out."""
    import gpt2.engine as engine_module

    real, plan = engine_module.gpt2_hidden, model.plan
    engine_module.gpt2_hidden = StubForward(model.xp, model.hparams["n_embd"])
    stub = dataclasses.replace(plan, head=model.xp.zeros((model.hparams["n_embd"], 1),
                                                         dtype="float32"))
    model.plan = model.engine.plan = stub
    y = x[:n_cache + 1]
    try:  # 100 calls per timing: one call is microseconds, near the clocks' own cost
        cpu, wall = timed(lambda: [model.logits(y) for _ in range(100)], sync)
    finally:
        engine_module.gpt2_hidden = real
        model.plan = model.engine.plan = plan
    # the stub left zeros where the new token's keys go: the next call runs it for real
    model(x[:n_cache])
    return cpu / 100, wall / 100


def bench(size, device, n_cache, Ms, repeats, threads=None):
    xp = get_xp(device)
    sync = (lambda: xp.cuda.Stream.null.synchronize()) if device == "gpu" else (lambda: None)
    hparams = hparams_of(size)
    params = random_params(hparams, xp)
    layouts = GPU_LAYOUTS if device == "gpu" else LAYOUTS
    models = {name: GPT2(hparams, params, device=device, threads=threads, **kw)
              for name, kw in layouts.items()}
    model = models["default"]
    weight_bytes = sum(to_numpy(a).nbytes
                       for a in flatten(model.params).values()) - model.params["wpe"].nbytes
    x = [int(t)
         for t in np.random.default_rng(1).integers(0, hparams["n_vocab"], n_cache + max(Ms))]
    for m in models.values():
        m(x[:n_cache])
    floor = GPT2({**hparams, "n_embd": 8, "n_head": min(hparams["n_head"], 8), "n_vocab": 16},
                 random_params(
        {**hparams, "n_embd": 8, "n_vocab": 16}, xp), device=device, threads=threads)
    x16 = [t % 16 for t in x]
    floor(x16[:n_cache])
    cases = [(name, M) for name in layouts
             for M in (Ms if name in CURVES[device] else [M for M in Ms if M <= 8])]
    cpu, wall = {}, {}
    # every case once per round: the machine's load falls on all of them alike
    for _ in range(repeats):
        # roll back to the n_cache-token cache, then score M new tokens in one forward
        for name, M in cases:
            c, w = timed(lambda: models[name].logits(x[:n_cache + M], M), sync)
            cpu.setdefault((name, M), []).append(c), wall.setdefault((name, M), []).append(w)
        extra = {"own": engine_overhead(model, x, n_cache, sync),
                 "floor": timed(lambda: floor.logits(x16[:n_cache + 1]), sync)}
        for name, (c, w) in extra.items():
            cpu.setdefault(name, []).append(c), wall.setdefault(name, []).append(w)
    cpu, wall = ({k: float(np.median(v)) for k, v in d.items()} for d in (cpu, wall))
    bw = bandwidth(xp, sync, repeats)  # [CPU, wall]
    rates = gemm_rates(xp, sync, hparams["n_embd"], sorted(set(Ms) | {32, 64}), repeats)
    grid = panel_grid(hparams, [M for M in (1, 2, 5, 8, 16) if M <= max(Ms)],
                      repeats) if device == "cpu" else {}
    # a clock around each operation sees a GPU kernel's launch, not its run: the CPU's alone
    parts = breakdown(model, x, n_cache, [M for M in (1, 2, 5, 8) if M <= max(Ms)],
                      repeats) if device == "cpu" else {}
    return {"size": size, "weight_MB": weight_bytes / 1e6, "bandwidth_GBps": bw / 1e9,
            "roofline_ms": weight_bytes / bw * 1e3, "cpu": cpu, "wall": wall, "rates": rates,
            "grid": grid, "parts": parts, "panels": model.plan.panels_report["on"],
            "kind": model.plan.kind, "layouts": list(layouts),
            "refused": models["static step"].engine.static.refused}


def main(sizes=("124M", "355M", "tiny"), device="cpu", n_cache=128, max_M=16, repeats=9, threads=1,
         out=None):
    """Decode latency beside the bandwidth roofline, the cost of M tokens per forward, layouts, and
    Python overhead."""

    with page_of_output(out):
        run(sizes, device, n_cache, max_M, repeats, threads)


def run(sizes, device, n_cache, max_M, repeats, threads):
    """main's measurement, printed as Markdown."""
    from picospec_app.machine import thread_policy

    sizes = sizes.split(",") if isinstance(sizes, str) else list(sizes)
    for s in sizes:
        if n_cache + max_M > hparams_of(s)["n_ctx"]:
            raise ValueError(f"--n_cache {n_cache} + --max_M {max_M} exceeds the {s} shape's "
                             f"context of {hparams_of(s)['n_ctx']} tokens")
    get_xp(device)  # --device gpu without CuPy or a GPU: one clear line before any work
    print(header(thread_policy(0, threads)), flush=True)
    Ms = list(range(1, max_M + 1))
    rows = [bench(s, device, n_cache, Ms, repeats, threads) for s in sizes]
    print(f"\n`{measured_command()}` (1-minute load "
          f"{os.getloadavg()[0]:.1f} at the end)\n")
    print("Each pair of numbers is CPU time / wall time (bandwidth: bytes per CPU second / per "
          "wall second).\n")
    graphs = " (CUDA graphs where CuPy records them)" if device == "gpu" else ""
    print(f"| shape | weights MB | bandwidth GB/s | roofline ms | decode ms ({n_cache}-token cache)"
          f" | decode / roofline | static step ms{graphs} | static / roofline |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        c, w = r["cpu"][("default", 1)] * 1e3, r["wall"][("default", 1)] * 1e3
        sc, sw = r["cpu"][("static step", 1)] * 1e3, r["wall"][("static step", 1)] * 1e3
        (bc, bw), (rc, rw) = r["bandwidth_GBps"], r["roofline_ms"]
        print(f"| {r['size']} | {r['weight_MB']:.0f} | {bc:.1f} / {bw:.1f} | {rc:.1f} / {rw:.1f} "
              f"| {c:.1f} / {w:.1f} | {c / rc:.2f}x / {w / rw:.2f}x | {sc:.1f} / {sw:.1f} "
              f"| {sc / rc:.2f}x / {sw / rw:.2f}x |")
    for r in rows:
        if r["refused"]:
            print(f"\n{r['size']}: the static step ran eagerly, CuPy would not record its pass as "
                  f"a CUDA graph ({r['refused']}).")
    print("\nCost of an M-token forward / one token, with the engine's default layout ("
          + ("the fused kernels) and with gpt2/model.py's formulas" if device == "gpu" else
             "weight panels where the policy turns them on) and without panels")
          + "; CPU time, wall time in parentheses:\n")
    print("| shape | layout | " + " | ".join(f"M={M}" for M in Ms) + " |")
    print("|---|---|" + "---|" * len(Ms))
    for r in rows:
        for name in CURVES[device]:
            label = name
            if name == "default":  # what the policy chose
                label += (f" (panels {'on, ' + r['kind'] if r['panels'] else 'off'})"
                          if device == "cpu" else f" ({r['kind']} ops)")
            print(f"| {r['size']} | {label} | " + " | ".join(
                f"{r['cpu'][(name, M)] / r['cpu'][(name, 1)]:.2f} "
                f"({r['wall'][(name, M)] / r['wall'][(name, 1)]:.2f})"
                for M in Ms) + " |")
    print("\nWhy: the rate of [M, n_embd] @ [n_embd, 4 n_embd] alone, GFLOP/s of CPU time, weight "
          "in cache / streaming from memory (one row reads each weight once for 2 flops; M rows do "
          "2M flops per weight read):\n")
    print("| shape | " + " | ".join(f"M={M}" for M in rows[0]["rates"]) + " |")
    print("|---|" + "---|" * len(rows[0]["rates"]))
    for r in rows:
        print(f"| {r['size']} | "
              + " | ".join(f"{hot:.0f} / {cold:.0f}" for hot, cold in r["rates"].values()) + " |")
    small = [M for M in Ms if M <= 8]
    print("\nLayouts: CPU time of an M-token forward / the default layout's one token:\n")
    print("| shape | layout | " + " | ".join(f"M={M}" for M in small) + " |")
    print("|---|---|" + "---|" * len(small))
    for r in rows:
        for name in r["layouts"]:
            print(f"| {r['size']} | {name} | " + " | ".join(
                f"{r['cpu'][(name, M)] / r['cpu'][('default', 1)]:.2f}" for M in small) + " |")
    if any(r["grid"] for r in rows):
        print("\nEach matrix alone (streaming from memory), M rows in each formulation: x @ W (the "
              "engine's), the others NumPy offers, and x times W's column panels of each width; "
              "CPU time / one row times W (the fastest of a row in bold):\n")
        names = ["W", *FORMULATIONS, *WIDTHS, ROW_WIDTH]
        print("| shape | matrix | M | x @ W | " + " | ".join(FORMULATIONS) + " | "
              + " | ".join(f"panels of {w}" for w in WIDTHS) + f" | {ROW_WIDTH} |")
        print("|---|---|---|" + "---|" * len(names))
        for r in rows:
            for (matrix, M), t in r["grid"].items():
                best = min(names, key=lambda k: t[k])
                print(f"| {r['size']} | {matrix} | {M} | " + " | ".join(
                    f"**{t[k]:.2f}**" if k == best else f"{t[k]:.2f}" for k in names) + " |")
    print("\nPython: the engine's own per-call work and NumPy's dispatch floor, beside one "
          "decoding step (CPU ms):\n")
    print("| shape | engine step (M=1) | engine's own work | share of the step | dispatch floor "
          "(n_embd 8) | share of the step |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        step, own, floor = r["cpu"][("default", 1)], r["cpu"]["own"], r["cpu"]["floor"]
        print(f"| {r['size']} | {step * 1e3:.3f} | {own * 1e3:.3f} | {own / step:.1%} | "
              f"{floor * 1e3:.3f} | {floor / step:.0%} |")
    if not any(r["parts"] for r in rows):
        return
    print("\nWhere an M-token call's time goes, the default layout (its operations named), the "
          "same M back to back: each product by weight, the other operations, and the rest "
          "(attention's products over the cache, reshapes, the cache, the Python between them); "
          "wall ms, each operation timed by a clock around it (what the clocks added is the last "
          "column, left out of the others: the timed call less the untimed, below 0 where the "
          "machine's noise exceeds it):\n")
    print("| shape | ops | M | call | " + " | ".join(BREAKDOWN) + " | rest | clocks |")
    print("|---|---|---|---|" + "---|" * (len(BREAKDOWN) + 2))
    for r in rows:
        for M, d in r["parts"].items():
            print(f"| {r['size']} | {r['kind']} | {M} | {d['call'] * 1e3:.2f} | " + " | ".join(
                f"{d[k] * 1e3:.2f}" for k in (*BREAKDOWN, "rest", "clocks")) + " |")


OPTIONS = [
    Option("sizes", "strs", ["124M", "355M", "tiny"],
           "shapes to measure (random weights): " + ", ".join(SHAPES), choices=tuple(SHAPES)),
    Option("device", str, "cpu", "cpu (NumPy) or gpu (CuPy)", choices=DEVICES,
           means=DEVICE_WORDS),
    Option("n_cache", int, 128, "tokens already in the KV cache before each measured forward",
           low=1),
    Option("max_M", int, 16, "measure forwards of M = 1 .. max_M new tokens", low=1),
    Option("repeats", int, 9, "timed repeats per measurement (the median is reported)", low=1),
    Option("threads", int, 1, "BLAS threads (with 1, this thread's CPU time is all the work done)",
           low=1, high=256),
    Option("out", "out", None, "also write what it prints as a results page (docs/results/)"),
]

if __name__ == "__main__":
    command(main, OPTIONS)
