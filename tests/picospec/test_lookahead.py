"""Lookahead decoding: the combined tree and its mask against hand-drawn ones, the n-gram pool by
hand, greedy equality on toys and on a real GPT-2 engine, and the target's exact law when sampling
(with broken variants that the same check rejects)."""
import numpy as np
import pytest

import picospec.lookahead as la
from gpt2.engine import GPT2
from picospec.autoregressive import autoregressive_sampling
from picospec.lookahead import (attention_mask, collect_ngrams, lookahead_decoding, lookahead_tree,
                                pool_guesses, verification_branch)

from tests.support.broken_verifiers import first_guess_unverified
from picospec.check.exact_law import check_law, exact_law
from tests.support.micro import random_gpt2
from tests.support.toy import random_toy_tree

# W = 3, N = 3: levels [10 11 12] and [20 21 22]; the pool holds three continuations of x[-1] = 5, G
# = 2 of them are verified: [7, 8] and [7, 9], a trie 7 -> {8, 9}.
#          (0,0) (0,1) (0,2) (1,0) (1,1) (1,2)  7   8   9
HAND = """
             1     0     0     0     0     0    0   0   0
             1     1     0     0     0     0    0   0   0
             1     1     1     0     0     0    0   0   0
             1     0     0     1     0     0    0   0   0
             1     1     0     0     1     0    0   0   0
             1     1     1     0     0     1    0   0   0
             0     0     0     0     0     0    1   0   0
             0     0     0     0     0     0    1   1   0
             0     0     0     0     0     0    1   0   1"""
POOL = {5: [[7, 8], [7, 9], [6, 6]], 7: [[1, 1]]}
WINDOW = [[10, 11, 12], [20, 21, 22]]


def test_tree_and_mask_against_hand_drawn():
    candidates = pool_guesses(POOL, 5, 2, room=10)
    assert candidates == [[7, 8], [7, 9]]
    tokens, parents, n_look = lookahead_tree(WINDOW, candidates)
    assert tokens == [10, 11, 12, 20, 21, 22, 7, 8, 9] and n_look == 6
    assert parents == [-1, 0, 1, 0, 1, 2, -1, 6, 6]
    hand = np.array([[int(c) for c in row.split()] for row in HAND.strip().splitlines()],
                    dtype=bool)
    np.testing.assert_array_equal(attention_mask(parents), hand)
    # positions by hand: (l, i) at len(x) + l + i, the guesses at len(x) and len(x) + 1; with x of 4
    # tokens:
    depths = []
    for p in parents:
        depths.append(1 if p < 0 else depths[p] + 1)
    assert [3 + d for d in depths] == [4, 5, 6, 5, 6, 7, 4, 5, 5]
    assert hand.sum(1).tolist() == depths  # a node sees as many nodes as its depth


def test_docstring_examples():
    assert lookahead_tree([[1, 2], [3, 4]], []) == ([1, 2, 3, 4], [-1, 0, 0, 1], 4)
    assert lookahead_tree([[10, 11], [20, 21]], [[7, 8]]) == ([10, 11, 20, 21, 7, 8],
                                                              [-1, 0, 0, 1, -1, 4], 4)
    pool = {}
    collect_ngrams(pool, [[1, 2], [4, 5]], [7, 8], cap=4)
    assert pool == {1: [[4, 7]], 2: [[5, 8]]}


def test_pool_collects_column_ngrams():
    pool = {}
    # columns (1 4 | 7) (2 5 | 8) (3 6 | 9)
    collect_ngrams(pool, [[1, 2, 3], [4, 5, 6]], [7, 8, 9], cap=2)
    assert pool == {1: [[4, 7]], 2: [[5, 8]], 3: [[6, 9]]}
    # key 1 gets [4 7] (again), [2 3], [0 0]
    collect_ngrams(pool, [[1, 1, 1], [4, 2, 0]], [7, 3, 0], cap=2)
    # newest first, the duplicate moved to the front then pushed out by the cap
    assert pool[1] == [[0, 0], [2, 3]]
    # an n-gram already there moves to the front, not twice
    collect_ngrams(pool, [[2], [5]], [8], cap=2)
    assert pool[2] == [[5, 8]]
    assert pool_guesses({3: [[1, 2], [4, 5], [6, 7]]}, 3, guesses=2, room=1) == [[1], [4]]
    assert pool_guesses({3: [[1, 2]]}, 3, guesses=2, room=0) == [] and pool_guesses({}, 3, 2,
                                                                                    5) == []


def test_verification_branch_rows():
    tokens, parents, n_look = lookahead_tree(WINDOW, [[7, 8], [7, 9]])
    Q = np.arange(10)[:, None] * np.ones((1, 3))  # row r holds r
    v_tokens, v_parents, rows = verification_branch(tokens, parents, Q, n_look)
    assert (v_tokens, v_parents, rows[:, 0].tolist()) == ([7, 8, 9], [-1, 0, 0], [0, 7, 8, 9])


def engine(n_ctx=64):
    return GPT2(*random_gpt2(n_vocab=16, n_ctx=n_ctx, n_embd=32, n_head=2, n_layer=2, scale=0.3,
                             seed=2))


def test_one_forward_scores_every_node_as_its_own_sequence():
    """The engine's tree attention on the combined tree: row 1 + i is the distribution after x and
    node i's chain."""
    model, x = engine(), [3, 1, 4, 1, 5]
    tokens, parents, _ = lookahead_tree([[2, 6, 5], [3, 5, 8], [9, 7, 9]], [[7, 8], [7, 9], [6]])
    Q = model.tree(x, tokens, parents, probs=True)
    for i in range(len(tokens)):
        chain, node = [], i
        while node >= 0:
            chain, node = [tokens[node]] + chain, parents[node]
        model.reset()
        np.testing.assert_allclose(Q[1 + i], model(x + chain)[-1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("window, ngram, guesses", [(4, 3, 4), (2, 2, 1), (3, 4, 2), (1, 2, 0)])
def test_temperature_zero_equals_greedy_on_toys(window, ngram, guesses):
    accepted = 0
    for seed in range(4):
        # peaked: greedy text repeats, the pool gets hits
        target = random_toy_tree(4, seed, concentration=0.2)
        stats = []
        out = lookahead_decoding([1, 2, 3], target, 30, np.random.default_rng(seed), window, ngram,
                                 guesses, stats=stats, temperature=0)
        assert out == autoregressive_sampling([1, 2, 3], target, 30, np.random.default_rng(0),
                                              temperature=0)
        accepted += sum(s["accepted"] for s in stats)
    assert accepted > 0 or guesses == 0


def test_temperature_zero_equals_greedy_on_engine():
    """Real tree attention, positions and cache compaction (accept() keeps only verification
    nodes)."""
    model, accepted = engine(), 0
    for x in ([1, 2, 3, 4], [5, 5, 6], [9]):
        model.reset()
        expected = autoregressive_sampling(x, model, 40, np.random.default_rng(0), temperature=0)
        model.reset()
        stats = []
        assert lookahead_decoding(x, model, 40, np.random.default_rng(0), 3, 3, 3, stats=stats,
                                  temperature=0) \
            == expected
        accepted += sum(s["accepted"] for s in stats)
    assert accepted > 0


class Plain:
    """The engine behind the bare tree interface (no n_ctx to read), as picospec.bench wraps it."""

    def __init__(self, model):
        self.model = model

    def __call__(self, x, n=1):
        return self.model(x, n)

    def tree(self, x, tokens, parents, probs=False):
        return self.model.tree(x, tokens, parents, probs=probs)

    def accept(self, path):
        self.model.accept(path)


def test_generating_up_to_the_context_end():
    """len(x) + N = n_ctx: the window (depth W + N - 2 = 5) is skipped when deeper than the tokens
    still needed."""
    model = engine(n_ctx=20)
    expected = autoregressive_sampling([1, 2, 3], model, 17, np.random.default_rng(0),
                                       temperature=0)
    model.reset()
    assert lookahead_decoding([1, 2, 3], Plain(model), 17, np.random.default_rng(0), 4, 3, 2,
                              temperature=0) == expected


# --- sampling follows the target's exact law
# ----------------------------------------------------------------------

PROMPT, N = [0, 1, 2, 0], 4
TARGET = random_toy_tree(3, seed=7, concentration=0.5)


# Sequences per check, each sized by `python -m tests.suite.power --only lookahead`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
JOINT = 1_300  # rows-of-the-window in each case: power 0.9995
BROKEN = {"verify_tree": 160, "verification_branch": 1_300}  # each itself: 1.0000, 0.9995


# W = 2, N-gram 3, G = 3: tries two deep, siblings after a shared first token
def runs(n, seed=0, **options):
    rng = np.random.default_rng(seed)
    return [tuple(lookahead_decoding(PROMPT, TARGET, N, rng, 2, 3, 3, **options)[len(PROMPT):])
            for _ in range(n)]


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_joint_law_equals_target(options):
    stats = []
    rng = np.random.default_rng(1)
    for _ in range(200):
        lookahead_decoding(PROMPT, TARGET, N, rng, 2, 3, 3, stats=stats, **options)
    # the pool's guesses are accepted in these short runs
    assert sum(s["accepted"] for s in stats) > 50
    check_law(runs(JOINT, **options), exact_law(TARGET, PROMPT, N, **options))


def rows_of_the_window(tokens, parents, Q, n_look):
    """Broken variant: the trie is verified against the first rows of Q (the window's) instead of
    its own."""
    v_tokens, v_parents, _ = verification_branch(tokens, parents, Q, n_look)
    return v_tokens, v_parents, Q[:1 + len(v_tokens)]


@pytest.mark.parametrize("name, broken",
                         [("verify_tree", first_guess_unverified),
                          ("verification_branch", rows_of_the_window)],
                         ids=["verify_tree", "verification_branch"])
def test_broken_variants_are_rejected(monkeypatch, name, broken):
    monkeypatch.setattr(la, name, broken)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(BROKEN[name]), exact_law(TARGET, PROMPT, N))


@pytest.mark.parametrize("kw, message", [(dict(window=0), "window"), (dict(ngram=1), "ngram"),
                                         (dict(guesses=-1), "guesses"),
                                         (dict(window=2.5), "window"),
                                         (dict(pool_cap=0), "pool_cap")])
def test_bad_options(kw, message):
    with pytest.raises(ValueError, match=message):
        lookahead_decoding([1], TARGET, 3, np.random.default_rng(0), **kw)
