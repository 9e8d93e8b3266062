"""Exercise: verifying siblings drawn without replacement (Sequoia, Chen et al. 2024,
arXiv:2402.12374, Algorithm 1), graded by its law. p = draft, q = target; m tree nodes, V tokens."""
import numpy as np

from picospec.exercises import verify_chain as chain
from picospec.exercises.grading import (drawn_elsewhere, grade_law, hair_calls, one_call,
                                        rare_token_calls, tie_call)
from picospec.sampling import residual, sample

NAME, FAMILY = "verify_without_replacement", "token trees (SpecInfer, Sequoia)"
STATEMENT = """\
**Exercise `verify_without_replacement(tokens, parents, Q, P, rng)`: walk a token tree whose
siblings were drawn without replacement.** tokens[i], parents[i] (< i; -1 below the root): the
tree of m nodes. The children of a node were drawn one after another from the draft's law P[i]
(the same row for every sibling: the law before removals), each sibling's token removed and the
law renormalised before the next draw. Q [1 + m, V]: the target's law after the root (row 0) and
after node i (row 1 + i). Sequoia, Algorithm 1: start at the root with q = Q[row]; try its children
in order, each against the law it was really drawn from, p_i = P with the earlier siblings' tokens
removed and renormalised: keep child x if r < min(1, q(x) / p_i(x)) (r = rng.random()) and go down
to it; else q <- norm(max(0, q - p_i)) and try the next sibling. When no child is kept (or the node
has none) draw the next token from q. Return (path: the kept nodes, root to leaf, next token).
Draw every random number from `rng`; tokens and parents are lists of ints, Q and P float64 arrays:
leave all four as they were."""
STUB = '''def verify_without_replacement(tokens, parents, Q, P, rng):
    """tokens, parents [m]; Q [1 + m, V]; P [m, V] -> (path, next token)."""
    raise NotImplementedError'''
ANSWER = "from picospec.verify import verify_without_replacement  # the project's answer"
CONTRACT = "tree_without_replacement"
PROBE = ([0], [-1], np.full((2, 2), 0.5), np.full((1, 2), 0.5), np.random.default_rng(0))


# two siblings below the root: the first kept with probability 0.6, the second never once the
# first is out, then the residual over tokens 2 and 3, or the bonus over four: every outcome random
UNCERTAIN = ([0, 1], [-1, -1], np.array([[0.3, 0.2, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4],
                                         [0.4, 0.3, 0.2, 0.1]]),
             np.array([[0.5, 0.4, 0.05, 0.05], [0.5, 0.4, 0.05, 0.05]]), None)


# a chain of two nodes kept whatever the uniforms (q = p), then two siblings below it as in
# UNCERTAIN: a draw outside rng from depth 2 on changes the outcome
DEEP_UNCERTAIN = ([0, 1, 0, 1], [-1, 0, 1, 1],
                  np.array([[0.25] * 4, [0.25] * 4, *UNCERTAIN[2]]),
                  np.array([[0.25] * 4, [0.25] * 4, *UNCERTAIN[3]]), None)


# wider and deeper than the battery's trees: the root's first four children have q = 0 (always
# rejected), its fifth then has q = p_i (always kept), and five nodes below it, each an only child
# with P's row Q's, are always kept: the path is [4, 5, 6, 7, 8, 9] whatever the uniforms
WIDE_DEEP = ([0, 1, 2, 3, 4, 5, 0, 1, 2, 3], [-1] * 5 + [4, 5, 6, 7, 8],
             np.array([[0, 0, 0, 0, 0.5, 0.5]] + [[1 / 6] * 6] * 4
                      + [[0.1, 0.2, 0.3, 0.1, 0.2, 0.1]] * 6),
             np.array([[1 / 6] * 6] * 5 + [[0.1, 0.2, 0.3, 0.1, 0.2, 0.1]] * 5), None)


# one node with q / p = 0.5 exactly: at u = 0.5 the rule rejects it
TIE = ([0], [-1], np.array([[0.25, 0.75], [0.5, 0.5]]), np.array([[0.5, 0.5]]))
# verify_chain.ENDS with nodes for drafts: no nodes, Q[0] = [1 - 1e-12, 1e-12]; no nodes, Q[0] over
# 300 tokens; one node the target forbids, its residual over tokens 1 .. 299
EVEN = ([], [], np.array([[0.5, 0.5]]), np.zeros((0, 2)))
ENDS = ((([], [], chain.RARE[2], np.zeros((0, 2))), 1, *chain.ENDS[0][2:]),
        (([], [], chain.WIDE[2], np.zeros((0, 300))), 299, *chain.ENDS[1][2:]),
        (([0], [-1], chain.WIDE_RESIDUAL[2], chain.WIDE_RESIDUAL[1]), 299,
         "node 0 (token 0) has q = 0 (always rejected); the residual, Q[0], gives token i > 0 mass "
         "(300 - i) / 45,149", "a residual over 300 tokens"))
# five siblings (tokens 0 .. 4) below the root, every child row of Q one-hot on token 0: the first
# four have q = 0 (always rejected), the fifth meets q(4) / p_i(4) = 0.292 under u = 0.4, where p_i
# has all four earlier tokens removed (0.49 or more with fewer removed): rejected, and the residual
# is all on token 5
FIFTH = ([0, 1, 2, 3, 4], [-1] * 5, np.array([[0, 0, 0, 0, 0.6, 0.4]] + [[1.0, 0, 0, 0, 0, 0]] * 5),
         np.array([[0.45, 0.2, 0.1, 0.1, 0.1, 0.05]] * 5))
# a uniform a hair from q / p, every law drawn from one-hot (verify_chain.HAIRS, one node), then
# the fifth sibling
HAIRS = (*(((drafts, [-1], Q, P), u, (list(range(n)), x),
            about.replace("the draft x", "node 0's token x"), failed)
           for (drafts, P, Q), u, (n, x), about, failed in chain.HAIRS),
         (FIFTH, 0.4, ([], 5), "the fifth sibling, token 4, has q / p_i = 0.292 < u against its "
          "law p_i, P with tokens 0 .. 3 removed: rejected, and the residual is all on token 5",
          "the fifth sibling's law"))

# past every call above: twelve siblings, the first eleven with q = 0, the twelfth with q = p_i,
# then a chain of 30 only children, each with P's row Q's: the path is [11, 12, .., 41] whatever the
# uniforms (a walk cut at 8 or 32 levels, or 8 children, stops short)
WIDER_DEEPER = (list(range(12)) + [0] * 30, [-1] * 12 + list(range(11, 41)),
                np.array([[0] * 11 + [0.5, 0.5]] + [[1 / 13] * 13] * 11
                         + [[0.5, 0.5] + [0] * 11] * 31),
                np.array([[1 / 13] * 13] * 12 + [[0.5, 0.5] + [0] * 11] * 30), None)
# twelve siblings (tokens 0 .. 11) below the root as in FIFTH: the twelfth meets q(11) / p_i(11) =
# 0.414 under u = 0.5 against P with all eleven earlier tokens removed (0.69 or more with fewer
# removed): rejected, the residual all on token 12; then verify_chain's calls past the battery
# as chains of nodes (its 1,500 drafts as 100 nodes: a walk may recurse a level a call), and its
# residual over 2,000 tokens and sum ending below 1
TWELFTH = (list(range(12)), [-1] * 12, np.array([[0] * 11 + [0.9, 0.1]] + [[1.0] + [0] * 12] * 12),
           np.array([[0.08] * 11 + [0.11, 0.01]] * 12))
# node 0 below the root, kept (Q[0] one-hot on its token); its children, nodes 3 and 9, tried in
# that order (a set of them iterates 9 first): node 3 has q / p = 1.2, kept whatever the uniforms
# (and node 9 would be), and below it a chain of five whose rows are one-hot on their tokens
SETS = ([0, 1, 0, 0, 0, 0, 0, 0, 0, 1], [-1, -1, 1, 0, 3, 4, 5, 6, 7, 0],
        np.array([[1.0, 0, 0], [0.6, 0.4, 0]] + [[1 / 3] * 3] * 2 + [[1.0, 0, 0]] * 7),
        np.array([[0.5, 0.3, 0.2]] * 2 + [[1 / 3] * 3] + [[0.5, 0.3, 0.2]] * 7))
# Llama 3's 128,256 tokens: siblings 70,000 (past 16 bits, where it wraps to 4,464), which the
# target forbids, and 4,464, which the residual it leaves forbids
WIDE_SIBLINGS = ([70_000, 4_464], [-1, -1], np.zeros((3, 128_256)), np.zeros((2, 128_256)))
WIDE_SIBLINGS[2][0, [4_464, 7]] = [0.2, 0.8]
WIDE_SIBLINGS[2][1:, 0] = 1.0
WIDE_SIBLINGS[3][:, [70_000, 4_464, 7]] = [0.5, 0.25, 0.25]
SETS_CALL = (SETS, 0.25, ([0, 3, 4, 5, 6, 7, 8], 0), "node 0 is kept (q = 1); of its children, "
             "nodes 3 and 9, node 3 comes first and is kept (q / p = 1.2: whatever the "
             "uniforms), then the chain below it", "children 3 and 9")
WIDE_CALL = (WIDE_SIBLINGS, 0.5, ([], 7), "node 0, token 70,000, has q = 0: rejected, the "
             "residual all on token 7; node 1, token 4,464, gets no mass from that residual: "
             "rejected against p_1 (P with token 70,000 removed), and the next token is 7",
             "tokens 70000 and 4464")
# two siblings below the root, tokens 0 and 1, P = [1 - 1e-15, 1e-15, 0]: the first rejected (q / p
# = 0.5 < u = 0.7), the second judged against p_1 = P with token 0 removed, of mass 1e-15 before it
# is renormalised to [0, 1, 0] (a law left as it is below a threshold keeps the second always):
# q / p_1 = 0.5 < 0.7 rejects it, and the residual is all on token 2
FAINT = ([0, 1], [-1, -1], np.array([[0.5, 0.25, 0.25], [1.0, 0, 0], [1.0, 0, 0]]),
         np.array([[1 - 1e-15, 1e-15, 0.0]] * 2))
# 300 siblings below the root, tokens 0 .. 299 drawn from an even draft: the target forbids all
# but the last, token 299, which it holds certain: the first 299 rejected, the 300th kept whatever
# the uniforms (a node's children cut to 8, 16 or 256 never reach it)
CROWD = (list(range(300)), [-1] * 300, np.r_[np.eye(1, 300, 299), np.eye(1, 300, 0).repeat(300, 0)],
         np.full((300, 300), 1 / 300))
HAIRS_PAST = ((TWELFTH, 0.5, ([], 12), "the twelfth sibling, token 11, has q / p_i = 0.414 < u "
               "against its law p_i, P with tokens 0 .. 10 removed: rejected, and the residual is "
               "all on token 12", "the twelfth sibling's law"),
              *(((drafts, [-1] + list(range(len(drafts) - 1)), Q, P), u, (list(range(n)), x),
                 about.replace("drafts[t] = 0", "node t (token 0)").replace(
                     "the draft x", "node 0's token x"),
                 failed.replace("forty drafts", "a chain of forty nodes").replace(
                     "100 drafts", "a chain of 100 nodes").replace(
                     "300 drafts, the last", "a chain of 300 nodes, the last"))
                for (drafts, P, Q), u, (n, x), about, failed in (
                    {"1,500 drafts": chain.kept_then_rejected(100),
                     "1,500 drafts, the last forbidden": chain.kept_then_forbidden(300)}.get(
                        call[-1], call) for call in chain.HAIRS_PAST)),
              SETS_CALL, WIDE_CALL,
              (FAINT, (0.7, 0.7, 0.5), ([], 2), "node 0, token 0, has q / p = 0.5 < u = 0.7: "
               "rejected; node 1, token 1, is judged against p_1, P with token 0 removed, of mass "
               "1e-15 before it is renormalised: q / p_1 = 0.5 < u rejects it, and the residual "
               "is all on token 2", "a sibling's law of mass 1e-15"),
              (CROWD, 0.5, ([299], 0), "300 siblings below the root, tokens 0 .. 299: the target "
               "forbids all but token 299, which it holds certain, so the first 299 are rejected "
               "and the 300th kept whatever the uniforms; then Q[300] is all on token 0",
               "a node of 300 children"))
ENDS_PAST = ((([0], [-1], chain.WIDER_RESIDUAL[2], chain.WIDER_RESIDUAL[1]), 1999,
              "node 0 (token 0) has q = 0 (always rejected); the residual, Q[0], gives token "
              "i > 0 mass (2000 - i) / 1,999,000", "a residual over 2,000 tokens"),
             (([], [], chain.SHORT_SUM[2], chain.SHORT_SUM[1]), 9, *chain.SHORT_SUM_ABOUT),
             *(((drafts, [-1] * len(drafts), Q, P), token,
                about.replace("drafts[0] = 0", "node 0 (token 0)"), failed)
               for (drafts, P, Q), token, about, failed in chain.ENDS_PAST[2:]))

# verify_chain.WIDE_UNCERTAIN with nodes for drafts: no nodes, then one the target forbids
WIDE_UNCERTAIN = tuple((drafts, [-1] * len(drafts), Q, P, None)
                       for drafts, P, Q, _ in chain.WIDE_UNCERTAIN)
# verify_chain.TAILS with nodes for drafts (each a child of the root)
TAILS = tuple(((drafts, [-1] * len(drafts), Q, P), first,
               about.replace("drafts[0] = 0", "node 0 (token 0)"), failed)
              for (drafts, P, Q), first, about, failed in chain.TAILS)


def grade(fn, samples=20_000, seed=0):
    verdict = grade_law(NAME, fn, CONTRACT, samples, seed, probe=PROBE,
                        uncertain=(UNCERTAIN, DEEP_UNCERTAIN),
                        known=WRONG, rules=rules)
    if not verdict.passed:
        return verdict
    wide = (*WIDE_DEEP[:-1], np.random.default_rng(seed))
    return (drawn_elsewhere(NAME, fn, *WIDE_UNCERTAIN, calls=chain.WIDE_CALLS)
            or one_call(NAME, fn, wide, rules, "of five siblings, then five nodes below the fifth",
                        "five siblings, six levels")
            or tie_call(NAME, fn, TIE, lambda out: len(out[0]) > 0)
            or hair_calls(NAME, fn, HAIRS, lambda out: ([int(i) for i in out[0]], int(out[1])),
                          rules)
            or rare_token_calls(NAME, fn, ENDS, EVEN, lambda out: int(out[1]))
            or one_call(NAME, fn, (*WIDER_DEEPER[:-1], np.random.default_rng(seed)), rules,
                        "of twelve siblings, then 30 nodes below the twelfth",
                        "twelve siblings, 31 levels")
            or hair_calls(NAME, fn, HAIRS_PAST,
                          lambda out: ([int(i) for i in out[0]], int(out[1])), rules)
            or rare_token_calls(NAME, fn, ENDS_PAST, EVEN, lambda out: int(out[1]), TAILS, seed)
            or verdict)


def rules(tokens, parents, Q, P, out):
    """What the call -> out = (path, next token) broke of what any uniforms allow, or None: the
    walk replayed along the path, each sibling before a kept one rejected."""
    path, x, V = [int(i) for i in out[0]], int(out[1]), Q.shape[-1]
    node, q = -1, Q[0]
    for c in path + [None]:
        children = [i for i, parent in enumerate(parents) if parent == node]
        if c is not None and c not in children:
            return f"node {c} is not a child of {'the root' if node < 0 else f'node {node}'}"
        tried = []
        for s in children[:children.index(c) if c is not None else len(children)]:
            p, t = law_of_sibling(tokens, P, tried, s), tokens[s]
            if q[t] >= p[t]:
                return (f"node {s} (token {t}) was rejected though q({t}) = {q[t]:.4g} >= "
                        f"p_i({t}) = {p[t]:.4g}, the law it was drawn from: it is always kept")
            q = residual(q, p)
            tried.append(s)
        if c is None:
            break
        if q[tokens[c]] == 0:
            return (f"node {c} (token {tokens[c]}) was kept though q({tokens[c]}) = 0 where it "
                    f"was judged: keep only when u < q(x) / p_i(x), never when q(x) = 0")
        node, q = c, Q[c + 1]
    if not 0 <= x < V or q[x] == 0:
        return (f"the next token {x} has probability 0 under q at the end of the walk "
                + ("(the residual left once every child was rejected)" if children else
                   f"(Q[{node + 1}], the law after the last kept node)"))
    return None


def law_of_sibling(tokens, P, tried, c):
    """p_i: P[c] with the tokens of the siblings tried before removed, renormalised."""
    return removed(tokens, P, tried, c) if tried else P[c]


def walk(tokens, parents, Q, P, rng, law_of, update=residual, draw=sample,
         uniform=lambda rng, path: rng.random()):
    """The walk, law_of(siblings tried before, node) -> p_i, q updated after each rejection, the
    next token draw(q, rng), each test's uniform(rng, path so far)."""
    node, path = -1, []
    while True:
        q, tried = Q[node + 1], []
        for c in [i for i, parent in enumerate(parents) if parent == node]:
            p = law_of(tokens, P, tried, c)
            if uniform(rng, path) < min(1, q[tokens[c]] / p[tokens[c]]):
                node, _ = c, path.append(c)
                break
            q = update(q, p)
            tried.append(c)
        else:
            return path, draw(q, rng)


def as_iid(tokens, P, tried, c):
    return P[c]


def removed(tokens, P, tried, c):
    p = np.array(P[c], dtype=float)
    p[[tokens[t] for t in tried]] = 0
    return p / p.sum()


# WRONG: plausible mistakes, each one the grader rejects
def judged_as_iid(tokens, parents, Q, P, rng):
    """Every sibling judged against P itself, as if the siblings were i.i.d."""
    return walk(tokens, parents, Q, P, rng, as_iid)


def only_previous_removed(tokens, parents, Q, P, rng):
    """Only the sibling just before removed from P, not every earlier one."""
    return walk(tokens, parents, Q, P, rng, lambda tokens, P, tried, c: removed(tokens, P,
                                                                                tried[-1:], c))


def no_residual_update(tokens, parents, Q, P, rng):
    """Q left as it was after a rejected sibling (and the next token drawn from it)."""
    return walk(tokens, parents, Q, P, rng, removed, update=lambda q, p: q)


def answer(tokens, parents, Q, P, rng):
    """The walk above with the right laws: Algorithm 1 written out."""
    return walk(tokens, parents, Q, P, rng, removed)


def last_token_from_numpy(tokens, parents, Q, P, rng):
    """The right walk, its next token drawn by NumPy's global generator."""
    return walk(tokens, parents, Q, P, rng, removed,
                draw=lambda q, rng: int(np.random.choice(len(q), p=q)))


def numpy_global_below_depth_2(tokens, parents, Q, P, rng):
    """The right walk, its uniforms from NumPy's global generator once the path holds 2 nodes."""
    return walk(tokens, parents, Q, P, rng, removed,
                uniform=lambda rng, path: rng.random() if len(path) < 2 else np.random.random())


WRONG = (judged_as_iid, only_previous_removed, no_residual_update, last_token_from_numpy,
         numpy_global_below_depth_2)
