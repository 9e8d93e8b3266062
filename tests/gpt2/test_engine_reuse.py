"""The engines' reuse of cached work (gpt2/engine.py: common_prefix_length, and the rows each
sequence of a batched call reuses), exhaustively around the shortcut that looks for the parting
point only in the last 16 tokens: after every rollback of 1 to 40 tokens, every rollback followed by
new tokens, and every change of one token at any distance from the end, the logits equal a fresh
engine's (within 1e-5), single and batched (also after a row leaves the batch)."""
import numpy as np
import pytest

from gpt2.engine import BatchGPT2, GPT2, common_prefix_length
from tests.support.micro import random_gpt2

HP, PARAMS = random_gpt2(n_vocab=50, n_ctx=64, n_embd=16, n_head=2, n_layer=2, seed=5)
TOL, L, ROWS = 1e-5, 48, 3  # L: the cached text's length, past the shortcut's 16 tokens


def text(seed, n=L):
    return [int(t) for t in np.random.default_rng(seed).integers(0, 50, n)]


def changed(x, d):
    """x with its token at distance d from the end (1: the last) replaced by another."""
    y = list(x)
    y[-d] = (y[-d] + 1) % 50
    return y


def reference(x, n):
    fresh = GPT2(HP, PARAMS)
    return fresh.logits(x, n)


@pytest.fixture(scope="module")
def fresh():
    """-> logits of a fresh engine, memoised by tokens and rows (the same text recurs)."""
    memo = {}

    def logits(x, n):
        key = (tuple(x), n)
        if key not in memo:
            memo[key] = reference(x, n)
        return memo[key]

    return logits


def test_common_prefix_length_at_every_parting_point():
    """Two texts parting at every index (and one extending the other), for lengths around 16 and
    past it, against the plain count."""
    for n in range(1, 50):
        a = text(n, n)
        for j in range(n):
            b = a[:j] + [(a[j] + 1) % 50] + a[j + 1:]
            for y in (b, b[:j + 1], b + [7, 8]):  # the same length, cut after it, longer
                assert common_prefix_length(a, y) == common_prefix_length(y, a) == j
        assert common_prefix_length(a, a[:n // 2]) == n // 2
        assert common_prefix_length(a, a + [3]) == n and common_prefix_length([], a) == 0


def cases(x):
    """The texts to call after x: every rollback of 1..40 tokens, the same with as many new tokens,
    and x with one token changed at every distance from the end."""
    for r in range(1, 41):
        yield f"rollback {r}", x[:-r]
        yield f"rollback {r}, new tokens", x[:-r] + [(t + 3) % 50 for t in x[-r:]]
    for d in range(1, len(x) + 1):
        yield f"changed {d} from the end", changed(x, d)


def test_single_engine_reuse_equals_a_fresh_engine(fresh):
    model, x = GPT2(HP, PARAMS), text(0)
    for name, y in cases(x):
        model.logits(x, 2)  # the cache holds x
        got = model.logits(y, 2)
        assert np.abs(got - fresh(y, 2)).max() < TOL, name


def test_single_engine_reuse_of_a_short_text(fresh):
    """The same around a text of 20 tokens: partings before and after its last 16."""
    model, x = GPT2(HP, PARAMS), text(1, 20)
    for d in range(1, 21):
        model.logits(x)
        y = changed(x, d)
        assert np.abs(model.logits(y) - fresh(y, 1)).max() < TOL, d


def test_batched_engine_reuse_equals_a_fresh_engine(fresh):
    """Three rows, each with its own change at the same distance: one token changed, a rollback, a
    rollback with new tokens; then back to the cached texts (every row parts from its cache
    again)."""
    model, xs = BatchGPT2(GPT2(HP, PARAMS), ROWS), [text(10 + b, L - 4 * b) for b in range(ROWS)]
    model.logits(xs, 2)
    for d in range(1, 41):
        ys = [changed(xs[0], d), xs[1][:-d], xs[2][:-d] + [(t + 3) % 50 for t in xs[2][-d:]]]
        for calls in (ys, xs):
            got = model.logits(calls, 2)  # [ROWS, 2, V]
            for b, y in enumerate(calls):
                assert np.abs(got[b] - fresh(y, 2)).max() < TOL, (d, b)


def test_batched_engine_reuse_after_a_row_leaves(fresh):
    """The first row leaves the batch while the others change at distance d: each remaining text
    finds its own row (not the one that left) and reuses only what it shares with it."""
    xs = [text(20 + b, L - 2 * b) for b in range(ROWS)]
    for d in range(1, 41):
        model = BatchGPT2(GPT2(HP, PARAMS), ROWS)
        model.logits(xs, 2)
        ys = [changed(xs[1], d), xs[2][:-d] + [(t + 3) % 50 for t in xs[2][-d:]]]
        got = model.logits(ys, 2)  # [2, 2, V]
        for b, y in enumerate(ys):
            assert np.abs(got[b] - fresh(y, 2)).max() < TOL, (d, b)
