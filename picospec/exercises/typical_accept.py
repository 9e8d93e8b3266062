"""Exercise: Medusa's typical acceptance (Cai et al. 2024, section 2.3.1). q = target; m tree
nodes, V tokens."""
import math

import numpy as np

from picospec.exercises.grading import grade_cases, show
from picospec.medusa import typical_accept as reference

NAME, FAMILY = "typical_accept", "Medusa"
STATEMENT = """\
**Exercise `typical_accept(tokens, parents, probs, epsilon, delta)`: which candidates Medusa's
typical acceptance keeps.** A tree of m candidates: tokens[i] is node i's token, parents[i] its
parent (-1: the root), both lists of ints. probs [1 + m, V]: the target's law after the root
(row 0) and after each node i (row 1 + i). Cai et al. 2024: candidate x below a node whose target
law is q is kept when
q(x) > min(epsilon, delta * exp(-H(q))), H(q) = -sum_v q(v) log q(v) (natural log, 0 log 0 = 0).
Return a list of m booleans, one per node (the node alone, not its whole path; m may be 0: []).
probs: float64,
compared exactly (a token at the threshold is not kept); it may hold exact zeros and must be left
as it was."""
STUB = '''def typical_accept(tokens, parents, probs, epsilon, delta):
    """tokens, parents [m]; probs [1 + m, V] -> [m] bools."""
    raise NotImplementedError'''
ANSWER = "from picospec.medusa import typical_accept  # the project's answer"


def cases(seed=0):
    """q(x) at and a hair (1e-9) either side of each threshold, zeros, tiny masses, no node;
    then trees of 1 to 6 nodes over 2 to 6 tokens."""
    rng = np.random.default_rng(seed)
    tie = ([0], [-1], np.array([[0.09, 0.91], [0.5, 0.5]]), 0.09, 0.3)  # threshold min(.09, .22)
    out = [("tokens=[0], parents=[-1], probs=[[0.09, 0.91], [0.5, 0.5]], epsilon=0.09, delta=0.3",
            tie)]
    # H = 0 exactly (0 log 0 = 0), so delta * exp(-H) is 1.0 exactly: min(2.0, 1.0), not kept
    out.append(("tokens=[0], parents=[-1], probs=[[1.0, 0.0], [0.5, 0.5]], epsilon=2.0, "
                "delta=1.0", ([0], [-1], np.array([[1.0, 0.0], [0.5, 0.5]]), 2.0, 1.0)))
    # an exact zero in the law (0 log 0 = 0): H = 0.673, threshold min(0.5, 0.306), 0.4 is kept
    zero = ([2, 1], [-1, 0], np.array([[0.0, 0.6, 0.4], [0.5, 0.0, 0.5], [1 / 3] * 3]), 0.5, 0.6)
    out.append(("tokens=[2, 1], parents=[-1, 0], probs=[[0.0, 0.6, 0.4], [0.5, 0.0, 0.5], "
                "[0.333, 0.333, 0.333]], epsilon=0.5, delta=0.6", zero))
    # one ulp above min(0.09, 0.67) is kept: compared exactly (no margin of eps)
    # (and one ulp above 0.05, which log maps to log 0.05: compared in log space, it is not kept)
    for q, epsilon in ((0.09000000009, 0.09), (0.08999999991, 0.09),
                       (float(np.nextafter(0.09, 1)), 0.09), (float(np.nextafter(0.05, 1)), 0.05)):
        out.append((f"tokens=[0], parents=[-1], probs=[[{q}, {1 - q}], [0.5, 0.5]], "
                    f"epsilon={epsilon}, delta=0.9",
                    ([0], [-1], np.array([[q, 1 - q], [0.5, 0.5]]), epsilon, 0.9)))
    # q(x) = 0.3 a hair (relative 1e-9) above, then below delta exp(-H([0.3, 0.7])): delta is
    # 0.3 exp(H) (1 - 1e-9), then (1 + 1e-9), H exact, to 12 digits (no libm's last bit matters);
    # then (1 -+ 1e-13): log(q + 1e-12) "against log 0" moves the threshold by 2e-12; then a
    # threshold 6 ulps below 0.3, 0.29999999999999966 however H is summed (rounded to 15 digits
    # it is 0.3)
    for delta in (0.552606831959, 0.552606833064, 0.5526068325111387, 0.5526068325112492,
                  0.5526068325111934):
        out.append((f"tokens=[0], parents=[-1], probs=[[0.3, 0.7], [0.5, 0.5]], epsilon=0.5, "
                    f"delta={delta}", ([0], [-1], np.array([[0.3, 0.7], [0.5, 0.5]]), 0.5, delta)))
    # masses of 1e-10 and 1e-12 beside 0.3: their q log q moves H by 2e-9 and 3e-11, so a
    # log clipped at 1e-8 (or 1e-11) puts 0.3 on the wrong side of a threshold a hair from it;
    # then 1e-17, whose log taken as log1p(q - 1) is -inf (1e-17 - 1 rounds to -1): H infinite
    for tiny in (1e-10, 1e-12, 1e-17):
        law = [tiny, 0.3, 0.7 - tiny]
        H = -math.fsum(q * math.log(q) for q in law)
        for hair in (-1e-13, 1e-13):
            delta = 0.3 * math.exp(H) * (1 + hair)
            out.append((f"tokens=[1], parents=[-1], probs=[[{tiny}, 0.3, {law[2]}], "
                        f"[0.3, 0.3, 0.4]], epsilon=0.5, delta={delta!r}",
                        ([1], [-1], np.array([law, [0.3, 0.3, 0.4]]), 0.5, delta)))
    # a law over GPT-2's 50,257 tokens, all but two of mass 4e-16: a log clipped at 1e-15 (or
    # above) moves H by 2e-11 and 0.3 crosses a threshold 1e-11 from it; any sum of the terms in
    # float64, tiny ones first or last, stays within 3e-12
    # (then masses of 1e-14, 0.3 above its threshold by 5e-12 of it: log(q + eps) lowers H by
    # 1.1e-11 and drops it; masses of 1e-17, 0.3 above by 1e-12: a log clipped at eps lowers H by
    # 1.6e-12, while summing the big terms first raises it by 2.6e-12, and 0.3 stays kept)
    V = 50_257
    for tiny, hairs in ((4e-16, (-1e-11, 1e-11)), (1e-14, (-5e-12,)), (1e-17, (-1e-12,))):
        law = [tiny] * (V - 2) + [0.3, 0.7 - tiny * (V - 2)]
        H = -math.fsum(q * math.log(q) for q in law)
        for hair in hairs:
            delta = 0.3 * math.exp(H) * (1 + hair)
            out.append((f"tokens=[{V - 2}], parents=[-1], probs=[[{tiny}, ..., {tiny}, 0.3, "
                        f"{law[-1]!r}], [1 / V, ...]] (V = {V:,}), epsilon=0.5, delta={delta!r}",
                        ([V - 2], [-1], np.array([law, [1 / V] * V]), 0.5, delta)))
    out.append(("tokens=[], parents=[], probs=[[0.5, 0.5]], epsilon=0.09, delta=0.3 (no "
                "candidates)", ([], [], np.array([[0.5, 0.5]]), 0.09, 0.3)))
    # laws alike at their ends and middle (and, over 9 tokens, at both ends' first two), one
    # right after the other: H 0.50 then 1.35, token 2's 0.2, then 0.17, above both thresholds
    # (0.182, 0.078); an entropy kept by a few entries gives the second the first's, and drops it
    for first, second in (([0, 0.8, 0.2, 0, 0, 0, 0], [0, 0.3, 0.17, 0, 0.3, 0.23, 0]),
                          ([0, 0, 0.8, 0, 0, 0.2, 0, 0, 0], [0, 0, 0.3, 0.3, 0, 0.17, 0.23, 0, 0])):
        x = first.index(0.2)
        for law in (first, second):
            rows = np.array([law, np.full(len(law), 1 / len(law))])
            out.append((f"tokens=[{x}], parents=[-1], probs=[{law}, [1 / {len(law)}, ...]], "
                        f"epsilon=0.5, delta=0.3", ([x], [-1], rows, 0.5, 0.3)))
    # a row summing to 1 + 2^-52, q(0) = 0.3 one ulp above epsilon: kept (a row divided by its
    # sum first puts 0.3 on epsilon, not kept)
    law, below = [0.3, 0.7000000000000002], float(np.nextafter(0.3, 0))
    out.append((f"tokens=[0], parents=[-1], probs=[{law}, [0.5, 0.5]], epsilon={below!r}, "
                f"delta=10.0", ([0], [-1], np.array([law, [0.5, 0.5]]), below, 10.0)))
    # Llama 3's 128,256 tokens, two rows with exact zeros: probs, 256,512 entries, left as it was
    # (zeros replaced in place in a large probs, to spare a copy, change the caller's)
    V = 128_256
    wide = np.r_[0.0, 0.3, np.full(V - 2, 0.7 / (V - 2))]
    out.append((f"tokens=[1], parents=[-1], probs=[[0, 0.3, 0.7 / {V - 2}, ...], [0, 0.3, ...]] "
                f"(V = {V:,}), epsilon=0.09, delta=0.3",
                ([1], [-1], np.array([wide, wide]), 0.09, 0.3)))
    # two calls alike but for row 1 (its threshold 0.3, then 0.3205 > q = 0.32): thresholds kept
    # by the shape, epsilon, delta and row 0 are the first call's
    for row in ([0.5, 0.5], [0.32, 0.68]):
        out.append((f"tokens=[0, 0], parents=[-1, 0], probs=[[0.5, 0.5], {row}, [0.5, 0.5]], "
                    f"epsilon=0.5, delta=0.6",
                    ([0, 0], [-1, 0], np.array([[0.5, 0.5], row, [0.5, 0.5]]), 0.5, 0.6)))
    for m in range(1, 7):
        for V in range(2, 7):
            for concentration in (0.3, 1.0, 5.0):
                parents = [int(rng.integers(-1, i)) for i in range(m)]
                tokens = [int(t) for t in rng.integers(0, V, m)]
                probs = rng.dirichlet(np.full(V, concentration), size=1 + m)  # [1 + m, V]
                epsilon, delta = [(0.09, 0.3), (0.3, 0.6), (0.05, 0.9)][int(rng.integers(3))]
                shown = np.round(probs, 3).tolist()
                out.append((f"tokens={tokens}, parents={parents}, probs={shown}, "
                            f"epsilon={epsilon}, delta={delta}",
                            (tokens, parents, probs, epsilon, delta)))
    # a law all but certain, its largest mass 1 - t: H = t (1 - log t) + O(t^2) > t, so under
    # delta = 1 the threshold exp(-H) is below 1 - t and the node is kept (a law taken as
    # certain, H = 0, above some 1 - t, puts the threshold at 1)
    # (at t = 1e-17, 1 - t rounds to 1.0: a largest mass of exactly 1 taken as certain answers
    # otherwise)
    for t in (1e-13, 1e-10, 1e-7, 1e-17):
        out.append((f"tokens=[0], parents=[-1], probs=[[{1 - t!r}, {t}], [0.5, 0.5]], "
                    f"epsilon=2.0, delta=1.0",
                    ([0], [-1], np.array([[1 - t, t], [0.5, 0.5]]), 2.0, 1.0)))
    # a threshold of 1e-13 and q(x) = 5e-13 above it (a floor on q, or on the threshold, answers
    # otherwise); then epsilon and delta swapped on one law (a threshold kept by a key symmetric
    # in them is the other call's)
    out.append(("tokens=[1], parents=[-1], probs=[[0.9999999999995, 5e-13], [0.5, 0.5]], "
                "epsilon=0.5, delta=1e-13",
                ([1], [-1], np.array([[1 - 5e-13, 5e-13], [0.5, 0.5]]), 0.5, 1e-13)))
    # epsilon = 0, then delta = 0: the threshold is 0, so a token of any mass is kept and one of
    # mass 0 is not (a 0 read as "that threshold is off" answers otherwise)
    for epsilon, delta in ((0.0, 0.3), (0.5, 0.0)):
        out.append((f"tokens=[0, 1], parents=[-1, -1], probs=[[0.05, 0.0, 0.95], "
                    f"[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], epsilon={epsilon}, delta={delta}",
                    ([0, 1], [-1, -1], np.array([[0.05, 0.0, 0.95], [0.5, 0.5, 0.0],
                                                 [0.5, 0.5, 0.0]]), epsilon, delta)))
    # a vocabulary of one token (H = 0, threshold min(2, 1) = 1: not kept); a law certain of its
    # token under epsilon 2, delta 0.5 (threshold 0.5: kept); a mass of 1e-310 under epsilon 0
    # (kept: a subnormal flushed to 0 answers otherwise); a child listed before its parent
    out.append(("tokens=[0], parents=[-1], probs=[[1.0], [1.0]], epsilon=2.0, delta=1.0",
                ([0], [-1], np.array([[1.0], [1.0]]), 2.0, 1.0)))
    out.append(("tokens=[0], parents=[-1], probs=[[1.0, 0.0], [0.5, 0.5]], epsilon=2.0, "
                "delta=0.5", ([0], [-1], np.array([[1.0, 0.0], [0.5, 0.5]]), 2.0, 0.5)))
    out.append(("tokens=[0], parents=[-1], probs=[[1e-310, 1.0], [0.5, 0.5]], epsilon=0.0, "
                "delta=0.3", ([0], [-1], np.array([[1e-310, 1.0], [0.5, 0.5]]), 0.0, 0.3)))
    out.append(("tokens=[1, 0], parents=[1, -1], probs=[[0.6, 0.4], [0.5, 0.5], [0.3, 0.7]], "
                "epsilon=0.5, delta=0.6",
                ([1, 0], [1, -1], np.array([[0.6, 0.4], [0.5, 0.5], [0.3, 0.7]]), 0.5, 0.6)))
    for epsilon, delta in ((0.9, 0.35), (0.35, 0.9)):
        out.append((f"tokens=[0], parents=[-1], probs=[[0.3, 0.7], [0.5, 0.5]], "
                    f"epsilon={epsilon}, delta={delta}",
                    ([0], [-1], np.array([[0.3, 0.7], [0.5, 0.5]]), epsilon, delta)))
    # a chain of 1,500 nodes of token 0, the rows below them alternately [0.5, 0.5] (kept) and
    # [0.05, 0.95] (not): rows past 8 bits, a fixed buffer of nodes, Python's recursion limit
    rows = np.array([[0.5, 0.5], [0.05, 0.95]] * 750 + [[0.5, 0.5]])  # [1501, 2]
    out.append(("tokens=[0] * 1500, parents=[-1, 0, 1, ..., 1498], probs=[[0.5, 0.5], "
                "[0.05, 0.95], ...] (1,501 rows), epsilon=0.09, delta=0.3",
                ([0] * 1_500, list(range(-1, 1_499)), rows, 0.09, 0.3)))
    # a chain of 300 nodes of token 0, every row [0.5, 0.5] (kept) but row 1 (node 1 not): the
    # chain above repeats every two rows, so a row index wrapped at 256 reads a row alike; here
    # node 257 read as row 1 answers otherwise
    rows = np.array([[0.5, 0.5]] * 301)  # [301, 2]
    rows[1] = [0.05, 0.95]
    out.append(("tokens=[0] * 300, parents=[-1, 0, 1, ..., 298], probs=[[0.5, 0.5], "
                "[0.05, 0.95], then [0.5, 0.5] ...] (301 rows), epsilon=0.09, delta=0.3",
                ([0] * 300, list(range(-1, 299)), rows, 0.09, 0.3)))
    # a chain of 33,000 nodes of token 0, every row [0.5, 0.5] but row 233: node 32,768's row,
    # 32,768, wraps in 16 bits to -32,768, which reads row 233 (33,001 - 32,768)
    rows = np.array([[0.5, 0.5]] * 33_001)  # [33001, 2]
    rows[233] = [0.05, 0.95]
    out.append(("tokens=[0] * 33000, parents=[-1, 0, 1, ..., 32998], probs=[[0.5, 0.5] (233 "
                "rows), [0.05, 0.95], then [0.5, 0.5] ...] (33,001 rows), epsilon=0.09, "
                "delta=0.3", ([0] * 33_000, list(range(-1, 32_999)), rows, 0.09, 0.3)))
    # Llama 3's 128,256 tokens, a random law with 0.3 on token 5, delta 0.3 exp(H) (1 -+ 1e-9):
    # H in float32 for a wide law moves the threshold by 1e-7 of it; then Gemma's 256,000 (past
    # 2^17) with 0.3 on token 70,000 (past 16 bits)
    for V, x in ((128_256, 5), (256_000, 70_000)):
        law = rng.dirichlet(np.ones(V))  # [V]
        law = np.r_[law[:x] * 0.7 / (1 - law[x]), 0.3, law[x + 1:] * 0.7 / (1 - law[x])]
        H = -math.fsum((law * np.log(law)).tolist())
        for hair in (-1e-9, 1e-9):
            delta = 0.3 * math.exp(H) * (1 + hair)
            out.append((f"tokens=[{x}], parents=[-1], probs=[a random law over V = {V:,} with "
                        f"0.3 on token {x}, [1 / V, ...]], epsilon=0.5, delta={delta!r}",
                        ([x], [-1], np.array([law, np.full(V, 1 / V)]), 0.5, delta)))
    return out


def compare(yours, expected):
    if not isinstance(yours, list):  # an array's truth and + are not a list's
        return f"what it returns: a {type(yours).__name__}, expected a list"
    same = [bool(y) for y in yours] == list(expected)
    if not same:
        return "kept nodes"
    for y in yours:  # 0 and 1 as an index pick nodes 0 and 1, not the kept ones
        if not isinstance(y, (bool, np.bool_)):
            return f"what it returns: {show(y)} ({type(y).__name__}), not a boolean"
    return None


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, lambda *a: [bool(k) for k in reference(*a)], cases(seed), compare,
                       "picospec.medusa.typical_accept", known=WRONG)


def entropy(q):  # [..., V] -> [...], natural log
    return -np.sum(np.where(q > 0, q * np.log(np.where(q > 0, q, 1)), 0.0), -1)


# WRONG: plausible mistakes, each one the grader rejects
def own_row(tokens, parents, probs, epsilon, delta):
    """Node i judged by the law after itself (row 1 + i), not after its parent."""
    threshold = np.minimum(epsilon, delta * np.exp(-entropy(probs)))  # [1 + m]
    return [bool(probs[i + 1, t] > threshold[i + 1]) for i, t in enumerate(tokens)]


def max_not_min(tokens, parents, probs, epsilon, delta):
    """The threshold max(epsilon, delta exp(-H)), stricter than the paper's."""
    threshold = np.maximum(epsilon, delta * np.exp(-entropy(probs)))  # [1 + m]
    return [bool(probs[p + 1, t] > threshold[p + 1]) for t, p in zip(tokens, parents)]


def entropy_in_bits(tokens, parents, probs, epsilon, delta):
    """H in bits (log base 2)."""
    threshold = np.minimum(epsilon, delta * np.exp(-entropy(probs) / np.log(2)))  # [1 + m]
    return [bool(probs[p + 1, t] > threshold[p + 1]) for t, p in zip(tokens, parents)]


def stops_at_first_rejection(tokens, parents, probs, epsilon, delta):
    """Read as a chain: nodes after the first rejected one are left out (fewer than m booleans)."""
    threshold = np.minimum(epsilon, delta * np.exp(-entropy(probs)))  # [1 + m]
    kept = []
    for t, p in zip(tokens, parents):
        if not probs[p + 1, t] > threshold[p + 1]:
            break
        kept.append(True)
    return kept + [False] * (len(kept) < len(tokens))


def no_zero_guard(tokens, parents, probs, epsilon, delta):
    """H without 0 log 0 = 0: a law with an exact zero gets H = nan, and nothing is kept."""
    with np.errstate(divide="ignore", invalid="ignore"):
        threshold = np.minimum(epsilon, delta * np.exp(np.sum(probs * np.log(probs), -1)))
    return [bool(probs[p + 1, t] > threshold[p + 1]) for t, p in zip(tokens, parents)]


def log_plus_1e5(tokens, parents, probs, epsilon, delta):
    """H as Medusa's code computes it, -sum q log(q + 1e-5), not the exact H."""
    threshold = np.minimum(epsilon, delta * np.exp(np.sum(probs * np.log(probs + 1e-5), -1)))
    return [bool(probs[p + 1, t] > threshold[p + 1]) for t, p in zip(tokens, parents)]


def threshold_in_float32(tokens, parents, probs, epsilon, delta):
    """H and the threshold in float32: q(x) a hair from the threshold lands on the wrong side."""
    low = probs.astype(np.float32)
    threshold = np.minimum(np.float32(epsilon), np.float32(delta) * np.exp(-entropy(low)))
    return [bool(probs[p + 1, t] > threshold[p + 1]) for t, p in zip(tokens, parents)]


def at_least_on_entropy_branch(tokens, parents, probs, epsilon, delta):
    """q(x) >= delta exp(-H) where that is below epsilon: a token at that threshold kept."""
    bound = delta * np.exp(-entropy(probs))  # [1 + m]
    return [bool(probs[p + 1, t] >= bound[p + 1] if bound[p + 1] < epsilon
                 else probs[p + 1, t] > epsilon) for t, p in zip(tokens, parents)]


def log_clipped(tokens, parents, probs, epsilon, delta):
    """H with log(max(q, 1e-8)): a tiny mass's q log q is wrong."""
    q = probs  # [1 + m, V]
    threshold = np.minimum(epsilon, delta * np.exp(np.sum(q * np.log(np.maximum(q, 1e-8)), -1)))
    return [bool(probs[p + 1, t] > threshold[p + 1]) for t, p in zip(tokens, parents)]


def indexed_by_arrays(tokens, parents, probs, epsilon, delta):
    """np.array(tokens) as an index: float, and raising, without candidates."""
    threshold = np.minimum(epsilon, delta * np.exp(-entropy(probs)))  # [1 + m]
    rows, cols = np.array(parents) + 1, np.array(tokens)  # [m], [m]
    return (probs[rows, cols] > threshold[rows]).tolist()


WRONG = (own_row, max_not_min, entropy_in_bits, stops_at_first_rejection, no_zero_guard,
         log_plus_1e5, threshold_in_float32, at_least_on_entropy_branch, log_clipped,
         indexed_by_arrays)
