"""Speculative sampling reproduces the target's law of whole sequences; broken variants are caught
by the same check.

Toy models over a 3-token vocabulary; sequences of N = 5 new tokens (243 cells). Each check draws
the sequences its broken variant needs: the smallest n at which that variant is rejected with
probability >= 0.999 (measured by `python -m tests.suite.power --only speculative`;
tests/__init__.py has the G-test and its error rates).
"""
import numpy as np
import pytest

import picospec.speculative as sps
from picospec.autoregressive import autoregressive_sampling
from picospec.sampling import sample, warp
from picospec.speculative import speculative_sampling

from tests.support.broken_verifiers import resample_from_target
from picospec.check.exact_law import check_law, exact_law
from tests.support.toy import Toy, perturbed, random_toy

N, PROMPT = 5, [1]
TARGET = random_toy(3, seed=7)
# acceptance about 0.7: both acceptance and rejection paths are exercised
DRAFT = perturbed(TARGET, 0.6, seed=8)
OPTIONS = [dict(), dict(temperature=0.6), dict(temperature=1.4, top_k=2), dict(top_p=0.8)]
FILTERS = dict(temperature=1.2, top_k=2, top_p=0.7)  # top-k, renormalised, then top-p
CLOSE = perturbed(TARGET, 0.15, seed=8)  # acceptance about 0.95: the residual is rarely used
ONE_HOT, SPREAD = Toy(np.tile([1.0, 0.0, 0.0], (3, 3, 1))), Toy(np.tile([0.0, 0.3, 0.7], (3, 3, 1)))
# zeros in rows, one-hot, identical models
EDGE_DRAFTS = [random_toy(3, seed=9, zeros=0.4), ONE_HOT, TARGET]

# Sequences per check, each sized by `python -m tests.suite.power --only speculative`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
JOINT = 2_300  # resample-from-target at each K and warping: power 0.9990
EDGE = 510  # resample-from-target; argmax-draft for the identical draft (never rejected): 0.9992
DISJOINT = 100  # accept-everything (keeps a draft the target forbids): 1.0000
TOGETHER = 100  # warp-draft-only with both filters, at each K: 1.0000
HIGH = 26_000  # resample-from-target with the close draft: 0.9994
BROKEN = {"accept-everything": 110, "resample-from-target": 1_300, "argmax-draft": 100,
          "warp-draft-only": 170}  # each itself: 0.9996, 0.9995, 1.0000, 0.9996


def run(sampler, n, seed, **options):
    rng = np.random.default_rng(seed)
    return [tuple(sampler(rng, **options)[len(PROMPT):]) for _ in range(n)]


def sps_runs(K, n, seed=0, draft=DRAFT, target=TARGET, **options):
    return run(lambda rng, **o: speculative_sampling(PROMPT, draft, target, N, K, rng, **o), n,
               seed, **options)


@pytest.mark.parametrize("K", [1, 2, 4])
@pytest.mark.parametrize("options", OPTIONS, ids=["T=1", "T=0.6", "T=1.4,top_k=2", "top_p=0.8"])
def test_joint_law_equals_target(K, options):
    check_law(sps_runs(K, JOINT, **options), exact_law(TARGET, PROMPT, N, **options))


@pytest.mark.parametrize("K", [1, 2, 4])
def test_joint_law_with_top_k_then_top_p(K):
    """Both filters at once (top-k, renormalised, then top-p, as transformers and vLLM apply them):
    the target's law under that warp."""
    check_law(sps_runs(K, TOGETHER, **FILTERS), exact_law(TARGET, PROMPT, N, **FILTERS))


@pytest.mark.parametrize("K", [1, 2, 4])
def test_both_filters_on_the_draft_only_are_rejected(monkeypatch, K):
    monkeypatch.setattr(sps, "warp", warp_draft_only)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(sps_runs(K, TOGETHER, **FILTERS), exact_law(TARGET, PROMPT, N, **FILTERS))


def test_joint_law_high_power():
    """The close draft (acceptance about 0.95), where resampling from q instead of the residual
    changes little."""
    check_law(sps_runs(2, HIGH, seed=1, draft=CLOSE), exact_law(TARGET, PROMPT, N))


@pytest.mark.parametrize("draft", EDGE_DRAFTS, ids=["zeros", "one-hot", "identical"])
def test_joint_law_edge_drafts(draft):
    check_law(sps_runs(2, EDGE, draft=draft), exact_law(TARGET, PROMPT, N))


def test_disjoint_supports():
    # all rejected
    check_law(sps_runs(2, DISJOINT, draft=ONE_HOT, target=SPREAD), exact_law(SPREAD, PROMPT, N))


# The power of the check: the same test must reject each deliberately broken sampler.

def accept_everything(drafts, P, Q, rng):
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"


def argmax_sample(p, rng):  # bug: draft by argmax while reporting the softmax probabilities
    return int(np.argmax(p))


def warp_draft_only(probs, **options):  # bug: the target's [k+1, V] rows go unwarped
    return probs if np.ndim(probs) == 2 else warp(probs, **options)


@pytest.mark.parametrize("name, broken",
                         [("verify_chain", accept_everything),
                          ("verify_chain", resample_from_target),
                          ("sample", argmax_sample), ("warp", warp_draft_only)],
                         ids=["accept-everything", "resample-from-target", "argmax-draft",
                              "warp-draft-only"])
def test_broken_samplers_are_rejected(request, monkeypatch, name, broken):
    """Each broken piece planted in speculative sampling's module fails the exact-law check."""
    monkeypatch.setattr(sps, name, broken)
    opts = dict(temperature=0.6) if name == "warp" else {}
    n = BROKEN[request.node.callspec.id]
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(sps_runs(2, n, **opts), exact_law(TARGET, PROMPT, N, **opts))


def test_residual_matters_even_for_close_models(monkeypatch):
    """A subtler bug: resampling from q when the draft is close (acceptance ~0.95) is still
    caught."""
    monkeypatch.setattr(sps, "verify_chain", resample_from_target)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(sps_runs(2, HIGH, draft=CLOSE), exact_law(TARGET, PROMPT, N))


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


@pytest.mark.parametrize("kwargs, message",
                         [(dict(K=0), "K"), (dict(N=0), "N"), (dict(x=[]), "empty"),
                                             (dict(temperature=-1), "temperature"),
                                             (dict(top_p=0), "top_p"), (dict(top_k=0), "top_k")])
def test_bad_inputs(kwargs, message):
    args = dict(x=[0], draft_model=DRAFT, target_model=TARGET, N=3, K=2,
                rng=np.random.default_rng(0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        speculative_sampling(**args)


def test_mismatched_vocabularies():
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_sampling([0], random_toy(4, 0), TARGET, 3, 2, np.random.default_rng(0))
