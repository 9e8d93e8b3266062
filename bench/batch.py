"""Batched decoding: tokens per second with B prompts decoded together against one prompt at a time.

    python -m bench.batch                       # the built-in tiny pair: batch 1 vs batch 8
    # GPT-2 124M's shape with random weights, and a small random draft
    python -m bench.batch --pair 124M
    # batched trees: Medusa on the built-in target and its shipped heads
    python -m bench.batch --method medusa
    python -m bench.batch --method prompt_lookup   # ragged draft chains from each row's own text
    # a retrieved trie per row (REST's datastore, built once and cached)
    python -m bench.batch --method rest
    # each row's lookahead window and pooled guesses as one tree
    python -m bench.batch --method lookahead
    # the baseline: one token per row per batched call
    python -m bench.batch --method autoregressive
    # greedy drafts, one batched draft call per position
    python -m bench.batch --method greedy --temperature 0
    # draft token trees (also sequoia): one batched draft call per level
    python -m bench.batch --method specinfer
    # the shipped Blockwise heads, a chain per row
    python -m bench.batch --method blockwise --temperature 0
    # the shipped EAGLE head, batched too (one pass per tree level)
    python -m bench.batch --method eagle
    # EAGLE-2's dynamic tree: one batched head pass per layer
    python -m bench.batch --method eagle2
    # tiny-draft reviewing the n-gram, the target reviewing both
    python -m bench.batch --method cascade
    # the target drafting for itself (also early_exit), shipped settings
    python -m bench.batch --method layer_skip

Protocol. 8 held-out prompts of different lengths (24, 30, ..., 66 tokens), each continued by
--n_tokens tokens with the method (speculative sampling: --K drafts per step; Medusa: the shipped
heads' sparse tree, lossless posterior; prompt lookup and REST: their defaults),
at --temperature. Three ways, interleaved in one process and repeated --repeats times; each prefills
its caches with the prompts (timed apart: one padded pass of all rows in a batch), then decodes:
  single    the method's per-sequence form on one GPT2 engine per model, one prompt after another
  batch 1   its batched form (picospec.methods row .batch) on BatchGPT2 engines of 1 row, one prompt
  after another batch B   its batched form on BatchGPT2 engines of B rows (target AND draft), B
  prompts at once
decode tokens/s = prompts x n_tokens / decoding time, the median over repeats, in CPU time of this
process, all its threads (what the work costs; other processes on a shared machine inflate it less;
with 2 BLAS threads it includes the second thread's work and its spinning between products) and in
wall time. At temperature 0 the same tokens are accepted every way, so the ratios compare
engines, not luck; at temperature > 0 each way draws its own tokens (the same law), so its
acceptance differs by luck: tokens per row-step (one row scored by one target call) are printed
beside the ratios, and rows per target call (8 while all rows decode; fewer once some have
finished and the last go on). Before timing, greedy
batch B is checked token for token against greedy single rows. Where the thread policy runs forwards
of many rows on more threads than one-row steps (gpt2/fast/policy.py: small models on idle cores), a
fourth way "batch B, narrow" runs batch B with them held to the one-row count, interleaved with the
others: what that buys (--wide 1,2,4: one such way per count). The 124M pair: target GPT-2 124M's
shape, draft 2 layers x 256 wide with GPT-2's vocabulary, random weights at temperature 1, where two
near-uniform models accept about as often as real ones; the point is the cost of the calls. Shapes:
none; this file only times things.
"""
import os
import time

import numpy as np

from gpt2.backend import DEVICE_WORDS, DEVICES
from gpt2.fast.policy import Wide
from picospec_app.settings import engine_choices
from picospec_cli import Option
from tools.families import command
from tools.page import gpu_name, header, measured_command, page_of_output

PAIRS = ("tiny", "124M")


def load_pair(pair, device="cpu"):
    """-> target, draft (GPT2 engines on `device`), prompts (8 lists of ids of different
    lengths)."""
    from gpt2.backend import get_xp
    from gpt2.train.corpus import heldout_prompts
    from gpt2.engine import GPT2
    from gpt2.load import load_model

    target, encoder = load_model("tiny-target", device, **engine_choices())
    prompts = [x[:24 + 6 * i] for i, x in enumerate(heldout_prompts(encoder, 8, 66))]
    if pair == "tiny":
        return target, load_model("tiny-draft", device, **engine_choices())[0], prompts
    from bench.engine import SHAPES, random_params

    xp = get_xp(device)
    big = dict(n_vocab=50257, n_ctx=1024, **SHAPES[pair])
    small = dict(n_vocab=50257, n_ctx=1024, n_layer=2, n_embd=256, n_head=4)
    return (GPT2(big, random_params(big, xp, seed=0), device=device),
            GPT2(small, random_params(small, xp, seed=1), device=device), prompts)


# any pair: a draft model or none
DRAFTED = ("speculative", "greedy", "autoregressive", "specinfer", "sequoia")
ON_TINY = ("medusa", "blockwise", "eagle", "eagle2", "prompt_lookup", "rest", "lookahead",
           "cascade", "layer_skip",
           "early_exit")  # --pair tiny: the built-in target and what ships with it


def load_method(method, pair, target, draft, K):
    """-> (the table's row, what it needs loaded, its options) for --method."""
    from picospec.methods import TABLE

    if method in ("speculative", "greedy"):
        return TABLE[method], {"target": target, "draft": draft}, {"K": K}
    if method == "autoregressive":
        return TABLE[method], {"target": target}, {}
    if method == "specinfer":
        return TABLE[method], {"target": target, "draft": draft}, {}
    # the built-in pair's measured vectors shape the tree on any pair (never the law)
    if method == "sequoia":
        from gpt2.load import load_acceptance

        return TABLE[method], {"target": target, "draft": draft,
                               "acceptance": load_acceptance("tiny-target", "tiny-draft")}, {}
    if method in ("prompt_lookup", "lookahead"):
        return TABLE[method], {"target": target}, {}
    if method == "rest":
        from picospec_app.load import rest_datastore
        from gpt2.load import load_model

        datastore = rest_datastore(None, "tiny-target",
                                   load_model("tiny-target", **engine_choices())[1])
        return TABLE[method], {"target": target, "datastore": datastore}, {}
    from picospec_app.load import load_heads
    from gpt2.load import load_model

    if method in ("eagle", "eagle2"):
        return TABLE[method], {"target": target,
                               "heads": load_heads("tiny-target", "eagle", None, target)}, {}
    # the target drafting for itself, with its shipped settings
    if method in ("layer_skip", "early_exit"):
        from picospec_app.load import load_self_draft

        return TABLE[method], load_self_draft(method, {}, target, "tiny-target"), {}
    # the n-gram as the smaller drafter, called row by row (it is stateless)
    if method == "cascade":
        return TABLE[method], {"target": target, "draft": draft,
                               "draft2": load_model("ngram", **engine_choices())[0]}, {"K": K}
    if method == "blockwise":
        heads = load_heads("tiny-target", "blockwise", None, target)
        return TABLE[method], {"target": target, "heads": heads}, {"K": K}
    return TABLE[method], {"target": target,
                           "heads": load_heads("tiny-target", "medusa", None, target)}, {}


class Clock:
    """CPU time of this process (every thread) and wall time, summed over the intervals it is
    running."""

    def __init__(self):
        self.cpu = self.wall = 0.0

    def __enter__(self):
        self.start = time.process_time(), time.perf_counter()

    def __exit__(self, *exc):
        self.cpu += time.process_time() - self.start[0]
        self.wall += time.perf_counter() - self.start[1]


def ways(method, loaded, prompts, B, N, options, sampling):
    """{name: run() -> (outputs, (row-steps, target calls), prefill Clock, decode Clock)} for
    single, batch 1 and batch B. Each group of prompts is prefilled first (its caches then hold the
    prompts), then decoded: the two are timed apart. A row-step is one row scored by one target call
    (a batched call scores its active rows)."""
    from picospec_app.load import batched_models
    from picospec.methods import call

    # prefilled before the clock (both self-draft sides)
    models = [k for k in ("target", "draft") if k in loaded]

    def single():
        out, steps, prefill, decode = [], 0, Clock(), Clock()
        for i, x in enumerate(prompts):
            stats = []
            for k in models:
                loaded[k].reset()
            with prefill:
                for k in models:
                    loaded[k](x)
            with decode:
                out.append(call(method, x, N, np.random.default_rng(i), loaded, sampling, options,
                                stats=stats))
            # target calls of this row (a Blockwise block makes 0-2)
            steps += sum(s.get("calls", 1) for s in stats)
        return out, (steps, steps), prefill, decode

    def batched(rows):
        batch = batched_models(loaded, rows)  # engines of `rows` rows, emptied before each group

        def run():
            out, steps, calls, prefill, decode = [], 0, 0, Clock(), Clock()
            for i in range(0, len(prompts), rows):
                stats, xs = [], prompts[i:i + rows]
                for model in batch.values():
                    getattr(model, "reset", lambda: None)()
                with prefill:
                    for k in models:
                        batch[k](xs)
                with decode:
                    out += call(method, xs, N, np.random.default_rng(i), batch, sampling, options,
                                stats=stats, batch=True)
                steps += sum(step.get("calls", 1) for step in stats for a in step["accepted"]
                             if a >= 0)
                # a Blockwise block makes 0-2 calls
                calls += sum(step.get("calls", 1) for step in stats)
            return out, (steps, calls), prefill, decode
        return run

    return {"single": single, "batch 1": batched(1), f"batch {B}": batched(B)}


def with_wide(run, models, threads):
    """`run` with the engines' wide forwards (gpt2/fast/policy.py) on `threads` threads instead of
    their wide count."""
    def run_with():
        saved = [m.plan.threads.wide for m in models]
        for m in models:
            m.plan.threads.wide = Wide(threads, "set by the benchmark")
        try:
            return run()
        finally:
            for m, wide in zip(models, saved):
                m.plan.threads.wide = wide
    return run_with


def main(pair="tiny", method="speculative", batch=8, n_tokens=48, K=4, temperature=1.0, repeats=3,
         device="cpu", wide=(), out=None):
    """Tokens per second of a method's batched form (batch B) against batch 1 and single-sequence
    decoding."""

    with page_of_output(out):
        run(pair, method, batch, n_tokens, K, temperature, repeats, device, wide)


def run(pair, method, batch, n_tokens, K, temperature, repeats, device, wide):
    """main's measurement, printed as Markdown."""
    from bench.harness import check_room
    from gpt2.backend import get_xp

    if method not in DRAFTED and pair != "tiny":
        raise ValueError(f"--method {method} runs on the built-in target and its shipped heads: "
                         f"use --pair tiny")
    if method in ("greedy", "blockwise") and temperature != 0:
        raise ValueError(f"--method {method} is greedy-only: pass --temperature 0")
    get_xp(device)  # no CuPy or no GPU: one clear line before any work
    target, draft, prompts = load_pair(pair, device)
    check_room(target.n_ctx, max(map(len, prompts)), n_tokens, fixed=True)  # the longest: 66 tokens
    row, loaded, options = load_method(method, pair, target, draft, K)
    from picospec_app.machine import policy

    threads = policy(target)
    engines = [m for m in (target, draft) if hasattr(getattr(m, "forward", None), "threads")]
    print(header(threads), flush=True)
    if device == "gpu":
        import cupy

        print(f"device: {gpu_name(cupy)} (CuPy {cupy.__version__}); every step brings its tokens "
              f"to the host, so wall time is the GPU's; CPU time counts the host waiting",
              flush=True)
    runs = ways(row, loaded, prompts, batch, n_tokens, options, {"temperature": temperature})
    greedy = ways(row, loaded, prompts, batch, n_tokens, options, {"temperature": 0.0})
    # what the wide count buys, side by side
    if device == "cpu" and threads["wide"]["threads"] > threads["threads"]:
        runs[f"batch {batch}, narrow"] = with_wide(runs[f"batch {batch}"], engines,
                                                       threads["threads"])
    # --wide: batch B with other wide counts, interleaved with the rest
    for n in wide if device == "cpu" else ():
        runs[f"batch {batch}, wide {n}"] = with_wide(runs[f"batch {batch}"], engines, n)
    same = greedy["single"]()[0] == greedy[f"batch {batch}"]()[0]
    cpu, wall, pre_cpu, pre_wall, steps = {}, {}, {}, {}, {}
    for _ in range(repeats):
        for name, run in runs.items():
            _, steps[name], prefill, decode = run()
            for into, value in ((cpu, decode.cpu), (wall, decode.wall), (pre_cpu, prefill.cpu),
                                (pre_wall, prefill.wall)):
                into.setdefault(name, []).append(value)
    tokens = len(prompts) * n_tokens
    c, w = ({name: float(np.median(v)) for name, v in d.items()} for d in (cpu, wall))
    print(f"\n`{measured_command()}` "
          f"({len(prompts)} prompts of 24-66 tokens; 1-minute load {os.getloadavg()[0]:.1f} at the "
          f"end)\n")
    print("| way | decode tokens/s (CPU time) | decode tokens/s (wall) | x single (CPU / wall) | x "
          "batch 1 (CPU / wall) "
          "| tokens per row-step | rows per target call | prefill s (CPU / wall) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in runs:
        (row_steps, calls) = steps[name]
        print(f"| {name} | {tokens / c[name]:.0f} | {tokens / w[name]:.0f} | "
              f"{c['single'] / c[name]:.2f}x / {w['single'] / w[name]:.2f}x | "
              f"{c['batch 1'] / c[name]:.2f}x / {w['batch 1'] / w[name]:.2f}x | "
              f"{tokens / row_steps:.2f} | {row_steps / calls:.2f} | "
              f"{np.median(pre_cpu[name]):.2f} / {np.median(pre_wall[name]):.2f} |")
    print(f"\ngreedy batch {batch} equals greedy single rows token for token: "
          f"{'yes' if same else 'NO'}")


OPTIONS = [
    Option("pair", str, "tiny",
           "tiny (the built-in pair) or 124M (random weights of GPT-2 124M's shape)",
           choices=PAIRS),
    Option("method", str, "speculative",
           "the method batched: speculative, greedy (--temperature 0), specinfer, sequoia or "
           "autoregressive (any pair), or medusa, blockwise (--temperature 0), eagle, eagle2, "
           "prompt_lookup, rest, lookahead, cascade, layer_skip or early_exit (--pair tiny)",
           choices=DRAFTED + ON_TINY),
    Option("batch", int, 8, "rows decoded together (the 8 prompts in groups of this size)", low=1,
           high=8),
    Option("n_tokens", int, 48, "new tokens per prompt", low=2),
    Option("K", int, 4, "drafts per step (speculative, greedy; blockwise: the block size)", low=1),
    Option("temperature", float, 1.0, "sampling temperature of the timed runs (0: greedy)", low=0),
    Option("repeats", int, 3, "timed repeats of each way (the median is reported)", low=1),
    Option("device", str, "cpu", "cpu (NumPy) or gpu (CuPy): where the engines run",
           choices=DEVICES, means=DEVICE_WORDS),
    Option("wide", "ints", (),
           "also run batch B with its wide forwards (33+ token rows) on each of these thread "
           "counts (CPU; e.g. 1,2,4,8,16)", low=1),
    Option("out", "out", None, "also write what it prints as a results page (docs/results/)"),
]

if __name__ == "__main__":
    command(main, OPTIONS)
