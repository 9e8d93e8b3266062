"""Batched EAGLE-2: batch_eagle2_decoding (picospec/batched/eagle2.py) on the batched head
(gpt2/eagle.py) gives each row what eagle2_decoding gives its prompt alone with its own generator,
in its tokens and in its step records, on the built-in target and its shipped head, at temperature
0, 1 and 0.7 with top-k 5 and top-p 0.8, rows finishing at different steps; the head runs once per
layer for all rows still expanding; the records have the keys of batched EAGLE-1's; and so on a
micro GPT-2 of three tokens with a random head (48 rows, nodes accepted and rejected, at temperature
1 and 0.7 with top-k 2), where the first drafted path taken unverified in the batched run is caught.
So each row has the law that tests/picospec/test_eagle2.py checks (tests/support/batchrows.py)."""
import numpy as np
import pytest

from gpt2.eagle import BatchEagleHead
from gpt2.engine import BatchGPT2
from gpt2.eagle import EagleHead
from picospec.batched.eagle import batch_eagle_decoding
from picospec.batched.eagle2 import batch_eagle2_decoding
from picospec.eagle import static_tree
from picospec.eagle2 import eagle2_decoding

from tests.support.batchrows import (HP, TEXTS, built_in, check_records, dynamic_tree_rows, heads,
                                     micro)
from tests.support.broken_verifiers import unverified
from tests.support.micro import random_head

N = 24
KEYS = {"drafted", "nodes", "accepted", "tokens"}


@pytest.fixture(scope="module")
def shipped():
    target, xs = built_in()
    return target, heads("eagle"), xs


def alone(target, head, xs, options):
    """-> per prompt, (eagle2_decoding's output alone with generator b, its step records)."""
    out = []
    for b, x in enumerate(xs):
        target.reset(), head.reset()
        stats = []
        out.append((eagle2_decoding(x, target, head, N, np.random.default_rng(b), stats=stats,
                                    **options), stats))
    return out


@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}],
                         ids=["T0", "T1", "T0.7-top_k5-top_p0.8"])
def test_batched_rows_equal_each_row_alone(shipped, options):
    """Tokens, and per step: each row's accepted count and new tokens (-1 and none once it has
    finished); the step's drafted and nodes are the largest of the rows still running."""
    target, head, xs = shipped
    stats = []
    out = batch_eagle2_decoding(xs, BatchGPT2(target, len(xs)), BatchEagleHead(head, len(xs)), N,
                                np.random.default_rng(9), stats=stats,
                                generators={b: np.random.default_rng(b) for b in range(len(xs))},
                                **options)
    rows = alone(target, head, xs, options)
    assert len(stats) == max(len(s) for _, s in rows)
    for b, (x, single) in enumerate(rows):
        assert out[b] == x, TEXTS[b]
        assert [s["accepted"][b] for s in stats] == [r["accepted"]
                                                     for r in single] + [-1] * (len(stats)
                                                                                - len(single))
        assert [s["tokens"][b] for s in stats] == [r["tokens"]
                                                   for r in single] + [[]] * (len(stats)
                                                                              - len(single))
    for k, s in enumerate(stats):
        running = [single[k] for _, single in rows if k < len(single)]
        assert (s["drafted"], s["nodes"]) == (max(r["drafted"] for r in running),
                                              max(r["nodes"] for r in running))
    # drafts accepted, rows ragged, some finished first; a record: kept nodes, then a root
    check_records(stats[1:])


class Counted:
    """The batched head, with the rows of every call written down."""

    def __init__(self, head):
        self.head, self.called = head, []

    def __call__(self, bs, xs, Fs, trees):
        self.called.append(list(bs))
        return self.head(bs, xs, Fs, trees)


def test_one_head_call_per_layer_and_the_records_of_batched_eagle(shipped):
    """A step calls the head `depth` times (the root's law, then a layer per call) for all rows
    still expanding, fewer near the end (no deeper than the tokens a row still needs); the records
    have batched EAGLE-1's keys."""
    target, head, xs = shipped
    depth, n = 3, 10
    batch, counted, stats = BatchGPT2(target, len(xs)), Counted(BatchEagleHead(head, len(xs))), []
    batch_eagle2_decoding(xs, batch, counted, n, np.random.default_rng(0), depth=depth,
                          tree_top_k=2, total_tokens=5, stats=stats, temperature=0)
    lengths, calls = [len(x) + 1 for x in xs], []  # every row's length after the prefill's token
    for s in stats[1:]:
        levels = {b: min(depth, len(x) + n - lengths[b] - 1) for b,
                  x in enumerate(xs) if s["accepted"][b] >= 0}
        calls += [[b for b in levels if levels[b] > k] for k in range(max(levels.values()))]
        lengths = [L + len(t) for L, t in zip(lengths, s["tokens"])]
    assert counted.called == calls and any(len(c) < len(xs) for c in calls)
    batch.reset(), head.reset()
    eagle1 = []
    batch_eagle_decoding(xs, batch, BatchEagleHead(head, len(xs)), n, np.random.default_rng(0),
                         static_tree("chain", depth=depth), stats=eagle1, temperature=0)
    assert {frozenset(s) for s in stats} == {frozenset(s) for s in eagle1} == {frozenset(KEYS)}
    assert all(len(s["accepted"]) == len(s["tokens"]) == len(xs) for s in stats)
    check_records(stats[1:])


def micro_rows(monkeypatch, broken=None, **options):
    """Batched EAGLE-2 on ROWS with a random head (a broken verify_tree planted in the batched run
    only), each row against eagle2_decoding alone -> the batch's step records."""
    target = micro()
    params, config = random_head(HP["n_embd"], HP["n_head"], seed=6, scale=0.8)
    head = EagleHead(params, config, target.params["wte"], 32)
    return dynamic_tree_rows(monkeypatch, target, head, batch_eagle2_decoding, eagle2_decoding,
                             broken, **options)


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    check_records(micro_rows(monkeypatch, **options)[1:])


def test_unverified_drafts_are_caught(monkeypatch):
    """Broken variant: the first drafted path taken as it is, in the batched run."""
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, unverified)
