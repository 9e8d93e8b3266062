"""The loops the batched forms share: ragged rows (each accepts its own count per step). A batched
model: model(xs, n=1) -> [B, n, V], the laws after each row's last n prefixes; tree(xs, trees) ->
per row [1 + m_b, V]; accept(paths) keeps each row's accepted nodes in its cache. Shapes: B rows,
m_b nodes of row b's tree, V vocabulary.
"""
import numpy as np

from picospec.tree import depth, node_path


class batched:
    """The batched contract over a stateless model(x, n) -> [n, V], called row by row; no cache."""

    def __init__(self, model):
        self.model = model

    def __call__(self, xs, n=1):  # -> probs [B, n, V]
        return np.stack([self.model(x, n) for x in xs])

    def tree(self, xs, trees, probs=True):
        if not probs:
            raise ValueError("a stateless model gives probabilities only: "
                             "call tree(..., probs=True)")
        # per row [1 + m_b, V]: the law after x_b, then after each node's path
        return [np.stack([self.model(list(x) + node_path(tokens, parents, node), 1)[-1]
                          for node in range(-1, len(tokens))])
                for x, (tokens, parents) in zip(xs, trees)]

    def accept(self, paths):
        pass


def eagle_prefill(xs, N, target, rng, generators, root, stats=None, hidden=True):
    """Prefill of the batched EAGLE forms -> (xs, T lengths to reach, gen generators, F per row the
    target's features [L_b, C] (hidden: those the head reads), roots)."""
    xs, T = [[int(t) for t in x] for x in xs], [len(x) + N for x in xs]
    gen = [(generators or {}).get(b, rng) for b in range(len(xs))]
    # each prompt as a chain below its first token: per row [L_b, V], [L_b, C]
    chains = [(x[1:], list(range(-1, len(x) - 2))) for x in xs]
    logits, H = target.tree([x[:1] for x in xs], chains, hidden=hidden)
    target.accept([list(range(len(x) - 1)) for x in xs])
    roots = [root(z[-1], g) for z, g in zip(logits, gen)]
    if stats is not None:
        stats.append({"drafted": 0, "nodes": 0, "accepted": [0] * len(xs),
                      "tokens": [[r] for r in roots]})
    return xs, T, gen, [list(h) for h in H], roots


def root_rounds(xs, T, roots):
    """Rounds of the forms whose steps end in a root (Medusa, EAGLE, EAGLE-2): each row takes
    roots[b], then -> the rows still short of T[b]."""
    active = list(range(len(xs)))
    while True:
        for b in active:
            xs[b].append(roots[b])
        active = [b for b in active if len(xs[b]) < T[b]]
        if not active:
            return
        yield active


def batch_tree_decoding(xs, target, N, rng, propose, verify, stats=None, generators=None,
                        propose_rows=False):
    """Each prompt of xs followed by N tokens, a batched target call per step. propose(b, x, room)
    -> (tokens, parents), paths at most room long (propose_rows: (bs, xs, rooms) -> a tree per
    row); verify(b, tokens, parents, Q [1 + m, V], rng) -> (path, next token)."""
    xs, T = [[int(t) for t in x] for x in xs], [len(x) + N for x in xs]
    gen = [(generators or {}).get(b, rng) for b in range(len(xs))]
    while True:
        active = [b for b in range(len(xs)) if len(xs[b]) < T[b]]
        if not active:
            return xs
        # Step 1: every row proposes its tree from its own text, no deeper than the tokens it needs
        rooms = [T[b] - len(xs[b]) - 1 for b in active]
        trees = (propose(active, [xs[b] for b in active], rooms) if propose_rows else
                 [propose(b, xs[b], room) for b, room in zip(active, rooms)])
        # Step 2: ONE batched tree-attention call scores every row's root and nodes
        probs = target.tree([xs[b] for b in active], trees, probs=True)  # per row [1 + m_b, V]
        # Step 3: each row's rule picks its accepted path and next token
        step = {"drafted": max(depth(parents) for _, parents in trees),
                "nodes": max(len(t) for t, _ in trees),
                "accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}
        paths = []
        for i, (b, (tokens, parents)) in enumerate(zip(active, trees)):
            path, token = verify(b, tokens, parents, probs[i], gen[b])
            paths.append(path)
            step["accepted"][b] = len(path)
            step["tokens"][b] = [tokens[j] for j in path] + [int(token)]
        # Step 4: every row keeps its accepted nodes in its cache and takes them and the next token
        target.accept(paths)
        for b in active:
            xs[b].extend(step["tokens"][b])
        if stats is not None:
            stats.append(step)
