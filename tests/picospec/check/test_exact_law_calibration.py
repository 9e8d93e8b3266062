"""The checker's calibration (picospec/check/exact_law.py): under a correct sampler its p-values are
uniform, so it rejects a correct sampler at level alpha in a share alpha of runs; under a known
alternative its power is what the noncentral chi-square gives. Counts are drawn straight from the
law (exact multinomial draws, no sampler), at several support sizes: two cells, five, a law whose
hundred rare cells are pooled into one, and the 27 sequences of a toy. The broken variant, the same
checker with its degrees of freedom off by one either way, fails the same tests.

Sizes: 4,000 draws of 20,000 samples per law. At that n the G statistic is close to its chi-square
limit (false-rejection rates measured 0.007-0.011 at alpha = 0.01 and 0.048-0.055 at 0.05; power
within 0.01 of the noncentral chi-square's), while on two to five cells one degree of freedom more
takes the rate at alpha = 0.05 to 0.011-0.024 and one less to 0.10-0.11, and moves the power by
0.045-0.09: at 4,000 draws, 5 to 15 standard errors.
"""
import numpy as np
import pytest
from scipy import stats

import picospec.check.exact_law as exact_law
from picospec.check.exact_law import cells, law_vector, perturb, power, random_toy

N_SAMPLES, DRAWS, LEVEL = 20_000, 4_000, 1e-3  # LEVEL: of the tests of calibration themselves
# law, and its cells at N_SAMPLES counted by hand
LAWS = {"two-cells": (np.array([0.3, 0.7]), 2),
        "five-cells": (np.array([0.1, 0.15, 0.2, 0.25, 0.3]), 5),
        # 100 cells expected 2 times each: pooled into one cell, beside the three large ones
        "rare-cells-pooled": (np.array([0.4, 0.3, 0.29] + [1e-4] * 100), 4),
        "toy-27-sequences": (law_vector(random_toy(3, seed=7), [1], 3), 27)}


def null_pvalues(probs, seed=0):
    """The checker's p-values on DRAWS sets of counts drawn from the law itself -> ([DRAWS], df)."""
    counts = np.random.default_rng(seed).multinomial(N_SAMPLES, probs, size=DRAWS).astype(float)
    G, df = exact_law.g_statistic(counts, probs)
    return np.array([exact_law.chi2_sf(float(g), df) for g in G]), df


def uniform(pvalues, df):
    """Whether the p-values look uniform: the share below alpha is alpha (binomial test) at alpha =
    0.01, 0.05 and 0.1, and, where the statistic is not too discrete (df >= 3), a Kolmogorov-Smirnov
    test against U(0, 1)."""
    rates = [stats.binomtest(int((pvalues < a).sum()), len(pvalues), a).pvalue
             for a in (0.01, 0.05, 0.1)]
    ks = stats.kstest(pvalues, "uniform").pvalue if df >= 3 else 1.0
    return min(rates + [ks]) > LEVEL


def off_by(monkeypatch, d):
    """The broken variant: the checker with d more degrees of freedom."""
    g_statistic = exact_law.g_statistic

    def wrong(counts, probs):
        G, df = g_statistic(counts, probs)
        return G, df + d

    monkeypatch.setattr(exact_law, "g_statistic", wrong)


@pytest.mark.parametrize("name", list(LAWS))
def test_degrees_of_freedom_are_the_cells_less_one(name):
    probs, n_cells = LAWS[name]
    assert len(cells(probs, N_SAMPLES)[1]) == n_cells
    counts = np.random.default_rng(0).multinomial(N_SAMPLES, probs, size=1).astype(float)
    assert exact_law.g_statistic(counts, probs)[1] == n_cells - 1


@pytest.mark.parametrize("name", list(LAWS))
def test_pvalues_of_a_correct_sampler_are_uniform(name):
    probs, _ = LAWS[name]
    assert uniform(*null_pvalues(probs))


# one degree of freedom more, or less where one is left
WRONG = [(name, d) for name in LAWS for d in (-1, 1) if LAWS[name][1] - 1 + d >= 1]


@pytest.mark.parametrize("name, d", WRONG)
def test_a_checker_with_the_wrong_degrees_of_freedom_is_not_uniform(monkeypatch, name, d):
    probs, _ = LAWS[name]
    off_by(monkeypatch, d)
    assert not uniform(*null_pvalues(probs))


def pooled(probs, moved):
    """probs and an alternative, both over the checker's cells at N_SAMPLES -> [C] x 2."""
    cell, expected = cells(probs, N_SAMPLES)
    m = np.zeros(len(expected))
    np.add.at(m, cell[cell >= 0], moved[cell >= 0])
    return expected / N_SAMPLES, m


def power_matches(probs, alpha=0.01, noncentrality=12.0):
    """The checker's simulated power against "spread" alternatives of noncentrality 12 (n times
    Pearson's chi-square distance to the law) equals the noncentral chi-square's with C - 1 degrees
    of freedom (C: the cells counted by hand), within a binomial test at LEVEL."""
    e, m = pooled(probs, perturb(probs, "spread", 0.01))
    tv = 0.01 * np.sqrt(noncentrality / (N_SAMPLES * np.sum((m - e) ** 2 / e)))
    e, m = pooled(probs, perturb(probs, "spread", tv))
    lam, df = N_SAMPLES * np.sum((m - e) ** 2 / e), len(e) - 1
    expected = stats.ncx2.sf(stats.chi2.isf(alpha, df), df, lam)
    measured = power(probs, "spread", tv, N_SAMPLES, alpha, repeats=DRAWS, seed=1)
    return stats.binomtest(round(measured * DRAWS), DRAWS, expected).pvalue > LEVEL


@pytest.mark.parametrize("name", list(LAWS))
def test_power_is_the_noncentral_chi_square(name):
    assert power_matches(LAWS[name][0])


@pytest.mark.parametrize("name, d", [w for w in WRONG if w[0] != "toy-27-sequences"])
def test_a_checker_with_the_wrong_degrees_of_freedom_has_other_power(monkeypatch, name, d):
    """(At 26 degrees of freedom one more or less moves the power by less than the draws resolve:
    the small supports carry this check.)"""
    probs, _ = LAWS[name]
    off_by(monkeypatch, d)
    assert not power_matches(probs)


def test_the_chi_square_tail_is_scipys():
    """The checker's own tail (plain Python, both branches: the series below df / 2 + 1, the
    continued fraction above) against scipy's, over the p-values that matter."""
    for df in (1, 2, 3, 4, 7, 26, 242):
        for x in np.linspace(0.01, df + 12 * np.sqrt(2 * df) + 20, 60):
            assert exact_law.chi2_sf(float(x), df) == pytest.approx(stats.chi2.sf(x, df),
                                                                    rel=1e-9, abs=1e-15)
