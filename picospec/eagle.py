"""EAGLE-1 (Li, Wei, Zhang, Zhang 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty",
arXiv:2401.15077): a one-block head drafts at the feature level (gpt2/eagle.py); a static tree of its guesses is scored
by one tree-attention forward of the target and verified losslessly. Shapes: V n_vocab, m tree nodes, C n_embd.
Notation in full, worked examples and choices: docs/algorithms.md (eagle.py).
"""
import numpy as np

from picospec.batch import eagle_prefill, root_rounds
from picospec.sampling import check_inputs, first_token, sample, warp
from picospec.tree import (chain_choices, check_choices, children, depth as tree_depth, greedy_path, sort_choices,
                           sparse_tree,
                           top_ranked)
from picospec.verify import step_record, verify_tree, verify_without_replacement

CANDIDATES = ("sample", "topk")
TREES = ("sparse", "chain")


def softmax(logits):  # [..., V] -> [..., V], float64
    z = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def draw_without_replacement(p, r, rng):
    """r tokens drawn one after another from p [V], each removed once drawn (fewer when p has fewer than r tokens)."""
    p, drawn = np.array(p, dtype=np.float64), []
    while len(drawn) < r and p.sum() > 0:
        drawn.append(sample(p, rng))  # sample() renormalises: a draw from p with the earlier draws removed
        p[drawn[-1]] = 0
    return drawn


def static_tree(tree, accuracy=None, nodes=10, depth=5):
    """The draft tree as rank paths: "chain" (depth top-1 tokens), "sparse" (Medusa's greedy construction,
    picospec.tree.sparse_tree, from the head's measured rank_share per step ahead: P(the true token k + 1 steps ahead
    is rank r | the k before it right), `nodes` nodes at most `depth` deep), or the paths themselves."""
    if tree == "chain":
        return chain_choices(depth)
    if tree == "sparse":
        if accuracy is None:
            raise ValueError("no accuracy record to build the sparse tree from")
        return sparse_tree(np.asarray(accuracy)[:depth], nodes)[0]
    check_choices(tree)
    return sort_choices(tree)


class TreeDraft:
    """Step 1 for one sequence, a level at a time. More: docs/algorithms.md (eagle.py, TreeDraft)."""

    def __init__(self, choices, rng, sampled, sampling_options):
        self.rng, self.sampled, self.sampling_options = rng, sampled, sampling_options
        self.levels = {}
        for c in sort_choices(choices):
            self.levels.setdefault(len(c), []).append(c)
        self.todo = sorted(self.levels)
        self.tokens, self.parents, self.laws, self.index = [], [], [], {(): -1}  # index: rank path -> node (root: -1)
        self.run = []  # nodes the head has run (their laws are rows 1.. of its output), in the order it ran them

    def request(self):
        if not self.todo:
            return None
        # the head's laws at the parents of this level: run the nodes of the level above that have children here
        wanted = [self.index[c[:-1]] for c in self.levels[self.todo[0]] if c[:-1] in self.index]
        self.run += [i for i in dict.fromkeys(wanted) if i >= 0 and i not in self.run]
        return ([self.tokens[i] for i in self.run],
                [self.run.index(self.parents[i]) if self.parents[i] >= 0 else -1 for i in self.run])

    def fill(self, logits):
        d = self.todo.pop(0)
        row = {-1: 0, **{node: 1 + k for k, node in enumerate(self.run)}}
        # the children of each parent: deterministic top-ranked tokens, or draws without replacement from p
        kids = {}
        for c in self.levels[d]:
            if c[:-1] in self.index:
                kids.setdefault(c[:-1], []).append(c)
        for path, below in kids.items():
            parent = self.index[path]
            z = logits[row[parent]]  # [V]
            if self.sampled:
                p = warp(softmax(z), **self.sampling_options)  # [V] the law the children are drawn from
                candidates = draw_without_replacement(p, len(below), self.rng)
                ranked = list(zip(below, candidates))  # the j-th child is the j-th draw
            else:
                candidates = top_ranked(z, max(c[-1] for c in below) + 1)
                ranked = [(c, candidates[c[-1]]) for c in below if c[-1] < len(candidates)]  # ranks past V: none
            for c, token in ranked:
                self.index[c] = len(self.tokens)
                self.tokens.append(token)
                self.parents.append(parent)
                self.laws.append(p if self.sampled else None)

    def result(self):
        return self.tokens, self.parents, (self.laws if self.sampled else None)


def draft_tree(x, F, draft, choices, rng, sampled, sampling_options):
    """Step 1: fill the rank paths `choices` with tokens, a level per head call -> TreeDraft.result()."""
    tree = TreeDraft(choices, rng, sampled, sampling_options)
    while (asked := tree.request()) is not None:
        tree.fill(draft(x, F, *asked))
    return tree.result()


def verify_step(tokens, parents, laws, logits, greedy, rng, sampling_options):
    """Step 3 on the target's logits [1 + m, V] at the root and every node -> (path, next root, its origin)."""
    if greedy:
        path, root = greedy_path(tokens, parents, logits)
        return path, root, "bonus" if not children(parents)[path[-1] if path else -1] else "resample"
    Q = warp(softmax(logits), **sampling_options)  # [1 + m, V] the target's laws
    if laws:  # sampled children: judged against the law they were drawn from
        return verify_without_replacement(tokens, parents, Q, laws, rng)
    return verify_tree(tokens, parents, Q, rng)  # deterministic candidates (or no tree): one-hot proposals


def eagle_decoding(x, target, draft, N, rng, choices, candidates="sample", stats=None, **sampling_options):
    """x followed by N tokens of the warped target's law (its greedy tokens at temperature 0)."""
    check_inputs(x, N, 1, **sampling_options)
    if candidates not in CANDIDATES:
        raise ValueError(f"unknown candidates {candidates!r}: choose one of {', '.join(CANDIDATES)}")
    check_choices(choices)
    greedy = sampling_options.get("temperature", 1) == 0
    x, T = [int(t) for t in x], len(x) + N
    logits, H = target.logits(x, len(x), hidden=True)  # prefill: [L, V], the features of every prompt position [L, C]
    F = list(H)  # F[j]: the target's feature after x[j]
    root = first_token(logits[-1], greedy, rng, **sampling_options)
    if stats is not None:
        stats.append(step_record([root], ["bonus"], drafted=0))  # the prefill call
    while True:
        x.append(root)  # the root is always accepted
        if len(x) == T:
            break
        # Step 1: the static tree, cut to the tokens still needed (each step ends with one token of the target's)
        cut = [c for c in choices if len(c) <= T - len(x) - 1]
        tokens, parents, laws = draft_tree(x, F, draft, cut, rng, candidates == "sample" and not greedy,
                                           sampling_options) if cut else ([], [], None)
        # Step 2: one tree-attention forward of the target over every node
        logits, H = target.tree(x, tokens, parents, hidden=True)  # [1 + m, V], [1 + m, C]
        # Step 3: lossless verification
        path, root, origin = verify_step(tokens, parents, laws, logits, greedy, rng, sampling_options)
        # Step 4: keep the path; its true features (the root's row, then the accepted nodes') feed the head
        target.accept(path)
        F += [H[0]] + [H[1 + i] for i in path]
        x += [tokens[i] for i in path]
        if stats is not None:
            stats.append(step_record([tokens[i] for i in path] + [root], ["draft"] * len(path) + [origin],
                                     drafted=tree_depth(parents), nodes=len(tokens)))
    return x


def batch_eagle_decoding(xs, target, draft, N, rng, choices, candidates="sample", stats=None, generators=None,
                         **sampling_options):
    """Each prompt of xs followed by N tokens, as eagle_decoding gives it alone with generators[b]
    (else rng). More: docs/algorithms.md (eagle.py, batch_eagle_decoding)."""
    for x in xs:
        check_inputs(x, N, 1, **sampling_options)
    if candidates not in CANDIDATES:
        raise ValueError(f"unknown candidates {candidates!r}: choose one of {', '.join(CANDIDATES)}")
    check_choices(choices)
    greedy = sampling_options.get("temperature", 1) == 0
    sampled = candidates == "sample" and not greedy
    xs, T, gen, F, roots = eagle_prefill(xs, N, target, rng, generators,
                                         lambda z, g: first_token(z, greedy, g, **sampling_options), stats)
    for active in root_rounds(xs, T, roots):  # each round: every row takes its root; the rows still short of T
        # Step 1: every row's static tree, cut to the tokens it still needs, a level per batched head call
        trees = {b: TreeDraft([c for c in choices if len(c) <= T[b] - len(xs[b]) - 1], gen[b], sampled,
                              sampling_options) for b in active}
        while asked := {b: a for b in active if (a := trees[b].request()) is not None}:
            for b, out in zip(asked, draft(list(asked), [xs[b] for b in asked], [F[b] for b in asked],
                                           list(asked.values()))):
                trees[b].fill(out)
        trees = [trees[b].result() for b in active]
        # Step 2: ONE batched tree-attention forward scores every row's root and nodes
        logits, H = target.tree([xs[b] for b in active], [(t, p) for t, p, _ in trees], hidden=True)
        # Step 3: each row's verification
        step = {"drafted": max(tree_depth(p) for _, p, _ in trees), "nodes": max(len(t) for t, _, _ in trees),
                "accepted": [-1] * len(xs), "tokens": [[] for _ in xs]}
        paths = []
        for i, (b, (tokens, parents, laws)) in enumerate(zip(active, trees)):
            path, roots[b], _ = verify_step(tokens, parents, laws, logits[i], greedy, gen[b], sampling_options)
            paths.append(path)
            F[b] += [H[i][0]] + [H[i][1 + j] for j in path]  # the root's and the accepted nodes' true features
            step["accepted"][b], step["tokens"][b] = len(path), [tokens[j] for j in path] + [roots[b]]
        # Step 4: every row keeps its accepted path in its cache
        target.accept(paths)
        for b, path, (tokens, _, _) in zip(active, paths, trees):
            xs[b] += [tokens[j] for j in path]
        if stats is not None:
            stats.append(step)
    return xs
