"""Exercise: EAGLE-3's draft law over the target's vocabulary (Li et al. 2025, arXiv:2503.01840),
graded by its law: speculative sampling's verifier (Chen et al. 2023, Alg. 2) judges drafts
drawn from the head's true law with the learner's law as p, and must stay lossless. p = draft,
q = target; V target tokens, V_d draft tokens (d2t [V_d]), K drafts."""
from typing import NamedTuple

import numpy as np

from picospec.check.exact_law import random_toy
from picospec.eagle3 import draft_law as reference
from picospec.exercises.grading import (WATCHED, Battery, BrokenRule, Verdict, copied, cut,
                                        grade_law, judged, not_ndarray, reused_answer, show,
                                        unanswered)
from picospec.verify import verify_chain

NAME, FAMILY = "draft_law", "EAGLE-3"
STATEMENT = """\
**Exercise `draft_law(z, d2t, n_vocab)`: EAGLE-3's draft law over all target tokens.** EAGLE-3's
draft head (Li et al. 2025) scores V_d tokens only, its draft vocabulary: z, float64 or float32
[..., V_d], its logits; d2t, an int array [V_d], the target id of each draft token (in any order:
the most frequent first). Return the head's law over all V = n_vocab target tokens, a float64 NumPy
array [..., V]: the softmax of z along its last axis, placed at the ids d2t, and exactly 0 for every
token outside the draft vocabulary; each row sums to 1 (to 1e-9). Logits reach 1000 or -1000, and a
row's may lie 700 or more apart: subtract each row's max before exp. Leave z and d2t as they were.
Example: z = [0, log 3], d2t = [2, 0], n_vocab = 4 -> [0.75, 0, 0.25, 0]. Graded by its law: on toy
heads (V = 3 to 8, V_d < V, d2t unsorted, logits with ties, targets with mass outside the draft
vocabulary) the drafts come from the head's true law and speculative sampling's verifier judges them
with your law as p; whole sequences must keep the target's law. Each call is also checked: shape,
dtype, no mass outside d2t, rows summing to 1."""
STUB = '''def draft_law(z, d2t, n_vocab):
    """z [..., V_d], d2t [V_d], n_vocab V -> the draft's law over all V tokens, float64 [..., V]."""
    raise NotImplementedError'''
ANSWER = "from picospec.eagle3 import draft_law  # the project's answer"
CONTRACT = "chain"
PROBE = (np.array([0.0, np.log(3)]), np.array([2, 0]), 4)


class Head(NamedTuple):
    """A case: a toy head over the tokens d2t of V, and a toy target."""
    name: str
    V: int
    N: int  # new tokens per sequence (the draft vocabulary holds len(d2t))
    K: int  # drafts per step
    d2t: tuple
    target: int = 7  # random_toy seed; the head's logits from seed target + 1
    ties: bool = False  # logits in {0, 1, 2}: many tied
    shift: float | tuple = 0.0  # added to every logit, or one per row of z (K of them)
    gap: float = 0.0  # taken off the first draft token's logits: a row spans more than exp takes
    dtype: str = "float64"  # of z
    calls: str = "row"  # z [V_d] a call ("row"), [K, V_d] ("rows") or [1, K, V_d] ("batch")
    lowest: bool = False  # every uniform 0.0: checks the support, not the law
    highest: bool = False  # every uniform the largest double below 1

    @property
    def support(self):
        return self.lowest or self.highest

    def laws(self):
        """The target's and the head's tables [V, V, V] (two tokens -> the next one's law)."""
        target = random_toy(self.V, self.target, zeros=0.3 if self.support else 0).table
        rng, shape = np.random.default_rng(self.target + 1), (self.V, self.V, len(self.d2t))
        z = rng.integers(0, 3, shape).astype(float) if self.ties else rng.normal(0, 1.5, shape)
        z[..., 0] -= self.gap
        return target, reference(z, np.array(self.d2t), self.V)  # [V, V, V] each

    def sampler(self, fn, limit=WATCHED):
        """The chain sampler: drafts from the head's law P, verified (verify_chain) with fn's
        law; fn's first `limit` calls checked (rules; BrokenRule at the first broken)."""
        d2t, shift = np.array(self.d2t), np.reshape(self.shift, (-1, 1))  # [V_d], [K or 1, 1]

        def law(z):  # z [..., V_d] -> fn's law [..., V]
            verify.calls += 1
            args = (z, d2t.copy(), self.V)
            if verify.calls > limit:
                return fn(*args)
            inputs = copied(args)
            out, problem = judged(lambda: fn(*args), rules, inputs, args[:2], ("z", "d2t"), shown,
                                  "not the array of floats the statement asks for")
            if problem is not None:
                verify.broken = "\n".join([
                    f"call {verify.calls} of this case, the first that broke a rule:",
                    *(f"  {name} = {shown(a)}" for name, a in zip(("z", "d2t", "n_vocab"), inputs)),
                    problem])
                raise BrokenRule(verify.broken)
            return out

        def verify(drafts, P, Q, rng):
            # [K, V_d]: the head's logits, as its law gives them (up to a constant per row)
            z = (np.log(P[:, d2t]) + shift).astype(self.dtype)
            if self.calls == "row":
                p = np.stack([law(row) for row in z])  # [K, V]
            else:
                p = np.reshape(law(z if self.calls == "rows" else z[None]), (len(z), self.V))
            return verify_chain(drafts, p, Q, rng)
        verify.calls, verify.broken = 0, None
        return verify


CASES = [
    Head("uniforms at 0: support", 4, 4, 3, (3, 1), target=97, lowest=True),
    Head("V=3 V_d=2 K=1", 3, 5, 1, (2, 0)),
    Head("V=4 V_d=3 K=2, d2t sorted", 4, 4, 2, (0, 1, 3), target=17),
    Head("V=4 V_d=3 K=2, d2t a permutation of 0..2", 4, 4, 2, (2, 0, 1), target=27),
    Head("V=5 V_d=3 K=2 tied logits", 5, 3, 2, (4, 1, 2), target=37, ties=True),
    Head("V=6 V_d=4 K=3, z [K, V_d]", 6, 3, 3, (5, 0, 3, 2), target=47, calls="rows"),
    Head("V=8 V_d=5 K=2, z [1, K, V_d]", 8, 2, 2, (6, 1, 7, 3, 4), target=57, calls="batch"),
    Head("V=3 V_d=1 K=2", 3, 5, 2, (1,), target=67),
    Head("V=4 V_d=2 K=2 logits near 1000", 4, 4, 2, (3, 0), target=77, shift=1000.0),
    Head("V=5 V_d=3 K=2 float32 z [K, V_d]", 5, 3, 2, (1, 4, 0), target=87, dtype="float32",
         calls="rows"),
    Head("V=4 V_d=3 K=2 rows 1000 apart, z [K, V_d]", 4, 4, 2, (2, 3, 0), target=107,
         shift=(0.0, 1000.0), calls="rows"),
    Head("V=4 V_d=3 K=2 a row's logits 720 apart", 4, 4, 2, (1, 3, 2), target=117, gap=720.0),
    Head("uniforms near 1: support", 4, 4, 3, (3, 1), target=97, highest=True),
]
BATTERY = Battery(
    f"{len(CASES)} toy draft heads over part of the vocabulary (V = 3 to 8), the drafts drawn "
    f"from the head's true law and verified with yours (picospec.verify.verify_chain), run as "
    f"the checker runs the chain contract (picospec.check); each case's first {WATCHED:,} calls "
    f"checked one by one (shape, dtype, no mass outside d2t, rows summing to 1, inputs left as "
    f"they were)", tuple(enumerate(CASES, 1)))


# a row spanning 2000, wider than a toy head's law can hold (exp(-745) is 0): only the max keeps
# exp finite (the mean, for one, does not)
WIDE = (np.array([1000.0, -1000.0, 0.0]), np.array([2, 0, 3]), 5)
# z [2, 2, V_d]: a batch of two, where the battery's batches hold one
BATCH = (np.array([[[0.5, -1.0, 2.0], [1.0, 1.0, 0.0]], [[3.0, 0.0, -2.0], [0.0, 0.7, 0.1]]]),
         np.array([4, 0, 2]), 5)
# a row all near -1000: exp underflows to 0 for every token unless the max is subtracted
LOW = (np.array([-1000.0, -1001.0, -1000.5]), np.array([1, 3, 0]), 4)
# z [0, V_d] (no rows: a law [0, V]) and z [1, 2, 2, V_d]: "[..., V_d]" is any leading shape
EMPTY = (np.zeros((0, 3)), np.array([4, 0, 2]), 5)
DEEP = (np.arange(12.0).reshape(1, 2, 2, 3) / 4, np.array([4, 0, 2]), 5)
# Gemma's 256,000 target ids: 70,000 is past 16 bits, 200,000 past 2^17; float32 logits, whose
# softmax computed in float32 (then renormalised in float64) is 2.7e-8 off the float64 one
WIDE_IDS = (np.array([[-1.6, -4.1, 1.2, 1.5, -0.6]], dtype=np.float32),
            np.array([70_000, 5, 255_999, 3, 200_000]), 256_000)
# a draft vocabulary of all n_vocab tokens, d2t not in order (the softmax as it is, d2t unread,
# answers otherwise)
FULL = (np.array([0.0, np.log(3)]), np.array([1, 0]), 2)
# z [2, 1] (one draft token: squeezed, its last axis goes too); z [3, 3] over V_d = 3 (a leading
# axis as long as the last); z [2, 0, V_d] (empty, though not [0, V_d])
COLUMN = (np.array([[0.0], [1.0]]), np.array([1]), 3)
SQUARE = (np.array([[0.0, 1.0, 2.0], [2.0, 5.0, 1.0], [1.0, 1.0, 0.0]]), np.array([0, 2, 4]), 5)
HOLLOW = (np.zeros((2, 0, 3)), np.array([0, 1, 2]), 4)
# the same z's bytes four times: other ids, then another n_vocab, then z [1, 2] (a law kept by
# z's bytes, or with d2t's, answers a call before)
AGAIN = ((np.array([0.0, 1.0]), np.array([1, 0]), 3), (np.array([0.0, 1.0]), np.array([0, 2]), 4),
         (np.array([0.0, 1.0]), np.array([0, 2]), 5), (np.array([[0.0, 1.0]]), np.array([0, 2]), 5))
# two rows of 7 logits alike in their first two, middle and last two, one call after the other
# with the same ids (a law kept by a few logits, a cache keyed by z's ends, answers the first)
ALIKE = tuple((np.array(z), np.array([6, 0, 3, 1, 5, 2, 4]), 8)
              for z in ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0, 1.0, -1.0, 3.0, 0.5, 5.0, 6.0]))
# V_d = 64 draft tokens, masses from 0.36 down to 2e-13 (a law cut to its likeliest few, masses
# below a floor zeroed, exp in float32 for a wide row: each answers otherwise)
SPREAD = (np.linspace(0.0, -28.0, 64), np.arange(64) * 785, 50_257)
# EAGLE-3's head of V_d = 32,000 draft tokens, its ids in falling order (a law written as a
# slice, or through sorted ids, is reversed), four rows: logits ~ N(0, 3) (exp in float32 is 1e-8
# off, a law cut to its likeliest hundreds loses most of its tail); one logit 0 and 31,999 at
# -30.5, each of mass 6e-14, 2e-9 in all (zeroed below a floor, however small, or cut at 30 below
# the max, the rest is 2e-9 off); 1,024 logits at -1000, then 0s and a last one at 1000 (a max
# over the first logits alone overflows); logits falling evenly from 10 to -10. z holds 128,000
# entries (a shift by the max made in z itself past some size, to spare a copy, changes it)
HEAD = (np.array([np.random.default_rng(0).normal(0.0, 3.0, 32_000),
                  np.r_[0.0, np.full(31_999, -30.5)],
                  np.r_[np.full(1_024, -1000.0), np.zeros(30_975), 1000.0],
                  np.linspace(10.0, -10.0, 32_000)]),
        np.arange(32_000)[::-1] + 96, 32_096)
CALLS = ((WIDE, "a call whose logits span 2000", "logits 2000 apart"),
         (BATCH, "a call with z [2, 2, V_d], a batch of two", "z [2, 2, V_d]"),
         (EMPTY, "a call with z [0, V_d], no rows", "z [0, V_d]"),
         (DEEP, "a call with z [1, 2, 2, V_d]", "z [1, 2, 2, V_d]"),
         (LOW, "a call whose logits all lie near -1000", "logits near -1000"),
         (WIDE_IDS, "a call over 256,000 target ids, float32 logits", "ids past 65535"),
         (FULL, "a call whose draft vocabulary holds all n_vocab = 2 tokens, d2t = [1, 0]",
          "V_d = n_vocab"),
         (COLUMN, "a call with z [2, 1], one draft token", "z [2, 1]"),
         (SQUARE, "a call with z [3, 3] over V_d = 3", "z [3, 3]"),
         (HOLLOW, "a call with z [2, 0, V_d], no rows", "z [2, 0, V_d]"),
         (SPREAD, "a call over V_d = 64 draft tokens, masses from 0.36 to 2e-13", "V_d = 64"),
         *((call, "a call with z's bytes those of [0, 1], as in the calls before it, with other "
           "d2t, n_vocab or shape", "the same z, other ids") for call in AGAIN),
         *((call, "a call whose z is alike in its first two, middle and last two logits to the "
           "call before, with the same ids", "z alike at its ends") for call in ALIKE),
         (HEAD, "a call over V_d = 32,000 draft tokens, masses down to 9e-14", "V_d = 32,000"))


def grade(fn, samples=20_000, seed=0):
    if (stub := unanswered(NAME, fn, copied(PROBE))) is not None:
        return stub
    verdict = grade_law(NAME, fn, CONTRACT, samples, seed, known=WRONG, battery=BATTERY)
    if not verdict.passed:
        return verdict
    return larger_calls(fn) or verdict


def larger_calls(fn):
    """A failing Verdict when fn's law for a call of CALLS breaks a rule or is not the head's,
    else None."""
    answers = []  # [(what, yours, a copy of it, the call)]: each answer as it came back
    for call, what, failed in CALLS:
        args, want = copied(call), reference(*call)
        with np.errstate(all="ignore"):  # an overflow is named below, not warned about
            out, problem = judged(lambda: fn(*args), rules, copied(call), args[:2], ("z", "d2t"),
                                  shown, "not the array of floats the statement asks for")
        if problem is None and not np.allclose(out, want, rtol=0, atol=1e-9):
            ids = call[1]  # (rules() passed: no mass outside d2t)
            worst = np.unravel_index(np.argmax(np.abs(out - want)), out.shape)
            problem = (f"it returned, at the ids d2t, {cut(repr(out[..., ids].tolist()))}, not "
                       f"the softmax {cut(repr(want[..., ids].tolist()))} "
                       f"({np.abs(out - want).max():.2g} off at out[{', '.join(map(str, worst))}]: "
                       f"{float(out[worst])!r}, not {float(want[worst])!r}"
                       f"{'; compute in float64' if np.abs(out - want).max() < 1e-6 else ''})")
        if problem is not None:
            inputs = [f"  {name} = {cut(shown(a))}"
                      for name, a in zip(("z", "d2t", "n_vocab"), call)]
            return Verdict(NAME, False, f"{what}, once the law passed",
                           "\n".join(["the call:", *inputs, problem]), failed)
        answers.append((what.replace("a call", "the call", 1), out, out.copy(), copied(call)))
    if (reused := reused_answer(fn, answers)) is not None:
        return Verdict(NAME, False, "the calls past the battery's, each made again, once the law "
                       "passed", reused, "answers reused")
    return None


def rules(z, d2t, n_vocab, out):
    """What the call (z, d2t, n_vocab) -> out broke of the statement, or None."""
    if (odd := not_ndarray(out)) is not None:
        return odd
    want = z.shape[:-1] + (n_vocab,)
    if out.shape != want:
        return (f"shape {out.shape}, expected {want}: for each row of z, a law over all "
                f"n_vocab = {n_vocab} target tokens")
    if out.dtype != np.float64:
        return f"dtype {out.dtype}, expected float64"
    if not np.isfinite(out).all():
        what = ("exp of every logit of a row underflows to 0 (0 / 0)" if float(z.max()) < -700
                else "exp overflows")  # exp(-745) is 0, exp(710) inf
        return (f"not finite (nan or inf): {what} for logits from {float(z.min()):.5g} to "
                f"{float(z.max()):.5g}; subtract each row's max before exp")
    if (out < 0).any():
        return "negative entries: a law has none (log-probabilities are not a law)"
    outside = np.ones(n_vocab, bool)  # [V]: the target ids outside the vocabulary
    outside[d2t] = False
    if (out[..., outside] != 0).any():
        j = np.flatnonzero(outside)[np.nonzero(out[..., outside])[-1][0]]
        return (f"token {j} is not in d2t, yet it got {out[..., j].max():.3g}: a token outside "
                f"the draft vocabulary must get exactly 0")
    sums = out.sum(-1)  # [...]
    gaps = np.abs(sums - 1)  # [...]
    if (gaps > 1e-9).any():
        hint = f" (z is {z.dtype}: compute in float64)" if z.dtype != np.float64 else ""
        return (f"a row sums to {sums.flat[np.argmax(gaps)]:.10g}, not 1 to 1e-9: "
                f"each row is the softmax of that row of z{hint}")
    return None


def shown(a):
    """show(a), a float32 array's dtype named."""
    if isinstance(a, np.ndarray) and a.dtype == np.float32:
        return f"{show(a.astype(np.float64))} ({a.dtype})"
    return show(a)


# WRONG: plausible mistakes, each one the grader rejects
def softmax(z, axis=-1):
    """The softmax of z along axis, its max subtracted first."""
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def placed(s, d2t, n_vocab, ids=None):
    """s [..., V_d] placed at ids (d2t by default) of zeros [..., V]."""
    p = np.zeros(s.shape[:-1] + (n_vocab,))  # [..., V]
    p[..., d2t if ids is None else ids] = s
    return p


def softmax_over_all_tokens(z, d2t, n_vocab):
    """z scattered into zeros [..., V], then the softmax over all V: mass outside the vocabulary."""
    x = placed(z.astype(np.float64), d2t, n_vocab)  # [..., V]
    return softmax(x)


def placed_by_inverse(z, d2t, n_vocab):
    """The softmax placed at argsort(d2t), t2d's order, not at the ids d2t."""
    return placed(softmax(z.astype(np.float64)), d2t, n_vocab, np.argsort(d2t))


def ids_from_one(z, d2t, n_vocab):
    """Ids taken as counted from 1: placed at d2t - 1 (id 0 wraps to the last token)."""
    return placed(softmax(z.astype(np.float64)), d2t, n_vocab, d2t - 1)


def epsilon_everywhere(z, d2t, n_vocab):
    """A small constant added to every token, then renormalised over V."""
    p = placed(softmax(z.astype(np.float64)), d2t, n_vocab) + 1e-12
    return p / p.sum(-1, keepdims=True)


def no_max_subtracted(z, d2t, n_vocab):
    """exp(z) straight: overflows for large logits."""
    e = np.exp(z.astype(np.float64))
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def log_probabilities(z, d2t, n_vocab):
    """The log-softmax placed at d2t: log-probabilities, not a law."""
    z = z.astype(np.float64)
    m = z.max(-1, keepdims=True)
    return placed(z - m - np.log(np.exp(z - m).sum(-1, keepdims=True)), d2t, n_vocab)


def first_axis(z, d2t, n_vocab):
    """Normalised over axis 0: right for one row z [V_d], wrong for z [..., V_d]."""
    return placed(softmax(z.astype(np.float64), axis=0), d2t, n_vocab)


def over_n(z, d2t, n_vocab):
    """exp(z - max) divided by V_d, not by its sum."""
    z = z.astype(np.float64)
    return placed(np.exp(z - z.max(-1, keepdims=True)) / z.shape[-1], d2t, n_vocab)


def sorted_ids(z, d2t, n_vocab):
    """The softmax placed at the ids in increasing order, ignoring d2t's order."""
    return placed(softmax(z.astype(np.float64)), d2t, n_vocab, np.sort(d2t))


def greedy_one_hot(z, d2t, n_vocab):
    """The head's most likely token with probability 1: the greedy token, not the law."""
    s = np.eye(z.shape[-1])[np.argmax(z, -1)]  # [..., V_d]
    return placed(s, d2t, n_vocab)


def in_z_dtype(z, d2t, n_vocab):
    """Computed and returned in z's dtype: float32 for float32 logits."""
    p = np.zeros(z.shape[:-1] + (n_vocab,), dtype=z.dtype)  # [..., V]
    p[..., d2t] = softmax(z)
    return p


def max_subtracted_in_place(z, d2t, n_vocab):
    """z -= its max: right law, but the caller's z is changed."""
    z -= z.max(-1, keepdims=True)
    return placed(softmax(z.astype(np.float64)), d2t, n_vocab)


def one_row_only(z, d2t, n_vocab):
    """Written for one row z [V_d]: the whole array normalised as one."""
    e = np.exp(z.astype(np.float64) - z.max())
    return placed(e / e.sum(), d2t, n_vocab)


def one_max_for_all_rows(z, d2t, n_vocab):
    """The max of the whole array subtracted, not each row's: a row far below it underflows."""
    e = np.exp(z.astype(np.float64) - z.max())
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def max_subtracted_when_large(z, d2t, n_vocab):
    """The max subtracted only above 700: a row all near -1000 underflows to 0 / 0."""
    z = z.astype(np.float64)
    m = z.max(-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(np.where(m > 700, z - m, z))
        return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


WRONG = (softmax_over_all_tokens, placed_by_inverse, ids_from_one, epsilon_everywhere,
         no_max_subtracted, log_probabilities, first_axis, over_n, sorted_ids, greedy_one_hot,
         in_z_dtype, max_subtracted_in_place, one_row_only, one_max_for_all_rows,
         max_subtracted_when_large)
