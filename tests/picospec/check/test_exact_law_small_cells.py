"""The checker's false-rejection rate where many cells are expected only 5 to 20 times
(picospec/check/exact_law.py): the battery's laws of 243 and 256 sequences at 2,000 and 20,000
samples, and the suite's smaller sample sizes, hold dozens of such cells. There G's mean is above
its degrees of freedom by about a sixth of the mean of 1/expected, and the plain G-test rejects
counts drawn from the law itself too often: measured over 200,000 draws, 1.3 to 1.5 times alpha at
0.01 and 1.4 to 1.7 times at 1e-4. G divided by Williams' (1976) 1 + (sum 1/p - 1) / (6 n (C - 1))
brings the rates to 1.0 to 1.15 times alpha (here 0.0109 and 0.0110 at alpha = 0.01, undivided
0.0136 and 0.0138). The broken variant, the undivided G, fails the same
test. (Every cell just above the pooling threshold, a flat law of 243 cells expected 5.2 times
each, is the worst case left: 1.75 times alpha at 1e-4 divided, 8.7 times undivided.)

Sizes: 20,000 draws per law; at alpha = 0.01 the undivided G is 5 standard errors high."""
import numpy as np
import pytest

import picospec.check.exact_law as exact_law
from picospec.check.cases import CASES, PROMPT
from picospec.check.exact_law import Toy, chi2_isf, law_vector, random_toy

DRAWS, LEVEL = 20_000, 1e-3  # LEVEL: of the binomial tests below
# name -> (law, samples per check): many cells expected 5 to 20 times
LAWS = {"5 tokens over 3 at 2,000": (law_vector(random_toy(3, seed=7), [1], 5), 2_000),
        "draft = target but 2 tokens at 20,000":
            (law_vector(Toy(CASES["chain"][10].laws()[0]), PROMPT, 4), 20_000)}


def rejected(probs, n, alpha, seed=0):
    """How many of DRAWS sets of n counts drawn from the law itself the checker rejects at alpha."""
    counts = np.random.default_rng(seed).multinomial(n, probs, size=DRAWS).astype(float)
    G, df = exact_law.g_statistic(counts, probs)
    return int((G > chi2_isf(alpha, df)).sum())


def at_alpha(probs, n, alpha=0.01):
    """Whether the rejection rate at alpha is alpha's (binomial test at LEVEL)."""
    stats = pytest.importorskip("scipy.stats")
    return stats.binomtest(rejected(probs, n, alpha), DRAWS, alpha).pvalue > LEVEL


@pytest.mark.parametrize("name", list(LAWS))
def test_a_right_sampler_is_rejected_at_alpha_among_small_cells(name):
    assert at_alpha(*LAWS[name])


@pytest.mark.parametrize("name", list(LAWS))
def test_the_undivided_g_rejects_too_often(monkeypatch, name):
    monkeypatch.setattr(exact_law, "williams", lambda expected: 1.0)
    assert not at_alpha(*LAWS[name])


def test_the_divisor_by_hand():
    """Two cells expected 2 and 8 of n = 10: 1 + (10/2 + 10/8 - 1) / (6 * 10 * 1) = 1.0875; one
    cell: no divisor."""
    assert exact_law.williams(np.array([2.0, 8.0])) == pytest.approx(1.0875, rel=1e-12)
    assert exact_law.williams(np.array([10.0])) == 1.0
