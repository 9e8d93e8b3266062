"""The exact-law checker's negative controls: for each contract, deliberately broken samplers that
every run of the battery must catch before its verdict counts (battery.py runs them first). If one
passes every case, the run has no power and gives no verdict. Notation as in picospec/verify.py: p =
draft (P), q = target (Q). Shapes: V vocabulary, K (k) drafts per step, B batch rows, m tree nodes.
"""
import numpy as np

from picospec.batched.rejection import rejection_sample, sample_rows
from picospec.sampling import sample
from picospec.verify import verify_chain, verify_tree


def resample_from_target(drafts, P, Q, rng):
    """chain, broken: a rejected draft is replaced from q instead of the residual norm(max(0, q -
    p))."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(Q[t], rng)
    return len(drafts), sample(Q[-1], rng)


def bonus_from_draft(drafts, P, Q, rng):
    """chain, broken: when every draft is accepted the extra token comes from the draft's last law,
    not q's."""
    return verify_chain(drafts, P, np.concatenate([Q[:-1], P[-1:]]), rng)


def tree_without_residual(tokens, parents, Q, rng, P=None):
    """tree, broken: siblings are tried against q itself and the next token drawn from q: no
    residual update."""
    node, path = -1, []
    while True:
        q = Q[node + 1]
        for c in [i for i, parent in enumerate(parents) if parent == node]:
            p_x = P[c][tokens[c]] if P is not None else 1.0
            if rng.random() < min(1, q[tokens[c]] / p_x):
                node = c
                path.append(c)
                break
        else:
            return path, sample(q, rng)


def tree_scored_by_parent(tokens, parents, Q, rng, P=None):
    """tree, broken: an off-by-one in the target rows: each node is scored with its parent's law."""
    return verify_tree(tokens, parents, Q[[0] + [p + 1 for p in parents]], rng, P)


def recovered_from_target(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                          rng):
    """rejection, broken: the token after the first rejection is drawn from q instead of norm(max(0,
    q - p))."""
    q, (B, k, _) = target_with_bonus_probs, draft_probs.shape
    rows, cols = np.arange(B)[:, None], np.arange(k)[None, :]
    ratio = q[rows, cols, draft_token_ids] / draft_probs[rows, cols, draft_token_ids]  # [B, k]
    accepted = rng.random((B, k)) < ratio
    n = np.where(accepted.all(1), k, accepted.argmin(1))  # [B]
    # bug: q, not the residual
    recovered = sample_rows(q[np.arange(B), np.minimum(n, k - 1)], rng.random(B))
    out = np.where(np.arange(k + 1) < n[:, None], np.pad(draft_token_ids, ((0, 0), (0, 1))), -1)
    out[np.arange(B), n] = np.where(n == k, bonus_token_ids[:, 0], recovered)
    return out


def bonus_is_last_draft(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                        rng):
    """rejection, broken: the bonus token is the last draft token again instead of the caller's
    bonus_token_ids."""
    return rejection_sample(target_with_bonus_probs, draft_token_ids[:, -1:], draft_probs,
                            draft_token_ids, rng=rng)


def judged_as_iid(tokens, parents, Q, P, rng):
    """tree_without_replacement, broken: siblings drawn without replacement judged against p itself,
    as if i.i.d."""
    return verify_tree(tokens, parents, Q, rng, P)


def without_replacement_without_residual(tokens, parents, Q, P, rng):
    """tree_without_replacement, broken: no residual update (tree_without_residual with this
    contract's arguments)."""
    return tree_without_residual(tokens, parents, Q, rng, P)


CONTROLS = {"chain": (resample_from_target, bonus_from_draft),
            "tree": (tree_without_residual, tree_scored_by_parent),
            "tree_without_replacement": (judged_as_iid, without_replacement_without_residual),
            "rejection": (recovered_from_target, bonus_is_last_draft)}
