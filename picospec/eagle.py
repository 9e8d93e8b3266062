"""EAGLE-1 (Li, Wei, Zhang, Zhang 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty",
arXiv:2401.15077): a one-block head drafts at the feature level (gpt2/eagle.py); a static tree of its guesses is scored
by one tree-attention forward of the target and verified losslessly.

Symbols (the paper's): t_i the tokens, f_i the target's feature (last hidden state) at position i; the head guesses
f_(i+1) from f_(<=i) and t_(<=i+1), and the target's frozen LM head turns the guess into p, the draft law of t_(i+2);
q is the target's law. Shapes: m tree nodes, V n_vocab, C n_embd. The models, as functions:
    target.logits(x, n, hidden=True) -> logits [n, V], features [n, C]         (prefill)
    target.tree(x, tokens, parents, hidden=True) -> logits [1 + m, V], features [1 + m, C]
    draft(x, F, tokens, parents) -> logits [1 + m, V]      F: the target's features at x's positions but the last
Row 0 of draft is its law of the token after x; row 1 + i its law after node i, which it reaches on its own guessed
features (so the tree is drafted a level per call). The head keeps its context cached, like the engine.

One step (x ends with the root: the token the last verification produced, always accepted):
  Step 1: draft the static tree `choices` (rank paths, picospec/tree.py) level by level. The children of a node are
          at temperature 0 or with candidates="topk": the head's top-ranked tokens (rank r: the (r+1)-th most likely),
          deterministic given the context;
          at temperature > 0 with candidates="sample": tokens drawn one after another without replacement from the
          head's law p, warped like the target's (the paper's multi-round speculative sampling; a node's j-th child
          in rank order is the j-th draw).
  Step 2: one target forward scores every node (row 0 after the root, row 1 + i after node i).
  Step 3: verify: temperature 0: the greedy path (exact match); sampled children: verify_without_replacement, each
          judged against p with the siblings drawn before it removed; top-k children: verify_tree with one-hot
          proposals (a token fixed by the context is a draw from the one-hot at itself). Lossless both ways.
  Step 4: keep the accepted path in the target's cache; the root's and the accepted nodes' features, rows of the same
          forward, join F: the head's context always holds true features.
"""
import numpy as np

from picospec.sampling import check_inputs, sample, warp
from picospec.tree import (check_choices, children, depth as tree_depth, greedy_path, sort_choices, sparse_tree,
                           top_ranked)
from picospec.verify import step_record, verify_tree, verify_without_replacement

CANDIDATES = ("sample", "topk")
TREES = ("sparse", "chain")


def softmax(logits):  # [..., V] -> [..., V], float64
    z = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def draw_without_replacement(p, r, rng):
    """r tokens drawn one after another from p [V], each removed once drawn (fewer when p has fewer than r tokens)."""
    p, drawn = np.array(p, dtype=np.float64), []
    while len(drawn) < r and p.sum() > 0:
        drawn.append(sample(p, rng))  # sample() renormalises: a draw from p with the earlier draws removed
        p[drawn[-1]] = 0
    return drawn


def static_tree(tree, accuracy=None, nodes=10, depth=5):
    """The draft tree as rank paths: "chain" (depth top-1 tokens), "sparse" (Medusa's greedy construction,
    picospec.tree.sparse_tree, from the head's measured rank_share per step ahead: P(the true token k + 1 steps ahead
    is rank r | the k before it right), `nodes` nodes at most `depth` deep), or the paths themselves."""
    if tree == "chain":
        return [[0] * d for d in range(1, depth + 1)]
    if tree == "sparse":
        if accuracy is None:
            raise ValueError("this EAGLE head has no accuracy record to build the sparse tree from: pass --tree chain "
                             "or a list of rank paths like '[[0],[0,0],[1]]'")
        return sparse_tree(np.asarray(accuracy)[:depth], nodes)[0]
    check_choices(tree)
    return sort_choices(tree)


def draft_tree(x, F, draft, choices, rng, sampled, sampling_options):
    """Step 1: fill the rank paths `choices` with tokens, a level per head call.
    -> tokens, parents (node order: by depth, siblings in rank order), laws (the warped p each node was drawn from,
    for sampled children; None otherwise)."""
    tokens, parents, laws, index = [], [], [], {(): -1}  # index: rank path -> node (the root's is -1)
    run = []  # nodes the head has run (their laws are rows 1.. of its output), in the order it ran them
    levels = {}
    for c in sort_choices(choices):
        levels.setdefault(len(c), []).append(c)
    for d in sorted(levels):
        # the head's laws at the parents of this level: run the nodes of the level above that have children here
        wanted = [index[c[:-1]] for c in levels[d] if c[:-1] in index]
        run += [i for i in dict.fromkeys(wanted) if i >= 0 and i not in run]
        row = {-1: 0, **{node: 1 + k for k, node in enumerate(run)}}
        logits = draft(x, F, [tokens[i] for i in run], [run.index(parents[i]) if parents[i] >= 0 else -1 for i in run])
        # the children of each parent: deterministic top-ranked tokens, or draws without replacement from p
        kids = {}
        for c in levels[d]:
            if c[:-1] in index:
                kids.setdefault(c[:-1], []).append(c)
        for path, below in kids.items():
            parent = index[path]
            z = logits[row[parent]]  # [V]
            if sampled:
                p = warp(softmax(z), **sampling_options)  # [V] the law the children are drawn from
                candidates = draw_without_replacement(p, len(below), rng)
                ranked = list(zip(below, candidates))  # the j-th child is the j-th draw
            else:
                candidates = top_ranked(z, max(c[-1] for c in below) + 1)
                ranked = [(c, candidates[c[-1]]) for c in below if c[-1] < len(candidates)]  # ranks past V: none
            for c, token in ranked:
                index[c] = len(tokens)
                tokens.append(token)
                parents.append(parent)
                laws.append(p if sampled else None)
    return tokens, parents, (laws if sampled else None)


def eagle_decoding(x, target, draft, N, rng, choices, candidates="sample", stats=None, **sampling_options):
    """x followed by N tokens of the warped target's law (its greedy tokens at temperature 0)."""
    check_inputs(x, N, 1, **sampling_options)
    if candidates not in CANDIDATES:
        raise ValueError(f"unknown candidates {candidates!r}: choose one of {', '.join(CANDIDATES)}")
    check_choices(choices)
    greedy = sampling_options.get("temperature", 1) == 0
    x, T = [int(t) for t in x], len(x) + N
    logits, H = target.logits(x, len(x), hidden=True)  # prefill: [L, V], the features of every prompt position [L, C]
    F = list(H)  # F[j]: the target's feature after x[j]
    root = int(np.argmax(logits[-1])) if greedy else sample(warp(softmax(logits[-1]), **sampling_options), rng)
    if stats is not None:
        stats.append(step_record([root], ["bonus"], drafted=0))  # the prefill call
    while True:
        x.append(root)  # the root is always accepted
        if len(x) == T:
            break
        # Step 1: the static tree, cut to the tokens still needed (each step ends with one token of the target's)
        cut = [c for c in choices if len(c) <= T - len(x) - 1]
        tokens, parents, laws = draft_tree(x, F, draft, cut, rng, candidates == "sample" and not greedy,
                                           sampling_options) if cut else ([], [], None)
        # Step 2: one tree-attention forward of the target over every node
        logits, H = target.tree(x, tokens, parents, hidden=True)  # [1 + m, V], [1 + m, C]
        # Step 3: lossless verification
        if greedy:
            path, root = greedy_path(tokens, parents, logits)
            origin = "bonus" if not children(parents)[path[-1] if path else -1] else "resample"
        else:
            Q = warp(softmax(logits), **sampling_options)  # [1 + m, V] the target's laws
            if laws:  # sampled children: judged against the law they were drawn from
                path, root, origin = verify_without_replacement(tokens, parents, Q, laws, rng)
            else:  # deterministic candidates (or no tree): one-hot proposals
                path, root, origin = verify_tree(tokens, parents, Q, rng)
        # Step 4: keep the path; its true features (the root's row, then the accepted nodes') feed the head
        target.accept(path)
        F += [H[0]] + [H[1 + i] for i in path]
        x += [tokens[i] for i in path]
        if stats is not None:
            stats.append(step_record([tokens[i] for i in path] + [root], ["draft"] * len(path) + [origin],
                                     drafted=tree_depth(parents), nodes=len(tokens)))
    return x
