"""Exercise: the residual of speculative sampling (Chen et al. 2023, Alg. 2, step 3).
p = draft, q = target, V vocabulary."""
import numpy as np

from picospec.exercises.grading import grade_cases, same_array
from picospec.sampling import residual as reference

NAME, FAMILY = "residual", "speculative sampling"
STATEMENT = """\
**Exercise `residual(q, p)`: the law a rejected draft token is replaced from.** q, p: the target's
and the draft's next-token laws, float64 arrays [V]. Chen et al. 2023 (Algorithm 2, step 3): after
a rejection, the next token is drawn from (q(x) - p(x))_+ normalised, that is
norm(max(0, q - p)). Return that law, a float64 NumPy array [V] summing to 1, each entry to 1e-9.
(When q = p there is no rejection and the residual is never used; the grader skips that case.)
Tokens with q <= p must get exactly 0 (no small constant added), and tokens with q > p more than 0
(none dropped, however small); leave q and p as they were."""
STUB = '''def residual(q, p):
    """norm(max(0, q - p)): q, p [V] -> [V]."""
    raise NotImplementedError'''
ANSWER = "from picospec.sampling import residual  # the project's answer"
TWINS = "from picospec.batched.rejection import recovered_probs"  # the batched form


def cases(seed=0):
    """[(label, (q, p))]: by hand (p with a 0, a residual of little mass), then random laws over
    2 to 6 tokens."""
    rng, out = np.random.default_rng(seed), []
    hand = [([0.5, 0.5], [0.9, 0.1]), ([1.0, 0.0], [0.3, 0.7]), ([0.2, 0.3, 0.5], [0.5, 0.3, 0.2]),
            ([0.3, 0.5, 0.2], [0.0, 0.3, 0.7]), ([0.52, 0.48], [0.5, 0.5]),
            ([0.5 + 2**-30, 0.5 - 2**-30], [0.5, 0.5]),  # exact in binary: one answer
            # q - p = [2^-52, 2^-51, -3 2^-52] exactly: q > p by a hair (< 1e-12, < eps) counts
            ([0.25 + 2**-52, 0.25 + 2**-51, 0.5 - 3 * 2**-52], [0.25, 0.25, 0.5]),
            # not binary fractions: 1 - sum min(q, p) is the mass only up to rounding (5e-5 off)
            ([0.1 + 3e-13, 0.2, 0.7 - 3e-13], [0.1, 0.2, 0.7]),
            # a residual of mass 1e-20, far below eps, is still the law [1, 0, 0]; of 1e-310
            # (subnormal), too: 1 / mass overflows, and a floor or tiny added to it shows
            ([1e-20, 0.6, 0.4], [0.0, 0.6, 0.4]), ([1e-310, 0.5, 0.5], [0.0, 0.5, 0.5]),
            # ... and spread unequally over two tokens: [1/3, 2/3, 0] (one token, or even shares,
            # for a mass taken as too small to divide, answers otherwise)
            ([1e-17, 2e-17, 1.0], [0.0, 0.0, 1.0]), ([1e-310, 2e-310, 1.0], [0.0, 0.0, 1.0]),
            # p holding a subnormal mass where q holds the same: token 0 gets exactly 0 (p's tiny
            # mass flushed to 0, in place or not, gives it some)
            ([1e-310, 0.5, 0.5], [1e-310, 0.3, 0.7]),
            # a mass of 2e-13 over two tokens: its sum over q > p less p's there cancels, and
            # q (1 - p / q) loses the digits q - p keeps
            ([0.1 + 1e-13, 0.2 + 1e-13, 0.7 - 2e-13], [0.1, 0.2, 0.7]),
            # laws summing to 1 within rounding, not exactly, equal on token 0: renormalised
            # first, q and p differ there and the residual gives it mass
            ([0.38315019488531304, 0.546797758969425, 0.07005204614526195],
             [0.38315019488531304, 0.546797758968425, 0.07005204614626195]),
            # q met again with another p (the first case's q; then two laws that agree at both
            # ends): a residual kept by q alone, or by its ends, is another p's
            ([0.5, 0.5], [0.1, 0.9]), ([0.2, 0.5, 0.3], [0.5, 0.1, 0.4]),
            ([0.2, 0.5, 0.3], [0.5, 0.4, 0.1]),
            # q above p by one unit in the last place (2^-53 at 0.5): the residual is [1, 0]
            # (no tolerance, absolute or relative to q)
            ([0.5 + 2**-53, 0.5 - 2**-53], [0.5, 0.5]),
            # q above p on both tokens, each by a unit in the last place (p sums to 1 - 2^-53):
            # the residual is spread over both, not all on one
            ([0.1, 0.9], [float(np.nextafter(0.1, 0)), float(np.nextafter(0.9, 0))]),
            # a share of 1.5e-17 beside 1, then of 2e-300: more than 0 (a floor relative to the
            # largest entry, eps or far below it, drops the token, never drawn after a rejection)
            ([0.9, 0.1], [0.0, float(np.nextafter(0.1, 0))]),
            ([0.5, 0.5, 2e-300], [0.0, 1.0, 1e-300]),
            # the first case's laws swapped, then two pairs alike in their first ten tokens and
            # swapped: a residual kept by a key symmetric in q and p, or by the first tokens, is
            # another pair's
            ([0.9, 0.1], [0.5, 0.5]), ([0.0] * 10 + [1.0, 0.0], [0.0] * 10 + [0.0, 1.0]),
            ([0.0] * 10 + [0.0, 1.0], [0.0] * 10 + [1.0, 0.0])]
    for q, p in hand:
        out.append((f"q={q}, p={p}", (np.array(q), np.array(p))))
    for V in range(2, 7):
        for _ in range(8):
            q, p = rng.dirichlet(np.ones(V), size=2)  # [V] each
            q[rng.random(V) < 0.2] = 0
            p[rng.random(V) < 0.2] = 0
            q = q / q.sum() if q.sum() > 0 else np.eye(V)[0]
            p = p / p.sum() if p.sum() > 0 else np.eye(V)[-1]
            if not np.allclose(q, p):
                out.append((f"q={np.round(q, 3).tolist()}, p={np.round(p, 3).tolist()}", (q, p)))
    # GPT-2's 50,257 tokens, then Llama 3's 128,256: a residual of thousands of small entries
    # and three large ones (one cut to its likeliest k, or computed in float32 for a large V,
    # answers otherwise)
    out.append(spread(rng, "", 50_257, [7, 30_000, 50_256]))
    out.append(spread(rng, "Llama 3's ", 128_256, [7, 70_000, 128_255]))
    # ... and Gemma's 256,000, past 2^17 (a buffer of 2^17 entries, or float32 past some
    # vocabulary, answers otherwise)
    out.append(spread(rng, "Gemma's ", 256_000, [7, 200_000, 255_999]))
    # 100,000 residual masses of 4e-13 beside two of about 0.5 (each rounded away, or dropped
    # below a floor, moves the large ones by 2e-8)
    q = np.r_[0.0, 0.5, 0.5 - 4e-8, np.full(100_000, 4e-13)]
    out.append(("q = [0, 0.5, 0.5 - 4e-8, then 4e-13 100,000 times], p = [1, 0, 0, ...]",
                (q, np.eye(1, q.size)[0])))
    # ... of 4e-14 (1e-13 of the largest, 4e-9 in all), then a million of 4e-15: dropped below a
    # floor relative to the largest entry (1e-13, 1e-14 of it), they move the large ones by 2e-9
    for tiny, n in ((4e-14, 100_000), (4e-15, 1_000_000)):
        q = np.r_[0.0, 0.5, 0.5 - 4e-9, np.full(n, tiny)]
        out.append((f"q = [0, 0.5, 0.5 - 4e-9, then {tiny:g} {n:,} times], p = [1, 0, 0, ...]",
                    (q, np.eye(1, q.size)[0])))
    return out


def spread(rng, whose, V, at):
    """(label, (q, p)) over V tokens: q = 0.8 p + 0.03 d (p, d random laws) with 0.1, 0.05 and
    0.02 added at the three tokens `at`."""
    p, d = rng.dirichlet(np.ones(V), size=2)  # [V] each
    q = 0.8 * p + 0.03 * d
    q[at] += [0.1, 0.05, 0.02]
    return (f"q, p over {whose}V = {V:,}: q = 0.8 p + 0.03 d, d a random law, and 0.1, 0.05, 0.02 "
            f"added at tokens {', '.join(map(str, at))}", (q, p))


def compare(yours, expected):
    """Exactly 0 where q <= p (a token the residual forbids gets no mass), more than 0 where
    q > p, then within 1e-9, then a sum of 1 within 1e-9 (entries each within 1e-9 of theirs,
    rounded say, may not sum to 1)."""
    if (part := same_array(yours, expected)) not in (None, "values"):  # its kind, shape or dtype
        return part
    mine, allowed = np.asarray(yours, dtype=float), np.asarray(expected) > 0
    forbidden = mine[~allowed]  # nan: 0 / 0, values
    if np.any((forbidden != 0) & ~np.isnan(forbidden)):
        return "support: a token with q <= p must get exactly 0"
    # ... and more than 0 where q > p: a token dropped, however small its share, is never drawn
    # after a rejection (the reference gives every such token its share, subnormal ones too)
    if np.any(mine[allowed] <= 0):  # nan: values
        return "support: a token with q > p must get more than 0"
    if part is None and not abs((total := float(np.sum(yours))) - 1) <= 1e-9:
        return f"sum: a law sums to 1 (within 1e-9), yours to {total!r}"
    return part


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(seed), compare,
                       "picospec.sampling.residual (exactly 0 where q <= p, more than 0 "
                       "where q > p, each to 1e-9)")


# WRONG: plausible mistakes, each one the grader rejects
def not_renormalised(q, p):
    """max(0, q - p) without dividing by its mass."""
    return np.maximum(q - p, 0)


def draft_minus_target(q, p):
    """Norm(max(0, p - q)), the letters swapped."""
    r = np.maximum(p - q, 0)
    return r / r.sum()


def epsilon_added(q, p):
    """A tiny constant added "to avoid a division by zero": forbidden tokens get mass."""
    r = np.maximum(q - p, 0) + 1e-12
    return r / r.sum()


def in_place(q, p):
    """Computed in q's own memory: the caller's q is changed."""
    q -= p
    np.maximum(q, 0, out=q)
    q /= q.sum()
    return q


def draft_support_only(q, p):
    """Only tokens the draft proposes (p > 0) get mass: a top-k draft's residual loses the rest."""
    r = np.where(p > 0, np.maximum(q - p, 0), 0.0)
    return r / r.sum()


def small_mass_guard(q, p):
    """A residual of little mass replaced by q "for numerical safety": q's law, not the residual."""
    r = np.maximum(q - p, 0)
    return q.copy() if r.sum() < 1e-6 else r / r.sum()


def overlap_normaliser(q, p):
    """max(0, q - p) over 1 - sum min(q, p): the same number in exact arithmetic, not in floats."""
    return np.maximum(q - p, 0) / (1 - np.minimum(q, p).sum())


WRONG = (not_renormalised, draft_minus_target, epsilon_added, in_place, draft_support_only,
         small_mass_guard, overlap_normaliser)
