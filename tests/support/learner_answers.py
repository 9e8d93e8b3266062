"""Right answers to every exercise, written as a learner would, independently of picospec's own
(no picospec import): the grader must pass them. Tests copy this file as a learner's answer file."""
import numpy as np


def residual(q, p):
    r = np.clip(np.asarray(q, dtype=float) - np.asarray(p, dtype=float), 0, None)
    return r / r.sum()


def draw(law, rng):
    cdf = np.asarray(law).cumsum(dtype=float)  # u scaled by its last entry: none runs past it
    return int(cdf.searchsorted(rng.random() * cdf[-1], side="right"))


def verify_chain(drafts, P, Q, rng):
    for t, x in enumerate(drafts):
        if rng.random() * P[t][x] < Q[t][x]:  # r < q/p, without dividing
            continue
        return t, draw(residual(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def medusa_buffers(choices):
    paths = [()] + [tuple(c) for c in choices]
    row = {path: i for i, path in enumerate(paths)}
    n, depth = len(paths), max(len(p) for p in paths)
    mask = np.zeros((n, n), dtype=bool)
    for i, path in enumerate(paths):
        for k in range(len(path) + 1):
            mask[i, row[path[:k]]] = True
    leaves = [p for p in paths if not any(q[:len(p)] == p and len(q) > len(p) for q in paths)]
    retrieve = [[row[leaf[:k]] for k in range(len(leaf) + 1)] + [-1] * (depth - len(leaf))
                for leaf in leaves]
    return {"attn_mask": mask, "position_ids": np.array([len(p) for p in paths]),
            "retrieve_indices": np.array(retrieve)}


def typical_accept(tokens, parents, probs, epsilon, delta):
    kept = []
    for token, parent in zip(tokens, parents):
        q = np.asarray(probs[parent + 1], dtype=float)
        nonzero = q[q > 0]
        entropy = -float(np.sum(nonzero * np.log(nonzero)))
        kept.append(bool(q[token] > min(epsilon, delta * np.exp(-entropy))))
    return kept


def verify_without_replacement(tokens, parents, Q, P, rng):
    path, node = [], -1
    q = np.asarray(Q[0], dtype=float)
    while True:
        children = [i for i, parent in enumerate(parents) if parent == node]
        chosen, removed = None, []
        for child in children:
            p = np.array(P[child], dtype=float)
            p[removed] = 0
            p = p / p.sum()
            x = tokens[child]
            if rng.random() * p[x] < q[x]:
                chosen = child
                break
            q = np.clip(q - p, 0, None)
            q = q / q.sum()
            removed.append(x)
        if chosen is None:
            return path, draw(q, rng)
        path.append(chosen)
        node, q = chosen, np.asarray(Q[chosen + 1], dtype=float)


def draft_law(z, d2t, n_vocab):
    z = np.asarray(z, dtype=np.float64)
    logits = np.full(z.shape[:-1] + (n_vocab,), -np.inf)
    logits[..., d2t] = z
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))  # exp(-inf) = 0 outside d2t
    return e / e.sum(axis=-1, keepdims=True)


def find_candidates(x, max_ngram_size=3, num_pred_tokens=10):
    x = list(x)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        tail = x[-n:]
        for s in range(len(x) - n):
            if x[s:s + n] == tail:
                return x[s + n:s + n + num_pred_tokens]
    return []


def longest_suffix(corpus, context, max_suffix):
    corpus, context = list(corpus), list(context)
    for n in range(min(max_suffix, len(context)), 0, -1):
        suffix = context[-n:]
        if any(corpus[s:s + n] == suffix for s in range(len(corpus) - n + 1)):
            return n
    return 0


def trie(sequences):
    tokens, parents, counts, child = [], [], [], {}
    for seq in sequences:
        parent = -1
        for t in seq:
            if (parent, t) not in child:
                child[parent, t] = len(tokens)
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            parent = child[parent, t]
            counts[parent] += 1
    return tokens, parents, counts


def lookahead_mask(W, L):
    mask = np.zeros((W * L, W * L), dtype=bool)
    for level in range(L):
        for i in range(W):
            row = level * W + i
            mask[row, :i + 1] = True  # what (0, i) sees: the first level up to column i
            for deeper in range(1, level + 1):
                mask[row, deeper * W + i] = True
    return mask


def expected_tokens(alpha, K):
    if alpha == 1:
        return float(K + 1)
    return (1.0 - alpha ** (K + 1)) / (1.0 - alpha)


def predicted_speedup(E, c, K, c_d):
    return E / (c + K * c_d)
