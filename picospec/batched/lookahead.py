"""Lookahead decoding (arXiv:2402.02057) for B prompts, each row with its own window and pool.
Shapes: B rows, W window, L levels, m_b nodes, V vocabulary.
"""
from picospec.batched.loop import batch_tree_decoding
from picospec.lookahead import (check_lookahead, first_window, jacobi_update, lookahead_tree,
                                pool_guesses, verification_branch)
from picospec.sampling import warp
from picospec.verify import verify_tree


def batch_lookahead_decoding(xs, target, N, rng, window=4, ngram=3, guesses=4, pool_cap=None,
                             stats=None, generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens; row b is lookahead_decoding(xs[b]) with
    generators[b]."""
    for x in xs:
        W, L, cap = check_lookahead(x, N, window, ngram, guesses, pool_cap, sampling_options)
    grids = [first_window([int(t) for t in x], W, L, (generators or {}).get(b, rng))
             for b, x in enumerate(xs)]
    pools = [{} for _ in xs]  # per row: key token -> [(N - 1)-token continuations], newest first
    # per row: the window's nodes in this step's tree (0: the window is skipped)
    n_look = [0] * len(xs)

    def propose(b, x, room):  # Step 1 of lookahead_decoding, on row b's window and pool
        look = W + L - 1 <= room + 1
        candidates = pool_guesses(pools[b], x[-1], guesses, room)
        tokens, parents, n_look[b] = lookahead_tree(grids[b] if look else [], candidates)
        return tokens, parents

    def verify(b, tokens, parents, Q, rng):  # Steps 3-4, on the row's [1 + m, V]
        if n_look[b]:
            grids[b] = jacobi_update(pools[b], grids[b], Q, W, L, cap)
        v_tokens, v_parents, rows = verification_branch(tokens, parents, Q, n_look[b])
        path, token, _ = verify_tree(v_tokens, v_parents, warp(rows, **sampling_options), rng)
        return [n_look[b] + j for j in path], token  # node indices of the combined tree

    return batch_tree_decoding(xs, target, N, rng, propose, verify, stats, generators)
