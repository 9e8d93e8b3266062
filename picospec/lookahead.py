"""Lookahead decoding (Fu, Bailis, Stoica, Zhang 2024, "Break the Sequential Dependency of LLM Inference Using
Lookahead Decoding", arXiv:2402.02057; LMSYS blog 2023-11-21): Jacobi iteration makes n-grams, an n-gram pool keeps
them, and the pool's n-grams that start with the last token are verified, all in one forward pass.

Notation (the paper's): W window size, N n-gram size, G the most n-grams verified per step. In code: `window`,
`ngram`, `guesses`; N (capital) stays the number of new tokens, as in every picospec method.

The lookahead branch is a 2-D window of N - 1 levels x W tokens: level 0 the oldest Jacobi guess, level N - 2 the
newest. Its attention mask is a tree, so the engine's tree() runs it (no special kernel needed):
    token (0, i) hangs below (0, i - 1), and (0, 0) below the last token of x;
    token (l, i), l >= 1, hangs below (l - 1, i).
So (l, i) sits at depth l + i + 1 and sees the prefix, (0, 0..i - 1) and its own column's levels below it: the
sequence x, (0, 0), .., (0, i - 1), (0, i), (1, i), .., (l, i), N consecutive positions along one column plus the next.
The row after the top token (N - 2, i) is the model's next token given that whole chain: Jacobi's update of column i.
The n-gram (0, i), (1, i), .., (N - 2, i), new_i is what the model believes follows its context: it enters the pool
(keyed by its first token). The window then shifts: level l <- level l + 1, the top level <- the new tokens.
The verification branch is the trie (picospec.tree) of at most G pool entries keyed by x[-1], i.e. (N - 1)-token
guesses of what follows x, hung below x[-1] beside the lookahead branch.

Worked example (W = 2, N = 3): lookahead nodes (0,0) (0,1) (1,0) (1,1) get parents -1, 0, 0, 1: depths 1 2 2 3.

Lossless: the window and the pool come from earlier steps only, so the candidates are a deterministic function of
what came before; they are one-hot proposals, verified by exact match at temperature 0 (greedy_path) and by
recursive rejection sampling otherwise (verify_tree, P=None). The Jacobi updates use the target's argmax at every
temperature: they are guesses, and a guess never changes the law of the output, only the speed.
Shapes: W window, N_g = ngram, m tree nodes, V n_vocab.
"""
import numpy as np

from picospec.sampling import check_inputs, warp
from picospec.tree import children, greedy_path, trie
from picospec.verify import verify_tree


def lookahead_tree(window, candidates):
    """Both branches as one tree -> tokens [m], parents [m], number of lookahead nodes.

    window: list of N - 1 levels of W tokens; candidates: guesses of what follows x[-1] (the verification branch).
    Node order: the window level by level, then the candidates' trie."""
    levels, W = len(window), len(window[0]) if window else 0
    tokens, parents = [], []
    for level in range(levels):
        for i in range(W):
            tokens.append(int(window[level][i]))
            if level == 0:
                parents.append(i - 1)  # (0, i) below (0, i - 1); (0, 0) below x[-1]
            else:
                parents.append((level - 1) * W + i)  # (l, i) below (l - 1, i)
    n_look = len(tokens)
    v_tokens, v_parents, _ = trie(candidates)
    tokens += v_tokens
    parents += [p + n_look if p >= 0 else -1 for p in v_parents]
    return tokens, parents, n_look


def attention_mask(parents):
    """[m, m] bool: node i sees node j when j is i or one of its ancestors (the prefix is seen by all)."""
    m = len(parents)
    mask = np.eye(m, dtype=bool)
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] |= mask[p]
    return mask


def collect_ngrams(pool, window, new, cap):
    """Add each column's n-gram (0, i), .., (N - 2, i), new_i to the pool under its first token (newest first)."""
    for i in range(len(new)):
        gram = [int(window[level][i]) for level in range(len(window))] + [int(new[i])]
        entries = pool.setdefault(gram[0], [])
        if gram[1:] in entries:
            entries.remove(gram[1:])
        entries.insert(0, gram[1:])
        del entries[cap:]


def lookahead_decoding(x, target, N, rng, window=4, ngram=3, guesses=4, pool_cap=None, stats=None,
                       **sampling_options):
    """x followed by N tokens distributed as sampling from the warped target (greedy decoding at temperature 0)."""
    check_inputs(x, N, 1, **sampling_options)
    for name, value, low in (("window", window, 1), ("ngram", ngram, 2), ("guesses", guesses, 0)):
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value}")
    x, T = [int(t) for t in x], len(x) + N
    greedy = sampling_options.get("temperature", 1.0) == 0
    # the first window: tokens of the prompt, drawn with the generator (any guess will do; Jacobi refines it)
    window_ = [[int(t) for t in rng.choice(x, size=window)] for _ in range(ngram - 1)]  # [N_g - 1][W]
    pool = {}
    while len(x) < T:
        # Step 1: verification candidates: pool n-grams that continue x[-1], cut to the tokens still needed - 1
        candidates = [c[:T - len(x) - 1] for c in pool.get(x[-1], [])[:guesses]]
        candidates = [c for c in candidates if c]
        fits = len(x) + window + ngram - 2 <= getattr(target, "n_ctx", np.inf)  # near the context's end: no lookahead
        tokens, parents, n_look = lookahead_tree(window_ if fits else [], candidates)
        # Step 2: one forward pass over the lookahead branch and the verification branch
        Q = target.tree(x, tokens, parents, probs=True)  # [1 + m, V]
        # Step 3: lookahead branch: Jacobi update of every column from its top token's row, n-grams into the pool
        if fits:
            top = [(ngram - 2) * window + i for i in range(window)]  # node index of (N - 2, i)
            new = [int(np.argmax(Q[1 + j])) for j in top]  # [W]
            collect_ngrams(pool, window_, new, pool_cap or 4 * max(guesses, 1))
            window_ = window_[1:] + [new]
        # Step 4: verification branch: exact match (T = 0) or recursive rejection sampling over the trie
        v_tokens, v_parents = tokens[n_look:], [p - n_look if p >= 0 else -1 for p in parents[n_look:]]
        v_rows = np.concatenate([Q[:1], Q[1 + n_look:]])  # [1 + m_v, V]: the root's row, then the trie's
        if greedy:
            path, token = greedy_path(v_tokens, v_parents, v_rows)
            origin = "resample" if children(v_parents)[path[-1] if path else -1] else "bonus"
        else:
            path, token, origin = verify_tree(v_tokens, v_parents, warp(v_rows, **sampling_options), rng)
        target.accept([n_look + i for i in path])
        new_tokens = [v_tokens[i] for i in path] + [int(token)]
        x.extend(new_tokens)
        if stats is not None:
            stats.append({"K": max((len(c) for c in candidates), default=0), "accepted": len(path),
                          "tokens": new_tokens, "origins": ["draft"] * len(path) + [origin]})
    return x
