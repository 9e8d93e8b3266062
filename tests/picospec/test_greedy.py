"""Greedy draft-and-verify equals autoregressive greedy decoding token for token, for every K and
schedule."""
import numpy as np
import pytest

from picospec.autoregressive import autoregressive_sampling
from picospec.greedy import greedy_decoding
from tests.support.toy import random_toy


def greedy_reference(x, target, N):
    return autoregressive_sampling(x, target, N, np.random.default_rng(0), temperature=0)


@pytest.mark.parametrize("K", [1, 2, 4, 8])
@pytest.mark.parametrize("schedule", ["constant", "heuristic"])
@pytest.mark.parametrize("confidence", [None, 0.4])
def test_equals_autoregressive_greedy(K, schedule, confidence):
    for seed in range(6):
        target, draft = random_toy(6, seed, concentration=0.3), random_toy(6, seed + 50,
                                                                           concentration=0.3)
        x = [seed % 6, 1]
        out = greedy_decoding(x, draft, target, 15, K, schedule=schedule, confidence=confidence)
        assert out == greedy_reference(x, target, 15)


def test_identical_draft_accepts_everything():
    target = random_toy(5, 1)
    stats = []
    out = greedy_decoding([0], target, target, 10, 3, stats=stats)
    assert out == greedy_reference([0], target, 10)
    assert all(s["accepted"] == s["drafted"] for s in stats) and target.calls > 0
    # K + 1 per step, and only what is left at the end
    assert [len(s["tokens"]) for s in stats] == [4, 4, 2]


def test_heuristic_schedule_grows_and_shrinks():
    target = random_toy(5, 1)
    stats = []
    greedy_decoding([0], target, target, 30, 1, stats=stats, schedule="heuristic")
    assert [s["drafted"] for s in stats][:4] == [1, 3, 5, 7]  # +2 after each fully accepted draft
    stats = []
    bad_draft = random_toy(5, 99, concentration=0.05)
    greedy_decoding([0], bad_draft, target, 30, 5, stats=stats, schedule="heuristic")
    ks = [s["drafted"] for s in stats]
    # the last step may need 0 drafts
    assert min(ks[:-1]) >= 1 and any(b == a - 1 for a, b in zip(ks, ks[1:]))


def test_confidence_stops_drafting():
    target = random_toy(5, 1)
    stats = []
    # never confident: no drafts
    greedy_decoding([0], target, target, 10, 4, stats=stats, confidence=1.01)
    assert all(s["drafted"] == 0 for s in stats) and len(stats) == 10


def test_bad_schedule():
    with pytest.raises(ValueError, match="schedule"):
        greedy_decoding([0], random_toy(3, 0), random_toy(3, 0), 3, 2, schedule="fast")
