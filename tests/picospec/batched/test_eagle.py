"""Batched EAGLE-1: the batched head (gpt2/eagle.py BatchEagleHead) gives each row what EagleHead
gives it alone, through calls with ragged contexts, trees grown a level per call, contexts that move
on or change, and rows left out of a call; batch_eagle_decoding (picospec/eagle.py) gives each row
what eagle_decoding gives its prompt alone with its own generator, on the built-in target and its
shipped head, at temperature 0, 1 (sampled and top-k candidates) and 0.7 with top-k 5 and top-p 0.8,
rows finishing at different steps; and so on a micro GPT-2 of three tokens with a random head (48
rows, nodes accepted and rejected, at temperature 1 and 0.7 with top-k 2), where the first drafted
path taken unverified in the batched run is caught. So each row has the law that
tests/picospec/test_eagle.py checks (tests/support/batchrows.py)."""
import numpy as np
import pytest

import picospec.eagle as eagle1
from gpt2.eagle import BatchEagleHead
from gpt2.engine import BatchGPT2
from gpt2.eagle import EagleHead
from picospec.batched.eagle import batch_eagle_decoding

from tests.support.batchrows import (HP, N as MICRO_N, ROWS, TEXTS, built_in, check_paths,
                                     check_records, check_rows_alone, generators, heads, micro)
from tests.support.broken_verifiers import unverified
from tests.support.micro import random_head

V, C = 13, 8


def test_batched_head_equals_each_head_alone():
    params, config = random_head(C, seed=3)
    wte = np.random.default_rng(4).standard_normal((V, C)).astype(np.float32)
    alone = [EagleHead(params, config, wte, 64) for _ in range(3)]
    batch = BatchEagleHead(EagleHead(params, config, wte, 64), 3)
    rng = np.random.default_rng(5)
    xs = [list(rng.integers(0, V, n)) for n in (2, 7, 4)]
    Fs = [list(rng.standard_normal((len(x) - 1, C)).astype(np.float32)) for x in xs]
    trees = [([], []) for _ in xs]
    for step in range(12):
        bs = [b for b in range(3) if (step + b) % 4]  # some rows sit out some calls
        if step % 3 == 0:  # the contexts move on (accepted tokens), one row's is rewritten
            for b in range(3):
                extra = int(rng.integers(1, 4))
                Fs[b] += list(rng.standard_normal((extra, C)).astype(np.float32))
                xs[b] += list(rng.integers(0, V, extra))
                trees[b] = ([], [])
            xs[1][-3] = (xs[1][-3] + 1) % V
        else:  # a tree level: new children below random nodes of the tree so far
            for b in bs:
                tokens, parents = trees[b]
                k = int(rng.integers(1, 4))
                first = len(tokens)
                trees[b] = (tokens + list(rng.integers(0, V, k)),
                            parents
                            + [int(rng.integers(-1, first)) if first else -1 for _ in range(k)])
        got = batch(bs, [xs[b] for b in bs], [Fs[b] for b in bs], [trees[b] for b in bs])
        for b, logits in zip(bs, got):
            want = alone[b](xs[b], Fs[b], *trees[b])
            assert logits.shape == want.shape and np.abs(logits - want).max() < 1e-5, (step, b)
    assert batch.calls < sum(h.calls for h in alone)  # rows shared passes


N = 24


@pytest.fixture(scope="module")
def shipped():
    target, xs = built_in()
    return target, heads("eagle"), xs


@pytest.mark.parametrize("candidates, options",
                         [("sample", {"temperature": 0}), ("sample", {"temperature": 1.0}),
                                                 ("topk", {"temperature": 1.0}),
                                                 ("sample", {"temperature": 0.7, "top_k": 5,
                                                             "top_p": 0.8})])
def test_batched_rows_equal_each_row_alone(shipped, candidates, options):
    from picospec.eagle import eagle_decoding, static_tree

    target, head, xs = shipped
    choices = static_tree("sparse", head.accuracy, 10, 5)
    stats = []
    out = batch_eagle_decoding(xs, BatchGPT2(target, len(xs)), BatchEagleHead(head, len(xs)), N,
                               np.random.default_rng(9), choices, candidates, stats=stats,
                               generators={b: np.random.default_rng(b) for b in range(len(xs))},
                               **options)
    for b, x in enumerate(xs):
        target.reset(), head.reset()
        assert out[b] == eagle_decoding(x, target, head, N, np.random.default_rng(b), choices,
                                        candidates, **options), TEXTS[b]
    # drafts accepted, rows ragged, some finished first; a record: kept nodes, then a root
    check_records(stats[1:])


CHOICES = [[0], [1], [0, 0]]  # two sampled children of the root, one grandchild


def micro_rows(monkeypatch, broken=None, **options):
    """Batched EAGLE on ROWS with a random head (a broken verify_without_replacement planted in the
    batched run only), each row against eagle_decoding alone -> the batch's step records."""
    from picospec.eagle import eagle_decoding

    target, stats = micro(), []
    params, config = random_head(HP["n_embd"], HP["n_head"], seed=6, scale=0.8)
    head = EagleHead(params, config, target.params["wte"], 32)
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(eagle1, "verify_without_replacement", broken)
        out = batch_eagle_decoding(ROWS, BatchGPT2(target, len(ROWS), tree_slots=8),
                                   BatchEagleHead(head, len(ROWS)), MICRO_N,
                                   np.random.default_rng(99), CHOICES, stats=stats,
                                   generators=generators(len(ROWS)), **options)

    def alone(b, steps):
        target.reset(), head.reset()
        return eagle_decoding(ROWS[b], target, head, MICRO_N, np.random.default_rng(b), CHOICES,
                              stats=steps, **options)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    check_records(micro_rows(monkeypatch, **options)[1:])


def test_unverified_drafts_are_caught(monkeypatch):
    """Broken variant: the first drafted path taken as it is. (Judging the sampled children as
    one-hot proposals instead would be no flaw: one-hot verification is lossless whatever chose the
    candidates.)"""
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, lambda tokens, parents, Q, laws, rng: unverified(tokens, parents, Q,
                                                                                 rng))
