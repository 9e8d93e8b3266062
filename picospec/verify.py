"""The lossless verification core: modified rejection sampling of drafted tokens against the target.
Shapes: K drafted tokens, V = n_vocab, m tree nodes; Q [1 + m, V] (row 0 after the root, row 1 + i
after node i). Chen et al. 2023 (arXiv:2302.01318), Algorithm 2, "accept or reject" and "resample";
p = draft, q = target. Each rule keeps the target's law when the p it judges a token against is the
law the token was drawn from; the proofs: docs/proofs.md.
"""
import numpy as np

from picospec.sampling import residual, sample


def accept_or_resample(x, p, q, rng):
    """One position: keep draft token x (drawn from p [V]) or replace it from the residual. ->
    (token, accepted)."""
    r = rng.random()
    if r < min(1, q[x] / p[x]):
        return x, True
    return sample(residual(q, p), rng), False


def verify_chain(drafts, P, Q, rng):
    """Verify K drafts left to right. P [K, V] draft distributions, Q [K + 1, V] target
    distributions.

    -> (n accepted, next token, its origin): the first rejection ends the step with a token from the
    residual ("resample"); if all K are accepted the target's last distribution gives one more token
    for free ("bonus").
    """
    for t, x in enumerate(drafts):
        token, accepted = accept_or_resample(x, P[t], Q[t], rng)
        if not accepted:
            return t, token, "resample"
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"


def verify_siblings(tokens, trials, Q, rng):
    """Recursive rejection sampling over siblings, the walk behind every tree rule. trials {node:
    [(child, p)]}: each node's children (-1: the root) in draw order with the law p [V] each was
    drawn from (None: a one-hot candidate); Q [1 + m, V] -> (path, next token, its origin). Proof:
    docs/proofs.md."""
    node, path = -1, []
    while True:
        q = Q[node + 1]  # [V] the target's law after the accepted path
        for child, p in trials.get(node, ()):
            x = tokens[child]
            p = one_hot(x, len(q), q.dtype) if p is None else p
            if rng.random() < min(1, q[x] / p[x]):  # keep x with probability min(1, q(x) / p(x))
                node = child
                path.append(child)
                break
            q = residual(q, p)  # rejected: the target's law left over for the next sibling
        else:  # no sibling kept: the next token comes from what is left of q
            return path, sample(q, rng), "resample" if trials.get(node) else "bonus"


def verify_iid(tokens, parents, Q, P, rng, draws=None):
    """SpecInfer's multi-step speculative sampling: siblings drawn i.i.d., every draw tried
    (draws[j]: the node of draw j). tokens, parents [m]; Q [1 + m, V]; P [m, V] each node's law ->
    (path, next token, origin)."""
    draws = range(len(tokens)) if draws is None else draws
    trials = {}
    for node, p in zip(draws, P):
        trials.setdefault(parents[node], []).append((node, p))
    return verify_siblings(tokens, trials, Q, rng)


def verify_without_replacement(tokens, parents, Q, P, rng):
    """Sequoia's Algorithm 1: child i judged against p with children 1..i-1 removed and
    renormalised. tokens, parents [m]; Q [1 + m, V]; P [m, V] the law before removals -> (path, next
    token, origin)."""
    trials = {}
    for node in range(len(tokens)):
        siblings = trials.setdefault(parents[node], [])
        p = np.asarray(P[node]) if not siblings else siblings[-1][1].copy()
        if siblings:  # remove the sibling drawn before this one
            p[tokens[siblings[-1][0]]] = 0
            p = p / p.sum()
        siblings.append((node, p))
    return verify_siblings(tokens, trials, Q, rng)


def verify_distinct(tokens, parents, Q, rng):
    """Deterministic candidates (top-k tokens, retrieved continuations, n-grams): lossless because a
    token fixed by the context is a draw from the one-hot e_x at itself: kept with probability q(x),
    else q loses x and is renormalised. At temperature 0 (q one-hot at the argmax) this is exact
    match: the greedy path (picospec.tree.greedy_path)."""
    trials = {}
    for node, parent in enumerate(parents):
        trials.setdefault(parent, []).append((node, None))  # p = e_x, made when x is tried
    return verify_siblings(tokens, trials, Q, rng)


def verify_tree(tokens, parents, Q, rng, P=None):
    """A token tree verified by verify_iid (P [m, V]) or, with P None, verify_distinct: the
    checker's `tree` contract. tokens, parents [m]; Q [1 + m, V] -> (path, next token, origin)."""
    if P is None:
        return verify_distinct(tokens, parents, Q, rng)
    return verify_iid(tokens, parents, Q, P, rng)


def step_record(tokens, origins, drafted, nodes=None, calls=1):
    """The one record every method appends to `stats` per target call (the same keys everywhere).
    More: docs/algorithms.md (verify.py, step_record)."""
    return {"drafted": int(drafted), "nodes": int(drafted if nodes is None else nodes),
            "accepted": origins.count("draft"), "tokens": [int(t) for t in tokens],
            "origins": list(origins), "calls": int(calls)}


def one_hot(x, V, dtype):
    e = np.zeros(V, dtype=dtype)
    e[x] = 1
    return e
