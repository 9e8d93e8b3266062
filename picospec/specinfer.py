"""SpecInfer: Miao et al. 2024, "SpecInfer: Accelerating Large Language Model Serving with
Tree-based Speculative Inference and Verification", ASPLOS 2024 (arXiv:2305.09781), sections 3-4;
its SSMs are drafts (p), its LLM the target (q). m nodes, V = n_vocab.

Each step:
1. grow: each draft expands a tree by the expansion configuration <k_1, .., k_d>: every node it
   reached at depth i - 1 gets k_i children drawn i.i.d. from its warped law p_s (its top k_i at
   temperature 0); the drafts' trees merge into one trie that keeps every draw and its law;
2. one tree-attention call of the target scores the root and every node;
3. verify_trie, multi-step speculative sampling: from the root, a node's draws are tried in turn,
   draw s kept with probability min(1, q(x_s) / p_s(x_s)) and a rejection replacing q by
   norm(max(0, q - p_s)); when none is kept the next token is drawn from the last q.

Why it is lossless, backwards from a node's last draw. Given the draws tried before it, draw s is
a fresh sample of p_s (i.i.d. draws depend neither on each other nor on the verifier's coins).
If the draws after it output a token of law norm(max(0, q - p_s)) (true when none is left: that
is the last q), trial s is verify.py's one-position rule against the current q, so it outputs
q. At the first draw q is the target's law after the node; the walk then repeats from the kept
child's row. A token drawn twice is one node, but both draws are tried: the second is rejected
for sure (q(x) = 0 after the first rejection), yet its trial moves q to the residual, and
skipping it gives the wrong law (docs/proofs.md)."""
import numpy as np

from picospec.sampling import check_inputs, check_vocab, sample, warp
from picospec.tree import DrawTrie, depth, node_path, top_tokens
from picospec.verify import step_record, verify_distinct, verify_iid


def sample_children(trie, node, p, k, rng, greedy, reached, **sampling_options):
    """k children of `node` from p [V] into `trie`: i.i.d., or its top k when greedy."""
    if greedy:
        picks = top_tokens(p, k)
    else:
        p = warp(p, **sampling_options)
        picks = [sample(p, rng) for _ in range(k)]
    for token in picks:
        child = trie.draw(node, token, p)
        if child not in reached:
            reached.append(child)


def grow(draft, x, expansion, trie, rng, greedy, **sampling_options):
    """Step 1 for one draft: each node it reached at depth i - 1 gets expansion[i - 1] children."""
    frontier = [-1]  # the nodes this draft reached at the previous depth (-1: the root)
    for k in expansion:
        reached = []
        for node in frontier:
            # [V] the draft's law after the node
            p = draft(x + node_path(trie.tokens, trie.parents, node))[-1]
            sample_children(trie, node, p, k, rng, greedy, reached, **sampling_options)
        frontier = reached
    return trie


def verify_trie(trie, Q, rng, greedy, **sampling_options):
    """Step 3 on the target's Q [1 + m, V] -> (path, token, origin)."""
    Q = warp(Q, **sampling_options)
    if greedy:
        return verify_distinct(trie.tokens, trie.parents, Q, rng)
    P = np.array(trie.laws)  # [draws, V] the law of each draw
    return verify_iid(trie.tokens, trie.parents, Q, P, rng, trie.draws)


def check_expansion(expansion):
    if len(expansion) == 0 or any(int(k) != k or k < 1 for k in expansion):
        raise ValueError(f"expansion must be positive integers like (1, 1, 3, 1): children per "
                         f"node at each depth; got {expansion}")


def specinfer_decoding(x, draft, target, N, rng, expansion=(1, 1, 2), stats=None,
                       **sampling_options):
    """x then N tokens of the warped target's law (greedy at T = 0)."""
    check_inputs(x, N, **sampling_options)
    check_expansion(expansion)
    drafts = list(draft) if isinstance(draft, (list, tuple)) else [draft]
    for d in drafts:
        check_vocab(d, target)
    greedy = sampling_options.get("temperature", 1.0) == 0
    x, T = [int(t) for t in x], len(x) + N
    while len(x) < T:
        # Step 1: every draft grows its tree from the expansion configuration, no deeper than the
        # tokens still needed minus one; the trees merge into one trie that keeps every draw and its
        # law
        trie = DrawTrie()
        for model in drafts:
            grow(model, x, expansion[:T - len(x) - 1], trie, rng, greedy, **sampling_options)
        tokens, parents = trie.tokens, trie.parents
        # Step 2: one tree-attention forward of the target scores the root's successor and every
        # node's successor
        Q = target.tree(x, tokens, parents, probs=True)  # [1 + m, V]
        # Step 3: multi-step speculative sampling over the draws (exact match at temperature 0)
        path, token, origin = verify_trie(trie, Q, rng, greedy, **sampling_options)
        target.accept(path)
        new = [tokens[i] for i in path] + [int(token)]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * len(path) + [origin], drafted=depth(parents),
                                     nodes=len(tokens)))
    return x
