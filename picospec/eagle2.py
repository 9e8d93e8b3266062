"""EAGLE-2: Li, Wei, Zhang, Zhang 2024, "EAGLE-2: Faster Inference of Language Models with Dynamic
Draft Trees", EMNLP 2024 (arXiv:2406.16858). The papers' p (target) and p-hat (the head's draft)
are q and p here; F holds the target's features (its last hidden states), which the head reads
with the tokens. m kept nodes, V = n_vocab.

Each step, in the paper's order:
1. expand: depth calls of the head grow a tree layer by layer; every node of a layer gets its
   top_k tokens, valued by the path's log-probability under the head (the sum of log p along it),
   and the top_k new nodes by value form the next layer;
2. rerank: the total_tokens nodes of highest value over the whole tree are kept (a node's value
   is never above its parent's, so the kept nodes form a tree);
3. verify_dynamic_tree: one target call scores every kept node, and the tree is verified
   (lossless: the siblings' rule of verify.py);
4. extend_context: the accepted path and the next token join the text, with their features.
"""
import numpy as np

from picospec.sampling import check_inputs, first_token, warp
from picospec.tree import (depth as tree_depth, greedy_origin, greedy_path, subtree,
                           top_ranked)
from picospec.verify import step_record, verify_tree


def log_softmax(logits):  # [..., V] -> [..., V], float64
    z = logits.astype(np.float64) - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def expand_layer(tokens, parents, values, layer, logits, run, top_k, d2t=None):
    """Each node of `layer` gets its top_k tokens, valued + log p -> the top_k new nodes. d2t: a
    head's own vocabulary (EAGLE-3), its logits' column j the target token d2t[j]."""
    new = []
    for i in layer:
        # [V] (or [V_d]) the head's law after node i
        logp = log_softmax(logits[0 if i < 0 else 1 + run.index(i)])
        for t in top_ranked(logp, top_k):
            new.append(len(tokens))
            value = (values[i] if i >= 0 else 0.0) + logp[t]  # the path's log-probability
            tokens.append(t if d2t is None else int(d2t[t]))
            parents.append(i)
            values.append(value)
    return sorted(new, key=lambda i: -values[i])[:top_k]


def expand(x, F, draft, depth, top_k):
    """Step 1: depth head calls -> (tokens, parents, values: the sum of log p along the path)."""
    tokens, parents, values = [], [], []
    # layer: the nodes to expand (the root first); run: the nodes the head has run
    layer, run = [-1], []
    for d in range(depth):
        if d > 0:  # the layer expanded last is now in the head's run
            run += layer
        layer = expand_layer(tokens, parents, values, layer,
                             draft(x, F, *subtree(tokens, parents, run)), run, top_k,
                             getattr(draft, "d2t", None))
    return tokens, parents, values


def rerank(tokens, parents, values, total_tokens):
    """Step 2: the total_tokens nodes of highest value, in drafted order, re-indexed."""
    kept = sorted(sorted(range(len(tokens)), key=lambda i: (-values[i], i))[:total_tokens])
    new = {old: i for i, old in enumerate(kept)}
    kept_parents = [new[parents[i]] if parents[i] >= 0 else -1 for i in kept]
    return [tokens[i] for i in kept], kept_parents, [values[i] for i in kept]


def dynamic_tree(x, F, draft, depth, top_k, total_tokens):
    return rerank(*expand(x, F, draft, depth, top_k), total_tokens)


def features_read(draft):
    """The target's features the head reads: its last hidden state (True), or the outputs of the
    blocks the head names (EAGLE-3's three depths, picospec/eagle3.py)."""
    return getattr(draft, "layers", True)


def check_options(xs, N, depth, tree_top_k, total_tokens, sampling_options):
    for x in xs:
        check_inputs(x, N, 1, **sampling_options)
    for name, value in (("depth", depth), ("tree_top_k", tree_top_k),
                        ("total_tokens", total_tokens)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value}")
    return sampling_options.get("temperature", 1) == 0


def verify_dynamic_tree(tokens, parents, logits, greedy, rng, sampling_options):
    """Step 3 on logits [1 + m, V]: greedy path, or one-hot proposals -> (path, root, origin)."""
    if greedy:
        path, root = greedy_path(tokens, parents, logits)
        return path, root, greedy_origin(parents, path)
    Q = warp(np.exp(log_softmax(logits)), **sampling_options)  # [1 + m, V]
    return verify_tree(tokens, parents, Q, rng)


def extend_context(x, F, tokens, path, H):
    """Step 4: accepted tokens join x, their features (rows of H [1 + m, C]) join F."""
    F += [H[0]] + [H[1 + i] for i in path]
    x += [tokens[i] for i in path]


def eagle2_decoding(x, target, draft, N, rng, depth=5, tree_top_k=4, total_tokens=16, stats=None,
                    **sampling_options):
    """x then N tokens of the warped target's law; tree_top_k is the paper's top-k."""
    greedy = check_options([x], N, depth, tree_top_k, total_tokens, sampling_options)
    x, T = [int(t) for t in x], len(x) + N
    reads = features_read(draft)
    logits, H = target.logits(x, len(x), hidden=reads)  # prefill: [L, V], [L, C]
    F = list(H)  # F[j]: the target's feature after x[j]
    root = first_token(logits[-1], greedy, rng, **sampling_options)
    if stats is not None:
        stats.append(step_record([root], ["bonus"], drafted=0))  # the prefill call
    while True:
        x.append(root)  # the root is always accepted
        if len(x) == T:
            break
        # Steps 1-2: expand and rerank, no deeper than the tokens still needed
        levels = min(depth, T - len(x) - 1)
        tokens, parents, _ = (dynamic_tree(x, F, draft, levels, tree_top_k, total_tokens)
                              if levels else ([], [], []))
        # Step 3: one tree-attention forward; lossless verification of deterministic, distinct
        # candidates
        logits, H = target.tree(x, tokens, parents, hidden=reads)  # [1 + m, V], [1 + m, C]
        path, root, origin = verify_dynamic_tree(tokens, parents, logits, greedy, rng,
                                                 sampling_options)
        # Step 4: keep the path; its true features feed the head
        target.accept(path)
        extend_context(x, F, tokens, path, H)
        if stats is not None:
            stats.append(step_record([tokens[i] for i in path] + [root],
                                     ["draft"] * len(path) + [origin],
                                     drafted=tree_depth(parents), nodes=len(tokens)))
    return x
