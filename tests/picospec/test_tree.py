"""The shared tree module and the tree verifier: the Medusa article's buffers exactly, tries, sparse
trees, clear errors for bad medusa_choices, and recursive rejection sampling over siblings
reproducing the target's exact law."""
import numpy as np
import pytest

import picospec.verify as verify
from picospec.sampling import sample, warp
from picospec.tree import greedy_path, medusa_buffers, paths, prune, sparse_tree, trie
from picospec.verify import verify_tree

from tests.support.broken_verifiers import longest_match
from picospec.check.exact_law import check_law, exact_law
from tests.support.toy import random_toy
from tests.support.trees import SEED_CHOICES

SEED_MASK = """
100000000
110000000
101000000
110100000
110010000
110001000
101000100
101000010
101000001"""


def test_seed_example_buffers_exactly():
    b = medusa_buffers(SEED_CHOICES, topk=10)
    assert b["tree_indices"].tolist() == [0, 1, 2, 11, 12, 13, 11, 12, 13]
    assert b["position_ids"].tolist() == [0, 1, 1, 2, 2, 2, 2, 2, 2]
    assert b["retrieve_indices"].tolist() == [[0, 2, 8], [0, 2, 7], [0, 2, 6], [0, 1, 5], [0, 1, 4],
                                              [0, 1, 3]]
    mask = np.array([[int(c) for c in row] for row in SEED_MASK.split()], dtype=bool)
    np.testing.assert_array_equal(b["attn_mask"], mask)
    # the article's demo tensor: root token 1, head 1 offers [2, 3], head 2 offers [4, 5, 6]
    flat = np.zeros(21, dtype=int)
    flat[0], flat[1:3], flat[11:14] = 1, [2, 3], [4, 5, 6]
    tree = flat[b["tree_indices"]]
    assert tree.tolist() == [1, 2, 3, 4, 5, 6, 4, 5, 6]
    assert np.append(tree, -1)[b["retrieve_indices"]].tolist() == [[1, 3, 6], [1, 3, 5], [1, 3, 4],
                                                                   [1, 2, 6], [1, 2, 5], [1, 2, 4]]


def test_buffers_agree_with_engine_parents():
    b = medusa_buffers(SEED_CHOICES, topk=10)
    n = len(b["parents"])
    mask = np.eye(n + 1, dtype=bool)  # rebuild the mask from the parents the engine gets
    mask[:, 0] = True
    for i, p in enumerate(b["parents"]):
        if p >= 0:
            mask[i + 1] |= mask[p + 1]
    np.testing.assert_array_equal(mask, b["attn_mask"])
    assert sorted(tuple(p) for p in paths(b["parents"])) == sorted(tuple(r[1:][r[1:] >= 0] - 1)
                                                                   for r in b["retrieve_indices"])


@pytest.mark.parametrize("choices, message", [
    ([[0], [0]], "twice"),
    ([[0], [1, 0]], "no parent: add [1]"),
    ([[0], [0, 0], [0, 0, 0]], "only 2 heads"),
    ([[0], [12]], "only topk = 10 candidates"),
    ([], "empty"),
    ([[0], [-1]], "non-negative"),
])
def test_bad_choices_give_clear_errors(choices, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        medusa_buffers(choices, topk=10, n_heads=2)


def test_trie_and_prune():
    tokens, parents, counts = trie([[5, 6, 1], [5, 7], [8], [5, 6, 2]])
    assert (tokens, parents, counts) == ([5, 6, 1, 7, 8, 2], [-1, 0, 1, 0, -1, 1],
                                         [3, 2, 1, 1, 1, 1])
    # ties: shallower first
    assert prune(tokens, parents, counts, 3) == ([5, 6, 8], [-1, 0, -1], [3, 2, 1])
    assert prune(tokens, parents, counts, 4) == ([5, 6, 7, 8], [-1, 0, 0, -1], [3, 2, 1, 1])


def test_greedy_path():
    tokens, parents = [3, 1, 2, 0], [-1, 0, 0, 2]  # 3 -> {1, 2 -> 0}
    logits = np.full((5, 4), -1.0)
    # after root: 3; after node 0: 2; after 2: 0; then 1
    logits[0, 3] = logits[1, 2] = logits[3, 0] = logits[4, 1] = 5
    assert greedy_path(tokens, parents, logits) == ([0, 2, 3], 1)
    logits[0, 3], logits[0, 2] = -1, 5  # root's argmax 2 is not a child
    assert greedy_path(tokens, parents, logits) == ([], 2)


def test_sparse_tree_is_greedy_by_expected_gain():
    acc = [[0.6, 0.2, 0.1], [0.4, 0.2, 0.1]]
    choices, expected = sparse_tree(acc, 5)
    # values .6 .24 .2 .12 .1 (not [2]'s .1 and [0,2]'s .06)
    assert choices == [[0], [1], [2], [0, 0], [0, 1]]
    assert expected == pytest.approx(1 + 0.6 + 0.2 + 0.1 + 0.24 + 0.12)
    assert sparse_tree(acc, 1) == ([[0]], pytest.approx(1.6))


# --- the origin a verifier returns, one deterministic step each
# -------------------------------------------------

# The tree 3 -> {1, 2 -> 0} of test_greedy_path, V = 4. Rows of Q are one-hot or zero at a child's
# token, so every accept (q(x) = 1) and every reject (q(x) = 0) happens whatever the generator
# draws, and the walk is fixed: Q row:      0 (after root)   1 (after 3)   2 (after 3 1)   3 (after
# 3 2)   4 (after 3 2 0)
TREE_TOKENS, TREE_PARENTS = [3, 1, 2, 0], [-1, 0, 0, 2]


def one_hot_rows(*tokens):
    return np.eye(4)[list(tokens)]  # [len(tokens), 4]


@pytest.mark.parametrize("Q, expected", [
    # 3 kept (q = 1), 1 rejected (q = 0), 2 kept, 0 kept: the walk ends at the leaf 0, whose row
    # gives 1: a bonus
    (one_hot_rows(3, 2, 0, 0, 1), ([0, 2, 3], 1, "bonus")),
    # 3 kept, then both children 1 and 2 have q = 0: rejected, the next token (0) comes from what is
    # left: resample
    (one_hot_rows(3, 0, 0, 0, 0), ([0], 0, "resample")),
    # the root's only child 3 has q = 0: no draft kept, token 2 from the residual: resample
    (one_hot_rows(2, 0, 0, 0, 0), ([], 2, "resample")),
])
def test_verify_tree_origin_of_each_step_by_hand(Q, expected):
    for seed in range(5):
        assert verify_tree(TREE_TOKENS, TREE_PARENTS, Q, np.random.default_rng(seed)) == expected


class Grid:
    """A stand-in generator: random() hands out the next of a preset list of uniforms."""

    def __init__(self, u):
        self.u = iter(u)

    def random(self):
        return next(self.u)


def test_siblings_law_by_quadrature_uses_the_residual_of_the_residual():
    """Root children 0 then 1 (one-hot proposals), q = [.5, .3, .2] after the root. 0 is kept with
    probability .5; after its rejection q becomes [0, .6, .4], so 1 is kept with .6 (.5 * .6 = .3 in
    all); after that rejection q is [0, 0, 1] and the walk draws 2 (.5 * .4 = .2): the law is q.
    Each walk uses at most three uniforms (two trials, one draw); laying them on the midpoints of a
    10 x 10 x 10 grid puts the thresholds .5, .6 between grid points, so the grid's law is exact.
    Taking the second residual from the first q (forgetting that 0 was rejected) keeps 1 with .3
    only and can even return the rejected 0."""
    # rows after the root, after node 0, after node 1
    Q = np.array([[0.5, 0.3, 0.2], [1, 0, 0], [1, 0, 0]])
    grid = (np.arange(10) + 0.5) / 10
    counts = np.zeros(3)
    for u in np.stack(np.meshgrid(grid, grid, grid, indexing="ij"), -1).reshape(-1, 3):  # [1000, 3]
        tokens = [0, 1]
        path, token, _ = verify_tree(tokens, [-1, -1], Q, Grid(u))
        counts[tokens[path[0]] if path else token] += 1  # the step's first new token
    np.testing.assert_allclose(counts / counts.sum(), Q[0], atol=1e-12)


def test_verify_tree_of_no_nodes_gives_a_bonus():
    """Nothing drafted: the token is the target's own, drawn from row 0 (a bonus, as
    verify_chain([]) says)."""
    assert verify_tree([], [], one_hot_rows(2), np.random.default_rng(0)) == ([], 2, "bonus")


# --- recursive rejection sampling over a tree reproduces the target
# -----------------------------------------------

PROMPT, N, V = [0, 1], 4, 3
TARGET, DRAFT = random_toy(V, seed=11), random_toy(V, seed=12)


def tree_decode(x, rng, draft_rng, branch, depth, sampled, options, one_hot=False):
    """A SpecInfer-style loop: a draft tree of `branch` children per node, `depth` levels, verified
    by verify_tree. sampled=True: children drawn i.i.d. from the draft (P given); False: the draft's
    top-`branch` tokens (P=None)."""
    x, T = list(x), len(x) + N
    while len(x) < T:
        tokens, parents, P, frontier = [], [], [], [(-1, [])]
        for _ in range(min(depth, T - len(x) - 1)):
            grown = []
            for node, path in frontier:
                p = warp(DRAFT(x + path)[-1], **options)
                picks = ([sample(p, draft_rng) for _ in range(branch)] if sampled
                         else list(np.argsort(-p, kind="stable")[:branch]))
                for t in picks:
                    tokens.append(int(t)), parents.append(node), P.append(p)
                    grown.append((len(tokens) - 1, path + [int(t)]))
            frontier = grown
        rows = [TARGET(x)[-1]]
        for i in range(len(tokens)):
            path, node = [], i
            while node >= 0:
                path, node = [tokens[node]] + path, parents[node]
            rows.append(TARGET(x + path)[-1])
        Q = warp(np.stack(rows), **options)
        path, token, _ = verify_tree(tokens, parents, Q, rng,
                                     np.array(P) if sampled and not one_hot else None)
        x += [tokens[i] for i in path] + [token]
    return tuple(x[len(PROMPT):T])


# Sequences per check, each sized by `python -m tests.suite.power --only tree`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
FOLLOWS = 980  # siblings-without-residual in each case: power 0.9991
ONE_HOT = 100  # longest-match with the same sampled drafts: 1.0000
LONGEST = {"False": 100, "True": 100}  # each itself: 1.0000, 1.0000
NO_RESIDUAL = 970  # itself: 0.9991
CASES = [(2, 2, False, {}),  # deterministic top-2 children: one-hot proposals
         (3, 2, True, {}),  # i.i.d. sampled siblings (duplicates possible)
         (2, 3, True, dict(temperature=0.7, top_k=2))]


def runs(n, seed=0, **kw):
    rng, draft_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    return [tree_decode(PROMPT, rng, draft_rng, **kw) for _ in range(n)]


@pytest.mark.parametrize("branch, depth, sampled, options", CASES)
def test_tree_verification_follows_target(branch, depth, sampled, options):
    samples = runs(FOLLOWS, branch=branch, depth=depth, sampled=sampled, options=options)
    check_law(samples, exact_law(TARGET, PROMPT, N, **options))


@pytest.mark.parametrize("sampled", [False, True])
def test_longest_match_of_independent_samples_is_rejected(monkeypatch, sampled):
    monkeypatch.setattr(f"{__name__}.verify_tree", longest_match)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(LONGEST[str(sampled)], branch=2, depth=2, sampled=sampled, options={}),
                  exact_law(TARGET, PROMPT, N))


def test_siblings_without_residual_are_rejected(monkeypatch):
    """Broken variant: siblings tried with min(1, q/p) but q is not replaced by the residual after a
    rejection."""
    monkeypatch.setattr(verify, "residual", lambda q, p: q)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(runs(NO_RESIDUAL, branch=3, depth=2, sampled=True, options={}),
                  exact_law(TARGET, PROMPT, N))


def test_one_hot_semantics_is_lossless_for_any_independent_draft():
    """Treating even sampled drafts as deterministic (P=None) stays lossless: given its value, a
    draft token is a one-hot proposal. It only accepts less often. This is why retrieved or top-k
    candidates need no P."""
    check_law(runs(ONE_HOT, branch=2, depth=2, sampled=True, options={}, one_hot=True),
              exact_law(TARGET, PROMPT, N))


def test_temperature_zero_equals_greedy_path():
    rng = np.random.default_rng(0)
    for seed in range(20):
        toy = random_toy(4, seed)
        tokens, parents = [0, 1, 2, 3, 0, 1], [-1, -1, 0, 0, 2, 3]
        Q = np.stack([toy([0])[-1]] + [toy([0] + [tokens[j] for j in p])[-1] for p in
                                       [[0], [1], [0, 2], [0, 3], [0, 2, 4], [0, 3, 5]]])
        path, token, _ = verify_tree(tokens, parents, warp(Q, temperature=0), rng)
        assert (path, token) == greedy_path(tokens, parents, np.log(Q))
