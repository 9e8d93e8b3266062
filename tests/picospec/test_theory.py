"""Theory against hand-computed numbers and against simulation: Leviathan's formulas, the acceptance
of each position and the tokens a step expects on a 3-token toy worked by hand, and the estimate of
the built-in pair's acceptance against its sampled acceptance."""
import numpy as np
import pytest

from picospec.speculative import speculative_sampling
from picospec.theory import (estimate_alpha, expected_speedup, expected_tokens_chain,
                             expected_tokens_per_call, optimal_K)
from picospec.sequoia import acceptance_vector
from tests.support.toy import Toy


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


# A 3-token toy whose laws depend on the last token only (rows: after 0, 1, 2), worked by hand:
# after 0: q = [.6, .3, .1], p = [.5, .1, .4]: alpha = .5 + .1 + .1 = .7; top-2 drafts [0, 2], the
#          target's choice 0: the first accepted
# after 1: q = [.7, .1, .2], p = [.25, .6, .15]: alpha = .25 + .1 + .15 = .5; drafts [1, 0], choice
#          0: the second accepted
# after 2: q = p = [.2, .5, .3]: alpha = 1; drafts [1, 2], choice 1: the first accepted
Q_HAND = np.array([[.6, .3, .1], [.7, .1, .2], [.2, .5, .3]])
P_HAND = np.array([[.5, .1, .4], [.25, .6, .15], [.2, .5, .3]])
ALPHA_HAND = [0.7, 0.5, 1.0]


def last_token_toy(laws):
    return Toy(np.tile(laws, (3, 1, 1)))  # [second-to-last, last, next]


HAND_TARGET, HAND_DRAFT = last_token_toy(Q_HAND), last_token_toy(P_HAND)


@pytest.mark.parametrize("last", [0, 1, 2])
def test_acceptance_at_one_position_by_hand(last):
    """One position, after each last token: the hand values above (whatever token follows)."""
    for then in range(3):
        assert estimate_alpha(HAND_DRAFT, HAND_TARGET, [last, then]) == pytest.approx(
            ALPHA_HAND[last])


def test_acceptance_over_positions_by_hand():
    """x = [0, 1, 2, 2, 0, 1]: positions after 0, 1, 2, 2, 0 -> (.7 + .5 + 1 + 1 + .7) / 5 = .78;
    at temperature 1/2 the laws are squared and renormalised: after 0, q = [36, 9, 1] / 46 and p =
    [25, 1, 16] / 42 give 25/42 + 1/42 + 1/46."""
    x = [0, 1, 2, 2, 0, 1]
    assert estimate_alpha(HAND_DRAFT, HAND_TARGET, x) == pytest.approx(0.78)
    for n in range(2, len(x) + 1):  # every prefix: the mean of its positions' hand values
        assert estimate_alpha(HAND_DRAFT, HAND_TARGET, x[:n]) == pytest.approx(
            np.mean([ALPHA_HAND[t] for t in x[:n - 1]]))
    warm = estimate_alpha(HAND_DRAFT, HAND_TARGET, [0, 2], temperature=0.5)
    assert warm == pytest.approx(25 / 42 + 1 / 42 + 1 / 46)


def test_acceptance_vector_at_temperature_zero_by_hand():
    """K = 2 greedy children after every prefix of [0, 1, 2, 2, 0] (last tokens 0, 1, 2, 2, 0):
    the first child accepted 4 times, the second once -> a = [4/5, 1/5]."""
    a = acceptance_vector(HAND_DRAFT, HAND_TARGET, [[0, 1, 2, 2, 0]], 1, 2,
                          np.random.default_rng(0), temperature=0)
    assert a.tolist() == pytest.approx([4 / 5, 1 / 5])


def test_expected_tokens_of_a_step_by_hand_and_sampled():
    """K = 2 drafts after token 0: the first is accepted with probability .7, as token 0, 1 or 2
    with probability min(p, q) = .5, .1, .1; the second then with the alpha after that token: .5 x
    .7 + .1 x .5 + .1 x 1 = .5. E = 1 + .7 + .5 = 2.2 tokens, the chain formula with alphas .7 and
    .5 / .7; 4,000 sampled steps agree within 4.5 standard errors."""
    assert expected_tokens_chain([0.7, 0.5 / 0.7]) == pytest.approx(2.2)
    rng, tokens = np.random.default_rng(0), []
    for _ in range(4000):
        stats = []
        speculative_sampling([1, 0], HAND_DRAFT, HAND_TARGET, 3, 2, rng, stats=stats)
        tokens.append(len(stats[0]["tokens"]))
    assert abs(np.mean(tokens) - 2.2) < 4.5 * np.std(tokens) / np.sqrt(len(tokens))


def test_estimated_acceptance_of_the_built_in_pair_is_its_sampled_acceptance(tiny_target,
                                                                            tiny_draft):
    """estimate_alpha on a prompt and the target's own continuation, against Chen's rule sampled
    after each of its prefixes (the laws read one prefix at a time: 300 draft tokens each, accepted
    when u < q / p), within 4.5 standard errors of the sampled mean."""
    from picospec.autoregressive import autoregressive_sampling
    from picospec.sampling import warp

    (target, encoder), draft = tiny_target, tiny_draft[0]
    target.reset(), draft.reset()
    seq = autoregressive_sampling(encoder.encode("def add(a, b):\n"), target, 24,
                                  np.random.default_rng(0))
    estimate = estimate_alpha(draft, target, seq, temperature=0.8)
    rng, accepted = np.random.default_rng(1), []
    for i in range(1, len(seq)):
        p = warp(draft(seq[:i])[-1].astype(np.float64), temperature=0.8)  # [V]
        q = warp(target(seq[:i])[-1].astype(np.float64), temperature=0.8)  # [V]
        d = rng.choice(len(p), size=300, p=p / p.sum())  # [300] draft tokens
        accepted += list(rng.random(300) < np.minimum(1, q[d] / p[d]))
    assert abs(np.mean(accepted) - estimate) < 4.5 * np.std(accepted) / np.sqrt(len(accepted))
