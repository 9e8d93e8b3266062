"""EAGLE-1: Li, Wei, Zhang, Zhang 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature
Uncertainty", ICML 2024 (arXiv:2401.15077); its p (target) and p-hat (draft) are q and p here.
m tree nodes, V = n_vocab, C = n_embd; F[j] the target's feature (last hidden state) after x[j].

Each step, after the root (the target's own token, always kept):
1. draft_tree: the head (one transformer block on the features F and the tokens shifted by one)
   guesses the next feature, the frozen LM head turns it into p, and a static tree of rank paths
   is filled a level per head call: the top-ranked tokens, or tokens drawn without replacement;
2. one tree-attention call of the target scores every node;
3. verify_static_tree: greedy path at temperature 0; else drawn children are judged against the
   law they were drawn from (verify_without_replacement) and ranked ones as one-hot proposals;
4. the accepted path joins x, and the target's true features for it join F."""
import numpy as np

from picospec.sampling import check_inputs, first_token, sample_without_replacement, softmax, warp
from picospec.tree import (chain_choices, check_choices, depth as tree_depth, greedy_origin,
                           greedy_path, sort_choices, sparse_tree, subtree, top_ranked)
from picospec.verify import step_record, verify_tree, verify_without_replacement

CANDIDATES = ("sample", "topk")
TREES = ("sparse", "chain")


def static_tree(tree, accuracy=None, nodes=10, depth=5):
    """Rank paths: "chain", "sparse" (on the head's accuracy [depth, ranks]) or those given."""
    if tree == "chain":
        return chain_choices(depth)
    if tree == "sparse":
        if accuracy is None:
            raise ValueError("no accuracy record to build the sparse tree from")
        return sparse_tree(np.asarray(accuracy)[:depth], nodes)[0]  # accuracy [depth, ranks]
    check_choices(tree)
    return sort_choices(tree)


def levels(choices):
    """Rank paths by depth: [[0], [1], [0, 0]] -> {1: [(0,), (1,)], 2: [(0, 0)]}."""
    out = {}
    for c in sort_choices(choices):
        out.setdefault(len(c), []).append(c)
    return out


def by_parent(level, node):
    kids = {}
    for c in level:
        if c[:-1] in node:
            kids.setdefault(c[:-1], []).append(c)
    return kids


def head_children(z, below, rng, sampled, sampling_options):
    """One node's children from logits z [V] -> [(rank path, token, law [V] or None)]."""
    if sampled:
        p = warp(softmax(z), **sampling_options)  # [V] the law the children are drawn from
        return [(c, t, p) for c, t in zip(below, sample_without_replacement(p, len(below), rng))]
    candidates = top_ranked(z, max(c[-1] for c in below) + 1)
    return [(c, candidates[c[-1]], None) for c in below if c[-1] < len(candidates)]


def draft_tree(x, F, draft, choices, rng, sampled, sampling_options):
    """Step 1: one head call per level -> (tokens, parents, laws [V] each, None if ranked)."""
    # node: rank path -> tree node (the root: -1)
    tokens, parents, laws, node = [], [], [], {(): -1}
    run = []  # nodes the head has run: row 1 + i of its output is the law after run[i]
    for level in levels(choices).values():
        kids = by_parent(level, node)
        run += [i for i in dict.fromkeys(node[c] for c in kids) if i >= 0 and i not in run]
        logits = draft(x, F, *subtree(tokens, parents, run))  # [1 + len(run), V]
        row = {-1: 0, **{i: 1 + k for k, i in enumerate(run)}}
        for path, below in kids.items():
            for c, token, law in head_children(logits[row[node[path]]], below, rng, sampled,
                                               sampling_options):
                node[c] = len(tokens)
                tokens.append(token)
                parents.append(node[path])
                laws.append(law)
    return tokens, parents, (laws if sampled else None)


def verify_static_tree(tokens, parents, laws, logits, greedy, rng, sampling_options):
    """Step 3 on the target's logits [1 + m, V] -> (path, next root, origin)."""
    if greedy:
        path, root = greedy_path(tokens, parents, logits)
        return path, root, greedy_origin(parents, path)
    Q = warp(softmax(logits), **sampling_options)  # [1 + m, V] the target's laws
    if laws:  # sampled children: judged against the law they were drawn from
        return verify_without_replacement(tokens, parents, Q, laws, rng)
    # deterministic candidates (or no tree): one-hot proposals
    return verify_tree(tokens, parents, Q, rng)


def check_tree(candidates, choices):  # ValueError for an unknown candidates rule or a bad tree
    if candidates not in CANDIDATES:
        raise ValueError(f"unknown candidates {candidates!r}: choose one of "
                         f"{', '.join(CANDIDATES)}")
    check_choices(choices)


def eagle_decoding(x, target, draft, N, rng, choices, candidates="sample", stats=None,
                   **sampling_options):
    """x then N tokens of the warped target's law (greedy at T = 0)."""
    check_inputs(x, N, 1, **sampling_options)
    check_tree(candidates, choices)
    greedy = sampling_options.get("temperature", 1) == 0
    x, T = [int(t) for t in x], len(x) + N
    # prefill: [L, V], the features of every prompt position [L, C]
    logits, H = target.logits(x, len(x), hidden=True)
    F = list(H)  # F[j]: the target's feature after x[j]
    root = first_token(logits[-1], greedy, rng, **sampling_options)
    if stats is not None:
        stats.append(step_record([root], ["bonus"], drafted=0))  # the prefill call
    while True:
        x.append(root)  # the root is always accepted
        if len(x) == T:
            break
        # Step 1: the static tree, cut to the tokens still needed (each step ends with one token of
        # the target's)
        cut = [c for c in choices if len(c) <= T - len(x) - 1]
        sampled = candidates == "sample" and not greedy
        tokens, parents, laws = (draft_tree(x, F, draft, cut, rng, sampled, sampling_options)
                                 if cut else ([], [], None))
        # Step 2: one tree-attention forward of the target over every node
        logits, H = target.tree(x, tokens, parents, hidden=True)  # [1 + m, V], [1 + m, C]
        # Step 3: lossless verification
        path, root, origin = verify_static_tree(tokens, parents, laws, logits, greedy, rng,
                                                sampling_options)
        # Step 4: keep the path; its true features (the root's row, then the accepted nodes') feed
        # the head
        target.accept(path)
        F += [H[0]] + [H[1 + i] for i in path]
        x += [tokens[i] for i in path]
        if stats is not None:
            stats.append(step_record([tokens[i] for i in path] + [root],
                                     ["draft"] * len(path) + [origin],
                                     drafted=tree_depth(parents), nodes=len(tokens)))
    return x
