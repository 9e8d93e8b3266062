"""Speculative sampling reproduces the target's law of whole sequences; broken variants are caught by the same check.

Toy models over a 3-token vocabulary; sequences of N = 5 new tokens (243 cells); SAMPLES runs per case. See
tests/checker.py for the G-test, the error rates and the measured power.
"""
import numpy as np
import pytest

import picospec.speculative as sps
from checker import SAMPLES, SAMPLES_HIGH, check_law, exact_law
from picospec.autoregressive import autoregressive_sampling
from picospec.sampling import sample, warp
from picospec.speculative import speculative_sampling
from toy import Toy, perturbed, random_toy

N, PROMPT = 5, [1]
TARGET = random_toy(3, seed=7)
DRAFT = perturbed(TARGET, 0.6, seed=8)  # acceptance about 0.7: both acceptance and rejection paths are exercised
OPTIONS = [dict(), dict(temperature=0.6), dict(temperature=1.4, top_k=2), dict(top_p=0.8),
           dict(temperature=1.2, top_k=2, top_p=0.7)]  # top-k, renormalised, then top-p


def run(sampler, n, seed, **options):
    rng = np.random.default_rng(seed)
    return [tuple(sampler(rng, **options)[len(PROMPT):]) for _ in range(n)]


def sps_runs(K, n=SAMPLES, seed=0, draft=DRAFT, target=TARGET, **options):
    return run(lambda rng, **o: speculative_sampling(PROMPT, draft, target, N, K, rng, **o), n, seed, **options)


@pytest.mark.parametrize("K", [1, 2, 4])
@pytest.mark.parametrize("options", OPTIONS, ids=["T=1", "T=0.6", "T=1.4,top_k=2", "top_p=0.8",
                                                  "T=1.2,top_k=2,top_p=0.7"])
def test_joint_law_equals_target(K, options):
    check_law(sps_runs(K, **options), exact_law(TARGET, PROMPT, N, **options))


def test_joint_law_high_power():
    check_law(sps_runs(3, n=SAMPLES_HIGH, seed=1), exact_law(TARGET, PROMPT, N))


@pytest.mark.parametrize("draft", [random_toy(3, seed=9, zeros=0.4),  # zeros in the draft's rows
                                   Toy(np.tile([1.0, 0.0, 0.0], (3, 3, 1))),  # one-hot draft
                                   TARGET])  # identical models: every draft accepted
def test_joint_law_edge_drafts(draft):
    check_law(sps_runs(2, draft=draft), exact_law(TARGET, PROMPT, N))


def test_disjoint_supports():
    target = Toy(np.tile([0.0, 0.3, 0.7], (3, 3, 1)))
    draft = Toy(np.tile([1.0, 0.0, 0.0], (3, 3, 1)))  # every draft is rejected
    check_law(sps_runs(2, draft=draft, target=target), exact_law(target, PROMPT, N))


def test_autoregressive_law_equals_target():
    runs = run(lambda rng, **o: autoregressive_sampling(PROMPT, TARGET, N, rng, **o), SAMPLES, 0, temperature=0.6)
    check_law(runs, exact_law(TARGET, PROMPT, N, temperature=0.6))


# The power of the check: the same test must reject each deliberately broken sampler.

def accept_everything(drafts, P, Q, rng):
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"


def resample_from_target(drafts, P, Q, rng):
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(Q[t], rng), "resample"  # bug: q instead of norm(max(0, q - p))
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"


def argmax_sample(p, rng):  # bug: draft by argmax while reporting the softmax probabilities
    return int(np.argmax(p))


def warp_draft_only(probs, **options):  # bug: the target's [k+1, V] rows go unwarped
    return probs if np.ndim(probs) == 2 else warp(probs, **options)


@pytest.mark.parametrize("patch, options", [("verify_chain", accept_everything), ("verify_chain", resample_from_target),
                                            ("sample", argmax_sample), ("warp", warp_draft_only)],
                         ids=["accept-everything", "resample-from-target", "argmax-draft", "warp-draft-only"])
def test_broken_samplers_are_rejected(monkeypatch, patch, options):
    name, broken = patch, options
    monkeypatch.setattr(sps, name, broken)
    opts = dict(temperature=0.6) if name == "warp" else {}
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(sps_runs(2, **opts), exact_law(TARGET, PROMPT, N, **opts))


def test_residual_matters_even_for_close_models(monkeypatch):
    """A subtler bug: resampling from q when the draft is close (acceptance ~0.95) is still caught."""
    monkeypatch.setattr(sps, "verify_chain", resample_from_target)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(sps_runs(2, draft=perturbed(TARGET, 0.15, seed=8)), exact_law(TARGET, PROMPT, N))


@pytest.mark.parametrize("K", [1, 2, 3, 4, 7])
def test_temperature_zero_equals_greedy(K):
    for seed in range(5):
        target, draft = random_toy(5, seed), random_toy(5, seed + 100)
        rng = np.random.default_rng(seed)
        greedy = autoregressive_sampling([2, 3], target, 12, rng, temperature=0)
        assert speculative_sampling([2, 3], draft, target, 12, K, rng, temperature=0) == greedy


def test_exactly_N_tokens_and_stats():
    stats = []
    out = speculative_sampling([0], DRAFT, TARGET, 11, 4, np.random.default_rng(3), stats=stats)
    assert len(out) == 12
    assert sum(len(s["tokens"]) for s in stats) == 11
    assert all(len(s["origins"]) == len(s["tokens"]) == s["accepted"] + 1 for s in stats)
    assert [t for s in stats for t in s["tokens"]] == out[1:]
    assert all(s["drafted"] <= 4 for s in stats) and stats[0]["drafted"] == 4


def test_seeded_runs_are_reproducible():
    a = speculative_sampling([0], DRAFT, TARGET, 20, 3, np.random.default_rng(42))
    b = speculative_sampling([0], DRAFT, TARGET, 20, 3, np.random.default_rng(42))
    assert a == b


@pytest.mark.parametrize("kwargs, message", [(dict(K=0), "K"), (dict(N=0), "N"), (dict(x=[]), "empty"),
                                             (dict(temperature=-1), "temperature"), (dict(top_p=0), "top_p"),
                                             (dict(top_k=0), "top_k")])
def test_bad_inputs(kwargs, message):
    args = dict(x=[0], draft_model=DRAFT, target_model=TARGET, N=3, K=2, rng=np.random.default_rng(0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        speculative_sampling(**args)


def test_mismatched_vocabularies():
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_sampling([0], random_toy(4, 0), TARGET, 3, 2, np.random.default_rng(0))
