"""The pairs test (picospec/check/exact_law.py: pairs_p_value), which each law case of the battery
runs beside its G-test: the first tokens of neighbours against the product of their exact law, on
the pairs (2j, 2j + 1) and (2j + 1, 2j + 2), the smaller p-value doubled (Bonferroni). On sequences
drawn straight from the law, independently, it rejects at level alpha in a share between alpha / 2
and alpha of runs, so it fails a right sampler at its level PAIRS_ALPHA in a share PAIRS_ALPHA of
runs at most; at the battery's 20,000 sequences, neighbours of which a tenth of the odd ones copy
the even one's first token are caught. The broken variant, one G-test on the overlapping pairs
(i, i + 1), which are not independent of each other, rejects more often than alpha.

Sizes: 2,000 draws of 2,000 sequences of the 27 sequences of a toy. Measured shares of p-values
below 0.01, 0.05 and 0.1: 0.0085, 0.0445 and 0.09; the broken variant's 0.026, 0.087 and 0.14
(binomial p-values 1e-9 to 1e-11). Copying a tenth of the first tokens: caught in 50 of 50 draws
of 20,000 sequences (a twentieth: 32 of 50).
"""
import numpy as np
from scipy import stats

from picospec.check.exact_law import (PAIRS_ALPHA, chi2_sf, g_statistic, law_vector,
                                      pairs_p_value, random_toy)

V, N, SEQUENCES, DRAWS, LEVEL = 3, 3, 2_000, 2_000, 1e-3  # LEVEL: of the tests themselves
LAW = law_vector(random_toy(V, seed=7), [1], N)  # [27]


def sequences(seed, copied=0.0, draws=DRAWS, n=SEQUENCES):
    """[draws, n, N] drawn from LAW; in a share `copied` of the pairs (2j, 2j + 1) the odd
    sequence's first token is its even neighbour's."""
    rng = np.random.default_rng(seed)
    drawn = rng.choice(len(LAW), size=(draws, n), p=LAW)  # [draws, n]
    seqs = np.stack(np.unravel_index(drawn, (V,) * N), -1)  # [draws, n, N]
    copy = rng.random((draws, n // 2)) < copied  # [draws, n // 2]
    seqs[:, 1::2, 0] = np.where(copy, seqs[:, 0::2, 0], seqs[:, 1::2, 0])
    return seqs


def overlapping_pairs(seqs, probs, V):
    """The broken variant: the n - 1 pairs (i, i + 1), each of the product law, but dependent."""
    first = probs.reshape(V, -1).sum(1)  # [V]
    pairs = seqs[:-1, 0] * V + seqs[1:, 0]  # [n - 1]
    G, df = g_statistic(np.bincount(pairs, minlength=V * V).astype(float),
                        np.outer(first, first).ravel())
    return chi2_sf(float(G), df)


def calibrated(test, seed=0):
    """Whether test's p-values on independent sequences fall below alpha in a share between
    alpha / 2 and alpha (one-sided binomial tests) at alpha = 0.01, 0.05 and 0.1."""
    pvalues = np.array([test(s, LAW, V) for s in sequences(seed)])  # [DRAWS]
    rates = [(int((pvalues < a).sum()), a) for a in (0.01, 0.05, 0.1)]  # [(count below, alpha)]
    return min([stats.binomtest(k, DRAWS, a, "greater").pvalue for k, a in rates]
               + [stats.binomtest(k, DRAWS, a / 2, "less").pvalue for k, a in rates]) > LEVEL


def test_independent_sequences_are_rejected_at_most_at_alpha_and_the_broken_variant_more():
    assert calibrated(pairs_p_value)
    assert not calibrated(overlapping_pairs)


def test_neighbours_sharing_a_tenth_of_their_first_tokens_are_caught():
    pvalues = [pairs_p_value(s, LAW, V) for s in sequences(1, 0.1, draws=20, n=20_000)]
    assert np.mean(np.array(pvalues) < PAIRS_ALPHA) >= 0.9
