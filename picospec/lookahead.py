"""Lookahead decoding: Fu, Bailis, Stoica, Zhang 2024, "Break the Sequential Dependency of LLM
Inference Using Lookahead Decoding", ICML 2024 (arXiv:2402.02057), its W, N, G; q = the target.
One call scores Jacobi steps on a window (jacobi_update fills an n-gram pool) and the pool's
guesses (verification_branch). L = N - 1, m nodes, m_v verified, V = n_vocab.

Each step: (1) one tree of both branches (lookahead_tree): the window's L levels of W guesses,
level 0 a chain and (l, i) below (l - 1, i), and the pool's n-grams that start with x[-1], as a
trie; (2) one target call; (3) lookahead branch: the target's argmax after each column's top
guess is that column's new token, each column plus its new token an n-gram for the pool, and
the window drops its oldest level; (4) verification branch: verify.py's rule with one-hot
proposals. Lossless because the guesses are fixed before this step's coins are drawn (the pool
comes from earlier steps), and the window's tokens are never output."""
import numpy as np

from picospec.sampling import check_inputs, warp
from picospec.tree import MOST_NODES, depth, trie
from picospec.verify import step_record, verify_tree


def lookahead_tree(window, candidates):
    """Both branches as one tree -> (tokens [m], parents [m], n_look = W * L)."""
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
    mask = np.eye(len(parents), dtype=bool)  # [m, m]
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] |= mask[p]  # a parent comes before its child, so its row is complete
    return mask


def collect_ngrams(pool, window, new, cap):
    """Column n-grams into pool[first token], newest first, at most cap a key.
    Example: [[1, 2], [4, 5]], new [7, 8] -> {1: [[4, 7]], 2: [[5, 8]]}."""
    for i, t in enumerate(new):
        gram = [int(row[i]) for row in window] + [int(t)]  # [N]
        entries = pool.setdefault(gram[0], [])
        if gram[1:] in entries:
            entries.remove(gram[1:])
        entries.insert(0, gram[1:])
        del entries[cap:]


def pool_guesses(pool, key, guesses, room):
    cut = [c[:room] for c in pool.get(key, [])[:guesses]]
    return [c for c in cut if c]


def verification_branch(tokens, parents, Q, n_look):
    """The trie's part -> (tokens [m_v], parents [m_v], rows [1 + m_v, V])."""
    v_parents = [p - n_look if p >= 0 else -1 for p in parents[n_look:]]
    return tokens[n_look:], v_parents, np.concatenate([Q[:1], Q[1 + n_look:]])  # [1 + m_v, V]


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
    # the window's W L nodes and the guesses' G L
    if (nodes := (window + guesses) * (ngram - 1)) > MOST_NODES:
        raise ValueError(f"window W = {window}, ngram N = {ngram} and guesses G = {guesses} make "
                         f"trees of up to (W + G)(N - 1) = {nodes} nodes, more than the "
                         f"{MOST_NODES} one target call scores: lower W, N or G")
    return int(window), int(ngram) - 1, int(pool_cap or 4 * max(guesses, 1))


def first_window(x, W, L, rng):  # [L][W] the first guesses: prompt tokens
    return [[int(t) for t in rng.choice(x, size=W)] for _ in range(L)]


def jacobi_update(pool, grid, Q, W, L, cap):
    """Step 3: new_i = argmax after column i's top node; n-grams to the pool -> next window."""
    new = [int(np.argmax(Q[1 + (L - 1) * W + i])) for i in range(W)]  # [W]
    collect_ngrams(pool, grid, new, cap)
    return grid[1:] + [new]


def lookahead_decoding(x, target, N, rng, window=4, ngram=3, guesses=4, pool_cap=None, stats=None,
                       **sampling_options):
    """x then N tokens of the warped target's law (greedy at T = 0)."""
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
