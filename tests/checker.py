"""The distribution checker: is a sampler's empirical law of whole sequences the target's exact law?

`exact_law` enumerates every continuation of N tokens of a toy model (V^N sequences) with its exact probability under
autoregressive sampling from the warped model. `check_law` runs a G-test (likelihood-ratio chi-square) of observed
sequence counts against it: cells whose expected count is below 5 are pooled into one, and a sampled sequence of
probability 0 fails at once.

Error rates. Every statistical test in the suite uses ALPHA = 1e-4 per check. Seeds are fixed (and hypothesis is
derandomised), so CI is deterministic: a check either always passes or always fails. Over a new seed, each correct
sampler's check fails with probability 1e-4; the suite runs < 40 checks, so the family-wise false-failure rate is
below 0.4% (Bonferroni).

Power (tests/test_checker_power.py measures it by simulation, drawing from perturbed laws of sequences of 5 tokens
over a 3-token vocabulary, 243 cells). With power >= 0.9 the check detects:

| samples per check | TV moved between two cells of p ~ 0.02 | TV moved out of a cell of p ~ 0.005 |
|---|---|---|
| SAMPLES = 30,000 (every check) | 0.006 | 0.004 |
| SAMPLES_HIGH = 120,000 (one check of SpS) | 0.0035 | 0.0025 |

At a tenth of these errors the same check cannot tell (power <= 0.2): the thresholds are measured, not bounds.
"""
import itertools
from collections import Counter

import numpy as np
from scipy.stats import chi2

from picospec.sampling import warp

ALPHA = 1e-4
SAMPLES = 30_000  # sequences per check
SAMPLES_HIGH = 120_000  # the one high-power check of speculative sampling


def exact_law(model, x, N, **sampling_options):
    """{sequence of N new tokens: probability} for autoregressive sampling from the warped model after prompt x."""
    law = {(): 1.0}
    for _ in range(N):
        grown = {}
        for seq, prob in law.items():
            q = warp(model(list(x) + list(seq))[-1], **sampling_options)  # [V]
            for token, qt in enumerate(q):
                if qt > 0:
                    grown[seq + (token,)] = prob * float(qt)
        law = grown
    return law


def g_test(counts, law, min_expected=5.0):
    """-> (G statistic, degrees of freedom, p-value); p = 0 when a sequence of probability 0 was sampled."""
    n = sum(counts.values())
    if any(seq not in law for seq in counts):
        return np.inf, 0, 0.0
    observed, expected, pooled_o, pooled_e = [], [], 0, 0.0
    for seq, prob in law.items():
        if n * prob >= min_expected:
            observed.append(counts.get(seq, 0))
            expected.append(n * prob)
        else:
            pooled_o += counts.get(seq, 0)
            pooled_e += n * prob
    if pooled_e > 0:
        observed.append(pooled_o)
        expected.append(pooled_e)
    o, e = np.array(observed, dtype=float), np.array(expected)
    with np.errstate(divide="ignore", invalid="ignore"):
        G = 2 * np.sum(np.where(o > 0, o * np.log(o / e), 0.0))
    df = len(o) - 1
    return G, df, float(chi2.sf(G, df)) if df > 0 else 1.0


def check_law(samples, law, alpha=ALPHA):
    """Raise AssertionError (with the worst cells) when the samples reject the law at level alpha; return p-value."""
    counts = Counter(tuple(s) for s in samples)
    G, df, p = g_test(counts, law)
    if p < alpha:
        n = len(samples)
        rows = sorted(set(law) | set(counts), key=lambda s: -abs(counts.get(s, 0) - n * law.get(s, 0)))[:8]
        table = "\n".join(f"  {s}: observed {counts.get(s, 0)}, expected {n * law.get(s, 0):.1f}" for s in rows)
        raise AssertionError(f"empirical law differs from the target (G = {G:.1f}, df = {df}, p = {p:.2e}):\n{table}")
    return p


def all_sequences(V, N):
    return list(itertools.product(range(V), repeat=N))
