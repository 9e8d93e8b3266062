"""Lookahead decoding: the combined mask against a hand-drawn one, the n-gram pool by hand, greedy equality on toys and
on a real GPT-2 engine, and the target's exact law when sampling (with broken variants the same check rejects)."""
import numpy as np
import pytest

import picospec.lookahead as la
from checker import SAMPLES, check_law, exact_law
from gpt2.engine import GPT2
from micro import random_gpt2
from picospec.autoregressive import autoregressive_sampling
from picospec.lookahead import attention_mask, collect_ngrams, lookahead_decoding, lookahead_tree
from picospec.tree import children
from toy import random_toy_tree

# W = 3, N = 3: window levels [a0 a1 a2] and [b0 b1 b2]; G = 2 guesses [7, 8] and [7, 9] (a trie: 7 -> {8, 9}).
#          a0 a1 a2 b0 b1 b2 7  8  9
HAND = """
           1  0  0  0  0  0  0  0  0
           1  1  0  0  0  0  0  0  0
           1  1  1  0  0  0  0  0  0
           1  0  0  1  0  0  0  0  0
           1  1  0  0  1  0  0  0  0
           1  1  1  0  0  1  0  0  0
           0  0  0  0  0  0  1  0  0
           0  0  0  0  0  0  1  1  0
           0  0  0  0  0  0  1  0  1"""


def test_mask_against_hand_drawn():
    tokens, parents, n_look = lookahead_tree([[10, 11, 12], [20, 21, 22]], [[7, 8], [7, 9]])
    assert tokens == [10, 11, 12, 20, 21, 22, 7, 8, 9] and n_look == 6
    hand = np.array([[int(c) for c in row.split()] for row in HAND.strip().splitlines()], dtype=bool)
    np.testing.assert_array_equal(attention_mask(parents), hand)
    depth = attention_mask(parents).sum(1)  # nodes seen = depth below x[-1]
    assert depth.tolist() == [1, 2, 3, 2, 3, 4, 1, 2, 2]  # (l, i) at l + i + 1; guesses at 1, 2


def test_docstring_example():
    assert lookahead_tree([[1, 2], [3, 4]], [])[1] == [-1, 0, 0, 1]


def test_pool_collects_column_ngrams():
    pool = {}
    collect_ngrams(pool, [[1, 2, 3], [4, 5, 6]], [7, 8, 9], cap=2)  # columns: (1 4 7) (2 5 8) (3 6 9)
    assert pool == {1: [[4, 7]], 2: [[5, 8]], 3: [[6, 9]]}
    collect_ngrams(pool, [[1, 1, 1], [4, 0, 2]], [7, 0, 3], cap=2)  # (1 4 7) again moves to the front; cap 2
    assert pool[1] == [[2, 3], [0, 0]]


@pytest.mark.parametrize("window, ngram, guesses", [(4, 3, 4), (2, 2, 1), (3, 4, 2), (1, 2, 0)])
def test_temperature_zero_equals_greedy_on_toys(window, ngram, guesses):
    accepted = 0
    for seed in range(4):
        target = random_toy_tree(4, seed, concentration=0.2)
        x = [1, 2, 3]
        stats = []
        out = lookahead_decoding(x, target, 30, np.random.default_rng(seed), window, ngram, guesses, stats=stats,
                                 temperature=0)
        assert out == autoregressive_sampling(x, target, 30, np.random.default_rng(0), temperature=0)
        accepted += sum(s["accepted"] for s in stats)
    assert accepted > 0 or guesses == 0


def test_temperature_zero_equals_greedy_on_engine():
    """A real engine: the combined tree mask, positions and cache compaction (accept of verification nodes only)."""
    model = GPT2(*random_gpt2(n_vocab=16, n_ctx=64, n_embd=32, n_head=2, n_layer=2, scale=0.3, seed=2))
    accepted = 0
    for x in ([1, 2, 3, 4], [5, 5, 6], [9]):
        expected = autoregressive_sampling(x, model, 40, np.random.default_rng(0), temperature=0)
        model.reset()
        stats = []
        out = lookahead_decoding(x, model, 40, np.random.default_rng(0), 3, 3, 3, stats=stats, temperature=0)
        assert out == expected
        accepted += sum(s["accepted"] for s in stats)
    assert accepted > 0


def test_context_end_drops_the_lookahead_branch():
    model = GPT2(*random_gpt2(n_vocab=16, n_ctx=20, n_embd=32, n_head=2, n_layer=2, scale=0.3, seed=2))
    out = lookahead_decoding([1, 2, 3], model, 17, np.random.default_rng(0), 4, 3, 2, temperature=0)
    assert out == autoregressive_sampling([1, 2, 3], model, 17, np.random.default_rng(0), temperature=0)


PROMPT, N = [0, 1, 2, 0], 4
TARGET = random_toy_tree(3, seed=7, concentration=0.5)


def runs(n=SAMPLES, **options):
    rng = np.random.default_rng(0)
    return [tuple(lookahead_decoding(PROMPT, TARGET, N, rng, 2, 2, 3, **options)[len(PROMPT):]) for _ in range(n)]


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_joint_law_equals_target(options):
    stats = []
    lookahead_decoding(PROMPT, TARGET, 30, np.random.default_rng(1), 2, 2, 3, stats=stats, **options)
    assert sum(s["accepted"] for s in stats) > 0  # the pool's guesses get accepted on this toy
    check_law(runs(**options), exact_law(TARGET, PROMPT, N, **options))


def unverified(tokens, parents, Q, rng, P=None):
    """Broken variant: the first guess is accepted without verification."""
    kids, path, node = children(parents), [], -1
    while kids[node]:
        node = kids[node][0]
        path.append(node)
    from picospec.sampling import sample
    return path, sample(Q[node + 1], rng), "bonus"


def test_unverified_guesses_are_rejected(monkeypatch):
    monkeypatch.setattr(la, "verify_tree", unverified)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(), exact_law(TARGET, PROMPT, N))


def test_bad_options():
    for kw, message in ((dict(window=0), "window"), (dict(ngram=1), "ngram"), (dict(guesses=-1), "guesses")):
        with pytest.raises(ValueError, match=message):
            lookahead_decoding([1], TARGET, 3, np.random.default_rng(0), **kw)
