"""Sequoia (arXiv:2402.12374) for B prompts: trees filled a level per batched draft call, all rows
verified in one target call. Shapes: B rows, m_b nodes of row b, V n_vocab.
"""
from picospec.batched.loop import batch_tree_decoding
from picospec.sampling import check_inputs, check_vocab
from picospec.sequoia import (check_sequoia, child_counts, draft_children, sequoia_tree,
                              verify_filled)


def batch_sequoia_decoding(xs, draft, target, N, rng, nodes=3, depth=3, *, acceptance, stats=None,
                           generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is sequoia_decoding(xs[b]) with
    generators[b]."""
    for x in xs:
        check_inputs(x, N, **sampling_options)
    check_vocab(draft, target)
    check_sequoia(acceptance, nodes, depth)
    greedy = sampling_options.get("temperature", 1.0) == 0
    choices, _ = sequoia_tree(acceptance, nodes + 1, depth)
    gen, kids, trees = [(generators or {}).get(b, rng) for b in range(len(xs))], {}, {}

    # Step 1 for every active row, parents first, one level per draft call
    def propose(bs, rows, rooms):
        for b, room in zip(bs, rooms):
            kids[b] = child_counts([c for c in choices if len(c) <= room])
            trees[b] = ([], [], [], {(): -1})  # tokens, parents, P, rank path -> node
        for level in range(max((len(c) + 1 for b in bs for c in kids[b]), default=0)):
            laws = draft.tree(rows, [trees[b][:2] for b in bs], probs=True)  # per row [1 + m, V]
            for i, b in enumerate(bs):
                tokens, parents, P, node = trees[b]
                for c, k in kids[b].items():
                    if len(c) == level and c in node:
                        picks, law = draft_children(laws[i][node[c] + 1], k, gen[b], greedy,
                                                    **sampling_options)
                        for rank, token in enumerate(picks):
                            node[c + (rank,)] = len(tokens)
                            tokens.append(int(token))
                            parents.append(node[c])
                            P.append(law)
        return [trees[b][:2] for b in bs]

    def verify(b, tokens, parents, Q, rng):  # Step 3 on the row's [1 + m, V]
        path, token, _ = verify_filled(tokens, parents, trees[b][2], Q, rng, greedy,
                                       **sampling_options)
        return path, token

    return batch_tree_decoding(xs, target, N, rng, propose, verify, stats, generators,
                               propose_rows=True)
