"""Forbidden sequences are never pooled away (picospec/check/exact_law.py, battery.py): on a law
with exact zeros beside rare cells, a handful of draws the target forbids fails the G-test however
the rare cells are pooled, while counts drawn from the law itself pass, failing at alpha's rate
over many runs; a sampler that puts 3e-4 of the mass on one forbidden sequence fails in every run
that draws it. The broken variant (zeros pooled with the rare cells) passes those forbidden draws,
and the same tests reject it."""
from collections import Counter

import numpy as np
import pytest

import picospec.check.exact_law as exact_law
from picospec.check.exact_law import ALPHA, cells, chi2_sf, g_statistic, g_test

N = 10_000
# three large cells, 40 rare cells (expected 2 each at N: pooled), 10 forbidden ones
PROBS = np.array([0.4, 0.3, 0.292] + [2e-4] * 40 + [0.0] * 10)
FORBIDDEN = np.flatnonzero(PROBS == 0)


def drawn(seed, forbidden=0):
    """counts [S] of N draws from PROBS, `forbidden` of them moved onto forbidden sequences."""
    counts = np.random.default_rng(seed).multinomial(N - forbidden, PROBS).astype(float)
    counts[FORBIDDEN[:forbidden]] += 1
    return counts


def pooled_zeros(probs, n, min_expected=5.0):
    """The broken variant: zeros counted among the rare cells (one missing `probs > 0`)."""
    big = n * probs >= min_expected
    cell = np.where(big, np.cumsum(big) - 1, big.sum())
    return cell, np.append(n * probs[big], n * probs[~big].sum())


def p_value(counts):
    G, df = g_statistic(counts, PROBS)
    return 0.0 if G == np.inf else chi2_sf(float(G), df)


def test_the_rare_cells_are_pooled_and_the_zeros_are_not():
    cell, expected = cells(PROBS, N)
    assert len(expected) == 4 and np.all(cell[FORBIDDEN] == -1)
    assert expected[-1] == pytest.approx(N * 40 * 2e-4)


@pytest.mark.parametrize("forbidden", [1, 2, 5])
def test_a_few_forbidden_draws_fail_however_rare(forbidden):
    assert p_value(drawn(0)) > ALPHA  # the law itself passes
    assert p_value(drawn(0, forbidden)) == 0.0


def test_pooling_zeros_with_rare_cells_is_caught(monkeypatch):
    """The broken variant lets 2 forbidden draws in 10,000 through (p far above alpha)."""
    monkeypatch.setattr(exact_law, "cells", pooled_zeros)
    assert p_value(drawn(0, 2)) > ALPHA


def test_a_forbidden_sequence_in_a_law_dict_fails():
    """g_test on {sequence: probability}: a drawn sequence with probability 0, or absent, -> p 0."""
    law = {(0,): 0.5, (1,): 0.4999, (2,): 1e-4, (3,): 0.0}
    counts = Counter({(0,): 5000, (1,): 4998, (3,): 2})
    assert g_test(counts, law)[2] == 0.0
    assert g_test(Counter({(0,): 5000, (1,): 4998, (4,): 2}), law)[2] == 0.0
    assert g_test(Counter({(0,): 5001, (1,): 4999}), law)[2] > ALPHA


@pytest.mark.parametrize("forbidden, verdict", [(0, "pass"), (2, "FAIL")])
def test_the_battery_fails_a_sampler_that_emits_a_forbidden_sequence_rarely(monkeypatch, forbidden,
                                                                            verdict):
    """check_case on a case whose target has zeros, its sampler's sequences drawn from the exact
    law, then 2 of 10,000 replaced by a sequence the target forbids."""
    from picospec.check import battery
    from picospec.check.cases import CASES, PROMPT
    from picospec.check.exact_law import Toy, law_vector

    case = next(c for c in CASES["chain"] if c.draft[0] == "one-hot" and not c.lowest)
    probs = law_vector(Toy(case.laws()[0]), PROMPT, case.N)  # [V^N]
    shape = (case.V,) * case.N
    seqs = np.array(np.unravel_index(np.arange(len(probs)), shape)).T  # [V^N, N]
    drawn = seqs[np.random.default_rng(1).choice(len(probs), size=N, p=probs)]  # [N, N new]
    drawn[:forbidden] = np.unravel_index(int(np.flatnonzero(probs == 0)[0]), shape)
    monkeypatch.setattr(battery, "run", lambda *args: drawn)
    result = battery.check_case(None, "chain", case, N, 0, tv=False)
    assert result.verdict == verdict, result


DRAWS = 2_000  # runs of N draws each, for the rates below
MOVED = 3e-4  # mass a broken sampler puts on one forbidden sequence: 3 draws expected in N


def p_values(probs, seed=0):
    """The checker's p-value on each of DRAWS runs of N draws from probs -> ([DRAWS], counts)."""
    counts = np.random.default_rng(seed).multinomial(N, probs, size=DRAWS).astype(float)
    G, df = g_statistic(counts, PROBS)
    return np.array([0.0 if g == np.inf else chi2_sf(float(g), df) for g in G]), counts


def test_a_right_sampler_fails_at_the_stated_rate_beside_zeros_and_rare_cells():
    """Counts from the law itself: the share of runs below alpha is alpha (binomial test at
    1e-3), for alpha 0.01, 0.05 and 0.1."""
    stats = pytest.importorskip("scipy.stats")
    p, _ = p_values(PROBS)
    assert all(stats.binomtest(int((p < a).sum()), DRAWS, a).pvalue > 1e-3
               for a in (0.01, 0.05, 0.1))


def a_little_on_a_forbidden_sequence():
    moved = PROBS.copy()
    moved[0] -= MOVED
    moved[FORBIDDEN[0]] += MOVED
    return moved


def test_a_little_mass_on_a_forbidden_sequence_fails_every_run_that_draws_it():
    """Every run that drew the forbidden sequence fails (p = 0), the others pass at alpha's rate:
    rejected in about 1 - exp(-3) = 95% of runs."""
    p, counts = p_values(a_little_on_a_forbidden_sequence(), seed=1)
    drew = counts[:, FORBIDDEN[0]] > 0
    assert (p[drew] == 0).all() and (p[~drew] >= ALPHA).mean() > 0.99
    assert abs(drew.mean() - (1 - (1 - MOVED) ** N)) < 0.02


def test_pooled_zeros_let_a_little_forbidden_mass_through(monkeypatch):
    """The broken variant rejects the same sampler in a few runs only."""
    monkeypatch.setattr(exact_law, "cells", pooled_zeros)
    p, _ = p_values(a_little_on_a_forbidden_sequence(), seed=1)
    assert (p < ALPHA).mean() < 0.05
