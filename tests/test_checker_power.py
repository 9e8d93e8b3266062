"""How small an error the distribution checker catches: measured by simulation, not assumed.

Samples are drawn straight from a perturbed exact law (no sampler involved), SAMPLES sequences per check as in the
suite, and the share of draws the G-test rejects at ALPHA is the power. POWER records the total-variation errors the
module docstring of tests/checker.py states, and the test asserts power >= 0.9 at each, and that at a TV ten times
smaller the checker is (correctly) unable to tell: so the stated threshold is the measured one, not a bound.
"""
import numpy as np
import pytest

from checker import ALPHA, SAMPLES, SAMPLES_HIGH, exact_law, g_test
from toy import random_toy

REPEATS = 100
# (how the law is perturbed, samples per check) -> smallest TV detected with power >= 0.9 (measured: 0.92 .. 1.0)
POWER = {("between two large cells", SAMPLES): 0.006, ("out of a rare cell", SAMPLES): 0.004,
         ("between two large cells", SAMPLES_HIGH): 0.0035, ("out of a rare cell", SAMPLES_HIGH): 0.0025}


def law_for_power():
    return exact_law(random_toy(3, seed=7), [1], 5)


def perturb(law, how, tv):
    seqs = list(law)
    probs = np.array([law[s] for s in seqs])
    if how == "between two large cells":  # the two sequences closest to probability 0.02
        i, j = np.argsort(np.abs(probs - 0.02))[:2]
    else:  # from the sequence closest to 0.005 to the largest one
        i, j = int(np.argmin(np.abs(probs - 0.005))), int(np.argmax(probs))
    moved = probs.copy()
    moved[i] -= tv
    moved[j] += tv
    assert moved.min() >= 0
    return seqs, moved


def power(law, how, tv, n, seed=0):
    seqs, moved = perturb(law, how, tv)
    rng = np.random.default_rng(seed)
    rejected = 0
    for counts in rng.multinomial(n, moved, size=REPEATS):
        _, _, p = g_test({s: int(c) for s, c in zip(seqs, counts) if c}, law)
        rejected += p < ALPHA
    return rejected / REPEATS


@pytest.mark.parametrize("how, n", list(POWER))
def test_power_at_stated_error(how, n):
    assert power(law_for_power(), how, POWER[how, n], n) >= 0.9


@pytest.mark.parametrize("how, n", list(POWER))
def test_tenfold_smaller_error_goes_unseen(how, n):
    """Sanity of the simulation itself: a 10x smaller error is below what the samples can resolve."""
    assert power(law_for_power(), how, POWER[how, n] / 10, n) <= 0.2


def test_exact_law_is_a_distribution():
    law = law_for_power()
    assert len(law) == 3**5 and abs(sum(law.values()) - 1) < 1e-12
