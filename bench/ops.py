"""The forward's operations side by side (gpt2/fast/): what each value costs against gpt2/model.py's
reference formulas, on each OpenBLAS kernel family this CPU can run.

    python -m bench.ops --out docs/results/ops.md      # every family, each in its own process
    python -m bench.ops --families Haswell --shapes tiny

For each family (OPENBLAS_CORETYPE set for a child process: Haswell always, SkylakeX where the CPU
has AVX-512) and each shape (random weights), every value runs an M-token forward after a 128-token
cache, M = 1 (a decoding step) and 5 (verifying K = 4 drafts): "reference" (the formulas as
written: tanh GELU, mean and variance, a stack of rows multiplied block by block), "cpu"
(gpt2/fast/ops.py: GELU through exp, moments as sums, one product over all rows, rows padded to 4),
"panels" (cpu with weight panels, a few rows in small products, forced on) and "panel_rows" (the
panels' other form, a few rows one by one, forced on); each engine's LM head is a contiguous copy.
One BLAS thread; CPU time of this thread, median of --repeats rounds in which every value runs once.
Shapes: none; this file only times things.
"""
import time

import numpy as np

from picospec_cli import Option
from tools.families import command
from tools.page import header, page_of_output

SHAPES = {"tiny": dict(n_layer=6, n_embd=256, n_head=4, n_vocab=4097, n_ctx=256),
          "124M": dict(n_layer=12, n_embd=768, n_head=12, n_vocab=50257, n_ctx=1024)}
VALUES = ("reference", "cpu", "panels", "panel_rows")


def measure(shapes, repeats, n_cache=128):
    """-> {shape: {(value, M): median CPU ms}} in this process (its BLAS as loaded)."""
    from gpt2.engine import GPT2
    from gpt2.backend import aligned, tree_map
    from gpt2.train.gpt2 import init_params

    out = {}
    for shape in shapes:
        hparams = SHAPES[shape]
        # on cache lines' boundaries, as each engine would copy them: the engines share them
        params = tree_map(aligned, init_params(hparams, np.random.default_rng(0)))
        models = {v: GPT2(hparams, params, ops=v, threads=1) for v in VALUES}
        x = [int(t) for t in np.random.default_rng(1).integers(0, hparams["n_vocab"], n_cache + 5)]
        for model in models.values():
            model(x[:n_cache])
        times = {}
        for _ in range(repeats):
            for v, model in models.items():
                for M in (1, 5):
                    start = time.thread_time()
                    model.logits(x[:n_cache + M], M)
                    times.setdefault((v, M), []).append((time.thread_time() - start) * 1e3)
        out[shape] = {f"{v} {M}": float(np.median(t)) for (v, M), t in times.items()}
    return out


def main(shapes=("tiny", "124M"), repeats=15, out=None):
    """The forward's operations against the reference, with the BLAS as loaded."""
    from gpt2.fast.policy import blas_kernels
    from picospec_app.machine import thread_policy

    with page_of_output(out):
        print(header(thread_policy(0, 1)), flush=True)
        times = measure(shapes, repeats)
        print(f"\nThe library reports {blas_kernels()[1]} kernels.\n")
        print("| shape | operations | M=1 ms | M=5 ms | c(5) = M=5 / M=1 | M=1 / reference | "
              "M=5 / reference |")
        print("|---|---|---|---|---|---|---|")
        for shape, t in times.items():
            for v in VALUES:
                one, five = t[f"{v} 1"], t[f"{v} 5"]
                print(f"| {shape} | {v} | {one:.2f} | {five:.2f} | {five / one:.2f} | "
                      f"{one / t['reference 1']:.2f} | {five / t['reference 5']:.2f} |")


OPTIONS = [
    Option("shapes", "strs", ["tiny", "124M"], "model shapes (random weights)",
           choices=tuple(SHAPES)),
    Option("repeats", int, 15, "rounds (the median is reported)", low=1),
    Option("out", "out", None, "also write what it prints as a results page (docs/results/)"),
]

if __name__ == "__main__":
    command(main, OPTIONS)
