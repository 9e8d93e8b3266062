"""The engine against the plain forward pass: cached, tree-masked, rolled back and compacted results
must all equal a fresh full forward of the same tokens."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpt2.cache import KVCache
from gpt2.engine import GPT2
from gpt2.model import gpt2, gpt2_hidden
from tests.support.micro import random_gpt2

HP, PARAMS = random_gpt2(n_vocab=50, n_ctx=32, n_embd=16, n_head=2, n_layer=2, seed=1)
TOL = 2e-6


def full(x):  # the reference: picoGPT's forward over the whole sequence, no cache
    return gpt2(np.array(x), **PARAMS, n_head=HP["n_head"])


def test_float32_end_to_end():
    model = GPT2(HP, PARAMS)
    logits, hidden = model.logits([1, 2, 3], 2, hidden=True)
    assert logits.dtype == np.float32 and hidden.dtype == np.float32
    assert model(([1, 2, 3])).dtype == np.float32
    assert full([1, 2, 3]).dtype == np.float32


def test_probs_are_softmax_of_logits():
    model = GPT2(HP, PARAMS)
    probs = model([4, 5, 6], 3)
    assert probs.shape == (3, 50)
    np.testing.assert_allclose(probs.sum(-1), 1, atol=1e-5)
    z = full([4, 5, 6])
    np.testing.assert_allclose(probs, np.exp(z) / np.exp(z).sum(-1, keepdims=True), atol=1e-6)


@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 6), st.integers(1, 4)), min_size=1,
                max_size=6),
       st.integers(0, 10**6))
def test_cached_calls_equal_full_forward(steps, seed):
    """Any sequence of calls (grow, roll back, change the tail) gives the full forward's rows."""
    rng = np.random.default_rng(seed)
    model, x = GPT2(HP, PARAMS), []
    for grow, cut, n in steps:
        x = x[:max(0, len(x) - cut)] + [int(t) for t in rng.integers(0, 50, grow)]
        x = x[-32:]
        n = min(n, len(x))
        assert np.abs(model.logits(x, n) - full(x)[-n:]).max() < TOL


@pytest.mark.parametrize("layout",
                         [dict(pad_rows=1), dict(pad_rows=4), dict(pad_rows=8),
                          dict(head_copy=False)])
def test_layouts_give_the_same_logits(layout):
    """The speed layouts (rows padded to a multiple of pad_rows, the LM head as a contiguous copy or
    as wte.T) change no result: cached calls, rollbacks and a tree all equal the plain forward."""
    model, x = GPT2(HP, PARAMS, **layout), [3, 1, 4, 1, 5, 9, 2]
    for end, n in ((3, 3), (5, 2), (4, 1), (7, 3), (7, 7)):
        assert np.abs(model.logits(x[:end], n) - full(x[:end])[-n:]).max() < TOL
    logits = model.tree(x, TREE_TOKENS, TREE_PARENTS)
    for node, path in PATHS.items():
        assert np.abs(logits[1 + node] - full(x + path)[-1]).max() < TOL


def test_padding_rows_are_dropped():
    """Padding runs dummy rows but counts, caches and returns only the real ones."""
    model = GPT2(HP, PARAMS, pad_rows=4)
    model([1, 2, 3, 4, 5, 6])
    assert model.cache.n == 6 and model.tokens_run == 6


def test_cache_reuse_runs_only_new_tokens():
    model = GPT2(HP, PARAMS)
    model([1, 2, 3, 4, 5])
    assert model.tokens_run == 5
    model([1, 2, 3, 4, 5, 6, 7], 2)  # two new tokens
    assert model.tokens_run == 7
    model([1, 2, 3, 9], 1)  # diverges after 3 tokens: roll back, run one
    assert model.tokens_run == 8 and model.calls == 3


TREE_TOKENS, TREE_PARENTS = [5, 6, 7, 8, 9, 10], [-1, 0, 0, -1, 3, 4]
PATHS = {0: [5], 1: [5, 6], 2: [5, 7], 3: [8], 4: [8, 9], 5: [8, 9, 10]}


def test_tree_forward_equals_each_path():
    model, x = GPT2(HP, PARAMS), [3, 1, 4, 1, 5, 9, 2]
    model(x[:4])  # part of the prefix already cached
    logits, hidden = model.tree(x, TREE_TOKENS, TREE_PARENTS, hidden=True)
    assert logits.shape == (7, 50) and hidden.shape == (7, 16)
    assert np.abs(logits[0] - full(x)[-1]).max() < TOL
    for node, path in PATHS.items():
        assert np.abs(logits[1 + node] - full(x + path)[-1]).max() < TOL
        ref_h = gpt2_hidden(np.array(x + path), **PARAMS, n_head=2)[-1]
        assert np.abs(hidden[1 + node] - ref_h).max() < TOL


def test_tree_mask_is_needed():
    """A broken variant (every node sees every node, as a plain causal pass would) does not match
    the paths."""
    x = [3, 1, 4]
    causal = gpt2(np.array(x + TREE_TOKENS), **PARAMS, n_head=2)
    assert np.abs(causal[len(x) + 2] - full(x + PATHS[2])[-1]).max() > 1e-3


@pytest.mark.parametrize("path", [[], [0], [0, 2], [3, 4, 5]])
def test_accept_compacts_cache_to_path(path):
    model, x = GPT2(HP, PARAMS), [3, 1, 4, 1, 5]
    model.tree(x, TREE_TOKENS, TREE_PARENTS)
    model.accept(path)
    kept = x + [TREE_TOKENS[i] for i in path]
    assert model.tokens == kept and model.cache.n == len(kept)
    fresh = KVCache(2, 2, 32, 8, np)
    gpt2_hidden(np.array(kept), **PARAMS, n_head=2, cache=fresh)
    np.testing.assert_allclose(model.cache.k[:, 0, :, :len(kept)], fresh.k[:, 0, :, :len(kept)],
                               atol=TOL)
    np.testing.assert_allclose(model.cache.v[:, 0, :, :len(kept)], fresh.v[:, 0, :, :len(kept)],
                               atol=TOL)
    nxt = kept + [11]
    runs = model.tokens_run
    assert np.abs(model.logits(nxt) - full(nxt)[-1]).max() < TOL
    assert model.tokens_run == runs + 1  # the compacted cache was reused


def test_rollback_leaves_cache_as_fresh():
    x = [7, 3, 5, 2, 8, 1]
    cache, fresh = KVCache(2, 2, 32, 8, np), KVCache(2, 2, 32, 8, np)
    gpt2_hidden(np.array(x), **PARAMS, n_head=2, cache=cache)
    cache.rollback(2)
    gpt2_hidden(np.array(x[:4]), **PARAMS, n_head=2, cache=fresh)
    assert cache.n == fresh.n == 4
    np.testing.assert_allclose(cache.k[:, 0, :, :4], fresh.k[:, 0, :, :4], atol=TOL)
    np.testing.assert_allclose(cache.v[:, 0, :, :4], fresh.v[:, 0, :, :4], atol=TOL)


def test_bad_calls_give_clear_errors():
    model = GPT2(HP, PARAMS)
    with pytest.raises(ValueError, match="empty"):
        model([])
    with pytest.raises(ValueError, match="context window of 32"):
        model(list(range(33)))
    with pytest.raises(ValueError, match="n must be"):
        model([1, 2], 3)
    with pytest.raises(ValueError, match="parent"):
        model.tree([1, 2], [3, 4], [-1, 1])
    cache = KVCache(1, 1, 4, 2, np)
    with pytest.raises(ValueError, match="roll back"):
        cache.rollback(1)
    with pytest.raises(ValueError, match="increasing"):
        cache.keep([1, 0])


@given(st.sets(st.integers(0, 11), min_size=0, max_size=12))
@settings(max_examples=60, deadline=None)
def test_keep_moves_exactly_the_kept_slots(kept):
    """keep(indices) leaves slot j holding what slot indices[j] held, whether or not the indices
    start 0, 1, 2, ..."""
    idx = sorted(kept)
    cache = KVCache(2, 3, 16, 4, np)
    rng = np.random.default_rng(len(idx))
    cache.k[:], cache.v[:] = rng.standard_normal((2, *cache.k.shape)).astype(np.float32)
    cache.n = 12
    before_k, before_v = cache.k.copy(), cache.v.copy()
    cache.keep(idx)
    assert cache.n == len(idx)
    np.testing.assert_array_equal(cache.k[:, 0, :, :len(idx)], before_k[:, 0][:, :, idx])
    np.testing.assert_array_equal(cache.v[:, 0, :, :len(idx)], before_v[:, 0][:, :, idx])
