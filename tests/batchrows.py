"""What the tests of the batched tree and chain forms share (prompt lookup, REST, lookahead): a micro GPT-2 with a
three-token vocabulary whose rows are sampled many at a time, and the checks on a batched run's step records."""
import numpy as np
import pytest

from checker import check_law, exact_law
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from gpt2.load import load_model
from micro import random_gpt2

V, N, COPIES = 3, 5, 500
HP, PARAMS = random_gpt2(n_vocab=V, n_ctx=16, n_embd=8, n_head=2, n_layer=2, seed=7, scale=0.6)
PROMPTS = [[0, 1, 2, 0, 1], [2, 2], [1, 0, 1, 0]]  # each repeats itself, so drafts are found (of different lengths)
# for the rows-equal-alone tests on the built-in models: texts of different lengths, so rows go ragged
TEXTS = ["def add(a, b):", "import os", "class Node:\n    def __init__(self", "x", "for i in range(10):"]


def built_in():
    """-> (the built-in target, TEXTS encoded by its tokenizer)."""
    target, encoder = load_model("tiny-target")
    return target, [encoder.encode(t) for t in TEXTS]


def sampled_rows(method, n, tree_slots=8, check=None):
    """-> (per prompt, n continuations of N tokens, the target): method(target) gives decode(xs, batch, rng, stats),
    which runs the batched method on COPIES rows of every prompt at once; it runs n // COPIES times, on one BatchGPT2
    of the micro target. check(stats), if given, asserts what the method's step records must show."""
    target = GPT2(HP, PARAMS)
    decode = method(target)
    batch = BatchGPT2(target, len(PROMPTS) * COPIES, tree_slots=tree_slots)
    rng, samples, stats = np.random.default_rng(0), [[] for _ in PROMPTS], []
    for _ in range(n // COPIES):
        batch.reset()
        for i, row in enumerate(decode(PROMPTS * COPIES, batch, rng, stats)):
            samples[i % len(PROMPTS)].append(tuple(row[len(PROMPTS[i % len(PROMPTS)]):]))
    assert sum(a for s in stats for a in s["accepted"] if a > 0) > 0  # drafts were accepted
    if check:
        check(stats)
    return samples, target


def check_records(stats, finished=True):
    """Drafts were accepted, the rows went ragged (and, if `finished`, some finished before others), and each row's
    record is the nodes it kept, then one token (a finished row: nothing)."""
    assert sum(a for s in stats for a in s["accepted"] if a > 0) > 0
    assert any(len({a for a in s["accepted"] if a >= 0}) > 1 for s in stats)
    assert not finished or any(-1 in s["accepted"] for s in stats)
    for s in stats:
        assert all(a == len(t) - 1 if a >= 0 else t == [] for a, t in zip(s["accepted"], s["tokens"]))


def check_laws(samples, target, **options):
    """Every prompt's sampled rows follow the target's exact law (picospec's checker, tests/checker.py)."""
    for prompt, rows in zip(PROMPTS, samples):
        check_law(rows, exact_law(target, prompt, N, **options))


def check_rejected(samples, target):
    """A broken variant's rows: the same check rejects the first prompt's."""
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(samples[0], exact_law(target, PROMPTS[0], N))
