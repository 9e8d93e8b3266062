"""Medusa (arXiv:2401.10774) for B prompts: each row's tree from its heads' guesses, all rows scored
in one target call. Shapes: B rows, m_b nodes of row b, V n_vocab, C n_embd.
"""
import numpy as np

from picospec.batched.loop import root_rounds
from picospec.medusa import (POSTERIORS, evaluate_posterior, generate_candidates, root_is_greedy,
                             tree_shape)
from picospec.sampling import check_inputs, first_token
from picospec.tree import check_choices, medusa_buffers


def batch_medusa_decoding(xs, target, heads, N, rng, medusa_choices, topk=10, posterior="greedy",
                          epsilon=0.09, delta=0.3, nucleus_p=0.8, stats=None, generators=None,
                          **sampling_options):
    """Each prompt of xs followed by N tokens; row b is medusa_decoding(xs[b]) with
    generators[b]."""
    for x in xs:
        check_inputs(x, N, 1, **sampling_options)
    if posterior not in POSTERIORS:
        raise ValueError(f"unknown posterior {posterior!r}: choose one of {', '.join(POSTERIORS)}")
    xs, T = [[int(t) for t in x] for x in xs], [len(x) + N for x in xs]
    gen = [(generators or {}).get(b, rng) for b in range(len(xs))]
    logits, h = target.logits(xs, 1, hidden=True)  # prefill: [B, 1, V], [B, 1, C]
    check_choices(medusa_choices, n_heads=heads(h[0]).shape[0], topk=topk)
    full = medusa_buffers(medusa_choices, topk)
    greedy = root_is_greedy(posterior, sampling_options)
    roots = [first_token(logits[b, 0], greedy, gen[b], **sampling_options) for b in range(len(xs))]
    h = list(h)  # [1, C] per row: the hidden state the heads read
    if stats is not None:
        stats.append({"drafted": 0, "nodes": 0, "accepted": [0] * len(xs),
                      "tokens": [[r] for r in roots]})
    # Step 0 of each round: each row's root (the LM head's token) is always accepted; rows that are
    # complete leave
    for active in root_rounds(xs, T, roots):
        # Step 1: each row's candidate tree from its heads' top-k (one call of the heads for all
        # rows), no deeper than its tokens still need
        shapes = [tree_shape(medusa_choices, full, topk, T[b] - len(xs[b]) - 1) for b in active]
        depth = max(d for _, d in shapes)
        # [depth, B, V]
        guesses = heads(np.concatenate([h[b] for b in active]), depth) if depth else None
        trees = [(generate_candidates(roots[b], guesses[:d, i], buffers, topk),
                  buffers["parents"], d) if d else ([], [], 0)
                 for i, (b, (buffers, d)) in enumerate(zip(active, shapes))]
        # Step 2: ONE batched tree-attention forward scores every row's root and nodes:
        # per row [1 + m_b, V], [1 + m_b, C]
        logits, h_tree = target.tree([xs[b] for b in active], [(t, p) for t, p, _ in trees],
                                     hidden=True)
        # Step 3: each row's posterior picks its accepted path and next root
        step = {"drafted": depth, "nodes": max(len(t) for t, _, _ in trees),
                "accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}
        paths = []
        for i, (b, (tokens, parents, _)) in enumerate(zip(active, trees)):
            path, roots[b], _ = evaluate_posterior(tokens, parents, logits[i], posterior, gen[b],
                                                   epsilon, delta, nucleus_p, **sampling_options)
            paths.append(path)
            h[b] = h_tree[i][[(path[-1] + 1) if path else 0]]  # [1, C]
            step["accepted"][b] = len(path)
            step["tokens"][b] = [tokens[j] for j in path] + [roots[b]]
        # Step 4: every row keeps its accepted path in its cache
        target.accept(paths)
        for b, path, (tokens, _, _) in zip(active, paths, trees):
            xs[b].extend(tokens[j] for j in path)
        if stats is not None:
            stats.append(step)
    return xs
