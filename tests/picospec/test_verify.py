"""The named verification rules of picospec/verify.py: i.i.d. siblings (SpecInfer), siblings drawn
without replacement (Sequoia), deterministic distinct candidates. Hand-checked examples, verify_tree
unchanged for its callers, and the target's exact law of whole sequences when trees are drawn here
(independently of the methods' code) and verified by each rule, with the broken pairings the same
check rejects.

Also the toy tree models the method tests share (tests/support/toy.py): `Toy1` and `MaskedToyTree`,
whose tree() rows are computed from the attention mask it is given, so a wrong mask gives wrong rows
(checked here).
"""
from collections import Counter

import numpy as np
import pytest

import picospec.verify as verify
from picospec.sampling import residual, sample, warp
from picospec.tree import DrawTrie, ancestor_mask
from picospec.verify import one_hot, verify_distinct, verify_iid, verify_siblings, verify_tree, \
    verify_without_replacement

from picospec.check.exact_law import check_law, exact_law
from tests.support.toy import MaskedToyTree, Toy1, sibling_mask
from tests.support.toy import random_toy, random_toy_tree


def test_masked_toy_equals_the_toy_tree_and_a_wrong_mask_changes_it():
    table = random_toy(3, seed=4).table
    tokens, parents, x = [0, 1, 2, 1, 0], [-1, -1, 0, 0, 3], [2, 1]
    right = MaskedToyTree(table).tree(x, tokens, parents, probs=True)
    assert np.array_equal(right, random_toy_tree(3, seed=4).tree(x, tokens, parents, probs=True))
    wrong = MaskedToyTree(table, sibling_mask).tree(x, tokens, parents, probs=True)
    assert not np.allclose(right, wrong)


def test_ancestor_mask_by_hand():
    assert ancestor_mask([-1, 0, 0, 2]).astype(int).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0],
                                                                 [1, 0, 1, 0], [1, 0, 1, 1]]


def test_draw_trie_by_hand():
    trie, p, r = DrawTrie(), np.full(9, 1 / 9), np.full(9, 1 / 9)
    assert [trie.draw(-1, 4, p), trie.draw(-1, 7, p), trie.draw(-1, 4, p),
            trie.draw(0, 5, r)] == [0, 1, 0, 2]
    assert (trie.tokens, trie.parents, trie.draws) == ([4, 7, 5], [-1, -1, 0], [0, 1, 0, 2])


def frequencies(rule, n=20_000, seed=0):  # the next token's law after one verification, estimated
    rng = np.random.default_rng(seed)
    return Counter(rule(rng) for _ in range(n))


def test_verify_siblings_example_by_hand():
    """The docstring's example: token 2 kept with probability .5, else token 0 for sure."""
    Q = np.array([[.5, 0, .5], [1, 0, 0], [0, 1, 0]])
    for trials in ({-1: [(0, None), (1, None)]},
                   {-1: [(0, one_hot(2, 3, Q.dtype)), (1, one_hot(0, 3, Q.dtype))]}):
        counts = frequencies(lambda rng: tuple(verify_siblings([2, 0], trials, Q, rng)[0]))
        assert set(counts) == {(0,), (1,)} and abs(counts[(0,)] / 20_000 - .5) < .02


def test_without_replacement_example_by_hand():
    """The docstring's example: child 0 kept with probability .4; after its rejection child 1 is
    kept for sure."""
    p, Q = np.array([.5, .3, .2]), np.array([[.2, .5, .3], [1, 0, 0], [0, 1, 0]])
    counts = frequencies(lambda rng: tuple(verify_without_replacement([0, 1], [-1, -1], Q,
                                                                      np.array([p, p]), rng)[0]))
    assert set(counts) == {(0,), (1,)} and abs(counts[(0,)] / 20_000 - .4) < .02


# verify_tree as it was before the named rules, for reference
def old_verify_tree(tokens, parents, Q, rng, P=None):
    kids = {-1: []}
    for i, p in enumerate(parents):
        kids.setdefault(p, []).append(i)
    node, path = -1, []
    while True:
        q = Q[node + 1]
        for c in kids.get(node, []):
            x = tokens[c]
            p = P[c] if P is not None else one_hot(x, len(q), q.dtype)
            if rng.random() < min(1, q[x] / p[x]):
                node = c
                path.append(c)
                break
            q = residual(q, p)
        else:
            return path, sample(q, rng), "resample" if kids.get(node) else "bonus"


@pytest.mark.parametrize("sampled", [False, True])
def test_verify_tree_is_unchanged_for_its_callers(sampled):
    """Same tree, same generator state -> the same path, token and origin, draw for draw."""
    gen = np.random.default_rng(5)
    for _ in range(300):
        m = int(gen.integers(0, 8))
        parents = [int(gen.integers(-1, i)) for i in range(m)]
        tokens = [int(t) for t in gen.integers(0, 4, m)]
        Q = gen.dirichlet(np.ones(4), 1 + m)
        P = gen.dirichlet(np.ones(4), m) if sampled else None
        if sampled:
            P[np.arange(m), tokens] += 0.1  # every drawn token has p > 0
            P /= P.sum(-1, keepdims=True)
        seed = int(gen.integers(1 << 30))
        assert verify_tree(tokens, parents, Q, np.random.default_rng(seed), P) == \
            old_verify_tree(tokens, parents, Q, np.random.default_rng(seed), P)


def test_distinct_rule_at_temperature_zero_is_exact_match():
    Q = warp(np.array([[.2, .5, .3], [.6, .3, .1], [.1, .1, .8]]), temperature=0)
    for tokens, parents, expected in [([1, 0], [-1, 0], ([0, 1], 2)), ([2, 1], [-1, -1], ([1], 2))]:
        path, token, _ = verify_distinct(tokens, parents, Q, np.random.default_rng(0))
        assert (path, token) == expected


# --- whole sequences: siblings drawn here, verified by each rule
# --------------------------------------------------- One level of siblings below the root and the
# token after them: N = 2 tokens, so every sequence is one verification (and, after a rejection, one
# plain target draw). Depth is the same walk repeated: tests/picospec/test_specinfer.py and
# tests/picospec/test_sequoia.py cover it through the methods.

PROMPT, N, V = [0, 1], 2, 3
TARGET = MaskedToyTree(random_toy(V, seed=25).table)
# a draft far from the target after the prompt: with 3 siblings, trying each merged token once moves
# 0.21 of probability (total variation) and judging without-replacement siblings as i.i.d. 0.50
# (computed exactly)
DRAFTS = [Toy1(random_toy(V, seed=39, concentration=0.5).table), Toy1(random_toy(V, seed=23).table)]


def draw_iid(x, k, rng, options, drafts=DRAFTS[:1]):
    """SpecInfer's siblings: k i.i.d. draws from each draft, merged in a trie that keeps every draw
    and its law."""
    trie = DrawTrie()
    for draft in drafts:
        p = warp(draft(x)[-1], **options)  # [V]
        for _ in range(k):
            trie.draw(-1, sample(p, rng), p)
    return trie.tokens, trie.parents, np.array(trie.laws), trie.draws


def draw_without_replacement(x, k, rng, options):
    """Sequoia's siblings: k distinct tokens, each drawn from the draft with the earlier ones
    removed."""
    p = warp(DRAFTS[0](x)[-1], **options)  # [V]
    left, tokens = p.copy(), []
    for _ in range(min(k, np.count_nonzero(p))):
        tokens.append(sample(left, rng))
        left[tokens[-1]] = 0
    return tokens, [-1] * len(tokens), np.array([p] * len(tokens)), None


def draw_top(x, k, rng, options):
    """Deterministic candidates: the draft's top-k tokens."""
    tokens = list(np.argsort(-DRAFTS[0](x)[-1], kind="stable")[:k])
    return tokens, [-1] * k, None, None


def iid(tokens, parents, Q, P, rng, draws):
    return verify_iid(tokens, parents, Q, P, rng, draws)


def without_replacement(tokens, parents, Q, P, rng, draws):
    return verify_without_replacement(tokens, parents, Q, P, rng)


def distinct(tokens, parents, Q, P, rng, draws):
    return verify_distinct(tokens, parents, Q, rng)


def iid_each_token_once(tokens, parents, Q, P, rng, draws):
    """Broken: merged duplicates tried once each (the repeated draw, a sure rejection, is dropped
    with its residual)."""
    # each node's first draw
    keep = sorted({node: j for j, node in reversed(list(enumerate(draws)))}.values())
    return verify_iid(tokens, parents, Q, P[keep], rng, [draws[j] for j in keep])


# Sequences per check, each sized by `python -m tests.suite.power --only verify`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
FOLLOWS = 1_700  # iid-without-residual (the case's own rule without its residual): power 0.9992
BROKEN = {"iid-dropping-repeats": 380, "without-replacement-judged-iid": 100,
          "iid-without-residual": 170}  # each itself: 0.9993, 1.0000, 0.9990


def decode(draw, rule, options, n, k=3, seed=0, **draw_options):
    rng, out = np.random.default_rng(seed), []
    for _ in range(n):
        x = list(PROMPT)
        tokens, parents, P, draws = draw(x, k, rng, options, **draw_options)
        Q = warp(TARGET.tree(x, tokens, parents, probs=True), **options)  # [1 + m, V]
        path, token, _ = rule(tokens, parents, Q, P, rng, draws)
        x += [tokens[i] for i in path] + [token]
        # a rejection: the second token is a plain draw from the target
        if len(x) < len(PROMPT) + N:
            x.append(sample(warp(TARGET(x)[-1], **options), rng))
        out.append(tuple(x[len(PROMPT):]))
    return out


# SpecInfer: 3 i.i.d. siblings over 3 tokens, duplicates merged, every draw
RULES = {"iid": (draw_iid, iid, {}, {}),
         "iid-two-drafters-T0.7-top_k2": (draw_iid, iid, dict(temperature=0.7, top_k=2),
                                          dict(drafts=DRAFTS)),
         "without-replacement": (draw_without_replacement, without_replacement, {}, {}),  # Sequoia
         "distinct": (draw_top, distinct, dict(temperature=1.3), {})}  # top-k candidates


@pytest.mark.parametrize("draw, rule, options, draw_options", RULES.values(), ids=RULES)
def test_rule_follows_the_target(draw, rule, options, draw_options):
    check_law(decode(draw, rule, options, FOLLOWS, **draw_options),
              exact_law(TARGET, PROMPT, N, **options))


# broken: after a rejection the next sibling is judged against the unchanged q
def no_residual(q, p):
    return q


# merged duplicates, repeats not tried
WRONG = {"iid-dropping-repeats": (draw_iid, iid_each_token_once, None),
         "without-replacement-judged-iid": (draw_without_replacement, iid, None),  # as if i.i.d.
         # the i.i.d. rule without the residual update
         "iid-without-residual": (draw_iid, iid, no_residual)}


@pytest.mark.parametrize("draw, rule, patch", WRONG.values(), ids=WRONG)
def test_wrong_rule_is_rejected(request, monkeypatch, draw, rule, patch):
    if patch:
        monkeypatch.setattr(verify, "residual", patch)
    with pytest.raises(AssertionError, match="empirical law differs"):
        check_law(decode(draw, rule, {}, BROKEN[request.node.callspec.id]),
                  exact_law(TARGET, PROMPT, N))
