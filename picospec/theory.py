"""What speculative decoding should gain: Leviathan et al. 2023 (arXiv:2211.17192), section 3.

alpha = E[sum_x min(p(x), q(x))] is the acceptance rate of one draft token (p = draft, q = target; Chen's letters).
If acceptances are i.i.d. with rate alpha, one step of K drafts yields (1 - alpha^(K+1)) / (1 - alpha) tokens on
average (Leviathan Eq. 1), costs K draft calls and one target call, and so with c = (draft call time) / (target call
time) the walltime improvement is (1 - alpha^(K+1)) / ((1 - alpha)(K c + 1)) (Leviathan Theorem 3.8).

Example (by hand): alpha = 0.5, K = 2 -> (1 - 0.125) / 0.5 = 1.75 tokens per target call; with c = 0.25 the
improvement is 1.75 / 1.5 = 1.1667.
"""
import numpy as np

from picospec.sampling import warp


def expected_tokens_per_call(alpha, K):
    if alpha >= 1:
        return K + 1.0
    return (1 - alpha ** (K + 1)) / (1 - alpha)


def expected_speedup(alpha, K, c):
    """Expected walltime improvement over autoregressive decoding, for draft/target cost ratio c."""
    return expected_tokens_per_call(alpha, K) / (K * c + 1)


def optimal_K(alpha, c, K_max=32):
    """The K in 1..K_max that maximises expected_speedup."""
    return max(range(1, K_max + 1), key=lambda K: expected_speedup(alpha, K, c))


def estimate_alpha(draft_model, target_model, x, **sampling_options):
    """Mean over the positions of x of sum_v min(p, q), the warped draft and target distributions after each prefix."""
    n = len(x) - 1
    p = warp(draft_model(x[:-1], n), **sampling_options)  # [n, V]
    q = warp(target_model(x[:-1], n), **sampling_options)  # [n, V]
    return float(np.minimum(p, q).sum(-1).mean())
