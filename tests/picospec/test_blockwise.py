"""Blockwise parallel decoding: greedy equality with autoregressive decoding on a real (random)
GPT-2 engine and random heads, the exact best-case call counts with oracle heads, and broken
variants that these same checks reject."""
import math

import numpy as np
import pytest

import picospec.blockwise as bl
from gpt2.engine import GPT2
from picospec.autoregressive import autoregressive_sampling
from picospec.blockwise import accepted_length, blockwise_decoding

from tests.support.micro import random_gpt2
from tests.support.micro import random_heads

V, N = 16, 20  # a small vocabulary, so that random heads are right now and then


# weights whose greedy text is not one token repeated (random GPT-2s tend to that)
def engine(seed=0):
    return GPT2(*random_gpt2(n_vocab=V, n_ctx=64, n_embd=32, seed=seed, scale=0.3))


def greedy(x, n, seed=0):
    return autoregressive_sampling(x, engine(seed), n, np.random.default_rng(0), temperature=0)


def oracle_heads(x, k, seed=0, miss=0.0):
    """Heads that are always right: they find their position by its hidden state on the greedy
    continuation G and propose G's tokens ahead (head j, 1-based, at position t -> G[t + j + 1]).
    miss > 0: each proposal is wrong with that probability, so blocks end at every place; which ones
    are wrong is fixed per (position, head)."""
    G = greedy(x, N + k, seed)
    # H[t] [C]: the hidden state after G[: t + 1]
    _, H = engine(seed).logits(G, len(G), hidden=True)
    wrong = np.random.default_rng(seed).random((len(G), k)) < miss  # [len(G), k]

    def heads(h):  # [n, C] -> [k - 1, n, V]
        d = ((H[None] - h[:, None]) ** 2).sum(-1)  # [n, len(G)]
        # [n]; off the greedy path (only a broken decoder goes there) the nearest position
        t = d.argmin(-1)
        out = np.zeros((k - 1, len(h), V), np.float32)
        for j in range(1, k):
            right = np.array([G[min(i + j + 1, len(G) - 1)] for i in t])  # [n]
            out[j - 1, np.arange(len(h)), np.where(wrong[t, j], (right + 1) % V, right)] = 1
        return out
    return heads


def paper_calls(N, k, merged):
    """Calls when every proposal is accepted (derived in picospec/blockwise.py; the paper's m/k + 1
    when k | N)."""
    if merged:
        return 1 + math.ceil((N - 1) / k)
    return N if k == 1 else math.ceil(N / k) + math.ceil((N - 1) / k)


def test_accepted_length_by_hand():
    assert accepted_length([7, 2, 9], [2, 4]) == 2  # the module's worked example
    assert accepted_length([7, 2, 9], [3, 9]) == 1  # a later match does not count after a mismatch
    assert accepted_length([7, 2, 9], [2, 9]) == 3
    assert accepted_length([7], []) == 1  # ŷ_{j+1} is p_1's own token: always kept


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("merged", [True, False])
def test_equals_greedy_with_random_heads(merged, k, tied):
    accepted = 0
    for seed in range(4):
        x = [int(t) for t in np.random.default_rng(seed).integers(V, size=3)]
        model, stats = engine(seed), []
        out = blockwise_decoding(x, model, random_heads(model, k, tied, seed), N, k, merged, stats)
        assert out == greedy(x, N, seed)
        assert [t for s in stats for t in s["tokens"]] == out[len(x):]
        assert sum(s["calls"] for s in stats) == model.calls  # calls are counted honestly
        assert all(len(s["origins"]) == len(s["tokens"]) == s["accepted"] + 1 <= k for s in stats)
        accepted += sum(s["accepted"] for s in stats)
    assert accepted > 0 or k == 1  # head proposals were kept too, not only p_1's tokens


@pytest.mark.parametrize("k", [2, 4])
def test_equals_greedy_with_heads_right_half_the_time(k):
    sizes = set()
    for seed in range(4):
        x = [int(t) for t in np.random.default_rng(seed).integers(V, size=3)]
        blocks = {}
        for merged in (True, False):
            model, stats = engine(seed), []
            out = blockwise_decoding(x, model, oracle_heads(x, k, seed, miss=0.5), N, k, merged,
                                     stats)
            assert out == greedy(x, N, seed)
            blocks[merged] = [s["tokens"] for s in stats]
        # merged proposes from the right row: the same blocks as a fresh Predict
        assert blocks[True] == blocks[False]
        sizes |= {len(b) for b in blocks[True]}
    assert sizes == set(range(1, k + 1))  # blocks ended at every place: k̂ = 1 .. k


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 20])
@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("merged", [True, False])
def test_oracle_heads_reach_the_best_case_exactly(merged, k, n):
    x = [1, 2, 3]
    model, stats = engine(), []
    out = blockwise_decoding(x, model, oracle_heads(x, k), n, k, merged, stats)
    assert out == greedy(x, n)
    # full blocks
    assert [len(s["tokens"]) for s in stats] == [min(k, n - i * k) for i in range(math.ceil(n / k))]
    assert model.calls == paper_calls(n, k, merged)
    if merged and k > 1 and n % k == 0:
        # the paper's m/k + 1 (k = 1: n calls, the last block needs no Verify)
        assert model.calls == n / k + 1


@pytest.mark.parametrize("merged, calls", [(True, [2, 1, 0]), (False, [2, 2, 1])])
def test_each_step_records_its_own_calls(merged, calls):
    # k = 4, N = 9 with oracle heads: blocks of 4, 4, 1; merged, the first block makes two calls
    # (Predict, then Verify with the next proposal) and a last block of one token none
    x = [1, 2, 3]
    model, stats = engine(), []
    blockwise_decoding(x, model, oracle_heads(x, 4), 9, 4, merged, stats)
    assert [s["calls"] for s in stats] == calls


def test_merged_makes_fewer_calls_on_the_same_run():
    x = [4, 0, 6]
    for k in (2, 4):
        runs = {}
        for merged in (True, False):
            model, stats = engine(1), []
            out = blockwise_decoding(x, model, random_heads(model, k, False, 1), N, k, merged,
                                     stats)
            runs[merged] = out, [s["tokens"] for s in stats], model.calls
        # the same blocks: the proposals do not depend on the variant
        assert runs[True][:2] == runs[False][:2]
        # at most one call per block + the first
        assert runs[True][2] <= len(runs[True][1]) + 1 < runs[False][2]
        # Predict + Verify per block (the last may skip Verify)
        assert runs[False][2] >= 2 * len(runs[False][1]) - 1


BROKEN = {
    "no verification": lambda y_hat, best: len(y_hat),
    "off by one: keeps the first wrong proposal": lambda y_hat,
    best: min(accepted_length(y_hat, best) + 1, len(y_hat)),
}


@pytest.mark.parametrize("name", BROKEN)
@pytest.mark.parametrize("merged", [True, False])
def test_broken_acceptance_fails_the_equality_check(monkeypatch, name, merged):
    monkeypatch.setattr(bl, "accepted_length", BROKEN[name])
    x, model = [4, 0, 6], engine(1)
    assert blockwise_decoding(x, model, random_heads(model, 4, False, 1), N, 4, merged) != greedy(x,
                                                                                                  N,
                                                                                                  1)
    model = engine(1)
    assert blockwise_decoding(x, model, oracle_heads(x, 4, 1, miss=0.5), N, 4, merged) != greedy(x,
                                                                                                 N,
                                                                                                 1)


def test_misaligned_verification_fails_the_call_count_check(monkeypatch):
    """Broken variant: ŷ_{j+i+1} compared with the row after itself instead of the row before. It
    keeps only p_1's tokens, so the text stays right, but the oracle's best case is missed: the call
    count catches it."""
    def misaligned(y_hat, best):
        n = 1
        while n < len(y_hat) and n < len(best) and y_hat[n] == best[n]:
            n += 1
        return n

    monkeypatch.setattr(bl, "accepted_length", misaligned)
    x, model = [1, 2, 3], engine()
    assert blockwise_decoding(x, model, oracle_heads(x, 4), N, 4) == greedy(x, N)
    assert model.calls > paper_calls(N, 4, merged=True)


def test_clear_errors():
    model = engine()
    heads = random_heads(model, 3, True, 0)
    for k in (0, -1, 2.5):
        with pytest.raises(ValueError, match="k \\(block size"):
            blockwise_decoding([1], model, heads, 3, k)
    with pytest.raises(ValueError, match="N"):
        blockwise_decoding([1], model, heads, 0, 3)
    with pytest.raises(ValueError, match="empty"):
        blockwise_decoding([], model, heads, 3, 3)
    with pytest.raises(ValueError,
                       match="heads gave 2 proposals per position; block size k = 4 needs k - 1"):
        blockwise_decoding([1], model, heads, 3, 4)
