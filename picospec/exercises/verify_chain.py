"""Exercise: speculative sampling's accept-or-resample walk (Chen et al. 2023, Alg. 2, step 3),
graded by its law (the checker's chain contract). p = draft, q = target; K drafts, V tokens."""
import numpy as np

from picospec.exercises.grading import (drawn_elsewhere, grade_law, hair_calls, one_call,
                                        rare_token_calls, tie_call)
from picospec.sampling import residual, sample

NAME, FAMILY = "verify_chain", "speculative sampling"
STATEMENT = """\
**Exercise `verify_chain(drafts, P, Q, rng)`: accept or reject K drafted tokens.** drafts: K token
ids, drafts[t] drawn from the draft's law P[t] (P: [K, V]); Q: [K + 1, V], Q[t] the target's law
after the prompt and drafts[:t]. Chen et al. 2023, Algorithm 2, step 3 (indexing from 0): for
t = 0 .. K - 1 draw r ~ U[0, 1) from `rng`; keep x = drafts[t] if r < min(1, q(x) / p(x)); at the
first rejection return (t, a token drawn from norm(max(0, Q[t] - P[t]))). If all K are kept return
(K, a token drawn from Q[K]): with K = 0 (no drafts, P of shape [0, V]) that is (0, a token from
Q[0]). Return (n accepted, next token). Draw every random number from `rng`
(`rng.random()`); `picospec.sampling.sample(law, rng)` draws a token. drafts is a list of ints, P
and Q float64 arrays: leave all three as they were. Graded by the law of the sequences it produces
on toy models, and each call by what no uniform allows (a token the rule gives probability 0)."""
STUB = '''def verify_chain(drafts, P, Q, rng):
    """drafts [K], P [K, V], Q [K + 1, V] -> (n accepted, next token)."""
    raise NotImplementedError'''
ANSWER = "from picospec.verify import verify_chain  # the project's answer"
TWINS = "from picospec.verify import accept_or_resample"  # one draft's whole step
CONTRACT = "chain"
PROBE = ([0], np.array([[0.5, 0.5]]), np.array([[0.5, 0.5], [0.5, 0.5]]),
         np.random.default_rng(0))


# each draft kept with probability 0.5, each residual and the bonus over two or three tokens: every
# outcome is random, whichever step draws it
UNCERTAIN = ([0, 1], np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2]]),
             np.array([[0.3, 0.4, 0.3], [0.3, 0.3, 0.4], [0.3, 0.3, 0.4]]), None)


# five drafts, the first three kept whatever the uniforms (q = p), the fourth and fifth each kept
# with probability 0.5: a draw outside rng from the fourth draft on changes the outcome
LATE_UNCERTAIN = ([0, 1, 2, 0, 1], np.array([[0.3, 0.3, 0.4]] * 3 + [[0.6, 0.2, 0.2],
                                                                     [0.2, 0.6, 0.2]]),
                  np.array([[0.3, 0.3, 0.4]] * 3 + [[0.3, 0.4, 0.3], [0.3, 0.3, 0.4],
                                                    [0.3, 0.3, 0.4]]), None)


# no drafts, the next token random (Q[0] over three tokens): its uniforms from rng alone (the
# battery's calls with no drafts cannot tell a generator seeded inside from rng)
EMPTY_UNCERTAIN = ([], np.zeros((0, 3)), np.array([[0.3, 0.3, 0.4]]), None)


# twenty drafts, longer than the battery's chains, each with q = p: all twenty kept whatever the
# uniforms; token 0 has 1e-4 of the mass, where a ratio q / (p + 1e-6) rejects 1 draft in 100
LAW = np.array([1e-4, 0.3, 0.6999])
LONG = ([2, 0, 1, 2, 0, 1, 0, 2, 1, 0, 2, 0, 1, 0, 2, 2, 0, 1, 0, 0], np.tile(LAW, (20, 1)),
        np.tile(LAW, (21, 1)), None)


# one draft with q / p = 0.5 exactly: at u = 0.5 the rule rejects it
TIE = ([0], np.array([[0.5, 0.5]]), np.array([[0.25, 0.75], [0.5, 0.5]]))


def float64_hair(x, P, Q, Q1, hair, want):
    """A hair call of one draft x: u = q / p + hair keeps it (hair < 0) or rejects it."""
    return (([x], np.array([P]), np.array([Q, Q1])), Q[x] / P[x] + hair, want,
            f"q(x) / p(x) = {Q[x]} / {P[x]} for the draft x = {x}, so u = q / p {'-+'[hair > 0]} "
            f"1e-9 {'keeps' if hair < 0 else 'rejects'} it (q / p compared in float64, not "
            f"float32), and the next token comes from {'Q[1]' if hair < 0 else 'the residual'}, "
            f"all on token {want[1]}", "q / p in float64")


# q / p = 0.1 / 0.3 and 0.7 / 0.9, neither exact in float32 (which moves each by 1e-8 to 4e-8),
# under u 1e-9 below it (kept) and above it (rejected): p, q or their ratio held in float32 (or
# float16) answers otherwise in one of the three
FLOAT64_HAIRS = (float64_hair(1, [0.7, 0.3], [0.9, 0.1], [1.0, 0.0], -1e-9, (1, 0)),
                 float64_hair(1, [0.7, 0.3], [0.9, 0.1], [1.0, 0.0], 1e-9, (0, 0)),
                 float64_hair(0, [0.9, 0.1], [0.7, 0.3], [0.0, 1.0], -1e-9, (1, 1)))

# a uniform a hair from q / p, where every law a token is drawn from is one-hot (the rule alone
# decides): q / p = 0.5 under u = 0.5 - 1e-9 keeps (no tolerance); q / p = 1 - 2e-13 (P and Q
# np.allclose) under u = 1 - 2^-53 rejects, the residual of mass 1e-13 all on token 0; q / p =
# 1e-12 under u = 0 keeps (no threshold on the ratio); q = 2e-200 >= p = 1e-200 keeps at every u
# (nothing added to p); then FLOAT64_HAIRS
HAIRS = ((([0], np.array([[0.5, 0.5]]), np.array([[0.25, 0.75], [1.0, 0.0]])), 0.5 - 1e-9,
          (1, 0), "q(x) / p(x) = 0.5 for the draft x = 0, so u < q / p keeps it (compared "
          "exactly: no tolerance such as np.isclose), and the next token comes from Q[1] = [1, 0]",
          "a uniform a hair from q / p"),
         (([1], np.array([[0.5, 0.5]]), np.array([[0.5 + 1e-13, 0.5 - 1e-13], [1.0, 0.0]])),
          1 - 2**-53, (0, 0), "q(x) / p(x) = 1 - 2e-13 for the draft x = 1, so u > q / p rejects "
          "it, and its residual norm(max(0, q - p)), of mass 1e-13, is all on token 0 (no "
          "shortcut for P close to Q, no guard that swaps a small residual for q)",
          "a uniform a hair from q / p"),
         (([0], np.array([[0.5, 0.5]]), np.array([[5e-13, 1 - 5e-13], [1.0, 0.0]])), 0.0, (1, 0),
          "q(x) / p(x) = 1e-12 for the draft x = 0, so u = 0 < q / p keeps it (no threshold below "
          "which a draft is dropped), and the next token comes from Q[1] = [1, 0]",
          "q / p = 1e-12 at u = 0"),
         (([0], np.array([[1e-200, 1.0]]), np.array([[2e-200, 1.0], [1.0, 0.0]])), 1 - 2**-53,
          (1, 0), "q(x) = 2e-200 >= p(x) = 1e-200 for the draft x = 0, so min(1, q / p) = 1 keeps "
          "it at every u (nothing added to p, nothing rounded to 0), and the next token comes "
          "from Q[1] = [1, 0]", "p(x) = 1e-200"),
         *FLOAT64_HAIRS)
# laws whose token of least mass an inverse CDF, read from either end, reaches at one extreme
# uniform: no drafts, Q[0] = [1 - 1e-12, 1e-12]; no drafts, Q[0] over 300 tokens, token i of mass
# proportional to 300 - i; one draft the target forbids, its residual (Q[0] itself) the same over
# tokens 1 .. 299
RARE = ([], np.zeros((0, 2)), np.array([[1 - 1e-12, 1e-12]]))
EVEN = ([], np.zeros((0, 2)), np.array([[0.5, 0.5]]))
SLOPE = np.arange(300, 0, -1) / 45_150


def forbidden_draft(law):
    """A call of one draft, token 0, which the target forbids: its residual, Q[0], is law over
    tokens 1.. (renormalised), and Q[1] is all on token 0."""
    V = len(law)
    return [0], np.eye(1, V), np.array([np.r_[0, law[1:] / law[1:].sum()], np.eye(1, V)[0]])


WIDE = ([], np.zeros((0, 300)), SLOPE[None])
WIDE_RESIDUAL = forbidden_draft(SLOPE)
ENDS = ((RARE, 1, "Q[0] = [1 - 1e-12, 1e-12]", "a token of mass 1e-12"),
        (WIDE, 299, "Q[0]: 300 tokens, token i of mass (300 - i) / 45,150", "token 299 of 300"),
        (WIDE_RESIDUAL, 299, "drafts[0] = 0 has q = 0 (always rejected); its residual, Q[0], "
         "gives token i > 0 mass (300 - i) / 45,149", "a residual over 300 tokens"))
# longer and wider than any call above: 40 drafts, each with q / p = 0.5, under uniforms 0.25 (kept)
# for the first 39 and 0.75 (rejected) for the last, its residual all on token 1 (uniforms drawn
# up front into a short buffer, or drafts cut at 32, answer otherwise); a residual of mass 2^-52
# (a floor on its entries, however small, empties it); a residual over 2,000 tokens, token i > 0
# of mass proportional to 2000 - i (one cut to its likeliest few hundred never reaches token 1999)
FORTY = ([0] * 40, np.full((40, 2), 0.5), np.array([[0.25, 0.75]] * 40 + [[1.0, 0.0]]))


def kept_then_rejected(K):
    """A hair call of K drafts as FORTY's: the first K - 1 kept (u = 0.25), the last rejected."""
    call = ([0] * K, np.full((K, 2), 0.5), np.array([[0.25, 0.75]] * K + [[1.0, 0.0]]))
    return (call, (0.25,) * (K - 1) + (0.75, 0.5), (K - 1, 1),
            f"drafts[t] = 0 has q / p = 0.5 at every t: the first {K - 1:,} kept (u = 0.25), the "
            f"last rejected (u = 0.75), and its residual is all on token 1", f"{K:,} drafts")


def kept_then_forbidden(K):
    """K drafts, each kept whatever the uniforms (q = 1 >= p = 0.5) but the last, which the target
    forbids, its residual all on token 1: (K - 1, 1) under any uniforms and any coin (a row index
    held in 8 or 16 bits wraps to a row of a kept draft, a walk cut short rejects a draft
    q >= p)."""
    Q = np.array([[1.0, 0.0]] * (K + 1))
    Q[K - 1] = [0.0, 1.0]
    return (([0] * K, np.full((K, 2), 0.5), Q), 0.5, (K - 1, 1),
            f"drafts[t] = 0 has q = 1 >= p = 0.5 (kept whatever the uniforms) but at the last, "
            f"t = {K - 1:,}, where the target forbids it (q = 0): its residual is all on token 1",
            f"{K:,} drafts, the last forbidden")


HAIRS_PAST = ((FORTY, (0.25,) * 39 + (0.75, 0.5), (39, 1),
               "drafts[t] = 0 has q / p = 0.5 at every t: the first 39 kept (u = 0.25), the last "
               "rejected (u = 0.75), and its residual is all on token 1", "forty drafts"),
              (([1], np.array([[0.5, 0.5]]), np.array([[0.5 + 2**-52, 0.5 - 2**-52], [1.0, 0.0]])),
               1 - 2**-53, (0, 0), "q(x) / p(x) = 1 - 2^-51 for the draft x = 1, so u > q / p "
               "rejects it, and its residual, of mass 2^-52 (2.2e-16), is all on token 0: no entry "
               "is too small to keep", "a residual of mass 2^-52"),
              # ... as many as 1,500 (past 64 bits of a mask, 8 bits of a count, Python's
              # recursion limit)
              kept_then_rejected(1_500),
              (([0], np.array([[1e-310, 1.0]]), np.array([[2e-310, 1.0], [1.0, 0.0]])),
               1 - 2**-53, (1, 0), "q(x) = 2e-310 >= p(x) = 1e-310 (subnormal) for the draft "
               "x = 0, so min(1, q / p) = 1 keeps it at every u (no floor under p), and the next "
               "token comes from Q[1] = [1, 0]", "p(x) = 1e-310"),
              kept_then_forbidden(1_500),
              # a residual of subnormal mass (a guard on its mass, however small, or subnormals
              # flushed to 0, empties it)
              (([0], np.array([[2e-308, 1.0, 0.0]]), np.array([[1e-308, 1.0, 1e-310],
                                                                 [1.0, 0.0, 0.0]])),
               1 - 2**-53, (0, 2), "q(x) / p(x) = 0.5 for the draft x = 0, so u > q / p rejects "
               "it, and its residual, of mass 1e-310 (subnormal), is all on token 2: no mass is "
               "too small to draw from", "a residual of mass 1e-310"))
SLOPE_2000 = np.arange(2000, 0, -1) / 2_001_000
WIDER_RESIDUAL = forbidden_draft(SLOPE_2000)


def long_tail(high):
    """GPT-2's 50,257 tokens, draft 0 forbidden by the target: its residual, Q[0], is token 1's
    but for a tail over tokens 2 to 50,256 falling from high to high / 2 of token 1's mass (a
    floor relative to the largest entry, or a top-k cut, leaves the last token nothing)."""
    law = np.r_[0.0, 1.0, np.linspace(high, high / 2, 50_255)]  # [V]
    return [0], np.eye(1, 50_257), np.array([law / law.sum(), np.eye(1, 50_257)[0]])


def long_tail_about(high):
    return (f"drafts[0] = 0 has q = 0 (always rejected); its residual, Q[0], is token 1's but "
            f"for a tail over tokens 2 to 50,256 falling from {high:g} to {high / 2:g} of token "
            f"1's mass", f"a residual's tail {high:g} of its largest entry")


# no drafts, Q[0] = [0.1] * 10 + [0]: its cumulative sum ends at 1 - 2^-53, below 1, and token 10
# has no mass (an index past the sum's end clamped to the last token draws it)
SHORT_SUM = ([], np.zeros((0, 11)), np.array([[0.1] * 10 + [0.0]]))
SHORT_SUM_ABOUT = ("Q[0] = [0.1] * 10 + [0]: its cumulative sum ends at 1 - 2^-53, and token 10 "
                   "has no mass", "a law whose sum ends below 1")
# Llama 3's 128,256 tokens, token i of mass proportional to 128,256 - i: no drafts, and a residual
# over the tokens after the one draft, which the target forbids (a law cut to its likeliest
# 100,000, as GPT-2's whole vocabulary fits, never reaches the last)
SLOPE_LLAMA = np.arange(128_256, 0, -1) / (128_256 * 128_257 / 2)
LLAMA_RESIDUAL = forbidden_draft(SLOPE_LLAMA)
ENDS_PAST = ((WIDER_RESIDUAL, 1999, "drafts[0] = 0 has q = 0 (always rejected); its residual, "
              "Q[0], gives token i > 0 mass (2000 - i) / 1,999,000",
              "a residual over 2,000 tokens"),
             (SHORT_SUM, 9, *SHORT_SUM_ABOUT),
             (long_tail(1e-10), 50_256, *long_tail_about(1e-10)),
             # a residual whose tail is 1e-15 of its largest entry, which u = 1 - 2^-53 reaches
             (([0], np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 1 - 1e-15, 1e-15],
                                                           [1.0, 0.0, 0.0]])), 2,
              "drafts[0] = 0 has q = 0 (always rejected); its residual, Q[0] = [0, 1 - 1e-15, "
              "1e-15], reaches token 2 at u = 1 - 2^-53", "a residual's tail 1e-15 of its "
              "largest entry"),
             (([], np.zeros((0, 128_256)), SLOPE_LLAMA[None]), 128_255, "Q[0]: Llama 3's 128,256 "
              "tokens, token i of mass proportional to 128,256 - i", "the last of 128,256 tokens"),
             (LLAMA_RESIDUAL, 128_255, "drafts[0] = 0 has q = 0 (always rejected); its residual, "
              "Q[0], gives token i > 0 of Llama 3's 128,256 mass proportional to 128,256 - i",
              "the last of a residual's 128,256"))
# for answers that draw their tokens other than from rng's uniforms (rng.gumbel): no drafts, Q[0] =
# [0.9992, 0.0008] (a law taken as certain past 0.999 never gives token 1); no drafts, Q[0] over
# 2,000 tokens, and the residual over 2,000, whose last hundred tokens hold 0.0025 of each (a law
# cut to its 1,900 likeliest misses them)
CONFIDENT = ([], np.zeros((0, 2)), np.array([[0.9992, 0.0008]]))
WIDEST = ([], np.zeros((0, 2000)), SLOPE_2000[None])
TAILS = ((CONFIDENT, 1, "Q[0] = [0.9992, 0.0008]", "a law of 0.9992"),
         (WIDEST, 1_900, "Q[0]: 2,000 tokens, token i of mass (2000 - i) / 2,001,000",
          "the last hundred of 2,000 tokens"),
         (WIDER_RESIDUAL, 1_900, ENDS_PAST[0][2], "the last hundred of a residual's 2,000"),
         (long_tail(1e-5), 10_000, *long_tail_about(1e-5)))
# no drafts, V = 257: the next token, 256, is past what 8 bits hold
BYTE = ([], np.zeros((0, 257)), np.eye(257)[[256]], None)
# GPT-2's 50,257 tokens: draft 35,000 (past int16, where it wraps to -30,536, the index of
# token 19,721) has q = 0: rejected whatever the uniforms, and the residual is all on 19,721
IDS = ([35_000], np.zeros((1, 50_257)), np.zeros((2, 50_257)), None)
IDS[1][0, 35_000] = IDS[2][0, 19_721] = IDS[2][1, 50_256] = 1.0
# Llama 3's 128,256 tokens: draft 70,000 (past 16 bits, where it wraps to 4,464, which the target
# forbids) has q = 1 >= p = 0.5: kept whatever the uniforms; the next token, 100,000, is past 16
# bits too
WIDE_IDS = ([70_000], np.zeros((1, 128_256)), np.zeros((2, 128_256)), None)
WIDE_IDS[1][0, [4_464, 70_000]] = 0.5
WIDE_IDS[2][0, 70_000] = WIDE_IDS[2][1, 100_000] = 1.0
# ... and draft 70,000 forbidden by the target, p and q sharing token 100,000: the residual is all
# on token 120,000, and a residual computed in Q's own row changes the caller's Q
WIDE_RESIDUAL_IDS = ([70_000], np.zeros((1, 128_256)), np.zeros((2, 128_256)), None)
WIDE_RESIDUAL_IDS[1][0, [70_000, 100_000]] = WIDE_RESIDUAL_IDS[2][0, [100_000, 120_000]] = 0.5
WIDE_RESIDUAL_IDS[2][1, 7] = 1.0
# random outcomes over Llama 3's 128,256 tokens: no drafts, Q[0] even; one draft the target
# forbids, its residual (Q[0]) even over the rest (a wide law drawn otherwise than from rng,
# np.random.choice say, shows only here). Two calls drawn from other global states agree with
# probability 1 / 128,255, so WIDE_CALLS of them miss such a draw less often than the 40 calls of
# two or three tokens each (about 0.34 ** 40) do
WIDE_CALLS = 4
EVEN_WIDE = np.full(128_256, 1 / 128_256)
WIDE_UNCERTAIN = (([], np.zeros((0, 128_256)), EVEN_WIDE[None], None),
                  ([0], np.eye(1, 128_256), np.array([np.r_[0.0, np.full(128_255, 1 / 128_255)],
                                                      EVEN_WIDE]), None))


def grade(fn, samples=20_000, seed=0):
    verdict = grade_law(NAME, fn, CONTRACT, samples, seed, probe=PROBE,
                        uncertain=(UNCERTAIN, LATE_UNCERTAIN),
                        known=WRONG, rules=rules)
    if not verdict.passed:
        return verdict
    long = (*LONG[:-1], np.random.default_rng(seed))
    byte = (*BYTE[:-1], np.random.default_rng(seed))
    ids = (*IDS[:-1], np.random.default_rng(seed))
    wide = (*WIDE_IDS[:-1], np.random.default_rng(seed))
    return (drawn_elsewhere(NAME, fn, EMPTY_UNCERTAIN)
            or drawn_elsewhere(NAME, fn, *WIDE_UNCERTAIN, calls=WIDE_CALLS)
            or one_call(NAME, fn, long, rules, "of twenty drafts the target agrees with (made 200 "
                        "times)", "twenty drafts", times=200)
            or one_call(NAME, fn, byte, rules, "with no drafts over V = 257 tokens, Q[0] all on "
                        "token 256", "token 256")
            or one_call(NAME, fn, ids, rules,
                        "over GPT-2's 50,257 tokens, draft 35,000 forbidden by the target, the "
                        "residual all on token 19,721", "token 35000")
            or one_call(NAME, fn, wide, rules,
                        "over Llama 3's 128,256 tokens, draft 70,000 kept (q = 1 >= p), Q[1] all "
                        "on token 100,000", "token 70000")
            or one_call(NAME, fn, (*WIDE_RESIDUAL_IDS[:-1], np.random.default_rng(seed)), rules,
                        "over Llama 3's 128,256 tokens, draft 70,000 forbidden by the target, "
                        "the residual all on token 120,000", "a residual over 128,256 tokens")
            or tie_call(NAME, fn, TIE, lambda out: int(out[0]) > 0)
            or hair_calls(NAME, fn, HAIRS, lambda out: (int(out[0]), int(out[1])), rules)
            or rare_token_calls(NAME, fn, ENDS, EVEN, lambda out: int(out[1]))
            or hair_calls(NAME, fn, HAIRS_PAST, lambda out: (int(out[0]), int(out[1])),
                          rules)
            or rare_token_calls(NAME, fn, ENDS_PAST, EVEN, lambda out: int(out[1]), TAILS, seed)
            or verdict)


def rules(drafts, P, Q, out):
    """What the call (drafts, P, Q) -> out broke of what any uniforms allow, or None."""
    K, V, (n, x) = len(drafts), Q.shape[-1], (int(out[0]), int(out[1]))
    if not 0 <= n <= K or not 0 <= x < V:
        return f"n accepted must be in 0 .. K = {K} and the next token in 0 .. V - 1 = {V - 1}"
    for t, d in enumerate(drafts[:n]):
        if Q[t][d] == 0:
            return (f"drafts[{t}] = {d} was kept though the target forbids it (Q[{t}][{d}] = 0): "
                    f"keep only when u < q(x) / p(x), never when q(x) = 0, not even at u = 0")
    if n < K and Q[n][drafts[n]] >= P[n][drafts[n]]:
        d = drafts[n]
        return (f"drafts[{n}] = {d} was rejected though q = Q[{n}][{d}] = {Q[n][d]:.4g} >= p = "
                f"P[{n}][{d}] = {P[n][d]:.4g}: min(1, q / p) = 1, so it is always kept")
    if n < K and Q[n][x] <= P[n][x]:
        return (f"after drafts[{n}] was rejected, token {x} came back, but q = Q[{n}][{x}] = "
                f"{Q[n][x]:.4g} <= p = P[{n}][{x}] = {P[n][x]:.4g}: the residual "
                f"norm(max(0, Q[{n}] - P[{n}])) gives it probability 0")
    if n == K and Q[K][x] == 0:
        return (f"every draft was kept, then token {x}, which Q[{K}] gives probability 0: draw "
                f"the extra token from Q[K], the law after all K drafts")
    return None


# WRONG: plausible mistakes, each one the grader rejects
def resample_from_target(drafts, P, Q, rng):
    """A rejected draft replaced from q itself, not the residual."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(Q[t], rng)
    return len(drafts), sample(Q[-1], rng)


def ratio_inverted(drafts, P, Q, rng):
    """Keep with probability min(1, p(x) / q(x))."""
    for t, x in enumerate(drafts):
        with np.errstate(divide="ignore"):
            if rng.random() >= min(1, P[t][x] / Q[t][x]):
                return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def ties_toward_draft(drafts, P, Q, rng):
    """Rarely: keep when r <= q(x) / p(x), so r = 0 keeps a token the target forbids."""
    for t, x in enumerate(drafts):
        if rng.random() > min(1, Q[t][x] / P[t][x]):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def bonus_from_draft(drafts, P, Q, rng):
    """With every draft kept, the extra token drawn from the last draft law."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(P[-1], rng)


def residual_unclipped(drafts, P, Q, rng):
    """A rejected draft replaced from q - p unclipped, negative entries and all."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(Q[t] - P[t], rng)
    return len(drafts), sample(Q[-1], rng)


def python_random(drafts, P, Q, rng):
    """The right rule, its uniforms from Python's `random`: right in law, not reproducible."""
    import random

    for t, x in enumerate(drafts):
        if random.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def numpy_global(drafts, P, Q, rng):
    """The right rule, its uniforms from NumPy's global generator."""
    for t, x in enumerate(drafts):
        if np.random.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def residual_from_numpy(drafts, P, Q, rng):
    """The right rule, the replacement token drawn by NumPy's global generator."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            r = residual(Q[t], P[t])
            return t, int(np.random.choice(len(r), p=r))
    return len(drafts), sample(Q[-1], rng)


def numpy_global_from_the_fourth(drafts, P, Q, rng):
    """The right rule, its uniforms from NumPy's global generator from the fourth draft on."""
    for t, x in enumerate(drafts):
        if (rng.random() if t < 3 else np.random.random()) >= min(1, Q[t][x] / P[t][x]):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def ratio_smoothed(drafts, P, Q, rng):
    """min(1, q / (p + 1e-6)), against a division by 0: a rare draft is rejected though q = p."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / (P[t][x] + 1e-6)):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


WRONG = (resample_from_target, ratio_inverted, ties_toward_draft, bonus_from_draft,
         residual_unclipped, python_random, numpy_global, residual_from_numpy, ratio_smoothed,
         numpy_global_from_the_fourth)
