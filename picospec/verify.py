"""Lossless verification: Chen et al. 2023, "Accelerating Large Language Model Decoding with
Speculative Sampling" (arXiv:2302.01318), Algorithm 2, on chains and on token trees. p = draft,
q = target, Q [1 + m, V] (row 1 + i: the target's law after node i).

The rule, for a token x drawn from p: draw r ~ U[0, 1); keep x if r < min(1, q(x) / p(x));
otherwise draw the next token from the residual norm(max(0, q - p)).

Why the kept-or-replaced token is distributed as q. Write m(y) = min(p(y), q(y)) and
R = sum_z max(0, q(z) - p(z)). For any token y,
    P(y) = p(y) min(1, q(y) / p(y)) + P(rejected) max(0, q(y) - p(y)) / R
         = m(y) + (1 - sum_z m(z)) max(0, q(y) - p(y)) / R,
and since sum_z m(z) + R = sum_z q(z) = 1, the factor (1 - sum_z m(z)) / R is 1, so
P(y) = min(p(y), q(y)) + max(0, q(y) - p(y)) = q(y) (R = 0 only when p = q: then nothing is
rejected, and P(y) = p(y) = q(y)). A chain applies the rule draft by draft, each against the
target's law after the drafts kept before it, and draws the bonus token from the target's law
after all K when every draft is kept: each new token follows the target's law given the ones
before it, so the whole sequence has the target's law. A tree applies it to a node's children
in turn, each against what is left of q (the residual after the siblings rejected before it).
Full proofs: docs/proofs.md.
"""
import numpy as np

from picospec.sampling import residual, sample


def accept_or_resample(x, p, q, rng):
    """Keep x ~ p [V] with probability min(1, q(x) / p(x)), else draw the residual."""
    r = rng.random()
    if r < min(1, q[x] / p[x]):
        return x, True
    return sample(residual(q, p), rng), False


def verify_chain(drafts, P, Q, rng):
    """P [K, V], Q [K + 1, V] -> (n accepted, next token, "resample" or "bonus")."""
    for t, x in enumerate(drafts):
        token, accepted = accept_or_resample(x, P[t], Q[t], rng)
        if not accepted:
            return t, token, "resample"
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"


def verify_siblings(tokens, trials, Q, rng):
    """Rejection sampling down trials {node: [(child, p [V] or None)]} -> (path, token, origin)."""
    node, path = -1, []
    while True:
        q = Q[node + 1]  # [V] the target's law after the accepted path
        kept = None
        for child, p in trials.get(node, ()):
            x = tokens[child]
            p = one_hot(x, len(q), q.dtype) if p is None else p
            if rng.random() < min(1, q[x] / p[x]):  # keep x with probability min(1, q(x) / p(x))
                kept = child
                break
            q = residual(q, p)  # rejected: the target's law left over for the next sibling
        if kept is None:
            # no child kept: the next token is drawn from what is left of q, a resample when
            # children were tried, the bonus token when the node had none
            origin = "resample" if trials.get(node) else "bonus"
            return path, sample(q, rng), origin
        node = kept
        path.append(kept)


def verify_iid(tokens, parents, Q, P, rng, draws=None):
    """SpecInfer's rule: siblings drawn i.i.d. from P [m, V]; draws[j] is the node of draw j."""
    draws = range(len(tokens)) if draws is None else draws
    trials = {}
    for node, p in zip(draws, P):
        trials.setdefault(parents[node], []).append((node, p))
    return verify_siblings(tokens, trials, Q, rng)


def verify_without_replacement(tokens, parents, Q, P, rng):
    """Sequoia's Algorithm 1: child i judged against P [m, V] less its earlier siblings."""
    trials = {}
    for node in range(len(tokens)):
        siblings = trials.setdefault(parents[node], [])
        p = np.asarray(P[node]) if not siblings else siblings[-1][1].copy()  # [V]
        if siblings:  # remove the sibling drawn before this one
            p[tokens[siblings[-1][0]]] = 0
            p = p / p.sum()
        siblings.append((node, p))
    return verify_siblings(tokens, trials, Q, rng)


def verify_distinct(tokens, parents, Q, rng):
    """Fixed candidates as one-hot draws, kept with probability q(x)."""
    trials = {}
    for node, parent in enumerate(parents):
        trials.setdefault(parent, []).append((node, None))  # p = e_x, made when x is tried
    return verify_siblings(tokens, trials, Q, rng)


def verify_tree(tokens, parents, Q, rng, P=None):
    """verify_iid with P [m, V], else verify_distinct."""
    if P is None:
        return verify_distinct(tokens, parents, Q, rng)
    return verify_iid(tokens, parents, Q, P, rng)


def step_record(tokens, origins, drafted, nodes=None, calls=1):
    """The record a method appends to `stats` per step (one target call; Blockwise: `calls`)."""
    return {"drafted": int(drafted), "nodes": int(drafted if nodes is None else nodes),
            "accepted": origins.count("draft"), "tokens": [int(t) for t in tokens],
            "origins": list(origins), "calls": int(calls)}


def one_hot(x, V, dtype):
    e = np.zeros(V, dtype=dtype)  # [V] e_x
    e[x] = 1
    return e
