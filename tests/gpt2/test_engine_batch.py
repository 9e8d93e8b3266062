"""The batched engine (gpt2/engine.py) against one sequence at a time: every row of a batched
forward equals the plain forward of that row alone, for ragged lengths, after rollbacks and when
rows leave; batched speculative sampling on it keeps the target's exact law (the suite's one sampled
law test of the batched loop, sized by power); greedy rows equal each row decoded alone; a tree per
row in one pass (and the accepted paths kept) equals the single-sequence engine's tree() on each row
alone."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gpt2.engine as batch_engine
import gpt2.model as model_module
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from gpt2.model import gpt2, gpt2_hidden
from picospec.autoregressive import autoregressive_sampling
from picospec.batched.speculative import batch_speculative_sampling

from picospec.check.exact_law import check_law, exact_law
from tests.support.micro import random_gpt2

HP, PARAMS = random_gpt2(n_vocab=50, n_ctx=32, n_embd=16, n_head=2, n_layer=2, seed=1)
TOL = 1e-5


def full(x):  # the reference: picoGPT's forward over the whole sequence, no cache
    return gpt2(np.array(x), **PARAMS, n_head=HP["n_head"])


def test_ragged_rows_by_hand():
    """Three rows of 3, 1 and 5 tokens from an empty cache (padded to 5), then 1, 2 and 0+1 new
    tokens."""
    model = BatchGPT2(GPT2(HP, PARAMS), rows=3)
    xs = [[1, 2, 3], [4], [5, 6, 7, 8, 9]]
    out = model.logits(xs)
    assert out.shape == (3, 1, 50) and out.dtype == np.float32
    for b, x in enumerate(xs):
        assert np.abs(out[b, 0] - full(x)[-1]).max() < TOL
    # row 2 runs its last token again: n = 1 is always run
    xs = [[1, 2, 3, 10], [4, 11, 12], [5, 6, 7, 8, 9]]
    out, hidden = model.logits(xs, 1, hidden=True)
    for b, x in enumerate(xs):
        assert np.abs(out[b, 0] - full(x)[-1]).max() < TOL
        assert np.abs(hidden[b, 0] - gpt2_hidden(np.array(x), **PARAMS, n_head=2)[-1]).max() < TOL
    assert model.tokens_run == 3 + 1 + 5 + 1 + 2 + 1


@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), min_size=4,
                                   max_size=4),
                          st.integers(1, 4), st.integers(0, 4)), min_size=1, max_size=6),
       st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_batched_rows_equal_each_row_alone(steps, seed):
    """Any sequence of batched calls (each row grows, rolls back or changes its tail by its own
    amount; rows leave) gives, row by row, the full forward's last n rows."""
    rng = np.random.default_rng(seed)
    model, xs = BatchGPT2(GPT2(HP, PARAMS), rows=4), [[int(rng.integers(0, 50))] for _ in range(4)]
    for changes, n, leave in steps:
        xs = [(x[:max(0, len(x) - cut)] + [int(t) for t in rng.integers(0, 50, grow)])[-32:] or [1]
              for x, (grow, cut) in zip(xs, changes)]
        if leave < len(xs) and len(xs) > 1:
            xs = xs[:leave] + xs[leave + 1:]  # a finished row leaves the batch; the others move up
        n = min([n] + [len(x) for x in xs])
        out = model.logits(xs, n)
        for b, x in enumerate(xs):
            assert np.abs(out[b] - full(x)[-n:]).max() < TOL


def test_padding_mask_is_needed(monkeypatch):
    """A broken variant where every query sees every slot (no per-row lengths, no causality) is
    caught."""
    model = BatchGPT2(GPT2(HP, PARAMS), rows=2)
    model.logits([[1, 2, 3, 4, 5], [6]])
    monkeypatch.setattr(model_module, "attention", lambda q, k, v, mask, ops: model_module.softmax(
        q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])) @ v)
    out = model.logits([[1, 2, 3, 4, 5, 7], [6, 8]])
    assert np.abs(out[1, 0] - full([6, 8])[-1]).max() > 1e-3


def test_rows_that_leave_free_their_place():
    """Rows 0 and 2 of four finish and leave: rows 1 and 3 move up with their caches and run only
    their new token."""
    model = BatchGPT2(GPT2(HP, PARAMS), rows=4)
    # all longer than KEEP
    xs = [list(range(1, 20)), list(range(20, 30)) * 2, list(range(30, 50)), [1, 2, 3] * 6]
    model.logits(xs)
    runs = model.tokens_run
    left = [xs[1] + [1], xs[3] + [2]]
    out = model.logits(left)
    assert model.tokens_run == runs + 2
    for b, x in enumerate(left):
        assert np.abs(out[b, 0] - full(x)[-1]).max() < TOL
    out = model.logits([left[0] + [5]])  # and once more, from their new places
    assert model.tokens_run == runs + 3 and np.abs(out[0, 0] - full(left[0] + [5])[-1]).max() < TOL


# -> (tokens, parents): m nodes, each below an earlier node or the prefix (-1)
def random_tree(rng, m):
    parents = [int(rng.integers(-1, i)) for i in range(m)]
    return [int(t) for t in rng.integers(0, 50, m)], parents


def random_path(rng, parents):  # a root-to-node path of increasing node indices, maybe empty
    path, node = [], -1
    while True:
        below = [i for i, q in enumerate(parents) if q == node]
        if not below or rng.random() < 0.25:
            return path
        node = int(rng.choice(below))
        path.append(node)


@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3),
                                             st.integers(0, 7)), min_size=3,
                                   max_size=3), st.booleans(), st.integers(0, 3)), min_size=1,
                                   max_size=6),
       st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_batched_trees_equal_each_row_alone(steps, seed):
    """Any mix of plain calls and tree steps (a tree of its own size per row, empty ones too, each
    row accepting its own path) gives, row by row, what GPT2.tree gives on that row alone, and after
    accept() the plain forward of the prefix followed by the path."""
    rng = np.random.default_rng(seed)
    model, alone = BatchGPT2(GPT2(HP, PARAMS), rows=3), GPT2(HP, PARAMS)
    xs = [[int(rng.integers(0, 50))] for _ in range(3)]
    for changes, is_tree, leave in steps:
        xs = [(x[:max(0, len(x) - cut)] + [int(t) for t in rng.integers(0, 50, grow)])[-20:] or [1]
              for x, (grow, cut, _) in zip(xs, changes)]
        if leave < len(xs) and len(xs) > 1:
            xs = xs[:leave] + xs[leave + 1:]  # a finished row leaves the batch; the others move up
        if not is_tree:
            out = model.logits(xs)
            for b, x in enumerate(xs):
                assert np.abs(out[b, 0] - full(x)[-1]).max() < TOL
            continue
        trees = [random_tree(rng, m) for (_, _, m) in changes[:len(xs)]]
        out, hidden = model.tree(xs, trees, hidden=True)
        paths = []
        for b, (x, (tokens, parents)) in enumerate(zip(xs, trees)):
            alone.reset()
            logits, h = alone.tree(x, tokens, parents, hidden=True)
            assert out[b].shape == (1 + len(tokens), 50) and hidden[b].shape == (1 + len(tokens),
                                                                                 HP["n_embd"])
            assert np.abs(out[b] - logits).max() < TOL and np.abs(hidden[b] - h).max() < TOL
            paths.append(random_path(rng, parents))
        model.accept(paths)
        xs = [x + [tokens[i] for i in path] for x, (tokens, _), path in zip(xs, trees, paths)]
        assert model.tokens[:len(xs)] == xs
        out = model.logits(xs)  # the kept nodes' keys and values now serve the plain forward
        for b, x in enumerate(xs):
            assert np.abs(out[b, 0] - full(x)[-1]).max() < TOL


def test_tree_mask_is_needed(monkeypatch):
    """A broken variant where a node sees every node before it (a causal chain, not its ancestors)
    is caught."""
    tokens, parents = [7, 8, 9], [-1, -1, 1]  # node 1 must not see node 0, nor node 2 node 0
    model = BatchGPT2(GPT2(HP, PARAMS), rows=2)
    out = model.tree([[1, 2, 3], [4]], [(tokens, parents), ([], [])])
    assert np.abs(out[0][2] - full([1, 2, 3, 8])[-1]).max() < TOL  # node 1's law: after 1 2 3 8
    monkeypatch.setattr(batch_engine, "tree_mask", lambda parents,
                        xp: np.tril(np.ones((len(parents),) * 2, bool)))
    model = BatchGPT2(GPT2(HP, PARAMS), rows=2)
    out = model.tree([[1, 2, 3], [4]], [(tokens, parents), ([], [])])
    assert np.abs(out[0][2] - full([1, 2, 3, 8])[-1]).max() > 1e-3


def test_bad_calls_give_clear_errors():
    model = BatchGPT2(GPT2(HP, PARAMS), rows=2)
    with pytest.raises(ValueError, match="holds 2 rows"):
        model([[1], [2], [3]])
    with pytest.raises(ValueError, match="empty"):
        model([[1], []])
    with pytest.raises(ValueError, match="context window of 32"):
        model([[1], list(range(33))])
    with pytest.raises(ValueError, match="one tree per sequence"):
        model.tree([[1], [2]], [([3], [-1])])
    with pytest.raises(ValueError, match="2 tokens but 1 parents"):
        model.tree([[1]], [([3, 4], [-1])])
    # a node's position is past the window
    with pytest.raises(ValueError, match="context window of 32"):
        model.tree([list(range(31))], [([3, 4], [-1, 0])])
    with pytest.raises(ValueError, match="one path per row"):
        model.accept([[0], [0]])


# Batched speculative sampling on batched engines: the exact law of each row, with a 3-token
# vocabulary so that every continuation can be enumerated. One batch holds ROWS rows of every
# prompt.
#
# ROWS is sized by power: the smallest count (in steps of 50) at which the broken variant below
# (recovering from the target instead of the residual, same engines, prompts and options) is
# rejected with probability >= 0.999 by the three checks at ALPHA = 1e-4 together. Measured by
# simulation: 40,000 runs per prompt of the broken variant (batches of 3 x 1,000 rows, each drafting
# k = 3, 3, 2, 1, 1 as the test's batch of 3 x 750 rows does) gave its law (total variation 0.057,
# 0.033 and 0.073 from the target's, per prompt); 20,000 sets of ROWS multinomial draws per prompt
# from that law, G-tested against the exact target law as check_law does, were rejected in 99.95% at
# ROWS = 750 and 99.85% at 700 (per prompt at 750: 90%, 81%, 97%). The same procedure on 40,000 runs
# of the correct sampler rejected 0.055% (the nominal 3 x 1e-4): the estimated law's own noise adds
# next to nothing. To re-measure: run sampled_rows many times with rejection.recovered_probs =
# lambda q, p: q, draw counts from the empirical law, and count the sets whose
# picospec.check.exact_law.g_statistic against the exact law exceeds chi2_isf(ALPHA, df) for some
# prompt.

V, N = 3, 5
T_HP, T_PARAMS = random_gpt2(n_vocab=V, n_ctx=16, n_embd=8, n_head=2, n_layer=2, seed=3, scale=0.6)
D_HP, D_PARAMS = random_gpt2(n_vocab=V, n_ctx=16, n_embd=8, n_head=2, n_layer=1, seed=4, scale=0.6)
PROMPTS = [[1], [0, 2], [2, 2, 1]]
ROWS = 750
OPTIONS = dict(temperature=0.7, top_k=2)


def sampled_rows(rows=ROWS):  # -> per prompt, `rows` sampled continuations, all in one batch
    target, draft = GPT2(T_HP, T_PARAMS), GPT2(D_HP, D_PARAMS)
    B = len(PROMPTS) * rows
    out = batch_speculative_sampling(PROMPTS * rows, BatchGPT2(draft, B), BatchGPT2(target, B), N,
                                     3, np.random.default_rng(0), **OPTIONS)
    samples = [[tuple(row[len(prompt):]) for row in out[b::len(PROMPTS)]]
               for b, prompt in enumerate(PROMPTS)]
    return samples, target


def check_laws(samples, target):
    for prompt, rows in zip(PROMPTS, samples):
        check_law(rows, exact_law(target, prompt, N, **OPTIONS))


def test_batched_engines_keep_the_exact_law():
    """750 runs per prompt, three prompts of different lengths in one batch, warped (temperature
    0.7, top-k 2)."""
    check_laws(*sampled_rows())


def test_broken_batched_sampler_is_rejected(monkeypatch):
    """Recovering from the target instead of the residual, on the same engines, fails the same
    checks."""
    import picospec.batched.rejection as rejection

    monkeypatch.setattr(rejection, "recovered_probs", lambda q, p: q)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_laws(*sampled_rows())


def test_greedy_batched_rows_equal_each_row_alone():
    """The built-in pair: greedy batched speculative sampling gives each row the target's own greedy
    continuation."""
    from tests.support.batchrows import model

    target, encoder = model("tiny-target")
    draft = model("tiny-draft")[0]
    prompts = [encoder.encode(p)
               for p in ("def add(a, b):\n", "import os\n\n", "class Node:\n    def", "for i in")]
    stats = []
    out = batch_speculative_sampling(prompts, BatchGPT2(draft, 4), BatchGPT2(target, 4), 24, 4,
                                     np.random.default_rng(0), stats=stats, temperature=0)
    for prompt, row in zip(prompts, out):
        target.reset()
        assert row == autoregressive_sampling(prompt, target, 24, np.random.default_rng(0),
                                              temperature=0)
    assert any(len({a for a in s["accepted"] if a >= 0}) > 1 for s in stats)  # the rows went ragged
