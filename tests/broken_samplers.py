"""Deliberately broken samplers, each with one bug that people ship; `python -m picospec.check` must fail every one.

    python -m picospec.check tests/broken_samplers.py:ties_toward_draft --contract chain     # exit status 1

Notation as in picospec/verify.py (Chen et al.): p = draft, q = target. The negative controls that the command runs
before every verdict (picospec.check_controls.CONTROLS) are further broken samplers of the same kind.
"""
import numpy as np

from picospec.rejection import recovered_probs, sample_rows
from picospec.sampling import residual, sample


def chain(drafts, P, Q, rng, accept=lambda u, q, p: u < min(1, q / p), resample=lambda t, q, p: residual(q, p),
          bonus=lambda P, Q: Q[-1]):
    """Chen et al. Alg. 2's verification with each step replaceable (the defaults are the right rules)."""
    for t, x in enumerate(drafts):
        if not accept(rng.random(), Q[t][x], P[t][x]):
            return t, sample(resample(t, Q[t], P[t]), rng)
    return len(drafts), sample(bonus(P, Q), rng)


def residual_not_renormalised(drafts, P, Q, rng):
    """max(0, q - p) sampled by inverse CDF against a uniform on [0, 1) without dividing by its sum: the missing
    mass 1 - sum lands on the last token."""
    for t, x in enumerate(drafts):
        if not rng.random() < min(1, Q[t][x] / P[t][x]):
            r = np.maximum(Q[t] - P[t], 0)
            return t, min(int(np.searchsorted(np.cumsum(r), rng.random(), side="right")), len(r) - 1)
    return len(drafts), sample(Q[-1], rng)


def bonus_from_draft(drafts, P, Q, rng):
    """All K accepted: the extra token is drawn from the draft's last law instead of the target's row K."""
    return chain(drafts, P, Q, rng, bonus=lambda P, Q: P[-1])


def ratio_inverted(drafts, P, Q, rng):
    """Accept with min(1, p/q): Leviathan's q/p read with Chen's letters (the notations swap p and q)."""
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u < min(1, p / q))


def ties_toward_draft(drafts, P, Q, rng):
    """Accept when u <= q/p: the tie u == q/p goes to the draft, so when u = 0 a token the target forbids (q = 0) is
    kept. With 53-bit uniforms the tie has probability 2^-53 per draft and no sampled law can show it; the battery's
    "uniforms at 0" case hands the sampler u = 0 and catches it."""
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u <= q / p)


def last_residual_skipped(drafts, P, Q, rng):
    """A rejection of the last draft (t = K - 1) is replaced from q instead of the residual."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: q if t == len(drafts) - 1 else residual(q, p))


CHAIN = ["residual_not_renormalised", "bonus_from_draft", "ratio_inverted", "ties_toward_draft",
         "last_residual_skipped"]


def tree(tokens, parents, Q, rng, P=None, accept=lambda u, q, p: u < min(1, q / p), last_residual=True):
    """verify_tree's recursive rejection sampling over siblings, with the acceptance test and the residual update
    after the last sibling replaceable."""
    node, path = -1, []
    while True:
        q, kids = Q[node + 1], [i for i, parent in enumerate(parents) if parent == node]
        for n, c in enumerate(kids):
            p = P[c] if P is not None else np.eye(len(q))[tokens[c]]
            if accept(rng.random(), q[tokens[c]], p[tokens[c]]):
                node = c
                path.append(c)
                break
            if last_residual or n < len(kids) - 1:
                q = residual(q, p)
        else:
            return path, sample(q, rng)


def tree_ties_toward_draft(tokens, parents, Q, rng, P=None):
    """Siblings accepted when u <= q/p: with u = 0 a child the (residual) target forbids is kept."""
    return tree(tokens, parents, Q, rng, P, accept=lambda u, q, p: u <= q / p)


def tree_last_residual_skipped(tokens, parents, Q, rng, P=None):
    """After the last sibling is rejected the next token comes from the law before its rejection, not the residual."""
    return tree(tokens, parents, Q, rng, P, last_residual=False)


TREE = ["tree_ties_toward_draft", "tree_last_residual_skipped"]


def without_replacement_not_renormalised(tokens, parents, Q, P, rng):
    """Sequoia's rule with the siblings drawn before removed from p but p not renormalised: child i is judged against
    (and its rejection subtracts) too small a law."""
    laws = np.array(P, dtype=float)  # [m, V]
    for i, parent in enumerate(parents):
        laws[i, [tokens[j] for j in range(i) if parents[j] == parent]] = 0  # bug: no laws[i] /= laws[i].sum()
    return tree(tokens, parents, Q, rng, laws)


WITHOUT_REPLACEMENT = ["without_replacement_not_renormalised"]


def batched(q, bonus, p, drafts, rng, accept=np.less, recover=recovered_probs):
    """vLLM's contract, vectorised (as picospec.rejection), with the acceptance test and the recovered law
    replaceable."""
    (B, k, _), rows, cols = p.shape, np.arange(len(p))[:, None], np.arange(p.shape[1])[None, :]
    accepted = accept(rng.random((B, k)), q[rows, cols, drafts] / p[rows, cols, drafts])  # [B, k]
    n = np.where(accepted.all(1), k, accepted.argmin(1))  # [B]: first rejection
    at = np.minimum(n, k - 1)
    recovered = sample_rows(recover(q[:, :k], p)[np.arange(B), at], rng.random(B))  # [B]
    out = np.where(np.arange(k + 1) < n[:, None], np.pad(drafts, ((0, 0), (0, 1))), -1)
    out[np.arange(B), n] = np.where(n == k, bonus[:, 0], recovered)
    return out


def batched_ties_toward_draft(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
    """accepted = u <= q/p (vLLM's own kernel avoids the tie's effect by drawing float64 uniforms)."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng, accept=np.less_equal)


def batched_residual_not_renormalised(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
    """The recovered law max(0, q - p) plus its missing mass on token 0."""
    def recover(q, p):
        r = np.maximum(q - p, 0)
        r[..., 0] += 1 - r.sum(-1)
        return r
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng, recover=recover)


def batched_ratio_inverted(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
    """accepted with min(1, p/q)."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   accept=lambda u, ratio: u < 1 / ratio)


REJECTION = ["batched_ties_toward_draft", "batched_residual_not_renormalised", "batched_ratio_inverted"]
