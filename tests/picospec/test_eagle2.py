"""EAGLE-2 (picospec/eagle2.py): equal to greedy decoding at temperature 0 on a real (random)
GPT-2; at temperature 1 with top-k it follows the target's exact law on toy models, its top-k
candidates verified as one-hot proposals; the dynamic tree keeps exactly the total_tokens best nodes
by cumulative log-probability (brute force), and the paper's worked example holds."""
import itertools

import numpy as np
import pytest

import picospec.eagle2 as eagle2  # noqa: F401  (python -m tests.suite.power plants a broken rule in it)
from picospec.autoregressive import autoregressive_sampling
from picospec.eagle2 import dynamic_tree, eagle2_decoding, expand, rerank

from tests.support.broken_verifiers import one_hot_without_residual  # noqa: F401  (tests.suite.power)
from picospec.check.exact_law import check_law, exact_law
from tests.support.feature_toys import ToyDraft, engine_and_head, toy_pair
from tests.support.toy import random_toy


# ---- temperature 0 on a real (random) GPT-2 ----

def test_temperature_zero_equals_greedy():
    accepted = 0
    for seed in range(3):
        model, head = engine_and_head(seed)
        x = [1, 2, 3, 4]
        expected = autoregressive_sampling(x, model, 25, np.random.default_rng(0), temperature=0)
        stats = []
        out = eagle2_decoding(x, model, head, 25, np.random.default_rng(0), depth=3, tree_top_k=3,
                              total_tokens=8, stats=stats, temperature=0)
        assert out == expected
        assert sum(len(s["tokens"]) for s in stats) == 25
        accepted += sum(s["accepted"] for s in stats)
    # some drafts were right, so the accepted-path bookkeeping (features, caches) was exercised
    assert accepted > 0


# ---- the exact law on toy models ----

PROMPT, N = [0, 1], 4  # the first tree (after the prefill's token) can be 2 deep
TARGET, DRAFT = toy_pair()
OPTIONS = dict(temperature=1.0, top_k=2)

# Sequences, sized by `python -m tests.suite.power --only eagle2`: one-hot-without-residual planted
# in eagle2's verification is rejected with the power given (at ALPHA, measured on 20,000 fresh
# draws of n sequences, with EAGLE-1's cases of tests/picospec/test_eagle.py).
FOLLOWS_N = 460  # one-hot-without-residual: power 0.9994 (the least over those cases)


def runs(n=FOLLOWS_N, seed=0, **options):
    rng = np.random.default_rng(seed)
    return [tuple(eagle2_decoding(PROMPT, TARGET, DRAFT, N, rng, depth=2, tree_top_k=2,
                                  total_tokens=4, **options)[len(PROMPT):])
            for _ in range(n)]


def test_follows_the_target_exactly():
    check_law(runs(FOLLOWS_N, **OPTIONS), exact_law(TARGET, PROMPT, N, **OPTIONS))


# ---- the dynamic tree ----

def all_paths(draft, x, F, depth, V):
    """Every node of the full V-ary tree up to `depth`, with its cumulative log-probability (brute
    force)."""
    values = {}
    for d in range(1, depth + 1):
        for path in itertools.product(range(V), repeat=d):
            tokens = list(path[:-1])
            logp = draft(x, F, tokens, list(range(-1, len(tokens) - 1)))[-1]
            logp = logp - np.log(np.exp(logp).sum())
            values[path] = values.get(path[:-1], 0.0) + logp[path[-1]]
    return values


def as_paths(tokens, parents):
    out = []
    for i in range(len(tokens)):
        path, node = [], i
        while node >= 0:
            path.append(tokens[node])
            node = parents[node]
        out.append(tuple(path[::-1]))
    return out


@pytest.mark.parametrize("total_tokens", [1, 3, 6, 9])
def test_dynamic_tree_keeps_the_best_nodes(total_tokens):
    """With top_k >= total_tokens every best node is reachable, so the kept tree is the global best
    total_tokens nodes of the full tree by cumulative log-probability."""
    V, depth = 4, 3
    draft = ToyDraft(random_toy(V, seed=5, concentration=0.5).table)
    x, F = [0, 1], [np.eye(V)[0]]
    best = sorted(all_paths(draft, x, F, depth, V).items(), key=lambda kv: -kv[1])[:total_tokens]
    tokens, parents, values = dynamic_tree(x, F, draft, depth, top_k=9, total_tokens=total_tokens)
    assert set(as_paths(tokens, parents)) == {p for p, _ in best}
    assert all(p < i for i, p in enumerate(parents))  # parents first: the engine's order
    np.testing.assert_allclose(sorted(values, reverse=True), [v for _, v in best])


def test_dynamic_tree_with_a_narrow_beam_keeps_the_best_of_its_pool():
    """top_k < total_tokens: the pool is what expansion reached (each layer's top_k expanded, top_k
    children each); the kept nodes are its total_tokens best, checked against an expansion written
    over paths."""
    V, depth, top_k, total = 5, 4, 2, 7
    draft = ToyDraft(random_toy(V, seed=6, concentration=0.5).table)
    x, F = [0, 1], [np.eye(V)[0]]
    values = all_paths(draft, x, F, depth, V)

    def children_of(path):  # the top_k children by value (ties: lower token first)
        kids = [c for c in values if len(c) == len(path) + 1 and c[:-1] == path]
        return sorted(kids, key=lambda c: (-values[c], c))[:top_k]

    pool, layer = children_of(()), children_of(())
    for _ in range(depth - 1):
        new = [c for p in layer for c in children_of(p)]
        pool += new
        layer = sorted(new, key=lambda c: -values[c])[:top_k]
    tokens, parents, _ = expand(x, F, draft, depth, top_k)
    assert as_paths(tokens, parents) == pool
    kept = set(as_paths(*rerank(tokens, parents, [values[p] for p in pool], total)[:2]))
    assert kept == set(sorted(pool, key=lambda c: -values[c])[:total])


def test_the_worked_example_of_eagle2():
    table = np.zeros((3, 3, 3))
    table[:, :] = [0.6, 0.3, 0.1]  # the root's law (after any two tokens)
    table[:, 0] = [0.9, 0.05, 0.05]  # after token 0
    draft = ToyDraft(table)
    tokens, parents, values = dynamic_tree([1, 2], [np.eye(3)[1]], draft, depth=2, top_k=2,
                                           total_tokens=2)
    assert (tokens, parents) == ([0, 0], [-1, 0])
    np.testing.assert_allclose(values, np.log([0.6, 0.54]))
