"""The negative controls: per contract, broken samplers a run must catch for its verdict to count.
p = draft (P), q = target (Q). Shapes: V vocabulary, K (k) drafts, B batch rows, m tree nodes.
"""
import numpy as np

from picospec.batched.rejection import rejection_sample, sample_rows
from picospec.sampling import sample
from picospec.verify import verify_chain, verify_tree


def resample_from_target(drafts, P, Q, rng):
    """chain, broken: a rejected draft is replaced from q, not norm(max(0, q - p))."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(Q[t], rng)
    return len(drafts), sample(Q[-1], rng)


def bonus_from_draft(drafts, P, Q, rng):
    """chain, broken: the bonus token comes from the draft's last law, not q's."""
    if not len(drafts):  # no drafts (P [0, V]): no draft law to take it from, q's is right
        return verify_chain(drafts, P, Q, rng)
    return verify_chain(drafts, P, np.concatenate([Q[:-1], P[-1:]]), rng)  # [K + 1, V]


def tree_without_residual(tokens, parents, Q, rng, P=None):
    """tree, broken: no residual update (siblings tried against q, the next token drawn from q)."""
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
    """tree, broken: off by one in Q's rows, each node scored with its parent's law."""
    return verify_tree(tokens, parents, Q[[0] + [p + 1 for p in parents]], rng, P)


def recovered_from_target(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                          rng):
    """rejection, broken: the recovered token is drawn from q, not norm(max(0, q - p))."""
    q, (B, k, _) = target_with_bonus_probs, draft_probs.shape  # q [B, k + 1, V], p [B, k, V]
    rows, cols = np.arange(B)[:, None], np.arange(k)[None, :]  # [B, 1], [1, k]
    ratio = q[rows, cols, draft_token_ids] / draft_probs[rows, cols, draft_token_ids]  # [B, k]
    accepted = rng.random((B, k)) < ratio  # [B, k]
    n = np.where(accepted.all(1), k, accepted.argmin(1))  # [B]
    # [B]: the bug, q and not the residual
    recovered = sample_rows(q[np.arange(B), np.minimum(n, k - 1)], rng.random(B))
    # [B, k + 1]: accepted drafts, then -1
    out = np.where(np.arange(k + 1) < n[:, None], np.pad(draft_token_ids, ((0, 0), (0, 1))), -1)
    out[np.arange(B), n] = np.where(n == k, bonus_token_ids[:, 0], recovered)  # [B]
    return out


def bonus_is_last_draft(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                        rng):
    """rejection, broken: the bonus token is the last draft again, not bonus_token_ids."""
    # draft_token_ids[:, -1:] [B, 1] in place of the bonus
    return rejection_sample(target_with_bonus_probs, draft_token_ids[:, -1:], draft_probs,
                            draft_token_ids, rng=rng)


def judged_as_iid(tokens, parents, Q, P, rng):
    """tree_without_replacement, broken: siblings judged against p itself, as if i.i.d."""
    return verify_tree(tokens, parents, Q, rng, P)


def without_replacement_without_residual(tokens, parents, Q, P, rng):
    """tree_without_replacement, broken: no residual update (tree_without_residual)."""
    return tree_without_residual(tokens, parents, Q, rng, P)


CONTROLS = {"chain": (resample_from_target, bonus_from_draft),
            "tree": (tree_without_residual, tree_scored_by_parent),
            "tree_without_replacement": (judged_as_iid, without_replacement_without_residual),
            "rejection": (recovered_from_target, bonus_is_last_draft)}
