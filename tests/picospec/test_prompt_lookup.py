"""Prompt lookup decoding: hand-checked candidate search, greedy equality, and the target's exact
law when sampling."""
import numpy as np
import pytest

import picospec.prompt_lookup as pl
from picospec.autoregressive import autoregressive_sampling
from picospec.prompt_lookup import find_candidates, prompt_lookup_decoding
from picospec.sampling import sample

from picospec.check.exact_law import check_law, exact_law
from tests.support.toy import random_toy


@pytest.mark.parametrize("x, expected", [
    ([1, 2, 3, 4, 1, 2, 3], [4, 1]),  # match found (3-gram)
    # several 2-gram matches: the first wins; no 3-gram match
    ([5, 1, 2, 9, 1, 2, 7, 1, 2], [9, 1]),
    ([1, 2, 3], []),  # no match
    ([7, 8, 7], [8, 7]),  # match whose continuation runs to the very end
    ([4, 4], [4]),  # the smallest case: 1-gram at 0, continuation is the last token
    ([9], []),
    ([1, 1, 1], [1]),  # the match overlaps the trailing 2-gram; the copy is cut short
])
def test_candidate_search_by_hand(x, expected):
    assert find_candidates(x, max_ngram_size=3, num_pred_tokens=2) == expected


def test_longest_ngram_preferred():
    # 1-gram [1] first at 0 -> [9, ...], but 2-gram [2, 1] at 3 -> [7, 6]
    x = [1, 9, 5, 2, 1, 7, 6, 2, 1]
    assert find_candidates(x, 3, 2) == [7, 6]
    assert find_candidates(x, 1, 2) == [9, 5]


@pytest.mark.parametrize("max_ngram_size, num_pred_tokens", [(3, 10), (2, 3), (1, 1)])
def test_temperature_zero_equals_greedy(max_ngram_size, num_pred_tokens):
    stats = []
    for seed in range(5):
        # peaked: greedy text repeats, so matches are found
        target = random_toy(4, seed, concentration=0.2)
        x = [1, 2, 3, 1, 2]
        out = prompt_lookup_decoding(x, target, 30, np.random.default_rng(0), max_ngram_size,
                                     num_pred_tokens, stats=stats, temperature=0)
        assert out == autoregressive_sampling(x, target, 30, np.random.default_rng(0),
                                              temperature=0)
    assert sum(s["accepted"] for s in stats) > 0  # drafts were found and some accepted


PROMPT, N = [0, 1, 2, 0, 1], 5
TARGET = random_toy(3, seed=7)


# Sequences per check, each sized by `python -m tests.suite.power --only prompt_lookup`: the broken
# variant named, planted in the same case, is rejected with the power given (at ALPHA; the
# least over the test's cases, measured on 20,000 fresh draws of n sequences).
JOINT = 100  # accepting-every-match in each case: power 1.0000
BROKEN = 100  # itself: 1.0000


def runs(n, seed=0, **options):
    rng = np.random.default_rng(seed)
    return [tuple(prompt_lookup_decoding(PROMPT, TARGET, N, rng, 2, 3, **options)[len(PROMPT):])
            for _ in range(n)]


@pytest.mark.parametrize("options", [{}, dict(temperature=0.6, top_k=2)])
def test_joint_law_equals_target(options):
    check_law(runs(JOINT, **options), exact_law(TARGET, PROMPT, N, **options))


# broken: every proposed token kept (copying without verification)
def accept_every_match(drafts, P, Q, rng):
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"


def test_accepting_every_match_is_rejected(monkeypatch):
    """The broken variant accept_every_match is caught by the same check."""
    monkeypatch.setattr(pl, "verify_chain", accept_every_match)
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(runs(BROKEN), exact_law(TARGET, PROMPT, N))
