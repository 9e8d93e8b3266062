"""Sequoia: Chen, May, Svirschevski, Huang, Ryabinin, Jia, Chen 2024, "Sequoia: Scalable, Robust,
and Hardware-aware Speculative Decoding" (arXiv:2402.12374; its v3 is titled "Sequoia:
Scalable and Robust Speculative Decoding"); its p_k is a here, p = draft, q = target.
Tree by dynamic program (3.1: sequoia_tree) and cost (3.3: choose_size), drawn without
replacement (draw_tree), verified by Algorithm 1 (verify_filled). n nodes with the root, d depth,
m = n - 1 drafts, V = n_vocab.

The dynamic program (section 3.1). a[k] is the chance that the (k + 1)-th child of a node is the
one accepted (its acceptance vector); a tree's value is the expected accepted tokens plus one,
1 + sum over nodes of the product of a[rank] along the node's path. With best[d][n] the largest
value of a tree of n nodes (root included) and depth <= d, and split[j][s] the largest value of
s nodes shared among the children of ranks j, j + 1, ... of one node (a table per depth d):
    best[0][1] = 1, best[0][n > 1] = -inf
    split[j][s] = max over t = 1..s of  a[j] best[d - 1][t] + split[j + 1][s - t]
    split[.][0] = 0, split[K][s > 0] = -inf (no rank left), K = len(a)
    best[d][n] = 1 + split[0][n - 1]
(child j roots a subtree of t nodes, scaled by its own acceptance a[j]; ranks are filled in
order, since a child of rank j + 1 is drawn only after the one of rank j). The hardware-aware
size (section 3.3) divides best[d][n] by the step's cost: the target's call on n positions plus
the draft's calls. The authors' optimizer counts d draft calls, one batched call per level;
here draw_tree calls the draft once per node that has children, and choose_size counts those.

Why Algorithm 1 is lossless. Child i is drawn from p_i, the draft's p with children 1..i-1
removed and renormalised, and judged against that same p_i, a rejection leaving
norm(max(0, q - p_i)) for child i + 1: the siblings' walk of verify.py with each child judged
against the law it was really drawn from, so the token that leaves a node follows q
(docs/proofs.md). Unlike i.i.d. siblings (SpecInfer), a rejected token is never drawn again.
"""
import numpy as np

from picospec.sampling import (check_inputs, check_vocab, sample, sample_without_replacement,
                               warp)
from picospec.tree import depth as tree_depth, node_path, sort_choices, top_tokens
from picospec.verify import (step_record, verify_distinct, verify_iid,
                             verify_without_replacement)

def tree_value(choices, acceptance):
    """1 + sum over nodes of prod a[rank]: [[0], [1], [0, 0]], a = (.6, .2) -> 2.16."""
    # ranks beyond K: never accepted
    a = list(acceptance) + [0.0] * max((max(c) + 1 for c in choices), default=0)
    return 1.0 + sum(float(np.prod([a[r] for r in c])) for c in choices)


def sequoia_table(acceptance, n, d):
    """Section 3.1's dynamic program for sizes <= n, depths <= d -> (best, choice)."""
    a, K = [float(v) for v in acceptance], len(acceptance)
    # depth 0: the root alone (s = 0 is the empty subtree)
    best = [[0.0, 1.0] + [-np.inf] * (n - 1)]
    choice = [None]
    for level in range(1, d + 1):
        below = best[level - 1]  # the children's subtrees are one level shallower
        # split[K][s > 0]: no rank left for s nodes
        split = [[0.0] + [-np.inf] * n for _ in range(K + 1)]
        take = [[0] * (n + 1) for _ in range(K + 1)]
        for j in range(K - 1, -1, -1):
            for s in range(1, n + 1):
                # child j takes t >= 1 nodes, the children of later ranks the other s - t
                options = [(a[j] * below[t] + split[j + 1][s - t] if below[t] > -np.inf
                            else -np.inf, t)
                           for t in range(1, s + 1)]
                split[j][s], take[j][s] = max(options, key=lambda o: o[0])
        best.append([0.0] + [1.0 + split[0][s - 1] for s in range(1, n + 1)])
        choice.append(take)
    return best, choice


def sequoia_tree(acceptance, n, d):
    """The best tree of n nodes, depth <= d: a = (.8, .1), 3, 2 -> ([[0], [0, 0]], 2.44)."""
    best, choice = sequoia_table(acceptance, n, d)
    if best[d][n] == -np.inf:
        raise ValueError(f"no tree of {n} nodes has depth <= {d} with at most {len(acceptance)} "
                         f"children per node: raise the depth or give a longer acceptance vector")
    return build_choices(choice, n, d), best[d][n]


def build_choices(choice, n, d, prefix=()):
    out, s, j = [], n - 1, 0
    while s > 0:
        t = choice[d][j][s]
        out.append(list(prefix + (j,)))
        out += build_choices(choice, t, d - 1, prefix + (j,))
        s, j = s - t, j + 1
    return [list(c) for c in sort_choices(out)] if not prefix else out


def all_trees(n, d):
    """Every tree of n nodes, depth <= d: the brute force that tests the table."""
    if n == 1:
        yield []
        return
    if d == 0:
        return
    # the first child's subtree takes `first` nodes, later children the rest
    for first in range(1, n):
        for sub in all_trees(first, d - 1):
            for rest in all_trees(n - first, d):
                # the rest's children become ranks 1, 2, ..
                shifted = [[c[0] + 1] + c[1:] for c in rest]
                yield [list(c) for c in sort_choices([[0]] + [[0] + c for c in sub] + shifted)]


def choose_size(acceptance, verify_cost, draft_cost, max_depth):
    """Section 3.3: the (n, d) of most value per cost -> (n, d, modelled speedup, choices)."""
    best, choice = sequoia_table(acceptance, len(verify_cost), max_depth)
    top = None
    for n in range(2, len(verify_cost) + 1):
        for d in range(1, max_depth + 1):
            if best[d][n] == -np.inf:
                continue
            choices = build_choices(choice, n, d)
            # nodes with children, the root included
            internal = len({tuple(c[:-1]) for c in choices})
            speedup = best[d][n] / (verify_cost[n - 1] + draft_cost * internal)
            if top is None or speedup > top[2] + 1e-12:
                top = (n, d, speedup, choices)
    return top


def child_counts(choices):
    """Children per rank path: [[0], [1], [0, 0]] -> {(): 2, (0,): 1}."""
    kids = {}
    for c in sort_choices(choices):
        kids[c[:-1]] = kids.get(c[:-1], 0) + 1
    return kids


def draft_children(p, k, rng, greedy, **sampling_options):
    """k children from the draft's p [V]: without replacement, or its top k when greedy."""
    law = p if greedy else warp(p, **sampling_options)
    return (top_tokens(law, k) if greedy else sample_without_replacement(law, k, rng)), law


def draw_tree(draft, x, choices, rng, greedy, **sampling_options):
    """Step 1: fill the shape, one draft call per inner node -> (tokens, parents, P [m, V])."""
    tokens, parents, P, node = [], [], [], {(): -1}  # node: rank path -> tree node (the root: -1)
    for c, k in child_counts(choices).items():
        if c in node:  # a rank the draft's law could not fill is left out with its subtree
            p = draft(x + node_path(tokens, parents, node[c]))[-1]  # [V] the draft's law after c
            picks, law = draft_children(p, k, rng, greedy, **sampling_options)
            for rank, token in enumerate(picks):
                node[c + (rank,)] = len(tokens)
                tokens.append(int(token))
                parents.append(node[c])
                P.append(law)
    return tokens, parents, P


def verify_filled(tokens, parents, P, Q, rng, greedy, **sampling_options):
    """Step 3 on the target's Q [1 + m, V]: Algorithm 1, exact match at T = 0."""
    Q = warp(Q, **sampling_options)
    if greedy:
        return verify_distinct(tokens, parents, Q, rng)
    return verify_without_replacement(tokens, parents, Q, np.array(P), rng)  # P [m, V]


def check_sequoia(acceptance, nodes, depth):
    if len(acceptance) == 0 or any(not 0 <= a <= 1
                                   for a in acceptance) or sum(acceptance) > 1 + 1e-6:
        raise ValueError(f"acceptance must be probabilities of the 1st, 2nd, .. child being "
                         f"accepted (each in [0, 1], summing to at most 1); got {acceptance}")
    for name, value in [("nodes", nodes), ("depth", depth)]:
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value}")


def sequoia_decoding(x, draft, target, N, rng, nodes=3, depth=3, *, acceptance, stats=None,
                     **sampling_options):
    """x then N tokens of the warped target's law (greedy at T = 0)."""
    check_inputs(x, N, **sampling_options)
    check_vocab(draft, target)
    check_sequoia(acceptance, nodes, depth)
    greedy = sampling_options.get("temperature", 1.0) == 0
    choices, _ = sequoia_tree(acceptance, nodes + 1, depth)
    x, T = [int(t) for t in x], len(x) + N
    while len(x) < T:
        # Step 1: the dynamic program's tree, no deeper than the tokens still needed minus one,
        # filled by the draft
        shape = [c for c in choices if len(c) <= T - len(x) - 1]
        tokens, parents, P = draw_tree(draft, x, shape, rng, greedy, **sampling_options)
        # Step 2: one tree-attention forward of the target scores every node
        Q = target.tree(x, tokens, parents, probs=True)  # [1 + m, V]
        # Step 3: verification without replacement (exact match at temperature 0)
        path, token, origin = verify_filled(tokens, parents, P, Q, rng, greedy, **sampling_options)
        target.accept(path)
        new = [tokens[i] for i in path] + [int(token)]
        x.extend(new)
        if stats is not None:
            stats.append(step_record(new, ["draft"] * len(path) + [origin],
                                     drafted=tree_depth(parents), nodes=len(tokens)))
    return x


def acceptance_vector(draft, target, sequences, start, K, rng, siblings="without_replacement",
                      repeats=1, **sampling_options):
    """Section 3.1's a [K]: share of trials on `sequences` whose (k + 1)-th child is accepted."""
    greedy, counts, trials = sampling_options.get("temperature", 1.0) == 0, np.zeros(K), 0
    for seq in sequences:
        n = len(seq) - start + 1
        P = draft(list(seq), n)  # [n, V] the draft's law after each prefix seq[:start] .. seq
        Q = warp(target(list(seq), n), **sampling_options)  # [n, V]
        for p, q in zip(P, Q):
            # [1 + K, V]: one level is verified; the rows below it are not used
            rows = np.tile(q, (1 + K, 1))
            for _ in range(1 if greedy else repeats):
                if greedy:
                    picks = top_tokens(p, K)
                    path, _, _ = verify_distinct(picks, [-1] * len(picks), rows, rng)
                    accepted = path[0] if path else None
                else:
                    law = warp(p, **sampling_options)  # [V]
                    picks = ([sample(law, rng) for _ in range(K)] if siblings == "iid"
                             else sample_without_replacement(law, K, rng))
                    # iid: one node per distinct token, every draw kept
                    tokens = list(dict.fromkeys(picks))
                    draws = [tokens.index(t) for t in picks]
                    if siblings == "iid":  # laws [K, V], one per draw
                        path, _, _ = verify_iid(tokens, [-1] * len(tokens), rows,
                                                np.array([law] * K), rng, draws)
                    else:
                        laws = np.array([law] * len(tokens))  # [len(tokens), V]
                        path, _, _ = verify_without_replacement(tokens, [-1] * len(tokens), rows,
                                                                laws, rng)
                    # the first draw of the accepted token
                    accepted = draws.index(path[0]) if path else None
                trials += 1
                if accepted is not None:
                    counts[accepted] += 1
    return counts / trials
