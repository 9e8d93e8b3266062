"""SpecInfer (arXiv:2305.09781) for B prompts: trees grown a level per batched draft call, all rows
verified in one target call. Shapes: B rows, m_b nodes of row b, V vocabulary.
"""
from picospec.batched.loop import batch_tree_decoding
from picospec.sampling import check_inputs, check_vocab
from picospec.specinfer import check_expansion, sample_children, verify_trie
from picospec.tree import DrawTrie


def batch_specinfer_decoding(xs, draft, target, N, rng, expansion=(1, 1, 2), stats=None,
                             generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is specinfer_decoding(xs[b]) with
    generators[b]."""
    for x in xs:
        check_inputs(x, N, **sampling_options)
    check_expansion(expansion)
    drafts = list(draft) if isinstance(draft, (list, tuple)) else [draft]
    for d in drafts:
        check_vocab(d, target)
    greedy = sampling_options.get("temperature", 1.0) == 0
    gen, tries = [(generators or {}).get(b, rng) for b in range(len(xs))], {}

    # Step 1 for every active row: one batched draft call per draft and level
    def propose(bs, rows, rooms):
        for b in bs:
            tries[b] = DrawTrie()
        for model in drafts:
            # per row: the nodes this draft reached at the previous depth
            frontier = {b: [-1] for b in bs}
            for level, k in enumerate(expansion[:max(rooms)]):
                # per row [1 + m, V]: row 1 + node is the law after that node
                laws = model.tree(rows, [(tries[b].tokens, tries[b].parents) for b in bs],
                                  probs=True)
                for i, b in enumerate(bs):
                    if level < rooms[i]:  # no deeper than the tokens the row still needs minus one
                        reached = []
                        for node in frontier[b]:
                            sample_children(tries[b], node, laws[i][node + 1], k, gen[b], greedy,
                                            reached, **sampling_options)
                        frontier[b] = reached
        return [(tries[b].tokens, tries[b].parents) for b in bs]

    def verify(b, tokens, parents, Q, rng):  # Step 3 on the row's [1 + m, V]
        path, token, _ = verify_trie(tries[b], Q, rng, greedy, **sampling_options)
        return path, token

    return batch_tree_decoding(xs, target, N, rng, propose, verify, stats, generators,
                               propose_rows=True)
