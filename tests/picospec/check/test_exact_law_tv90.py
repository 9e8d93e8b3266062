"""tv90, the error a case catches with probability 0.9 wherever it lies (the battery's figure,
detectable_tv(probs, n, "anywhere") in picospec/check/exact_law.py): the G-test pools the
sequences expected fewer than 5 times, so mass moved among them shows only through their total,
and not at all when the total stays. The hardest error of a given TV therefore moves what it can
inside the pool and spreads the rest (SHAPES' "spread", the least detectable outside it), and tv90
is the spread error's threshold plus the pool's mass. An error that hard and no larger than tv90 is
caught in 0.9 of runs; the spread threshold alone, the broken variant, is no bound: on the law of 5
tokens over 3 its hardest error is caught in 0.47 of runs at 20,000 samples (the pool holds 0.0074
of the mass) and in none at 2,000 (the pool holds 0.104, the spread threshold is 0.100: an error of
that TV fits in the pool whole). tv90 itself is caught in 0.93 and 0.92 of runs.

Sizes: 400 runs per law (a standard error of 0.015 at power 0.9)."""
import numpy as np
import pytest

from picospec.check.exact_law import (ALPHA, chi2_isf, detectable_tv, g_statistic, law_vector,
                                      perturb, random_toy, rare)

RUNS = 400
LAW = law_vector(random_toy(3, seed=7), [1], 5)  # [243]: the --power table's law


def hardest(probs, n, tv):
    """An error of TV at most tv that the G-test at n samples sees least: as much as the pool can
    take (all of it but its likeliest sequence's own mass) moved inside the pool onto its likeliest
    sequence, the rest spread. -> the perturbed law [S]."""
    pool = rare(probs, n)  # [S]
    j = int(np.argmax(np.where(pool, probs, 0)))
    inside = min(tv, probs[pool].sum() - probs[j])
    moved = perturb(probs, "spread", tv - inside) if tv > inside else probs.copy()  # [S]
    others = pool.copy()
    others[j] = False
    taken = inside * moved[others] / moved[others].sum()  # [S in the pool but j]
    moved[others] -= taken
    moved[j] += taken.sum()
    return moved


def caught(probs, n, tv, seed=1):
    """The share of RUNS runs of n samples from the hardest error of TV tv rejected at ALPHA."""
    moved = hardest(probs, n, tv)
    assert moved.min() >= 0 and np.abs(moved - probs).sum() / 2 <= tv * (1 + 1e-9)
    counts = np.random.default_rng(seed).multinomial(n, moved / moved.sum(), size=RUNS)
    G, df = g_statistic(counts.astype(float), probs)  # [RUNS]
    return float(np.mean(G > chi2_isf(ALPHA, df)))


@pytest.mark.parametrize("n", [2_000, 20_000])
def test_tv90_is_caught_wherever_the_error_lies(n):
    assert caught(LAW, n, detectable_tv(LAW, n, "anywhere")) >= 0.85


@pytest.mark.parametrize("n", [2_000, 20_000])
def test_the_spread_threshold_alone_is_no_bound(n):
    assert caught(LAW, n, detectable_tv(LAW, n, "spread")) < 0.7


def test_tv90_is_the_spread_threshold_plus_the_pool():
    n = 2_000
    pool = float(LAW[rare(LAW, n)].sum())
    assert 0.05 < pool and detectable_tv(LAW, n, "anywhere") == pytest.approx(
        detectable_tv(LAW, n, "spread") + pool, rel=1e-12)


def test_the_battery_reports_the_bound_that_holds_anywhere(monkeypatch):
    """check_case's tv90 on the battery's first chain law case, its sequences drawn from the exact
    law, at 2,000 samples: the spread threshold plus the pool, not the spread threshold alone."""
    from picospec.check import battery
    from picospec.check.cases import CASES, PROMPT
    from picospec.check.exact_law import Toy

    n, case = 2_000, CASES["chain"][1]
    probs = law_vector(Toy(case.laws()[0]), PROMPT, case.N)  # [V^N]
    seqs = np.array(np.unravel_index(np.arange(len(probs)), (case.V,) * case.N)).T  # [V^N, N]
    drawn = seqs[np.random.default_rng(1).choice(len(probs), size=n, p=probs)]  # [n, N]
    monkeypatch.setattr(battery, "run", lambda *args: drawn)
    result = battery.check_case(None, "chain", case, n, 0)
    assert result.verdict == "pass"
    assert result.tv90 == detectable_tv(probs, n, "anywhere") > detectable_tv(probs, n) + 0.05


@pytest.mark.parametrize("n", [1, 3, 2_000, 20_000])
def test_a_law_of_one_sequence_catches_the_error_that_n_samples_hit_in_0_9_of_runs(n):
    """One possible sequence (a law at temperature 0): any sample elsewhere rejects it, so tv90 is
    the mass tv moved onto impossible sequences that n samples hit at least once with probability
    0.9, 1 - (1 - tv)^n = 0.9, for an error of any shape (below 5 samples the one sequence is a
    pool of its own, with no mass to move inside it). By hand at n = 1: tv = 0.9 (0.1 would be
    hit in 0.1 of runs)."""
    probs = np.array([0.0, 1.0, 0.0, 0.0])  # [S]
    tv = detectable_tv(probs, n)
    assert detectable_tv(probs, n, "anywhere") == tv
    assert 1 - (1 - tv) ** n == pytest.approx(0.9)
    hits = np.random.default_rng(0).binomial(n, tv, size=RUNS * 10)  # [runs]: samples moved
    assert np.mean(hits > 0) == pytest.approx(0.9, abs=0.03)
    if n == 1:
        assert tv == pytest.approx(0.9)
