"""EAGLE-2 (Li, Wei, Zhang, Zhang 2024, "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees",
arXiv:2406.16858): EAGLE's head (picospec/eagle.py, gpt2/eagle.py), but the tree is grown for each context by the
head's own confidence instead of being fixed in advance.

The paper's observation: the head's probability of a token approximates the chance the target accepts it, so a node's
value V_i = prod of the head's probabilities along its path (here log V_i = sum of log p, "the cumulative draft
log-probability") approximates the chance the whole path is accepted. Shapes: V n_vocab; n drafted nodes, m kept.
    draft(x, F, tokens, parents) -> logits [1 + m, V]       (the contract of picospec/eagle.py)

One step (x ends with the root):
  Step 1 (expansion): the root's top_k tokens are layer 1. For each further layer (depth layers in all): the head
          runs on the top_k nodes of the layer with the highest value (one head call per layer), and each of them
          gets its top_k tokens as children, value = parent's value + log p(child). Every child joins the draft pool;
          the top_k of them by value are the next layer's nodes to expand.
  Step 2 (reranking): of all drafted nodes, keep the total_tokens of highest value. A child's value is never above its
          parent's (log p <= 0), and ties go to the node drafted first, so the kept nodes form a tree (every kept
          node's parent is kept); flattened in the order drafted, parents come before children.
  Step 3: one target forward scores the kept tree; verification as for EAGLE-1 with top-k candidates: the greedy path
          at temperature 0, verify_tree with one-hot proposals above (the candidates are fixed by the context, and the
          siblings are distinct, being one node's top-k), so the output follows the warped target exactly.
  Step 4: keep the accepted path; its true features join F.
Worked example (tests/test_eagle.py checks it): top_k 2, the root's law [.6, .3, .1] over tokens 0..2 -> layer 1 is
tokens 0 (log .6) and 1 (log .3); if the head then gives token 0's children [.9, .05, .05], child 0 has value log .54,
above token 1's log .3, so with total_tokens 2 the tree is the chain 0 -> 0.
"""
import numpy as np

from picospec.sampling import check_inputs, sample, warp
from picospec.tree import children, greedy_path, depth as tree_depth, top_ranked
from picospec.verify import step_record, verify_tree


def log_softmax(logits):  # [..., V] -> [..., V], float64
    z = logits.astype(np.float64) - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def expand(x, F, draft, depth, top_k):
    """Step 1: the draft pool -> tokens, parents (pool nodes, -1: the root), values (cumulative log p), in the order
    drafted (by layer, so a parent comes before its children)."""
    logp = log_softmax(draft(x, F)[0])  # [V] the head's law after the root
    tokens, parents, values = [], [], []
    for t in top_ranked(logp, top_k):  # layer 1: the root's top_k
        tokens.append(t), parents.append(-1), values.append(logp[t])
    layer, run = list(range(len(tokens))), []  # layer: pool nodes to expand; run: nodes the head has run, in order
    for _ in range(depth - 1):
        run += layer
        logits = draft(x, F, [tokens[i] for i in run], [run.index(parents[i]) if parents[i] >= 0 else -1 for i in run])
        new = []
        for i in layer:  # each expanded node's top_k children
            logp = log_softmax(logits[1 + run.index(i)])  # [V]
            for t in top_ranked(logp, top_k):
                new.append(len(tokens))
                tokens.append(t), parents.append(i), values.append(values[i] + logp[t])
        layer = sorted(new, key=lambda i: -values[i])[:top_k]  # the next layer: the top_k new nodes by value
    return tokens, parents, values


def rerank(tokens, parents, values, total_tokens):
    """Step 2: the total_tokens nodes of highest value (ties: drafted first), in drafted order, re-indexed.
    -> tokens, parents, values of the kept tree."""
    kept = sorted(sorted(range(len(tokens)), key=lambda i: (-values[i], i))[:total_tokens])
    new = {old: i for i, old in enumerate(kept)}
    return [tokens[i] for i in kept], [new[parents[i]] if parents[i] >= 0 else -1 for i in kept], \
        [values[i] for i in kept]


def dynamic_tree(x, F, draft, depth, top_k, total_tokens):
    """Steps 1 and 2: the draft tree for this context -> tokens, parents, values."""
    return rerank(*expand(x, F, draft, depth, top_k), total_tokens)


def eagle2_decoding(x, target, draft, N, rng, depth=5, tree_top_k=4, total_tokens=16, stats=None, **sampling_options):
    """x followed by N tokens of the warped target's law (its greedy tokens at temperature 0).
    tree_top_k is the paper's top-k (--top_k is the shared sampling option that warps the target's law)."""
    check_inputs(x, N, 1, **sampling_options)
    for name, value in (("depth", depth), ("tree_top_k", tree_top_k), ("total_tokens", total_tokens)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value}")
    greedy = sampling_options.get("temperature", 1) == 0
    x, T = [int(t) for t in x], len(x) + N
    logits, H = target.logits(x, len(x), hidden=True)  # prefill: [L, V], [L, C]
    F = list(H)  # F[j]: the target's feature after x[j]
    law = warp(np.exp(log_softmax(logits[-1])), **sampling_options)
    root = int(np.argmax(logits[-1])) if greedy else sample(law, rng)
    if stats is not None:
        stats.append(step_record([root], ["bonus"], drafted=0))  # the prefill call
    while True:
        x.append(root)  # the root is always accepted
        if len(x) == T:
            break
        # Steps 1-2: expand and rerank, no deeper than the tokens still needed
        levels = min(depth, T - len(x) - 1)
        tokens, parents, _ = dynamic_tree(x, F, draft, levels, tree_top_k, total_tokens) if levels else ([], [], [])
        # Step 3: one tree-attention forward; lossless verification of deterministic, distinct candidates
        logits, H = target.tree(x, tokens, parents, hidden=True)  # [1 + m, V], [1 + m, C]
        if greedy:
            path, root = greedy_path(tokens, parents, logits)
            origin = "bonus" if not children(parents)[path[-1] if path else -1] else "resample"
        else:
            path, root, origin = verify_tree(tokens, parents, warp(np.exp(log_softmax(logits)), **sampling_options),
                                             rng)
        # Step 4: keep the path; its true features feed the head
        target.accept(path)
        F += [H[0]] + [H[1 + i] for i in path]
        x += [tokens[i] for i in path]
        if stats is not None:
            stats.append(step_record([tokens[i] for i in path] + [root], ["draft"] * len(path) + [origin],
                                     drafted=tree_depth(parents), nodes=len(tokens)))
    return x
