"""EAGLE-1 (arXiv:2401.15077) for B prompts: static trees drafted a level per batched head call,
all rows scored in one target call. Shapes: B rows, m_b nodes of row b, V n_vocab, C n_embd.
"""
from picospec.batched.loop import eagle_prefill, root_rounds
from picospec.eagle import by_parent, check_tree, head_children, levels, verify_static_tree
from picospec.sampling import check_inputs, first_token
from picospec.tree import depth as tree_depth, subtree


def batch_eagle_decoding(xs, target, draft, N, rng, choices, candidates="sample", stats=None,
                         generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is eagle_decoding(xs[b]) with generators[b]."""
    for x in xs:
        check_inputs(x, N, 1, **sampling_options)
    check_tree(candidates, choices)
    greedy = sampling_options.get("temperature", 1) == 0
    sampled = candidates == "sample" and not greedy
    xs, T, gen, F, roots = eagle_prefill(xs, N, target, rng, generators,
                                         lambda z, g: first_token(z, greedy, g, **sampling_options),
                                         stats)
    # each round: every row takes its root; the rows still short of T
    for active in root_rounds(xs, T, roots):
        # Step 1: every row's static tree, cut to the tokens it still needs, a level per batched
        # head call
        shape = {b: levels([c for c in choices if len(c) <= T[b] - len(xs[b]) - 1]) for b in active}
        tokens_b, parents_b, laws_b = ({b: [] for b in active} for _ in range(3))
        # rank path -> node; nodes run
        node, run = {b: {(): -1} for b in active}, {b: [] for b in active}
        for d in range(1, 1 + max(len(shape[b]) for b in active)):
            rows = [b for b in active if d in shape[b]]
            kids = {b: by_parent(shape[b][d], node[b]) for b in rows}
            for b in rows:
                run[b] += [i for i in dict.fromkeys(node[b][c] for c in kids[b])
                           if i >= 0 and i not in run[b]]
            # per row [1 + len(run), V]: the head's logits after the root and each node run
            out = draft(rows, [xs[b] for b in rows], [F[b] for b in rows],
                        [subtree(tokens_b[b], parents_b[b], run[b]) for b in rows])
            for b, logits in zip(rows, out):
                row = {-1: 0, **{i: 1 + k for k, i in enumerate(run[b])}}
                for path, below in kids[b].items():
                    z = logits[row[node[b][path]]]  # [V] the head's logits after the parent
                    for c, token, law in head_children(z, below, gen[b], sampled, sampling_options):
                        node[b][c] = len(tokens_b[b])
                        tokens_b[b].append(token)
                        parents_b[b].append(node[b][path])
                        laws_b[b].append(law)
        trees = [(tokens_b[b], parents_b[b], laws_b[b] if sampled else None) for b in active]
        # Step 2: ONE batched tree-attention forward scores every row's root and nodes:
        # per row [1 + m_b, V], [1 + m_b, C]
        logits, H = target.tree([xs[b] for b in active], [(t, p) for t, p, _ in trees], hidden=True)
        # Step 3: each row's verification
        step = {"drafted": max(tree_depth(p) for _, p, _ in trees),
                "nodes": max(len(t) for t, _, _ in trees),
                "accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}
        paths = []
        for i, (b, (tokens, parents, laws)) in enumerate(zip(active, trees)):
            path, roots[b], _ = verify_static_tree(tokens, parents, laws, logits[i], greedy, gen[b],
                                                   sampling_options)
            paths.append(path)
            # the root's and the accepted nodes' true features
            F[b] += [H[i][0]] + [H[i][1 + j] for j in path]
            step["accepted"][b] = len(path)
            step["tokens"][b] = [tokens[j] for j in path] + [roots[b]]
        # Step 4: every row keeps its accepted path in its cache
        target.accept(paths)
        for b, path, (tokens, _, _) in zip(active, paths, trees):
            xs[b] += [tokens[j] for j in path]
        if stats is not None:
            stats.append(step)
    return xs
