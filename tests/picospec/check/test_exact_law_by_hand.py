"""The G-test's pooled table and its p-value against an independent computation
(picospec/check/exact_law.py: cells, g_statistic, g_test; battery.py: g_p_value): the cells built by
a plain loop from the rule the checker states (a possible sequence expected 5 times or more is a
cell of its own, those expected fewer share one pooled cell, an impossible one is in no cell), G
from scipy's power_divergence, Williams' divisor written out, the tail from scipy's chi-square. The
law's expected counts are whole numbers, exact in floats, one of them at the threshold itself. The
pairs and kept tests (pairs_p_value, kept_p_value) against loops written from their comments. The
broken variant, a pool that takes the sequences expected exactly 5 times too, fails the same test.
"""
import numpy as np
import pytest
from scipy import stats

import picospec.check.exact_law as exact_law
from picospec.check.battery import g_p_value
from picospec.check.exact_law import cells, g_statistic, g_test

# 12 sequences; expected counts at n = 1,024: 512, 256, ..., 8, then 5 (at the threshold), 2 and 1
# (pooled), and two impossible sequences
PROBS = np.array([512, 256, 128, 64, 32, 16, 8, 5, 2, 1, 0, 0]) / 1024
# at 512 four sequences are pooled (4 + 2.5 + 1 + 0.5), at 1,024 and 2,048 two, at 3,072 one alone
SIZES = (512, 1024, 2048, 3072)


def by_hand(counts, probs, n):
    """The checker's table by a loop -> (observed [C], expected [C], draws of impossible ones)."""
    observed, expected, pool, forbidden = [], [], None, 0.0
    for count, p in zip(counts, probs):
        if p == 0:
            forbidden += count
        elif n * p < 5:
            pool = [pool[0] + count, pool[1] + n * p] if pool else [count, n * p]
        else:
            observed.append(count)
            expected.append(n * p)
    if pool:
        observed.append(pool[0])
        expected.append(pool[1])
    return np.array(observed), np.array(expected), forbidden


def scipys(counts, probs):
    """(G / Williams' divisor, df, p-value) of counts [S], computed apart from the checker."""
    n = counts.sum()
    observed, expected, forbidden = by_hand(counts, probs, n)
    df = len(expected) - 1
    if forbidden:
        return np.inf, df, 0.0
    G = stats.power_divergence(observed, expected, lambda_="log-likelihood").statistic
    q = 1 + (np.sum(n / expected) - 1) / (6 * n * df)  # Williams (1976): 1 + (a - 1) / (6 n df)
    return G / q, df, stats.chi2.sf(G / q, df)


def drawn(n, seed, rows=3):
    """counts [rows, S] drawn from PROBS, a big cell left empty in the last row (0 log 0 = 0)."""
    counts = np.random.default_rng(seed).multinomial(n, PROBS, size=rows).astype(float)
    counts[-1, 0] += counts[-1, 3]
    counts[-1, 3] = 0
    return counts


def test_the_pooled_table_at_1024_by_hand():
    """Expected 5: its own cell (the pool takes fewer than 5); 2 and 1: one cell of 3; zeros: -1."""
    cell, expected = cells(PROBS, 1024)
    assert cell.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 8, -1, -1]
    assert expected.tolist() == [512, 256, 128, 64, 32, 16, 8, 5, 3]


@pytest.mark.parametrize("n", SIZES)
def test_the_pooled_table_is_the_loops(n):
    counts = drawn(n, seed=n)[0]
    cell, expected = cells(PROBS, n)
    observed, by_loop, _ = by_hand(counts, PROBS, n)
    assert expected.tolist() == pytest.approx(by_loop.tolist(), rel=1e-15)
    pooled = np.zeros(len(expected))
    np.add.at(pooled, cell[cell >= 0], counts[cell >= 0])
    assert pooled.tolist() == observed.tolist()


@pytest.mark.parametrize("n", SIZES)
def test_g_its_degrees_of_freedom_and_p_value_are_scipys(n):
    counts = drawn(n, seed=n)  # [3, S]: G of a batch of rows, row by row
    G, df = g_statistic(counts, PROBS)
    for row, g in zip(counts, G):
        want_G, want_df, want_p = scipys(row, PROBS)
        assert (g, df) == (pytest.approx(want_G, rel=1e-10), want_df)
        assert g_p_value(row, PROBS) == pytest.approx(want_p, rel=1e-8)
        law = {(s,): float(p) for s, p in enumerate(PROBS)}
        seqs = {(s,): c for s, c in enumerate(row) if c}
        assert g_test(seqs, law)[2] == pytest.approx(want_p, rel=1e-8)


def test_a_draw_of_an_impossible_sequence_is_p_0():
    counts = drawn(1024, seed=1)[0]
    counts[0] -= 1
    counts[-1] += 1
    assert scipys(counts, PROBS)[2] == 0.0 == g_p_value(counts, PROBS)


def test_a_pool_that_takes_the_threshold_fails_the_comparison(monkeypatch):
    """The broken variant: the sequences expected exactly 5 times pooled too."""
    monkeypatch.setattr(exact_law, "rare", lambda probs, n, min_expected=5.0:
                        (probs > 0) & (n * probs <= min_expected))
    with pytest.raises(AssertionError):
        test_the_pooled_table_at_1024_by_hand()
    with pytest.raises(AssertionError):
        test_g_its_degrees_of_freedom_and_p_value_are_scipys(1024)


def pairs_by_hand(seqs, probs, V):
    """The pairs test by loops: the first tokens of sequences (0, 1), (2, 3), ... and of (1, 2),
    (3, 4), ..., each pairing G-tested against the product of the first token's law, the smaller
    p-value doubled (at most 1)."""
    first = [sum(p for s, p in enumerate(probs) if s // V ** (len(seqs[0]) - 1) == a)
             for a in range(V)]
    ps = []
    for start in (0, 1):
        counts = np.zeros(V * V)
        for i in range(start, len(seqs) - 1, 2):
            counts[seqs[i][0] * V + seqs[i + 1][0]] += 1
        ps.append(scipys(counts, np.outer(first, first).ravel())[2])
    return min(1.0, 2 * min(ps))


@pytest.mark.parametrize("n, copied, forbidden", [(201, 0.0, False), (2000, 0.0, False),
                                                  (2000, 0.3, False), (2000, 0.0, True)])
def test_the_pairs_test_by_hand(n, copied, forbidden):
    """Sequences of 2 tokens over 3 from a law; in a share `copied` of the pairs (2j, 2j + 1) the
    odd sequence's first token is the even one's (an odd n: the last sequence pairs once);
    forbidden: the law never starts with token 2, and one sequence does (p = 0)."""
    V, rng = 3, np.random.default_rng(n)
    probs = rng.dirichlet(np.ones(V * V)) * ([1] * 2 * V + [0 if forbidden else 1] * V)  # [9]
    probs /= probs.sum()
    seqs = np.stack(np.unravel_index(rng.choice(V * V, size=n, p=probs), (V, V)), -1)  # [n, 2]
    copy = np.flatnonzero(rng.random(n // 2) < copied) * 2  # [copies]: the even ones
    seqs[copy + 1, 0] = seqs[copy, 0]
    if forbidden:
        seqs[7, 0] = 2
    assert exact_law.pairs_p_value(seqs, probs, V) == pytest.approx(
        pairs_by_hand(seqs.tolist(), probs, V), rel=1e-8)


def kept_by_hand(full, rule):
    """1 / the mean, over lam = 2^-8 ... 2^3, of exp(-lam * kept) / prod_c (1 - rule_c (1 - e^-lam))
    (Ville's inequality: the p-value of a sampler keeping all drafts less often than the rule),
    at most 1; 0 where a call the rule keeps whole (rule 1) was cut."""
    if any(f < 1 and r >= 1 for f, r in zip(full, rule)):
        return 0.0
    ms = []
    for lam in [2.0 ** e for e in range(-8, 4)]:
        m = np.exp(-lam * sum(full))
        for r in rule:
            m /= 1 - r * (1 - np.exp(-lam))
        ms.append(m)
    return min(1.0, 1 / np.mean(ms))


@pytest.mark.parametrize("kept_share", [0.5, 0.8, 1.0, 1.2])
def test_the_kept_test_by_hand(kept_share):
    """200 calls of rule chances in (0, 1], a few of them 1 (kept whole), kept with kept_share times
    the rule's chance: p-values from 1 (kept as often, or more) down to far below KEPT_ALPHA."""
    rng = np.random.default_rng(3)
    rule = np.where(rng.random(200) < 0.1, 1.0, rng.random(200))  # [200]
    full = (rule >= 1) | (rng.random(200) < kept_share * rule)  # [200]
    want = kept_by_hand(full.tolist(), rule.tolist())
    assert exact_law.kept_p_value(full, rule) == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_a_failing_case_names_its_three_farthest_sequences_farthest_first(monkeypatch):
    """check_case on sequences drawn from the case's exact law, 600 of 10,000 replaced by one
    sequence of probability near 0.01: its detail names three sequences, that one first, with its
    count and expectation; the other two are the next farthest from theirs."""
    from picospec.check import battery
    from picospec.check.cases import CASES, PROMPT
    from picospec.check.exact_law import Toy, law_vector

    case, n = CASES["chain"][1], 10_000
    probs = law_vector(Toy(case.laws()[0]), PROMPT, case.N)  # [V^N]
    seqs = list(np.ndindex((case.V,) * case.N))  # [V^N] tuples in the law's order
    drawn = np.random.default_rng(2).choice(len(probs), size=n, p=probs)  # [n]
    drawn[:600] = heavy = int(np.argmin(np.abs(probs - 0.01)))
    monkeypatch.setattr(battery, "run", lambda *args: np.array([seqs[i] for i in drawn]))
    result = battery.check_case(None, "chain", case, n, 0, tv=False)
    count = np.bincount(drawn, minlength=len(probs))  # [V^N]
    off = sorted(range(len(probs)), key=lambda s: -abs(count[s] - n * probs[s]))[:3]
    assert result.verdict == "FAIL" and off[0] == heavy
    assert result.detail.split("; ") == [f"{seqs[s]}: observed {count[s]}, expected "
                                         f"{n * probs[s]:.1f}" for s in off]


def test_a_passing_case_s_p_value_is_the_smallest_of_its_tests(monkeypatch):
    """check_case on 10,000 sequences drawn from the case's exact law: its p-value is the G-test's
    or the pairs test's on alpha's scale (times ALPHA / PAIRS_ALPHA), whichever is smaller, at most
    1 (no kept calls here, so no kept test)."""
    from picospec.check import battery
    from picospec.check.cases import CASES, PROMPT
    from picospec.check.exact_law import ALPHA, PAIRS_ALPHA, Toy, law_vector

    case, n = CASES["chain"][1], 10_000
    probs = law_vector(Toy(case.laws()[0]), PROMPT, case.N)  # [V^N]
    drawn = np.random.default_rng(0).choice(len(probs), size=n, p=probs)  # [n]
    seqs = np.array(list(np.ndindex((case.V,) * case.N)))[drawn]  # [n, N]
    monkeypatch.setattr(battery, "run", lambda *args: seqs)
    result = battery.check_case(None, "chain", case, n, 0, tv=False)
    g = g_p_value(np.bincount(drawn, minlength=len(probs)).astype(float), probs)
    pairs = exact_law.pairs_p_value(seqs, probs, case.V)
    assert g > 0.1  # a p-value the case must report as it is, not capped below
    assert result.verdict == "pass"
    assert result.p_value == min(g, 1.0, pairs * ALPHA / PAIRS_ALPHA)


@pytest.mark.parametrize("share", [0.1, 0.99, 1.0, 2.0])
def test_a_case_fails_below_alpha_and_passes_from_it(monkeypatch, share):
    """The verdict of a case is its p-value against ALPHA: the G-test's p-value set to share x
    ALPHA (the pairs test's to 1), the case fails below ALPHA and passes at it and above."""
    from picospec.check import battery
    from picospec.check.cases import CASES, PROMPT
    from picospec.check.exact_law import ALPHA, Toy, law_vector

    case, n = CASES["chain"][1], 2_000
    probs = law_vector(Toy(case.laws()[0]), PROMPT, case.N)  # [V^N]
    drawn = np.random.default_rng(4).choice(len(probs), size=n, p=probs)  # [n]
    seqs = np.array(list(np.ndindex((case.V,) * case.N)))[drawn]  # [n, N]
    monkeypatch.setattr(battery, "run", lambda *args: seqs)
    monkeypatch.setattr(battery, "g_p_value", lambda counts, probs: share * ALPHA)
    monkeypatch.setattr(battery, "pairs_p_value", lambda seqs, probs, V: 1.0)
    result = battery.check_case(None, "chain", case, n, 0, tv=False)
    assert result.p_value == share * ALPHA
    assert result.verdict == ("pass" if share >= 1 else "FAIL")
