"""Sampling pieces, and the proof of speculative sampling as code: one rejection step's exact law
equals the target."""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

from picospec.sampling import residual, sample, warp
from picospec.verify import accept_or_resample


def one_step_law(p, q, resid=residual):
    """Exact output law of accept_or_resample with draft x ~ p: accept x w.p. min(1, q/p), else draw
    the residual."""
    accept = np.where(p > 0, np.minimum(1, q / np.where(p > 0, p, 1)), 0)  # [V]
    return p * accept + (1 - np.sum(p * accept)) * resid(q, p)


def dist(V):  # arbitrary distributions: zeros, one-hots, tiny probabilities
    weights = st.lists(st.one_of(st.just(0.0), st.just(1e-12), st.floats(1e-6, 1.0)), min_size=V,
                       max_size=V)
    return weights.filter(lambda w: sum(w) > 0).map(lambda w: np.array(w) / sum(w))


@given(st.integers(2, 6).flatmap(lambda V: st.tuples(dist(V), dist(V))))
def test_one_rejection_step_gives_the_target(pq):
    p, q = pq
    np.testing.assert_allclose(one_step_law(p, q), q, atol=1e-12, rtol=0)


@pytest.mark.parametrize("p, q", [([1, 0, 0], [0, 0.5, 0.5]),  # disjoint supports
                                  # identical: the residual is all zero
                                  ([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]),
                                  ([0, 1, 0], [0, 1, 0]), ([0.5, 0.5, 0], [0, 0, 1])])
def test_edge_cases(p, q):
    p, q = np.array(p, float), np.array(q, float)
    np.testing.assert_allclose(one_step_law(p, q), q, atol=1e-12)


def test_proof_rejects_a_wrong_resampling():
    """The same exact-law check fails for the classic bug: resampling from q instead of the
    residual."""
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.3, 0.5])
    assert np.abs(one_step_law(p, q, resid=lambda q, p: q) - q).max() > 0.05


def test_accept_or_resample_follows_its_law():
    """The code's own step, sampled, against the analytic law (100k draws, 5-sigma bound)."""
    p, q = np.array([0.5, 0.3, 0.2, 0.0]), np.array([0.1, 0.2, 0.3, 0.4])
    rng = np.random.default_rng(0)
    n = 100_000
    counts = np.bincount([accept_or_resample(sample(p, rng), p, q, rng)[0] for _ in range(n)],
                         minlength=4)
    assert np.all(np.abs(counts / n - q) < 5 * np.sqrt(q * (1 - q) / n) + 1e-9)


def test_warp_examples_by_hand():
    p = np.array([0.5, 0.3, 0.2], dtype=np.float32)
    np.testing.assert_allclose(warp(p, top_k=2), [0.625, 0.375, 0], atol=1e-7)
    np.testing.assert_allclose(warp(p, top_p=0.6), [0.625, 0.375, 0], atol=1e-7)
    np.testing.assert_allclose(warp(p, top_p=0.5), [1, 0, 0], atol=1e-7)
    np.testing.assert_array_equal(warp(np.array([0.2, 0.8]), temperature=0), [0, 1])
    # first on ties
    np.testing.assert_array_equal(warp(np.array([0.4, 0.4, 0.2]), temperature=0), [1, 0, 0])
    t = warp(p, temperature=0.5)
    np.testing.assert_allclose(t, p**2 / np.sum(p**2), rtol=1e-6)
    assert warp(p, temperature=0.7, top_k=2, top_p=0.9).dtype == np.float32
    assert warp(p, temperature=0).dtype == np.float32


def test_warp_rows_independently():
    P = np.array([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    np.testing.assert_allclose(warp(P, top_k=1), [[0, 0, 1], [1, 0, 0]])


def test_warp_more_examples_by_hand():
    """Temperature 2 (q ~ sqrt(p)), then top-p on the tempered law (its cut is on the tempered mass,
    whatever scale the unnormalised intermediate has), and top-k and top-p together (both cuts
    apply)."""
    p = np.array([0.5, 0.3, 0.2])
    np.testing.assert_allclose(warp(p, temperature=2), np.sqrt(p) / np.sqrt(p).sum(), rtol=1e-12)
    # tempered: [.4155, .3218, .2628]; mass before each: 0, .4155, .7373 -> top_p .7 keeps the first
    # two
    kept = np.sqrt(p[:2]) / np.sqrt(p[:2]).sum()
    np.testing.assert_allclose(warp(p, temperature=2, top_p=0.7), [*kept, 0], rtol=1e-12)
    # top-p alone keeps 3
    np.testing.assert_allclose(warp(p, top_k=2, top_p=0.95), [0.625, 0.375, 0], atol=1e-12)


@pytest.mark.parametrize("options",
                         [dict(temperature=0), dict(temperature=0.5), dict(temperature=2),
                                     dict(top_k=2), dict(top_p=0.6),
                                     dict(temperature=1.5, top_k=3, top_p=0.8)],
                         ids=["T=0", "T=0.5", "T=2", "top_k", "top_p", "all three"])
def test_warp_of_a_batch_is_the_warp_of_each_row(options):
    """[2, 3, V] at once equals each [V] row alone (every reduction is over the last axis only)."""
    P = np.random.default_rng(0).dirichlet(np.ones(6), size=(2, 3))  # [2, 3, 6]
    rows = np.array([[warp(row, **options) for row in block] for block in P])
    np.testing.assert_allclose(warp(P, **options), rows, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_warp_at_extreme_settings_stays_a_distribution_without_warnings(dtype):
    """A temperature so small that log(p) / T overflows (1e-40 is 0 in float32), or so large that it
    does (1e308 is inf in float32), and a top_p whose share of the mass underflows to 0: the limits
    are the argmax one-hot (ties shared), the uniform law on the support, and the top token alone;
    no NaN, no RuntimeWarning, dtype kept."""
    p = np.array([0.4, 0.4, 0.2, 0.0], dtype=dtype)
    with warnings.catch_warnings():
        # overflow, invalid value, division: each a RuntimeWarning, now an error
        warnings.simplefilter("error")
        np.testing.assert_allclose(warp(p, temperature=1e-40), [0.5, 0.5, 0, 0])
        np.testing.assert_allclose(warp(p, temperature=1e-300), [0.5, 0.5, 0, 0])
        np.testing.assert_allclose(warp(p, temperature=1e308), [1 / 3, 1 / 3, 1 / 3, 0], rtol=1e-6)
        np.testing.assert_allclose(warp(p, top_p=1e-50), [1, 0, 0, 0])
        np.testing.assert_allclose(warp(p, temperature=1e-40, top_p=1e-50), [1, 0, 0, 0])
        assert warp(p, temperature=1e-40).dtype == dtype


class FixedUniform:
    """A generator whose next uniform is u: sample() by hand."""

    def __init__(self, u):
        self.u = u

    def random(self):
        return self.u


def test_sample_by_hand_at_the_edges_and_unnormalised():
    """u = 0 never picks a leading zero-probability token (side="right"); an unnormalised p [0, 2,
    2] is renormalised: u = 0.4 -> 1.6 of 4 -> token 1, u = 0.9 -> 3.6 -> token 2."""
    assert sample(np.array([0.0, 1.0]), FixedUniform(0.0)) == 1
    assert sample(np.array([0.0, 0.0, 1.0, 0.0]), FixedUniform(0.0)) == 2
    assert sample(np.array([0.0, 2.0, 2.0]), FixedUniform(0.4)) == 1
    assert sample(np.array([0.0, 2.0, 2.0]), FixedUniform(0.9)) == 2


@given(dist(5), st.floats(0.05, 3.0), st.one_of(st.none(), st.integers(1, 5)),
       st.one_of(st.none(), st.floats(0.01, 1.0)))
def test_warp_gives_a_distribution_inside_the_support(p, T, k, top_p):
    w = warp(p, temperature=T, top_k=k, top_p=top_p)
    assert abs(w.sum() - 1) < 1e-9 and np.all(w[p == 0] == 0) and np.count_nonzero(w) >= 1
    if k is not None:
        assert np.count_nonzero(w) <= k


def test_sample_never_returns_zero_probability_and_allows_token_0():
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.0, 0.5, 0.0], dtype=np.float32)
    draws = {sample(p, rng) for _ in range(2000)}
    assert draws == {0, 2}
    assert sample(np.array([1.0, 0.0]), rng) == 0 and sample(np.array([0.0, 1.0]), rng) == 1


def test_residual_of_identical_distributions_is_total():
    q = np.array([0.25, 0.75])
    np.testing.assert_array_equal(residual(q, q), q)
    np.testing.assert_allclose(residual(np.array([0.5, 0.5]), np.array([0.9, 0.1])), [0, 1])


def test_first_token_by_hand():
    """The prefill's token: the argmax when greedy (the docstring's example); sampled, its
    frequencies follow the warped softmax (logits log [.5, .3, .2] -> about .5, .3, .2; top_k 1
    leaves only the argmax)."""
    from picospec.sampling import first_token

    assert first_token(np.array([0.0, 2.0, 1.0], np.float32), True, None) == 1
    logits, rng = np.log(np.array([0.5, 0.3, 0.2], np.float32)), np.random.default_rng(0)
    counts = np.bincount([first_token(logits, False, rng) for _ in range(20000)],
                         minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.5, 0.3, 0.2], atol=0.015)
    assert {first_token(logits, False, rng, top_k=1) for _ in range(50)} == {0}
