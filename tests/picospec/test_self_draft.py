"""Self-speculative decoding (picospec/self_draft.py; layer_skip: Draft & Verify, early_exit:
LayerSkip): the loop keeps the target's exact law with its adaptive early stop, a broken variant is
rejected by the same check, temperature 0 equals greedy decoding, and the adaptive threshold by
hand. The engine (gpt2/self_draft.py) is tested in tests/gpt2/test_self_draft.py.
"""

import numpy as np
import pytest

import picospec.self_draft as sd
from picospec.autoregressive import autoregressive_sampling
from picospec.sampling import sample, warp
from picospec.self_draft import adapt_threshold, self_speculative_decoding

from tests.support.broken_verifiers import resample_from_target  # the bug: q, not the residual
from picospec.check.exact_law import check_law, exact_law
from tests.support.methods import ADAPTIVE
from tests.support.toy import perturbed, random_toy

N, PROMPT = 5, [1]
TARGET = random_toy(3, seed=7)
# the target's "skipped" version: another toy law, acceptance about 0.7
SKIPPED = perturbed(TARGET, 0.6, seed=8)
OPTIONS = [dict(), dict(temperature=0.6), dict(temperature=1.4, top_k=2, top_p=0.9)]
# a draft that always stops after one token (one that never stops is SpS)
ONE_TOKEN = dict(threshold=1.01)

# Sequences per check, each sized by `python -m tests.suite.power --only self_draft`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
JOINT = 5_500  # verified-against-the-unwarped-draft-law (resample-from-target at T = 1, where the
#                two laws agree): power 0.9993
ONE = 2_900  # resample-from-target: 0.9993
UNWARPED = 5_500  # itself: 0.9993
RESAMPLE = 3_000  # itself: 0.9994


def runs(n, seed=0, draft=SKIPPED, K=3, stop=ADAPTIVE, **options):
    rng = np.random.default_rng(seed)
    return [tuple(self_speculative_decoding(PROMPT, draft, TARGET, N, K, rng, **stop,
                                            **options)[len(PROMPT):])
            for _ in range(n)]


@pytest.mark.parametrize("options", OPTIONS, ids=["T=1", "T=0.6", "T=1.4,top_k=2,top_p=0.9"])
def test_joint_law_equals_target_with_adaptive_stop(options):
    check_law(runs(JOINT, **options), exact_law(TARGET, PROMPT, N, **options))


def test_a_draft_that_always_stops_after_one_token():
    check_law(runs(ONE, seed=1, stop=ONE_TOKEN), exact_law(TARGET, PROMPT, N))


def raw_law_draft_token(draft_model, x, rng, **sampling_options):
    """Bug: verify against the draft's unwarped law (the one its confidence reads), not the warped
    law it sampled."""
    p_raw = draft_model(x)[-1]
    token = sample(warp(p_raw, **sampling_options), rng)
    return token, p_raw, float(p_raw[token])


def test_verifying_against_the_unwarped_draft_law_is_rejected(monkeypatch):
    monkeypatch.setattr(sd, "draft_token", raw_law_draft_token)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(runs(UNWARPED, temperature=0.6), exact_law(TARGET, PROMPT, N, temperature=0.6))


def test_resampling_from_the_target_is_rejected(monkeypatch):
    monkeypatch.setattr(sd, "verify_chain", resample_from_target)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(runs(RESAMPLE), exact_law(TARGET, PROMPT, N))


@pytest.mark.parametrize("K", [1, 2, 4, 7])
def test_temperature_zero_equals_greedy(K):
    for seed in range(4):
        target, draft = random_toy(5, seed), random_toy(5, seed + 100)
        greedy = autoregressive_sampling([2, 3], target, 12, np.random.default_rng(0),
                                         temperature=0)
        out = self_speculative_decoding([2, 3], draft, target, 12, K, np.random.default_rng(0),
                                        temperature=0, **ADAPTIVE)
        assert out == greedy


def test_adapt_threshold_worked_example():
    gamma, AR = adapt_threshold(0.6, 0.9, 1, 4, alpha=0.9, epsilon=0.01, beta1=0.5, beta2=0.9)
    assert AR == pytest.approx(0.575) and gamma == pytest.approx(0.601)
    gamma, AR = adapt_threshold(0.6, 1.0, 4, 4, alpha=0.9, epsilon=0.01, beta1=0.5, beta2=0.9)
    assert gamma == pytest.approx(0.599)  # all kept: AR above alpha, the threshold comes down


def test_steps_draft_fewer_tokens_when_unsure():
    stats = []
    self_speculative_decoding([0], SKIPPED, TARGET, 30, 4, np.random.default_rng(2), threshold=0.99,
                              stats=stats)
    # V = 3: never that sure
    assert stats[0]["origins"] == ["target"] and all(s["drafted"] == 1 for s in stats[1:])
    assert sum(len(s["tokens"]) for s in stats) == 30
