"""REST (arXiv:2311.08252) for B prompts: each row's trie from the one datastore, all scored in one
tree call. Shapes: B rows, m_b nodes of row b, V vocabulary.
"""
from picospec.batched.loop import batch_tree_decoding
from picospec.rest import check_rest, retrieve
from picospec.sampling import warp
from picospec.verify import verify_tree


def batch_rest_decoding(xs, target, N, rng, datastore, max_matches=100, draft_len=10,
                        num_draft_nodes=7, stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is rest_decoding(xs[b]) with generators[b]."""
    for x in xs:
        check_rest(x, N, target, datastore, max_matches, draft_len, num_draft_nodes,
                   sampling_options)

    def propose(b, x, room):  # Steps 1-2 of rest_decoding
        return retrieve(datastore, x, room, max_matches, draft_len, num_draft_nodes)

    # Step 4: recursive rejection over the trie's one-hot proposals
    def verify(b, tokens, parents, probs, rng):
        path, token, _ = verify_tree(tokens, parents, warp(probs, **sampling_options), rng)
        return path, token

    return batch_tree_decoding(xs, target, N, rng, propose, verify, stats, generators)
