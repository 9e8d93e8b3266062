"""The lossless verification core: modified rejection sampling of drafted tokens against the target.

Chen et al. 2023 (arXiv:2302.01318), Algorithm 2, steps "accept or reject" and "resample"; the same rule as
Leviathan et al. 2023 (arXiv:2211.17192), Algorithm 1, in swapped notation. Here p = draft, q = target (Chen).

Why it is lossless, for one position: a draft x ~ p is kept with probability min(1, q(x)/p(x)), so token x comes out
accepted with probability min(p(x), q(x)); rejection happens with probability 1 - sum_x min(p, q) = sum_x max(0, q - p)
and then draws from norm(max(0, q - p)), adding exactly max(0, q(x) - p(x)). Together: min(p, q) + max(0, q - p) = q.

Trees: the same rule over siblings (SpecInfer, Miao et al. 2024, arXiv:2305.09781, "multi-step speculative
sampling"; Sequoia, Chen et al. 2024, arXiv:2402.12374, Algorithm 1). At a node whose target law is q_1 = q, the
children are tried in the order they were drawn; child i holds x_i, drawn from a law p_i that may depend on the draws
before it but not on the verifier's coins. It is kept with probability min(1, q_i(x_i) / p_i(x_i)) and the walk moves
to it; a rejection sets q_(i+1) = norm(max(0, q_i - p_i)) and tries child i + 1; when none is left, the token is drawn
from the last q. Claim: the token that leaves the node follows q. Proof, backwards from the last child: given the
draws before it, x_i ~ p_i, so by the one-position identity trial i (keep x_i, else continue with a token that by
induction follows q_(i+1)) outputs min(p_i, q_i) + max(0, q_i - p_i) = q_i. Below the kept child the walk repeats
with that child's row of Q, which is the target's law after its path as long as a node attends only to its ancestors.
So a rule is lossless exactly when the p_i it judges child i against is the law child i was really drawn from:
    verify_iid                 i.i.d. siblings (SpecInfer): a fresh draw's law is p whatever came before.
    verify_without_replacement siblings drawn without replacement (Sequoia): child i's law is p with children
                               1..i-1 removed and renormalised.
    verify_distinct            tokens fixed by the context (top-k candidates, retrievals, n-grams): a token that is
                               not random is a draw from the one-hot at itself.
A rejected token keeps q(x) = 0 from then on (it was rejected, so q_i(x) < p_i(x) and max(0, q_i - p_i) is 0 there),
so a token drawn again is rejected for sure; its trial still moves q to the residual, which is why i.i.d. rules keep
every draw, repeats included (see verify_iid).
Shapes: K drafted tokens, V = n_vocab, m tree nodes; Q [1 + m, V] (row 0 after the root, row 1 + i after node i).
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


def verify_siblings(tokens, trials, Q, rng):
    """The walk behind every tree rule (module docstring): recursive rejection sampling over siblings.

    trials {node: [(child, p), ..]}: the children of each node (-1: the root) in the order they were drawn, each with
    the law p [V] its token was drawn from given the draws before it (None: a deterministic candidate, the one-hot at
    its token, made only if it is tried); a child may appear more than once (a token drawn twice and merged into one
    node). Q [1 + m, V] the target's laws. -> (path: accepted node indices, next token, its origin).
    Example: tokens [2, 0], trials {-1: [(0, None), (1, None)]} (deterministic candidates), Q[0] = [.5, 0, .5]:
    token 2 is kept with probability .5; else q becomes [1, 0, 0] and token 0 is kept for sure -> each with .5.
    """
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
    """SpecInfer's multi-step speculative sampling: siblings drawn i.i.d. (Miao et al. 2024, arXiv:2305.09781).

    Lossless because a fresh draw from p has law p whatever was drawn before it, so p is the law to judge it against
    (and to subtract after a rejection).
    P [n_draws, V]: the law of each draw (rows may differ: siblings from several drafters); draws: the node each draw
    landed on, in draw order, a node once per time its token was drawn (None: node i was drawn once, from P[i]).
    Merged duplicates: i.i.d. draws [a, b, a] under one node are nodes a, b with draws [a, b, a]. The second a can
    never be kept (a was rejected first) but its trial still moves q to norm(max(0, q - p)) before the walk samples:
    dropping it (trying each distinct token once) gives the wrong law (tests/test_verify_rules.py rejects it).
    """
    draws = range(len(tokens)) if draws is None else draws
    trials = {}
    for node, p in zip(draws, P):
        trials.setdefault(parents[node], []).append((node, p))
    return verify_siblings(tokens, trials, Q, rng)


def verify_without_replacement(tokens, parents, Q, P, rng):
    """Sequoia's verification: siblings drawn without replacement (Chen et al. 2024, arXiv:2402.12374, Alg. 1).

    Lossless because child i was drawn from p with children 1..i-1 removed and renormalised, and that is the law it is
    judged against: p_1 = p, p_(i+1) = norm(p_i with x_i set to 0); a rejection sets q_(i+1) = norm(max(0, q_i - p_i)).
    P [m, V]: the law node i and its siblings were drawn from, before any removal (the same row for siblings).
    Example: p = [.5, .3, .2], q = [.2, .5, .3], children [0, 1]: 0 is kept with probability .2 / .5 = .4; after a
    rejection q_2 = norm(max(0, q - p)) = norm([0, .2, .1]) = [0, 2/3, 1/3] and p_2 = norm([0, .3, .2]) = [0, .6, .4],
    so 1 is kept with probability 1 (the i.i.d. rule would judge it against p(1) = .3, with the same verdict here, but
    its residual after a rejection would differ: [0, 2/3, 1/3] - [.5, .3, .2] instead of - [0, .6, .4]).
    """
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
    """Deterministic candidates (top-k tokens, retrieved continuations, n-grams): lossless because a token fixed by the
    context is a draw from the one-hot e_x at itself: kept with probability q(x), else q loses x and is renormalised.
    At temperature 0 (q one-hot at the argmax) this is exact match: the greedy path (picospec.tree.greedy_path)."""
    trials = {}
    for node, parent in enumerate(parents):
        trials.setdefault(parent, []).append((node, None))  # p = e_x, made when x is tried
    return verify_siblings(tokens, trials, Q, rng)


def verify_tree(tokens, parents, Q, rng, P=None):
    """Multi-draft verification of a token tree, for existing callers: verify_distinct when P is None (every node a
    deterministic proposal: top-k or retrieved candidates), else verify_iid with node i drawn once from P [m, V].

    tokens/parents as in model.tree(); Q [1 + m, V] target distributions (row 0 after the root, row 1 + i after
    node i). For one child this is `accept_or_resample`. -> (path: accepted node indices, next token, its origin).
    """
    if P is None:
        return verify_distinct(tokens, parents, Q, rng)
    return verify_iid(tokens, parents, Q, P, rng)


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
