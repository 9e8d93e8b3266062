"""Cascade drafting keeps the target's exact law, vertical, horizontal and both, at temperature 1
and warped; a cascade that verifies the outer step against the smallest drafter's law is rejected by
the same check. The walltime model of cascades reduces to Leviathan's and its expected step counts
match a simulation.
"""
import numpy as np
import pytest

import picospec.cascade as cs
from picospec.autoregressive import autoregressive_sampling
from picospec.cascade import cascade_decoding
from picospec.sampling import warp
from picospec.theory import (cascade_speedup, expected_speedup, expected_tokens_chain,
                             expected_tokens_per_call, steps_to_draft)

from tests.support.broken_verifiers import resample_from_target  # the bug: q, not the residual
from picospec.check.exact_law import check_law, exact_law
from tests.support.toy import perturbed, random_toy

N, PROMPT = 5, [1]
TARGET = random_toy(3, seed=7)
DRAFT = perturbed(TARGET, 0.5, seed=8)  # the larger drafter: close to the target
DRAFT2 = perturbed(TARGET, 0.9, seed=9)  # the smaller one: further away
CASCADES = {"vertical": dict(K=3, K_inner=2, K_tail=0),
            "horizontal": dict(K=2, K_inner=0, K_tail=2), "both": dict(K=3, K_inner=2, K_tail=2)}
CASES = {"vertical": dict(), "horizontal": dict(temperature=0.7, top_k=2),
         "both": dict(temperature=1.3, top_p=0.9)}

# Sequences per check, each sized by `python -m tests.suite.power --only cascade`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
JOINT = 760  # verified-against-the-smallest-drafter's-law (vertical, both), resample-from-target
#              (horizontal, where no drafter reviews another): power 0.9989
BROKEN = 620  # itself: 0.9990
RESAMPLE = 760  # itself, in the horizontal cascade: 0.9989


def runs(cascade, n, seed=0, **options):
    rng = np.random.default_rng(seed)
    return [tuple(cascade_decoding(PROMPT, TARGET, DRAFT, DRAFT2, N, rng=rng, **cascade,
                                   **options)[len(PROMPT):])
            for _ in range(n)]


@pytest.mark.parametrize("name, options", CASES.items(),
                         ids=[f"{k}-{v or 'T=1'}" for k, v in CASES.items()])
def test_joint_law_equals_target(name, options):
    """Each cascade once: at temperature 1, and warped (temperature, top-k, top-p)."""
    check_law(runs(CASCADES[name], JOINT, **options), exact_law(TARGET, PROMPT, N, **options))


def review_step_with_the_smallest_law(x, models, k_matrix, limit, rng, sampling_options):
    """Bug: a reviewing drafter hands up, as the law of each token it passes on, what the smallest
    drafter would have proposed there, not its own law (the law the token actually follows)."""
    new, _, origins, drafted = REVIEW_STEP(x, models, k_matrix, limit, rng, sampling_options)
    laws = [warp(models[-1](x + new[:t])[-1], **sampling_options) for t in range(len(new))]
    return new, laws, origins, drafted


REVIEW_STEP = cs.review_step


def test_verifying_against_the_smallest_drafters_law_is_rejected(monkeypatch):
    monkeypatch.setattr(cs, "review_step", review_step_with_the_smallest_law)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(runs(CASCADES["vertical"], BROKEN), exact_law(TARGET, PROMPT, N))


def test_resampling_from_the_target_is_rejected(monkeypatch):
    monkeypatch.setattr(cs, "verify_chain", resample_from_target)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(runs(CASCADES["horizontal"], RESAMPLE, **CASES["horizontal"]),
                  exact_law(TARGET, PROMPT, N, **CASES["horizontal"]))


@pytest.mark.parametrize("name", CASCADES)
def test_temperature_zero_equals_greedy(name):
    for seed in range(4):
        target, draft, draft2 = random_toy(5, seed), random_toy(5, seed + 100), random_toy(5,
                                                                                           seed
                                                                                           + 200)
        greedy = autoregressive_sampling([2, 3], target, 14, np.random.default_rng(0),
                                         temperature=0)
        out = cascade_decoding([2, 3], target, draft, draft2, 14, rng=np.random.default_rng(0),
                               temperature=0, **CASCADES[name])
        assert out == greedy


def test_one_target_call_per_step_and_exactly_N_tokens():
    stats = []
    out = cascade_decoding([0], TARGET, DRAFT, DRAFT2, 23, 3, np.random.default_rng(3), K_inner=2,
                           K_tail=2, stats=stats)
    assert len(out) == 24 and [t for s in stats for t in s["tokens"]] == out[1:]
    assert all(s["drafted"] <= 5 and s["calls"] == 1 for s in stats) and stats[0]["drafted"] == 5


@pytest.mark.parametrize("K, inner, same", [(4, 8, 3), (1, 3, 0)])
def test_K_inner_past_K_minus_1_runs_as_K_minus_1(K, inner, same):
    """A --draft review call checks at most K - 1 of --draft2's tokens: a larger K_inner draws the
    same tokens with the same calls (main.py's note on --K_inner says so)."""
    def run(K_inner):
        stats, calls = [], []

        def counted(x, M=1):
            calls.append(M)
            return DRAFT2(x, M)
        out = cascade_decoding([0], TARGET, DRAFT, counted, 12, K, np.random.default_rng(5),
                               K_inner=K_inner, K_tail=0, stats=stats)
        return out, stats, calls
    assert run(inner) == run(same)


# ---- the walltime model with two drafters ----

def test_cascade_model_reduces_to_leviathan():
    assert cascade_speedup(0.7, 0.0, 4, 0, 0.2, 0.0,
                           1.0) == pytest.approx(expected_speedup(0.7, 4, 0.2))
    assert expected_tokens_chain([0.6] * 5) == pytest.approx(expected_tokens_per_call(0.6, 5))
    assert expected_tokens_chain([0.5, 0.5, 0.2]) == pytest.approx(1 + 0.5 + 0.25 + 0.05)


@pytest.mark.parametrize("m, alpha, k", [(4, 0.6, 2), (5, 0.3, 3), (1, 0.9, 4)])
def test_steps_to_draft_matches_a_simulation(m, alpha, k):
    rng, steps, drafts = np.random.default_rng(0), 0, 0
    for _ in range(20000):
        left = m
        while left > 0:
            kk = min(k, left - 1)
            n = 0
            while n < kk and rng.random() < alpha:
                n += 1
            steps, drafts, left = steps + 1, drafts + kk, left - n - 1
    expected = steps_to_draft(m, alpha, k)
    assert steps / 20000 == pytest.approx(expected[0], rel=0.02)
    assert drafts / 20000 == pytest.approx(expected[1], rel=0.02)

