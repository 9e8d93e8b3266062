"""The lossless verification core: modified rejection sampling of drafted tokens against the target.

Chen et al. 2023 (arXiv:2302.01318), Algorithm 2, steps "accept or reject" and "resample"; the same rule as
Leviathan et al. 2023 (arXiv:2211.17192), Algorithm 1, in swapped notation. Here p = draft, q = target (Chen).

Why it is lossless, for one position: a draft x ~ p is kept with probability min(1, q(x)/p(x)), so token x comes out
accepted with probability min(p(x), q(x)); rejection happens with probability 1 - sum_x min(p, q) = sum_x max(0, q - p)
and then draws from norm(max(0, q - p)), adding exactly max(0, q(x) - p(x)). Together: min(p, q) + max(0, q - p) = q.
Shapes: K drafted tokens, V = n_vocab.
"""
from picospec.sampling import residual, sample


def accept_or_resample(x, p, q, rng):
    """One position: keep draft token x (drawn from p [V]) or replace it from the residual. -> (token, accepted)."""
    r = rng.random()
    if r < min(1, q[x] / p[x]):
        return x, True
    return sample(residual(q, p), rng), False


def verify_chain(drafts, P, Q, rng):
    """Verify K drafts left to right. P [K, V] draft distributions, Q [K + 1, V] target distributions.

    -> (n accepted, next token, its origin): the first rejection ends the step with a token from the residual
    ("resample"); if all K are accepted the target's last distribution gives one more token for free ("bonus").
    """
    for t, x in enumerate(drafts):
        token, accepted = accept_or_resample(x, P[t], Q[t], rng)
        if not accepted:
            return t, token, "resample"
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"
