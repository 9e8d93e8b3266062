"""Token trees for the tree methods. m drafted nodes, n = 1 + m rows (root first), L leaves, D the
depth, V = n_vocab; parents[i] < i, -1 the root."""
import numpy as np

MOST_NODES = 256  # the draft nodes one target call scores (gpt2.engine's TREE_SLOTS)


def sort_choices(choices):
    """Medusa's node order: by depth, then by ranks."""
    return sorted((tuple(int(r) for r in c) for c in choices), key=lambda c: (len(c), c))


def check_choices(choices, n_heads=None, topk=None):
    if not choices:
        raise ValueError("the tree is empty: give at least one node, e.g. [[0]]")
    seen = set()
    for c in choices:
        c = tuple(c)
        if len(c) == 0:
            raise ValueError("the tree holds an empty path; the root is implicit, list only nodes "
                             "below it")
        if c in seen:
            raise ValueError(f"the tree lists node {list(c)} twice")
        if any(int(r) != r or r < 0 for r in c):
            raise ValueError(f"node {list(c)}: ranks must be non-negative integers")
        if n_heads is not None and len(c) > n_heads:
            raise ValueError(f"node {list(c)} has depth {len(c)} but there are only {n_heads} "
                             f"heads, one per level: keep paths of at most {n_heads} nodes")
        if topk is not None and max(c) >= topk:
            raise ValueError(f"node {list(c)} asks for candidate rank {max(c)} but each head "
                             f"offers only topk = {topk} candidates (ranks 0..{topk - 1}): raise "
                             f"topk or use smaller ranks")
        seen.add(c)
    for c in seen:
        if len(c) > 1 and c[:-1] not in seen:
            raise ValueError(f"node {list(c)} has no parent: add {list(c[:-1])} to the tree")


def medusa_buffers(choices, topk=10, n_heads=None):
    """-> {tree_indices [n], position_ids [n], retrieve_indices [L, D + 1], attn_mask [n, n],
    parents [m], nodes}."""
    check_choices(choices, n_heads, topk)
    nodes = sort_choices(choices)
    index = {c: i + 1 for i, c in enumerate(nodes)}  # row of each node; the root is row 0
    n = len(nodes) + 1
    # [n] each row's place among the heads' candidates; [n] each row's depth
    tree_indices = np.array([0] + [1 + (len(c) - 1) * topk + c[-1] for c in nodes], dtype=np.int64)
    position_ids = np.array([0] + [len(c) for c in nodes], dtype=np.int64)
    # engine convention: node i is row i + 1, -1 the root
    parents = [index.get(c[:-1], 0) - 1 for c in nodes]
    attn_mask = np.eye(n, dtype=bool)  # [n, n]
    attn_mask[:, 0] = True  # [n] every row sees the root
    for i, parent in enumerate(parents):  # parents first: a node sees what its parent sees
        attn_mask[i + 1] |= attn_mask[parent + 1]
    inner = set(parents)  # the nodes with a child
    leaves = [c for i, c in enumerate(nodes) if i not in inner]
    depth = max(len(c) for c in nodes)
    retrieve = np.full((len(leaves), depth + 1), -1, dtype=np.int64)  # [L, D + 1], -1 padding
    for row, leaf in enumerate(reversed(leaves)):  # the article's order: the last leaf first
        retrieve[row, :len(leaf) + 1] = [0] + [index[leaf[:d]] for d in range(1, len(leaf) + 1)]
    return {"tree_indices": tree_indices, "position_ids": position_ids,
            "retrieve_indices": retrieve, "attn_mask": attn_mask,
            "parents": parents, "nodes": nodes}


def trie(sequences):
    """Merge sequences on shared prefixes -> (tokens, parents, counts).
    Example: [[5, 6], [5, 7], [8]] -> [5, 6, 7, 8], [-1, 0, 0, -1], [2, 1, 1, 1]."""
    tokens, parents, counts, child = [], [], [], {}
    for seq in sequences:
        node = -1
        for t in seq:
            key = (node, int(t))
            if key not in child:
                child[key] = len(tokens)
                tokens.append(int(t))
                parents.append(node)
                counts.append(0)
            node = child[key]
            counts[node] += 1
    return tokens, parents, counts


def prune(tokens, parents, counts, budget):
    """The `budget` most frequent nodes, shallower first on ties."""
    depth = []
    for p in parents:
        depth.append(depth[p] + 1 if p >= 0 else 1)
    order = sorted(range(len(tokens)), key=lambda i: (-counts[i], depth[i], i))[:budget]
    # parents come before children in a trie, and a kept node's parent is kept too
    keep = sorted(order)
    new = {old: i for i, old in enumerate(keep)}
    return ([tokens[i] for i in keep], [new[parents[i]] if parents[i] >= 0 else -1 for i in keep],
            [counts[i] for i in keep])


def children(parents):  # -> {node: [its children, in order]}, node -1 the root
    kids = {-1: []}
    for i, p in enumerate(parents):
        kids.setdefault(p, []).append(i)
        kids.setdefault(i, [])
    return kids


def greedy_origin(parents, path):
    """The next token's origin after a greedy path: "bonus" past a leaf (no draft there to reject),
    "resample" where the path stopped above children the target did not choose."""
    return "bonus" if not children(parents)[path[-1] if path else -1] else "resample"


def depth(parents):
    """Nodes on the longest root-to-leaf path: depth([-1, 0, 0, 1]) -> 3."""
    level = []
    for p in parents:
        level.append(1 + (level[p] if p >= 0 else 0))
    return max(level, default=0)


def greedy_path(tokens, parents, logits):
    """Exact match: the longest argmax path under logits [1 + m, V] -> (path, next token)."""
    kids, node, path = children(parents), -1, []
    while True:
        best = int(np.argmax(logits[node + 1]))  # scalar: argmax of the row [V] after node
        nxt = next((c for c in kids[node] if tokens[c] == best), None)
        if nxt is None:
            return path, best
        path.append(nxt)
        node = nxt


def paths(parents):
    kids = children(parents)
    out = []
    for leaf in (i for i in range(len(parents)) if not kids[i]):
        path, node = [], leaf
        while node >= 0:
            path.append(node)
            node = parents[node]
        out.append(path[::-1])
    return out


def expected_length(values):
    """1 + sum(values), node i accepted with probability values[i]."""
    return 1.0 + float(np.sum(values))


def sparse_tree(accuracy, budget):
    """Medusa's sparse tree of `budget` nodes under accuracy [D, topk]."""
    accuracy = np.asarray(accuracy, dtype=np.float64)  # [D, topk]
    n_heads, topk = accuracy.shape
    frontier = {(r,): accuracy[0, r] for r in range(topk)}
    chosen = []
    while frontier and len(chosen) < budget:
        node = max(frontier, key=lambda c: (frontier[c], [-r for r in c]))
        value = frontier.pop(node)
        chosen.append((node, value))
        if len(node) < n_heads:
            for r in range(topk):
                frontier[node + (r,)] = value * accuracy[len(node), r]
    return [list(c)
            for c in sort_choices(c for c, _ in chosen)], expected_length([v for _, v in chosen])


def node_path(tokens, parents, node):
    """Tokens from the root down to `node`."""
    path = []
    while node >= 0:
        path.append(tokens[node])
        node = parents[node]
    return path[::-1]


def subtree(tokens, parents, nodes):
    """The listed nodes, parents first, as their own tree."""
    return [tokens[i] for i in nodes], [nodes.index(parents[i]) if parents[i] >= 0 else -1
                                        for i in nodes]


def ancestor_mask(parents):
    """[m, m] bool, node i sees itself and its ancestors.
    Example: parents [-1, 0, 0] -> rows [1, 0, 0], [1, 1, 0], [1, 0, 1]."""
    mask = np.eye(len(parents), dtype=bool)  # [m, m]
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]  # parents come before children: the parent's row is complete
    return mask


def top_ranked(scores, k):
    """The k best tokens of scores [V], ties to the lower id."""
    scores = np.asarray(scores)  # [V]
    if k >= len(scores):
        return [int(t) for t in np.argsort(-scores, kind="stable")]
    cut = np.partition(scores, len(scores) - k)[len(scores) - k]  # scalar: the k-th largest
    above = np.flatnonzero(scores > cut)  # [< k] ids strictly above the cut
    # [k] ids, ascending in each part
    chosen = np.concatenate([above, np.flatnonzero(scores == cut)[:k - len(above)]])
    return [int(t) for t in chosen[np.argsort(-scores[chosen], kind="stable")]]


def top_tokens(p, k):
    """The k likeliest tokens of p [V] with p > 0."""
    return [t for t in top_ranked(p, k) if p[t] > 0]


class DrawTrie:
    """A trie of drawn tokens that keeps every draw's node and law."""

    def __init__(self):
        self.tokens, self.parents, self.draws, self.laws, self.index = [], [], [], [], {}

    def draw(self, parent, token, law):  # -> the node the draw landed on
        key = (parent, int(token))
        if key not in self.index:
            self.index[key] = len(self.tokens)
            self.tokens.append(int(token))
            self.parents.append(parent)
        self.draws.append(self.index[key])
        self.laws.append(law)
        return self.index[key]


def chain_choices(depth):
    """[[0], [0, 0], ...]: one path of top-1 candidates."""
    return [[0] * d for d in range(1, depth + 1)]


def cartesian_choices(depth, k):
    level, out = [[]], []
    for _ in range(depth):
        level = [c + [r] for c in level for r in range(k)]
        out += level
    return out
