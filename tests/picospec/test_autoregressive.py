"""Autoregressive sampling, the baseline every method is held to, follows the target's law of whole
sequences at a temperature; a sampler that ignores the temperature is caught by the same check.

Toy models over a 3-token vocabulary; sequences of N = 5 new tokens (243 cells). The check draws the
sequences its broken variant needs (measured by `python -m tests.suite.power --only autoregressive`;
tests/__init__.py has the G-test and its error rates).
"""
import numpy as np
import pytest

import picospec.autoregressive as ars
from picospec.autoregressive import autoregressive_sampling

from picospec.check.exact_law import check_law, exact_law
from tests.support.toy import random_toy

N, PROMPT = 5, [1]
TARGET = random_toy(3, seed=7)

# Sequences per check, sized by `python -m tests.suite.power --only autoregressive`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA, measured on
# 20,000 fresh draws of n sequences).
AUTOREGRESSIVE = 170  # autoregressive-unwarped: 0.9993


def run(sampler, n, seed, **options):
    rng = np.random.default_rng(seed)
    return [tuple(sampler(rng, **options)[len(PROMPT):]) for _ in range(n)]


def ars_runs(n, seed=0, **options):
    return run(lambda rng, **o: autoregressive_sampling(PROMPT, TARGET, N, rng, **o), n, seed,
               **options)


def test_autoregressive_law_equals_target():
    check_law(ars_runs(AUTOREGRESSIVE, temperature=0.6),
              exact_law(TARGET, PROMPT, N, temperature=0.6))


# bug: the baseline samples the raw target law, whatever the temperature
def unwarped(probs, **options):
    return probs


def test_an_unwarped_autoregressive_sampler_is_rejected(monkeypatch):
    monkeypatch.setattr(ars, "warp", unwarped)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(ars_runs(AUTOREGRESSIVE, temperature=0.6),
                  exact_law(TARGET, PROMPT, N, temperature=0.6))
