"""The lossless verification core: modified rejection sampling of drafted tokens against the target.

Chen et al. 2023 (arXiv:2302.01318), Algorithm 2, steps "accept or reject" and "resample"; the same rule as
Leviathan et al. 2023 (arXiv:2211.17192), Algorithm 1, in swapped notation. Here p = draft, q = target (Chen).

Why it is lossless, for one position: a draft x ~ p is kept with probability min(1, q(x)/p(x)), so token x comes out
accepted with probability min(p(x), q(x)); rejection happens with probability 1 - sum_x min(p, q) = sum_x max(0, q - p)
and then draws from norm(max(0, q - p)), adding exactly max(0, q(x) - p(x)). Together: min(p, q) + max(0, q - p) = q.
Shapes: K drafted tokens, V = n_vocab.
"""
import numpy as np

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


def verify_tree(tokens, parents, Q, rng, P=None):
    """Multi-draft verification of a token tree by recursive rejection sampling over siblings (SpecInfer, Miao et
    al. 2024, arXiv:2305.09781, Algorithm "multi-step speculative sampling"; the same rule verifies EAGLE's trees).

    tokens/parents as in model.tree(); Q [1 + m, V] target distributions (row 0 after the root, row 1 + i after
    node i); P [m, V] the distribution each node's token was proposed from (None: every node is a deterministic
    proposal, a one-hot at its own token, as for top-k or retrieved candidates).
    At a node with target law q, its children c1, c2, .. are tried in order: c is kept with probability
    min(1, q(x_c) / p_c(x_c)) and the walk moves to it; a rejection replaces q by the residual norm(max(0, q - p_c))
    and tries the next sibling. When no child is left, the next token is drawn from q. For one child this is
    `accept_or_resample`; for siblings drawn independently from p (or deterministic distinct tokens) every
    rejection step is the single-draft rule applied to the law left over, so the output follows the target.
    -> (path: accepted node indices, next token, its origin "resample" or "bonus").
    """
    kids = {-1: []}
    for i, p in enumerate(parents):
        kids.setdefault(p, []).append(i)
    node, path = -1, []
    while True:
        q = Q[node + 1]
        for c in kids.get(node, []):
            x = tokens[c]
            p = P[c] if P is not None else one_hot(x, len(q), q.dtype)
            if rng.random() < min(1, q[x] / p[x]):
                node = c
                path.append(c)
                break
            q = residual(q, p)
        else:  # no child left: the walk ends here
            return path, sample(q, rng), "resample" if kids.get(node) else "bonus"


def step_record(tokens, origins, drafted, nodes=None, calls=1):
    """The one record every method appends to `stats` per target call (the same keys everywhere):

    drafted   draft tokens this step could have accepted (K for a chain, the depth of a tree)
    nodes     draft tokens the target scored (K for a chain, every node of a tree)
    accepted  draft tokens kept (= origins.count("draft")), so acceptance = accepted / drafted for every method
    tokens    the new tokens, in order; origins: where each came from, "draft" | "resample" | "bonus" | "target"
    calls     target calls this step made (1, except Blockwise's unmerged Predict + Verify)
    Example: step_record([7, 9], ["draft", "resample"], drafted=4) -> drafted 4, nodes 4, accepted 1, calls 1.
    """
    return {"drafted": int(drafted), "nodes": int(drafted if nodes is None else nodes),
            "accepted": origins.count("draft"), "tokens": [int(t) for t in tokens], "origins": list(origins),
            "calls": int(calls)}


def one_hot(x, V, dtype):
    e = np.zeros(V, dtype=dtype)
    e[x] = 1
    return e
