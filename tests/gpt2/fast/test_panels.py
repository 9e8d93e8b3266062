"""Weight panels (gpt2/fast/panels.py; gpt2/fast/ops.py's "panels" and "panel_rows" operations): a
few rows times W's column panels equal x @ W in either form (small products, or row by row), the
engines take that path exactly for 2..MAX_ROWS rows (2..ROW_MAX by row) and give the same logits
with panels as without (each form forced on here, whatever the machine's BLAS), and the policy
(gpt2/fast/policy.py) turns them on with OpenBLAS, in the form its kernels favour, PICOSPEC_PANELS
over it."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpt2.engine import BatchGPT2, GPT2
from gpt2.fast import policy
from gpt2.fast.ops import PanelMatmul, linear_weights
from gpt2.fast.panels import (MAX_ROWS, ROW_MAX, padded_matmul, panel_matmul, panel_width, panels,
                              row_products)
from gpt2.model import gpt2

from tests.support.clitools import run_here
from tests.support.micro import random_gpt2

HP, PARAMS = random_gpt2(n_vocab=50, n_ctx=48, n_embd=16, n_head=2, n_layer=2, seed=3)
TOL = 2e-6
FORMS = {"panels": MAX_ROWS, "panel_rows": ROW_MAX}  # each form's largest product through panels


def full(x):  # picoGPT's forward over the whole sequence, no cache, no panels
    return gpt2(np.array(x), **PARAMS, n_head=HP["n_head"])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 200), st.integers(1, 20),
       st.sampled_from([None, 8, 32, 64]), st.booleans(), st.integers(0, 10**6))
def test_panel_product_equals_the_plain_product(n_in, n_out, m, width, by_row, seed):
    """Any shape, n_out a multiple of the width or not (the last panel is padded with zero
    columns), in both forms; and rows padded with zeros before W."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n_in, n_out), dtype=np.float32)
    x = rng.standard_normal((m, n_in), dtype=np.float32)
    p = panels(w, width, by_row)
    assert p.dtype == np.float32 and p.shape[1] == n_in and p.shape[0] * p.shape[2] >= n_out
    for out in (panel_matmul(x, p, n_out), row_products(x, p, n_out), padded_matmul(x, w),
                padded_matmul(x, w, 3)):
        assert out.shape == (m, n_out) and out.dtype == np.float32
        np.testing.assert_allclose(out, x @ w, rtol=1e-5, atol=1e-5 * np.sqrt(n_in))


def test_the_panels_cover_every_linear_weight_and_copy_nothing_else():
    weights = linear_weights(PARAMS["blocks"])
    assert len(weights) == 4 * HP["n_layer"]
    product = PanelMatmul(weights)
    for w in weights:
        assert product.panels[id(w)][0] is w  # the weight itself, held beside its panels
    model = GPT2(HP, PARAMS, ops="panels")
    held = model.plan.ops.matmul.panels
    assert id(model.plan.head) in held and len(held) == 4 * HP["n_layer"] + 1
    # the engine's weights stay plain arrays
    assert isinstance(model.params["blocks"][1]["attn"]["c_attn"]["w"], np.ndarray)


@pytest.mark.parametrize("m", [1, 2, 5, ROW_MAX, ROW_MAX + 1, 11, MAX_ROWS, MAX_ROWS + 1])
@pytest.mark.parametrize("by_row", [False, True])
def test_a_weight_with_panels_multiplies_as_the_weight(m, by_row):
    """PanelMatmul(x, W) is x @ W for rows [m, n_in] and for gpt2/model.py's [B, m, n_in]."""
    rng = np.random.default_rng(m)
    w, x = (rng.standard_normal((16, 70), dtype=np.float32),
            rng.standard_normal((m, 16), dtype=np.float32))
    product = PanelMatmul([w], 32, by_row)
    np.testing.assert_allclose(product(x, w), x @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(product(x[None], w), (x @ w)[None], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(product(np.stack([x, 2 * x]), w), np.stack([x @ w, 2 * x @ w]),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", FORMS)
def test_the_engine_takes_the_panels_exactly_for_a_few_rows(form):
    """The equality tests below would pass if the panels were never used; so spoil them and watch
    which calls change: calls of 2..the form's largest new tokens must, calls of 1 or more must
    not."""
    x = [int(t) for t in np.random.default_rng(0).integers(0, 50, 40)]
    good = GPT2(HP, PARAMS, ops=form, pad_rows=1)
    spoiled = GPT2(HP, PARAMS, ops=form, pad_rows=1)
    held = spoiled.plan.ops.matmul.panels
    for w in (spoiled.plan.head, spoiled.params["blocks"][0]["mlp"]["c_fc"]["w"]):
        held[id(w)] = (w, held[id(w)][1] * 0)  # the LM head's panels, and one layer's
    assert np.abs(spoiled.params["blocks"][0]["mlp"]["c_fc"]["w"]).max() > 0
    for n in (1, 2, 5, ROW_MAX, ROW_MAX + 1, 17, MAX_ROWS, MAX_ROWS + 1, 40):
        spoiled.reset(), good.reset()
        a, b = good.logits(x, n), spoiled.logits(x, n)
        assert (np.abs(a - b).max() > 1e-3) == (2 <= n <= FORMS[form]), n


@pytest.mark.parametrize("form", FORMS)
def test_no_product_of_the_engine_misses_its_panels(form):
    """Every product of 2..MAX_ROWS rows an engine runs (verification calls, a tree, a batch of
    decode steps) finds its weight's panels: the lookup by the weight held cannot miss silently. A
    weight swapped for a copy after the engine was built is what a miss looks like: named in
    .missed, by shape."""
    x = [int(t) for t in range(3, 45)]
    model = GPT2(HP, PARAMS, ops=form, pad_rows=1)
    for n in (1, 2, 5, MAX_ROWS, 40):
        model.logits(x, n)
    model.tree(x[:30], [5, 6, 7], [-1, 0, 0])
    BatchGPT2(model, 3)([[1, 2], [3, 4], [5, 6]])
    assert model.plan.ops.matmul.missed == set()
    c_fc = model.params["blocks"][0]["mlp"]["c_fc"]
    c_fc["w"] = c_fc["w"].copy()  # the same values, another array: no panels of its own
    model.logits(x[:30], 5)  # 5 new tokens after a cached prefix
    assert model.plan.ops.matmul.missed == {c_fc["w"].shape}


@pytest.mark.parametrize("pad_rows", [1, 4])
@pytest.mark.parametrize("form", FORMS)
def test_panels_change_no_result(pad_rows, form):
    """Cached calls of 1..40 tokens (in and past the panels' range), rollbacks and a tree, with
    panels: the full forward's rows."""
    model, x = GPT2(HP, PARAMS, ops=form, pad_rows=pad_rows), [int(t) for t in range(3, 45)]
    for end, n in ((3, 3), (9, 5), (8, 1), (20, 12), (40, 17), (42, 2), (42, 40), (44, 30)):
        assert np.abs(model.logits(x[:end], n) - full(x[:end])[-n:]).max() < TOL, (end, n)
    tokens, parents = [5, 6, 7, 8, 9, 10], [-1, 0, 0, -1, 3, 4]
    logits = model.tree(x[:30], tokens, parents)
    for node, path in {0: [5], 2: [5, 7], 5: [8, 9, 10]}.items():
        assert np.abs(logits[1 + node] - full(x[:30] + path)[-1]).max() < TOL


@pytest.mark.parametrize("form", FORMS)
def test_batched_engine_with_panels_equals_rows_alone(form):
    """The batched engine shares its model's panels: few rows in all (a batch of decode steps) go
    through them."""
    plain = GPT2(HP, PARAMS, ops="reference")
    batch = BatchGPT2(GPT2(HP, PARAMS, ops=form), 3)
    xs = [[1, 2, 3, 4], [5, 6], [7, 8, 9, 10, 11, 12]]
    batch(xs)
    for step in range(3):  # one new token per row: 3 rows in all, the panels' range
        xs = [x + [(7 * step + b) % 50] for b, x in enumerate(xs)]
        out = batch.logits(xs)
        for b, x in enumerate(xs):
            plain.reset()
            assert np.abs(out[b, 0] - plain.logits(x)[0]).max() < TOL


def test_policy_follows_the_blas_and_the_size(monkeypatch):
    """On with OpenBLAS up to PANEL_MAX_PARAMS, in the form its kernels favour; off elsewhere."""
    for arch, form in (("SkylakeX", "panels"), ("Haswell", "panel_rows"), ("Zen", "panel_rows")):
        monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", arch))
        assert policy.panel_policy(5_000_000)["on"] and policy.panel_form() == form
        big = policy.panel_policy(policy.PANEL_MAX_PARAMS + 1)
        assert not big["on"] and "memory" in big["why"]
    for kernels in (("mkl", None), (None, None), ("blis", "zen3")):
        monkeypatch.setattr(policy, "blas_kernels", lambda: kernels)
        assert not policy.panel_policy(5_000_000)["on"]
        assert policy.panel_form() == "panel_rows"
    # a request decides over both
    assert policy.panel_policy(10**10, True) == {"on": True, "why": "requested (PICOSPEC_PANELS)"}


@pytest.mark.parametrize("arch, form", [("SkylakeX", "panels"), ("Haswell", "panel_rows")])
def test_the_engine_follows_the_policy(monkeypatch, arch, form):
    """The choice reaches the engine, in the family's form, and with it the padding that suits
    each path."""
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", arch))
    for on in (True, False):
        model = GPT2(HP, PARAMS, panels=on)
        assert model.plan.panels_report["on"] == on
        assert model.plan.kind == (form if on else "cpu")
        assert isinstance(model.plan.ops.matmul, PanelMatmul) == on
        assert on is False or model.plan.ops.matmul.by_row == (form == "panel_rows")
        assert model.plan.pad_rows == (1 if on else 4)
    assert GPT2(HP, PARAMS).plan.kind == form


@pytest.mark.parametrize("env", ["0", "1"])
def test_main_reports_the_choice(env, tmp_path):
    r = run_here(["main.py", "--method", "speculative", "--n_tokens", "4", "--temperature", "0",
                  "--runs", "1", "--json"], tmp_path,
                env={"PICOSPEC_PANELS": env})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["threads"]["panels"] == {"on": env == "1", "why": "requested (PICOSPEC_PANELS)"}
    # temperature 0: speculative text equals autoregressive text on either path
    assert out["same_output"] == [True]


@pytest.mark.parametrize("n_in", [16, 512, 513, 1023, 1024, 1025, 2047, 2048, 2049, 4096])
def test_panel_widths(n_in):
    """By row: the widest of 128, 64 and 32 columns whose float32 panel fits in 512 KB, one
    core's cache (docs/performance.md); small products: 64 columns up to 512 inputs, else 32
    (bench/engine.py's layouts), the form panels() cuts when not told."""
    fits = [w for w in (128, 64, 32) if n_in * w * 4 <= 512 * 1024]
    assert panel_width(n_in, by_row=True) == fits[0]
    assert panel_width(n_in) == (64 if n_in <= 512 else 32)
    assert panels(np.zeros((n_in, 1), np.float32)).shape == (1, n_in, panel_width(n_in))


class Rows:
    """A weight that notes how many rows each product with it has (NumPy hands x @ W to it)."""
    __array_ufunc__ = None

    def __init__(self, w):
        self.w, self.rows = w, []

    def __rmatmul__(self, x):
        self.rows.append(x.shape[0])
        return x @ self.w


@pytest.mark.parametrize("m", range(1, 10))
def test_rows_are_padded_to_a_multiple_of_4(m):
    """padded_matmul: W sees the rows padded with zeros to a multiple of 4 (docs/performance.md:
    OpenBLAS multiplies 4 rows as fast as 2 or 3), or of the multiple asked for; only the rows
    given come back."""
    rng = np.random.default_rng(m)
    x, w = rng.standard_normal((m, 8), dtype=np.float32), rng.standard_normal((8, 5), np.float32)
    for multiple, padded in ((None, -(-m // 4) * 4), (3, -(-m // 3) * 3)):
        weight = Rows(w)
        out = padded_matmul(x, weight) if multiple is None else padded_matmul(x, weight, multiple)
        assert weight.rows == [padded]
        np.testing.assert_allclose(out, x @ w, rtol=1e-5, atol=1e-5)
