"""The suite, as packages that mirror the tree: tests/picospec/test_eagle.py tests picospec/eagle.py
and imports as tests.picospec.test_eagle, beside tests.gpt2.test_eagle; what several test modules
share lives in tests/support/ (tests.support.*), and no test module imports another.

The sampled law tests check with picospec.check.exact_law, the public checker.

Error rates. Every statistical test in the suite uses ALPHA = 1e-4 per check. Seeds are fixed (and
hypothesis is derandomised), so CI is deterministic: a check either always passes or always fails.
Over a new seed, each correct sampler's check fails with probability about 1e-4 (the G statistic
with Williams' correction: 0.6 to 1.3 times it, measured on the checker's laws), so the family-wise
false-failure rate of the suite is about 1e-4 times its number of checks, at most (Bonferroni).

Sample sizes. Each test draws the sequences its deliberately broken variant needs: the smallest n at
which that variant, planted in the same case, is rejected with probability >= 0.999 at ALPHA. The n,
the variant and the measured power stand beside each test; `python -m tests.suite.power` measures
them afresh (and says how).

Power of the check itself (tests/picospec/check/test_exact_law_power.py measures it by simulation;
`python -m picospec.check --power` prints it) on the law of sequences of 5 tokens over a 3-token
vocabulary (243 cells). With power >= 0.9 the check detects:

| sequences | TV, two cells of p ~ 0.02 | TV, out of a cell of p ~ 0.005 | TV spread over the law |
|---|---|---|---|
| SAMPLES = 30,000 | 0.006 | 0.004 | 0.033 |
| SAMPLES_HIGH = 120,000 | 0.0035 | 0.0025 | 0.017 |

"Spread" moves mass in proportion to the law from one half of it to the other: the least detectable
error of a given TV outside the rare sequences the G-test pools into one cell (an error among those
shows only through their total; the checker's tv90 adds their mass, docs/checker.md). At a tenth of
these errors the same check cannot tell (power <= 0.2): the thresholds are measured, not bounds.
"""
