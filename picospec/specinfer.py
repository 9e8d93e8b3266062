"""SpecInfer: a token tree from draft samples, scored in one tree-attention forward, verified by multi-step
speculative sampling (Miao et al. 2024, "SpecInfer: Accelerating Large Language Model Serving with Tree-based
Speculative Inference and Verification", arXiv:2305.09781, sections 3 and 4).

Notation: the paper's small speculative models (SSMs) are our drafts, with law p (Chen's letter, as in
picospec/verify.py); the LLM is the target, law q. An expansion configuration <k_1, .., k_d> (section 3,
"expansion-based construction") gives every node of depth i - 1 k_i children at step i: <1, 1, 3, 1, 1, 1, 1, 1>
grows one path, branches three ways at depth 3 and continues each branch to depth 8 (1 + 1 + 3 + 5 * 3 = 20 nodes).
With several drafts ("merge-based construction") each grows its own tree from the same configuration and the trees
are merged into one trie. The target scores the trie in one forward pass where a node attends to its ancestors only
(picospec.tree.ancestor_mask), and the verifier walks it (section 4). Shapes: V n_vocab, m tree nodes.

Temperature > 0: a node's k_i children are i.i.d. samples from the warped draft at that node (each draft's own law).
Samples of the same token are one node of the trie, scored once and expanded once (by every draft that drew it), but
every draw is kept, in order, with the law it came from (picospec.tree.DrawTrie), and verify_iid tries them all.
Lossless, proof: a draw's law given everything drawn before it is the law of the draft that drew it at that node, so
each trial meets verify_iid's condition (picospec/verify.py); merging changes where a draw is scored, not its law nor
its trial. What merging must not do is drop the repeats: a repeated token, once rejected, is rejected again for sure,
but that trial moves q to norm(max(0, q - p)) before the next sibling is tried (tests/test_verify_rules.py shows that
trying each distinct token once gives the wrong law).
Temperature 0 ("the greedy path"): the children are the draft's top-k_i tokens, verified by verify_distinct, which at
temperature 0 keeps exactly the argmax matches.
"""
import numpy as np

from picospec.sampling import check_inputs, check_vocab, sample, warp
from picospec.tree import DrawTrie, depth, node_path, top_tokens
from picospec.verify import step_record, verify_distinct, verify_iid


def grow(draft, x, expansion, trie, rng, greedy, **sampling_options):
    """Expansion-based construction for one draft, merged into `trie`: at step i every node of depth i - 1 that this
    draft reached gets k_i = expansion[i - 1] children (i.i.d. samples, or the top k_i tokens when greedy)."""
    frontier = [-1]  # the nodes this draft reached at the previous depth (-1: the root)
    for k in expansion:
        reached = []
        for node in frontier:
            p = draft(x + node_path(trie.tokens, trie.parents, node))[-1]  # [V] the draft's law after the node
            if greedy:
                picks = top_tokens(p, k)
            else:
                p = warp(p, **sampling_options)
                picks = [sample(p, rng) for _ in range(k)]
            for token in picks:
                child = trie.draw(node, token, p)
                if child not in reached:
                    reached.append(child)
        frontier = reached
    return trie


def specinfer_decoding(x, draft, target, N, rng, expansion=(1, 1, 2), stats=None, **sampling_options):
    """x followed by N tokens distributed as sampling from the warped target (greedy decoding at temperature 0).

    draft: a model, or a list of models whose trees are merged (each node remembers the law it was drawn from).
    target: the model contract plus target.tree(x, tokens, parents, probs=True) -> [1 + m, V] and target.accept(path).
    stats: one picospec.verify.step_record per target call: drafted = the tree's depth, nodes = its size.
    """
    check_inputs(x, N, **sampling_options)
    if len(expansion) == 0 or any(int(k) != k or k < 1 for k in expansion):
        raise ValueError(f"expansion must be positive integers like (1, 1, 3, 1): children per node at each depth; "
                         f"got {expansion}")
    drafts = list(draft) if isinstance(draft, (list, tuple)) else [draft]
    greedy = sampling_options.get("temperature", 1.0) == 0
    x, T = [int(t) for t in x], len(x) + N
    while len(x) < T:
        # Step 1: every draft grows its tree from the expansion configuration, no deeper than the tokens still needed
        # minus one; the trees merge into one trie that keeps every draw and its law
        trie = DrawTrie()
        for model in drafts:
            grow(model, x, expansion[:T - len(x) - 1], trie, rng, greedy, **sampling_options)
        tokens, parents = trie.tokens, trie.parents
        # Step 2: one tree-attention forward of the target scores the root's successor and every node's successor
        Q = warp(target.tree(x, tokens, parents, probs=True), **sampling_options)  # [1 + m, V]
        if trie.laws:
            check_vocab(trie.laws[0], Q)
        # Step 3: multi-step speculative sampling over the draws (exact match at temperature 0)
        if greedy:
            path, token, origin = verify_distinct(tokens, parents, Q, rng)
        else:
            path, token, origin = verify_iid(tokens, parents, Q, np.array(trie.laws), rng, trie.draws)
        target.accept(path)
        new = [tokens[i] for i in path] + [int(token)]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * len(path) + [origin], drafted=depth(parents), nodes=len(tokens)))
    return x
