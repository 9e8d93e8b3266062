"""What the tests of the batched forms share. A batched form is held to its single form row by row:
row b of one batched run, with its own generator, is token for token what the single form gives row
b's prompt alone with that generator (at temperature 0, and with the same seeded draws at
temperature > 0). That carries the single form's law, checked by its own sampled test, over to every
row; a batched-only flaw (a row read from another row's laws, the wrong generator, a broken rule
planted in the batched run) makes some row differ.

One allowance, and only one: the batched forward's logits may differ from a single row's in the last
float32 bit (other GEMM shapes, other BLAS kernels: measured on AVX2 OpenBLAS), so a draw whose
uniform falls within MARGIN of a CDF boundary may pick the neighbouring token. A row may differ only
when its single run made such a draw (`check_rows_alone` records every draw of picospec's `sample`);
a logic error splits rows without one.

Two settings: a micro GPT-2 of three tokens (HP, PARAMS, PROMPTS), on which acceptance and rejection
both happen often, and the built-in models on code prompts of different lengths (TEXTS). Both load
once per test session.
"""
import functools
import sys

import numpy as np

import picospec.eagle2 as eagle2
import picospec.sampling as sampling
from gpt2.engine import GPT2
from gpt2.load import load_model
from tests.support.micro import random_gpt2

MARGIN = 1e-5
V, N = 3, 5
HP, PARAMS = random_gpt2(n_vocab=V, n_ctx=16, n_embd=8, n_head=2, n_layer=2, seed=7, scale=0.6)
# each repeats itself, so drafts are found (of different lengths)
PROMPTS = [[0, 1, 2, 0, 1], [2, 2], [1, 0, 1, 0]]
ROWS = PROMPTS * 16  # the micro rows: 48, each with its own generator
# for the rows-equal-alone tests on the built-in models: texts of different lengths, so rows go
# ragged
TEXTS = ["def add(a, b):", "import os", "class Node:\n    def __init__(self", "x",
         "for i in range(10):"]


def micro():
    """-> a fresh single-sequence engine of the micro target (it holds a cache: one per use)."""
    return GPT2(HP, PARAMS, threads=1)


@functools.cache
def model(name):
    """-> (model, encoder) of a built-in model on one BLAS thread, loaded once per test session
    (reset() it before use)."""
    return load_model(name, threads=1)


def built_in():
    """-> (the built-in target, TEXTS encoded by its tokenizer)."""
    target, encoder = model("tiny-target")
    return target, [encoder.encode(t) for t in TEXTS]


def generators(n, seed=0):
    """-> {row: its own generator} for n rows (row b: seed + b)."""
    return {b: np.random.default_rng(seed + b) for b in range(n)}


def record_draws(monkeypatch):
    """Every picospec module's `sample` records, for each draw, how far its uniform fell from the
    nearest CDF boundary (the draws are unchanged) -> the list of those distances."""
    margins = []

    def recorded(p, rng):
        cdf = np.cumsum(p, dtype=np.float64)
        u = rng.random() * cdf[-1]
        i = int(np.searchsorted(cdf, u, side="right"))
        margins.append(min(abs(u - cdf[j]) for j in (i - 1, i) if 0 <= j < len(cdf)))
        return i

    sample = sampling.sample
    for name, module in list(sys.modules.items()):
        if name.startswith("picospec") and getattr(module, "sample", None) is sample:
            monkeypatch.setattr(module, "sample", recorded)
    return margins


def check_rows_alone(out, alone, monkeypatch):
    """out[b] == alone(b, steps) for every row b, alone being the single form on row b's prompt with
    row b's generator (it appends its step records to steps), but for a row whose single run drew
    within MARGIN of a CDF boundary -> the single runs' step records, per row."""
    records = []
    with monkeypatch.context() as patch:  # the recording sample for the single runs only
        margins = record_draws(patch)
        for b, row in enumerate(out):
            margins.clear()
            steps = []
            single = alone(b, steps)
            records.append(steps)
            near = min(margins, default=1) < MARGIN
            assert row == single or near, f"row {b} differs from its single run"
    return records


def check_paths(records):
    """The rows compared took both paths of verification: some draft accepted, some rejected (a
    token resampled)."""
    origins = [o for steps in records for s in steps for o in s.get("origins", [])]
    assert "draft" in origins and "resample" in origins


def check_records(stats, finished=True):
    """Drafts were accepted, the rows went ragged (and, if `finished`, some finished before others),
    and each row's record is the nodes it kept, then one token (a finished row: nothing)."""
    assert sum(a for s in stats for a in s["accepted"] if a > 0) > 0
    assert any(len({a for a in s["accepted"] if a >= 0}) > 1 for s in stats)
    assert not finished or any(-1 in s["accepted"] for s in stats)
    for s in stats:
        assert all(a == len(t) - 1 if a >= 0 else t == [] for a,
                   t in zip(s["accepted"], s["tokens"]))


def dynamic_tree_rows(monkeypatch, target, head, batched, single, broken=None, **options):
    """An EAGLE-2-style dynamic tree on the micro ROWS (depth 2, top-k 2, 3 nodes): `batched` with
    `head` (a broken verify_tree planted in the batched run only), each row against `single` alone
    -> the batch's step records."""
    from gpt2.eagle import BatchEagleHead
    from gpt2.engine import BatchGPT2

    stats, kwargs = [], dict(depth=2, tree_top_k=2, total_tokens=3, **options)
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(eagle2, "verify_tree", broken)
        out = batched(ROWS, BatchGPT2(target, len(ROWS), tree_slots=8),
                      BatchEagleHead(head, len(ROWS)), N, np.random.default_rng(99), stats=stats,
                      generators=generators(len(ROWS)), **kwargs)

    def alone(b, steps):
        target.reset(), head.reset()
        return single(ROWS[b], target, head, N, np.random.default_rng(b), stats=steps, **kwargs)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@functools.cache
def heads(method):
    """-> the built-in target's shipped heads for `method` (picospec_app.load.load_heads), loaded
    once per test session."""
    from picospec_app.load import load_heads

    return load_heads("tiny-target", method, None, model("tiny-target")[0])
