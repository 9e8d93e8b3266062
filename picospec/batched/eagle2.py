"""EAGLE-2 (arXiv:2406.16858) for B prompts: dynamic trees expanded a layer per batched head call,
all rows scored in one target call. Shapes: B rows, m_b nodes of row b, V n_vocab, C n_embd.
"""
from picospec.batched.loop import eagle_prefill, root_rounds
from picospec.eagle2 import (check_options, expand_layer, extend_context, features_read, rerank,
                             verify_dynamic_tree)
from picospec.sampling import first_token
from picospec.tree import depth as tree_depth, subtree


def batch_eagle2_decoding(xs, target, draft, N, rng, depth=5, tree_top_k=4, total_tokens=16,
                          stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is eagle2_decoding(xs[b]) with
    generators[b]."""
    greedy = check_options(xs, N, depth, tree_top_k, total_tokens, sampling_options)
    reads = features_read(draft)
    xs, T, gen, F, roots = eagle_prefill(xs, N, target, rng, generators,
                                         lambda z, g: first_token(z, greedy, g, **sampling_options),
                                         stats, reads)
    # each round: every row takes its root; the rows still short of T
    for active in root_rounds(xs, T, roots):
        # Step 1: every row's expansion, no deeper than the tokens it still needs, a layer per
        # batched head call
        levels = {b: min(depth, T[b] - len(xs[b]) - 1) for b in active}
        tokens_b, parents_b, values_b = ({b: [] for b in active} for _ in range(3))
        layer, run = {b: [-1] for b in active}, {b: [] for b in active}
        for d in range(max(levels.values())):
            rows = [b for b in active if levels[b] > d]
            for b in rows:
                run[b] += layer[b] if d else []
            out = draft(rows, [xs[b] for b in rows], [F[b] for b in rows],
                        [subtree(tokens_b[b], parents_b[b], run[b]) for b in rows])
            for b, z in zip(rows, out):  # z [1 + len(run), V] (EAGLE-3's head: [.., V_d])
                layer[b] = expand_layer(tokens_b[b], parents_b[b], values_b[b], layer[b], z, run[b],
                                        tree_top_k, getattr(draft, "d2t", None))
        # Step 2: each row's rerank
        trees = [rerank(tokens_b[b], parents_b[b], values_b[b], total_tokens)[:2] for b in active]
        # Step 3: ONE batched tree-attention forward scores every row's tree; each row verified with
        # its generator
        # per row [1 + m_b, V], [1 + m_b, C]
        logits, H = target.tree([xs[b] for b in active], trees, hidden=reads)
        verdicts = [verify_dynamic_tree(*tree, z, greedy, gen[b], sampling_options)
                    for b, tree, z in zip(active, trees, logits)]
        # Step 4: every row keeps its accepted path, in its cache and in x and F
        target.accept([path for path, _, _ in verdicts])
        step = {"drafted": max(tree_depth(p) for _, p in trees),
                "nodes": max(len(t) for t, _ in trees),
                "accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}
        for b, (tokens, _), h, (path, root, _) in zip(active, trees, H, verdicts):
            extend_context(xs[b], F[b], tokens, path, h)
            roots[b] = root
            step["accepted"][b], step["tokens"][b] = len(path), [tokens[i] for i in path] + [root]
        if stats is not None:
            stats.append(step)
    return xs
