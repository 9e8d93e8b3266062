"""Theory against hand-computed numbers and against simulation."""
import numpy as np
import pytest

from picospec.speculative import speculative_sampling
from picospec.theory import estimate_alpha, expected_speedup, expected_tokens_per_call, optimal_K
from toy import Toy


def test_hand_examples():
    assert expected_tokens_per_call(0.5, 2) == pytest.approx(1.75)
    assert expected_speedup(0.5, 2, 0.25) == pytest.approx(1.75 / 1.5)
    assert expected_tokens_per_call(1.0, 4) == 5 and expected_tokens_per_call(0.0, 4) == 1
    assert optimal_K(0.0, 0.1) == 1
    assert optimal_K(0.9, 0.01) > optimal_K(0.6, 0.01) > 1
    assert expected_speedup(0.8, optimal_K(0.8, 0.05),
                            0.05) >= max(expected_speedup(0.8, K, 0.05) for K in range(1, 33))


@pytest.mark.slow
def test_tokens_per_call_match_simulation_when_acceptance_is_iid():
    """Context-free draft and target: acceptance is i.i.d. with rate alpha, so the formula is exact
    in expectation."""
    q = np.array([0.5, 0.3, 0.2])
    p = np.array([0.2, 0.3, 0.5])
    target, draft = Toy(np.tile(q, (3, 3, 1))), Toy(np.tile(p, (3, 3, 1)))
    alpha = np.minimum(p, q).sum()
    assert estimate_alpha(draft, target, [0, 1, 2, 0, 1]) == pytest.approx(alpha)
    K = 3
    rng = np.random.default_rng(0)
    stats = []
    for _ in range(3000):
        speculative_sampling([0], draft, target, 40, K, rng, stats=stats)
    full = [s for s in stats if s["drafted"] == K]
    measured = np.mean([len(s["tokens"]) for s in full])
    assert measured == pytest.approx(expected_tokens_per_call(alpha, K), rel=0.01)
