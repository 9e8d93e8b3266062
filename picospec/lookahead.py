"""Lookahead decoding (Fu, Bailis, Stoica, Zhang 2024, "Break the Sequential Dependency of LLM
Inference Using Lookahead Decoding", arXiv:2402.02057; LMSYS blog, November 2023). No draft model:
Jacobi iteration on a window of guesses produces n-grams, a pool remembers them, and the pooled
n-grams that continue the text are verified, both branches in one forward pass of the target.
Shapes: W = window, L = ngram - 1 levels, m tree nodes (m_v of them in the verification branch), V =
n_vocab. More: docs/algorithms.md (lookahead.py).
"""
import numpy as np

from picospec.sampling import check_inputs, warp
from picospec.tree import depth, trie
from picospec.verify import step_record, verify_tree


def lookahead_tree(window, candidates):
    """Both branches as one tree -> (tokens [m], parents [m], n_look = W * L lookahead nodes). More:
    docs/algorithms.md (lookahead.py, lookahead_tree)."""
    W = len(window[0]) if window else 0
    tokens, parents = [], []
    for level, row in enumerate(window):
        for i, t in enumerate(row):
            tokens.append(int(t))
            # (0, i - 1), or (l - 1, i)
            parents.append(i - 1 if level == 0 else (level - 1) * W + i)
    n_look = len(tokens)
    v_tokens, v_parents, _ = trie(candidates)
    return tokens + v_tokens, parents + [p + n_look if p >= 0 else -1 for p in v_parents], n_look


def attention_mask(parents):
    """[m, m] bool: node i sees node j when j is i or one of its ancestors (every node also sees the
    prefix)."""
    mask = np.eye(len(parents), dtype=bool)  # [m, m]
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] |= mask[p]  # a parent comes before its child, so its row is complete
    return mask


def collect_ngrams(pool, window, new, cap):
    """Add each column's n-gram (0, i), .., (L - 1, i), new_i to the pool: key its first token, the
    rest as the continuation, moved to the front if already there, at most `cap` continuations per
    key.
    Example: window [[1, 2], [4, 5]], new [7, 8] -> pool {1: [[4, 7]], 2: [[5, 8]]}."""
    for i, t in enumerate(new):
        gram = [int(row[i]) for row in window] + [int(t)]  # [N]
        entries = pool.setdefault(gram[0], [])
        if gram[1:] in entries:
            entries.remove(gram[1:])
        entries.insert(0, gram[1:])
        del entries[cap:]


def pool_guesses(pool, key, guesses, room):
    """The verification candidates: the newest `guesses` continuations of `key`, cut to `room`
    tokens (none if 0)."""
    cut = [c[:room] for c in pool.get(key, [])[:guesses]]
    return [c for c in cut if c]


def verification_branch(tokens, parents, Q, n_look):
    """The trie's part of the combined tree, renumbered from 0 -> (tokens [m_v], parents [m_v], rows
    [1 + m_v, V]): row 0 is the distribution after x, row 1 + j the one after trie node j (combined
    node n_look + j)."""
    v_parents = [p - n_look if p >= 0 else -1 for p in parents[n_look:]]
    return tokens[n_look:], v_parents, np.concatenate([Q[:1], Q[1 + n_look:]])


def check_lookahead(x, N, window, ngram, guesses, pool_cap, sampling_options):  # -> W, L, cap
    check_inputs(x, N, **sampling_options)
    for name, value, low, meaning in (("window", window, 1, "W, columns of the lookahead window"),
                                      ("ngram", ngram, 2, "N, the n-gram size: window levels + 1"),
                                      ("guesses", guesses, 0, "G, pool n-grams verified per step")):
        if int(value) != value or value < low:
            raise ValueError(f"{name} ({meaning}) must be an integer >= {low}; got {value}")
    if pool_cap is not None and (int(pool_cap) != pool_cap or pool_cap < 1):
        raise ValueError(f"pool_cap (continuations kept per key) must be a positive integer or "
                         f"None; got {pool_cap}")
    return int(window), int(ngram) - 1, int(pool_cap or 4 * max(guesses, 1))


def first_window(x, W, L, rng):  # [L][W] the first guesses: prompt tokens
    return [[int(t) for t in rng.choice(x, size=W)] for _ in range(L)]


def jacobi_update(pool, grid, Q, W, L, cap):
    """Step 3: each column's top row gives new_i (the target's argmax after node (L - 1, i)); the
    n-grams go into the pool, and the window shifts up one level -> the new window."""
    new = [int(np.argmax(Q[1 + (L - 1) * W + i])) for i in range(W)]  # [W]
    collect_ngrams(pool, grid, new, cap)
    return grid[1:] + [new]


def lookahead_decoding(x, target, N, rng, window=4, ngram=3, guesses=4, pool_cap=None, stats=None,
                       **sampling_options):
    """x followed by N tokens distributed as sampling from the warped target (greedy decoding at
    temperature 0).

    target: the model contract plus target.tree(x, tokens, parents, probs=True) -> [1 + m, V] and
    target.accept(path). window, ngram, guesses: the paper's W, N, G; pool_cap: continuations kept
    per key (default 4 * G, at least 4).
    """
    W, L, cap = check_lookahead(x, N, window, ngram, guesses, pool_cap, sampling_options)
    x, T = [int(t) for t in x], len(x) + N
    grid = first_window(x, W, L, rng)  # [L][W]
    pool = {}  # key token -> [(N - 1)-token continuations], newest first
    while len(x) < T:
        # Step 1: build the tree: the window (if no deeper than the tokens still needed) and the
        # pool's guesses
        look = W + L - 1 <= T - len(x)
        candidates = pool_guesses(pool, x[-1], guesses, T - len(x) - 1)
        tokens, parents, n_look = lookahead_tree(grid if look else [], candidates)
        # Step 2: one forward pass of the target over x and both branches
        Q = target.tree(x, tokens, parents, probs=True)  # [1 + m, V]
        # Step 3: lookahead branch: each column's top row gives new_i; n-grams into the pool; shift
        # the window
        if look:
            grid = jacobi_update(pool, grid, Q, W, L, cap)
        # Step 4: verification branch: recursive rejection sampling (exact match at temperature 0: q
        # is one-hot)
        v_tokens, v_parents, rows = verification_branch(tokens, parents, Q, n_look)
        path, token, origin = verify_tree(v_tokens, v_parents, warp(rows, **sampling_options), rng)
        target.accept([n_look + j for j in path])  # node indices of the combined tree
        new_tokens = [v_tokens[j] for j in path] + [int(token)]
        x.extend(new_tokens)
        if stats is not None:
            stats.append(step_record(new_tokens, ["draft"] * len(path) + [origin],
                                     drafted=depth(v_parents), nodes=len(v_tokens)))
    return x
