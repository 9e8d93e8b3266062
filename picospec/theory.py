"""What speculative decoding should gain: Leviathan, Kalman, Matias 2023, "Fast Inference from
Transformers via Speculative Decoding", ICML 2023 (arXiv:2211.17192), section 3; self-drafting;
cascades.

The symbols, all costs in units of one autoregressive (one-token) target call:
    alpha     the chance a draft token is accepted, given the ones before it were
    K         drafts per step (the draft model called K times)
    E         tokens one target call yields: sum_{j=0..K} alpha^j (Eq. 1)
    c         a verifying target call's cost (K + 1 positions at once)
    c_d       one draft call's cost
    r         the rest of a step: sampling, acceptance, rollback, Python between the calls
    r_0       the same around each call of autoregressive decoding (its tokens cost 1 + r_0 each)
    speedup   E (1 + r_0) / (c + K c_d + r): a step's tokens at autoregressive decoding's cost over
              the step's cost (cost_model_speedup; with r = r_0 = 0, E / (c + K c_d))
Leviathan et al. name the draft's cost c; here c is always the target's call and c_d a draft's.

Why E = sum_{j=0..K} alpha^j. The paper assumes each draft is accepted with probability alpha
independently of the others (the acceptance rate at a position is beta = sum_x min(p(x), q(x)),
the betas taken i.i.d. with mean alpha; estimate_alpha measures that mean). A step keeps n
drafts, n the index of the first rejection (n = K if none), and yields n + 1 tokens, the last one
the target's. P(n >= j) = alpha^j, the first j all kept, so E[n + 1] = 1 + sum_{j=1..K} P(n >= j)
= sum_{j=0..K} alpha^j = (1 - alpha^(K+1)) / (1 - alpha), and K + 1 when alpha = 1.

Cascades (cascade_speedup) draft with a small model (cost c_d1, acceptance alpha1) for K tokens and
a second, smaller one (cost c_d2, acceptance alpha2) for K_tail more; with K_inner > 0 the first
drafter makes its K tokens by reviewing the second's: inner steps of K_inner drafts of the second,
each reviewed by one call of the first (acceptance alpha12, each review costing c_inner of the
first drafter's calls), and the target's verification costs c.
"""
import numpy as np

from picospec.sampling import warp


def expected_tokens_per_call(alpha, K):
    """E = (1 - alpha^(K+1)) / (1 - alpha) tokens per target call (Eq. 1)."""
    if alpha >= 1:
        return K + 1.0
    return (1 - alpha ** (K + 1)) / (1 - alpha)


def expected_speedup(alpha, K, c_d):
    """Theorem 3.8 (the paper's c is c_d here), verification at the cost of one call."""
    return expected_tokens_per_call(alpha, K) / (K * c_d + 1)


# c of a (K+1)-token verification on a GPU, where it is nearly free: c(5) of the 124M shape in
# docs/results/engine_gpu.md (docs/results/gpu.md: each method's own c there)
GPU_VERIFY_COST = 1.2


def cost_model_speedup(E, c, drafts=(), rest=0.0, rest_base=0.0):
    """E (1 + r_0) / (c + sum k c_d + r): drafts [(k calls, cost c_d)], the rest r of a step and
    r_0 of an autoregressive token, in one-token target calls."""
    return E * (1 + rest_base) / (c + sum(k * c_d for k, c_d in drafts) + rest)


def optimal_K(alpha, c_d, K_max=32):
    return max(range(1, K_max + 1), key=lambda K: expected_speedup(alpha, K, c_d))


def estimate_alpha(draft_model, target_model, x, **sampling_options):
    """Mean over x's positions of sum_v min(p, q), p and q warped -> scalar."""
    n = len(x) - 1
    p = warp(draft_model(x[:-1], n), **sampling_options)  # [n, V]
    q = warp(target_model(x[:-1], n), **sampling_options)  # [n, V]
    return float(np.minimum(p, q).sum(-1).mean())


# ---- self-drafting (Draft & Verify, LayerSkip) and cascades (CS Drafting) ----

def greedy_walk(agree, K, confidence=None, gamma=0.0):
    """Greedy self-drafting along agree[i], stopping below gamma -> [(drafted, accepted)]."""
    steps, i, m = [], 0, len(agree)
    while i < m:
        k, most = 0, min(K, m - i - 1)
        while k < most:
            k += 1
            if confidence is not None and confidence[i + k - 1] < gamma:
                break
        n = 0
        while n < k and agree[i + n]:
            n += 1
        steps.append((k, n))
        i += n + 1
    return steps


def walk_speedup(walks, c_d, c):
    """Speedup of greedy walks; c_d a draft call, c(k) the target's on k drafts, in one-token
    calls."""
    tokens = sum(1 + sum(n + 1 for _, n in steps) for steps in walks)
    return tokens / sum(1 + sum(k * c_d + c(k) for k, _ in steps) for steps in walks)


def expected_tokens_chain(alphas):
    """Tokens per call when draft t is accepted with probability alphas[t]: [.5, .5] -> 1.75."""
    total, reach = 1.0, 1.0
    for a in alphas:
        reach *= a
        total += reach
    return total


def steps_to_draft(m, alpha, k):
    """m tokens by review steps of k drafts -> (E[steps], E[smaller drafts])."""
    steps, drafts = [0.0], [0.0]  # index: tokens still to make
    for left in range(1, m + 1):
        kk = min(k, left - 1)
        # P(n drafts kept), n = 0..kk
        probs = [alpha ** n * (1 - alpha) for n in range(kk)] + [alpha ** kk]
        steps.append(1 + sum(p * steps[max(0, left - n - 1)] for n, p in enumerate(probs)))
        drafts.append(kk + sum(p * drafts[max(0, left - n - 1)] for n, p in enumerate(probs)))
    return steps[m], drafts[m]


def cascade_speedup(alpha1, alpha2, K, K_tail, c_d1, c_d2, c, alpha12=None, K_inner=0,
                    c_inner=1.0):
    """Cascade drafting's speedup: acceptances alpha1, alpha2, alpha12; costs c_d1, c_d2, c,
    c_inner."""
    tokens = expected_tokens_chain([alpha1] * K + [alpha2] * K_tail)
    if K_inner:
        steps, drafts = steps_to_draft(K, alpha12, K_inner)
        draft_cost = steps * c_d1 * c_inner + drafts * c_d2
    else:
        draft_cost = K * c_d1
    return tokens / (c + draft_cost + K_tail * c_d2)
