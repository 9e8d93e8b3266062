"""EAGLE-2 (Li, Wei, Zhang, Zhang 2024, "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees",
arXiv:2406.16858): EAGLE's head (picospec/eagle.py, gpt2/eagle.py), but the tree is grown for each context by the
head's own confidence instead of being fixed in advance.
Shapes: V n_vocab; n drafted nodes, m kept.
    draft(x, F, tokens, parents) -> logits [1 + m, V]       (the contract of picospec/eagle.py)
Notation in full, worked examples and choices: docs/algorithms.md (eagle2.py).
"""
import numpy as np

from picospec.batch import eagle_prefill, root_rounds
from picospec.sampling import check_inputs, first_token, warp
from picospec.tree import children, greedy_path, depth as tree_depth, top_ranked
from picospec.verify import step_record, verify_tree


def log_softmax(logits):  # [..., V] -> [..., V], float64
    z = logits.astype(np.float64) - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


class Expansion:
    """Step 1 for one context, a layer per head call. More: docs/algorithms.md (eagle2.py,
    Expansion)."""

    def __init__(self, depth, top_k):
        self.depth, self.top_k = depth, top_k
        self.tokens, self.parents, self.values = [], [], []
        self.layer, self.run = None, []  # layer: pool nodes to expand (None: the root); run: nodes the head has run
        self.layers = 0  # layers drafted

    def request(self):
        if self.layer is None:
            return [], []
        if self.layers == self.depth:
            return None
        self.run += self.layer
        return ([self.tokens[i] for i in self.run],
                [self.run.index(self.parents[i]) if self.parents[i] >= 0 else -1 for i in self.run])

    def fill(self, logits):
        tokens, parents, values = self.tokens, self.parents, self.values
        if self.layer is None:  # layer 1: the root's top_k
            logp = log_softmax(logits[0])  # [V] the head's law after the root
            for t in top_ranked(logp, self.top_k):
                tokens.append(t), parents.append(-1), values.append(logp[t])
            self.layer, self.layers = list(range(len(tokens))), 1
            return
        new = []
        for i in self.layer:  # each expanded node's top_k children
            logp = log_softmax(logits[1 + self.run.index(i)])  # [V]
            for t in top_ranked(logp, self.top_k):
                new.append(len(tokens))
                tokens.append(t), parents.append(i), values.append(values[i] + logp[t])
        self.layer = sorted(new, key=lambda i: -values[i])[:self.top_k]  # the next layer: the top_k new nodes by value
        self.layers += 1

    def pool(self):
        return self.tokens, self.parents, self.values


def expand(x, F, draft, depth, top_k):
    """Step 1: the draft pool -> tokens, parents, values (Expansion.pool()), one head call per layer."""
    tree = Expansion(depth, top_k)
    while (asked := tree.request()) is not None:
        tree.fill(draft(x, F, *asked))
    return tree.pool()


def rerank(tokens, parents, values, total_tokens):
    """Step 2: the total_tokens nodes of highest value (ties: drafted first), in drafted order, re-indexed.
    -> tokens, parents, values of the kept tree."""
    kept = sorted(sorted(range(len(tokens)), key=lambda i: (-values[i], i))[:total_tokens])
    new = {old: i for i, old in enumerate(kept)}
    return [tokens[i] for i in kept], [new[parents[i]] if parents[i] >= 0 else -1 for i in kept], \
        [values[i] for i in kept]


def dynamic_tree(x, F, draft, depth, top_k, total_tokens):
    """Steps 1 and 2: the draft tree for this context -> tokens, parents, values."""
    return rerank(*expand(x, F, draft, depth, top_k), total_tokens)


def check_options(xs, N, depth, tree_top_k, total_tokens, sampling_options):
    """The prompts and options, checked once where they enter -> greedy (temperature 0)."""
    for x in xs:
        check_inputs(x, N, 1, **sampling_options)
    for name, value in (("depth", depth), ("tree_top_k", tree_top_k), ("total_tokens", total_tokens)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value}")
    return sampling_options.get("temperature", 1) == 0


def verify_step(tokens, parents, logits, greedy, rng, sampling_options):
    """Step 3 on the target's logits [1 + m, V] at the root and every node -> (path, next root, its origin): the greedy
    path at temperature 0; above, verify_tree with one-hot proposals (deterministic, distinct candidates)."""
    if greedy:
        path, root = greedy_path(tokens, parents, logits)
        origin = "bonus" if not children(parents)[path[-1] if path else -1] else "resample"
        return path, root, origin
    return verify_tree(tokens, parents, warp(np.exp(log_softmax(logits)), **sampling_options), rng)


def keep(x, F, tokens, path, H):
    """Step 4: the accepted nodes join x; the root's feature and theirs (H [1 + m, C], rows of the verifying forward)
    join F, so the head's context always holds true features."""
    F += [H[0]] + [H[1 + i] for i in path]
    x += [tokens[i] for i in path]


def eagle2_decoding(x, target, draft, N, rng, depth=5, tree_top_k=4, total_tokens=16, stats=None, **sampling_options):
    """x followed by N tokens of the warped target's law (its greedy tokens at temperature 0).
    tree_top_k is the paper's top-k (--top_k is the shared sampling option that warps the target's law)."""
    greedy = check_options([x], N, depth, tree_top_k, total_tokens, sampling_options)
    x, T = [int(t) for t in x], len(x) + N
    logits, H = target.logits(x, len(x), hidden=True)  # prefill: [L, V], [L, C]
    F = list(H)  # F[j]: the target's feature after x[j]
    root = first_token(logits[-1], greedy, rng, **sampling_options)
    if stats is not None:
        stats.append(step_record([root], ["bonus"], drafted=0))  # the prefill call
    while True:
        x.append(root)  # the root is always accepted
        if len(x) == T:
            break
        # Steps 1-2: expand and rerank, no deeper than the tokens still needed
        levels = min(depth, T - len(x) - 1)
        tokens, parents, _ = dynamic_tree(x, F, draft, levels, tree_top_k, total_tokens) if levels else ([], [], [])
        # Step 3: one tree-attention forward; lossless verification of deterministic, distinct candidates
        logits, H = target.tree(x, tokens, parents, hidden=True)  # [1 + m, V], [1 + m, C]
        path, root, origin = verify_step(tokens, parents, logits, greedy, rng, sampling_options)
        # Step 4: keep the path; its true features feed the head
        target.accept(path)
        keep(x, F, tokens, path, H)
        if stats is not None:
            stats.append(step_record([tokens[i] for i in path] + [root], ["draft"] * len(path) + [origin],
                                     drafted=tree_depth(parents), nodes=len(tokens)))
    return x


def batch_eagle2_decoding(xs, target, draft, N, rng, depth=5, tree_top_k=4, total_tokens=16, stats=None,
                          generators=None, **sampling_options):
    """Each prompt of xs followed by N tokens, as eagle2_decoding gives it alone with generators[b]
    (else rng). More: docs/algorithms.md (eagle2.py, batch_eagle2_decoding)."""
    greedy = check_options(xs, N, depth, tree_top_k, total_tokens, sampling_options)
    xs, T, gen, F, roots = eagle_prefill(xs, N, target, rng, generators,
                                         lambda z, g: first_token(z, greedy, g, **sampling_options), stats)
    for active in root_rounds(xs, T, roots):  # each round: every row takes its root; the rows still short of T
        # Step 1: every row's expansion, no deeper than the tokens it still needs, a layer per batched head call
        grow = {b: Expansion(levels, tree_top_k) for b in active if (levels := min(depth, T[b] - len(xs[b]) - 1))}
        while asked := {b: a for b, tree in grow.items() if (a := tree.request()) is not None}:
            out = draft(list(asked), [xs[b] for b in asked], [F[b] for b in asked], list(asked.values()))
            for b, z in zip(asked, out):  # z [1 + m, V]
                grow[b].fill(z)
        # Step 2: each row's rerank
        trees = [rerank(*grow[b].pool(), total_tokens)[:2] if b in grow else ([], []) for b in active]
        # Step 3: ONE batched tree-attention forward scores every row's tree; each row verified with its generator
        logits, H = target.tree([xs[b] for b in active], trees, hidden=True)  # per row [1 + m_b, V], [1 + m_b, C]
        verdicts = [verify_step(*tree, z, greedy, gen[b], sampling_options)
                    for b, tree, z in zip(active, trees, logits)]
        # Step 4: every row keeps its accepted path, in its cache and in x and F
        target.accept([path for path, _, _ in verdicts])
        step = {"drafted": max(tree_depth(p) for _, p in trees), "nodes": max(len(t) for t, _ in trees),
                "accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}
        for b, (tokens, _), h, (path, root, _) in zip(active, trees, H, verdicts):
            keep(xs[b], F[b], tokens, path, h)
            roots[b] = root
            step["accepted"][b], step["tokens"][b] = len(path), [tokens[i] for i in path] + [root]
        if stats is not None:
            stats.append(step)
    return xs
