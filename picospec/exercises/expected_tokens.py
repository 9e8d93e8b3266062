"""Exercise: tokens per target call (Leviathan et al. 2023, arXiv:2211.17192, Eq. 1)."""
import numpy as np

from picospec.exercises.grading import grade_cases, named, same_array
from picospec.theory import expected_tokens_per_call as reference

NAME, FAMILY = "expected_tokens", "the cost model"
STATEMENT = """\
**Exercise `expected_tokens(alpha, K)`: E, the tokens one target call yields.** Each of K drafts is
accepted with probability alpha, independently, once every draft before it was; the target call
also yields one token of its own (the residual's or the bonus). Return E = sum over j = 0 .. K of
alpha^j = (1 - alpha^(K + 1)) / (1 - alpha), with alpha in [0, 1] (alpha = 1: every draft is kept,
E = K + 1). Return a float64 (to 1e-9). Example: alpha = 0.5, K = 2 -> 1.75."""
STUB = '''def expected_tokens(alpha, K):
    """alpha in [0, 1], K >= 1 drafts -> E, expected tokens per target call."""
    raise NotImplementedError'''
ANSWER = "from picospec.theory import expected_tokens_per_call as expected_tokens  # the answer"


def cases(seed=0):
    """alpha 0, 1/2, 1 and just below 1 by hand, then random alpha, K from 1 to 16."""
    rng = np.random.default_rng(seed)
    hand = [(a, K) for K in (1, 2, 4) for a in (0.0, 0.5, 1.0)] + [(0.9995, 16), (1 - 2**-20, 16)]
    # 1 - alpha = 6e-8, 7.5e-9: "alpha close to 1" is K + 1 only at 1 (the closed form holds here)
    hand += [(1 - 2**-24, 16), (1 - 2**-27, 64)]
    # many drafts close to 1: a shortcut there (a Taylor step) is off by 1e-8 of E or more
    hand += [(1 - 9e-7, 1000), (1 - 2**-24, 4096)]
    # closer to 1 with K (1 - alpha) near 1e-6, where the closed form is still good to 1e-10 and
    # E is below K + 1 by 5e-7 of it: "alpha is 1" within 1e-9, 1e-10 or 1e-12 answers otherwise,
    # as does alpha capped below 1 at alpha = 1 with many drafts
    hand += [(1 - 5e-10, 1000), (1 - 2**-31, 4096), (1 - 1e-10, 10_000), (1 - 1e-12, 1_000_000),
             (1.0, 100_000)]
    # 3,000,000 drafts at 1 - alpha = 1e-7: a sum of alpha^k over fewer terms is short
    hand += [(1 - 1e-7, 3_000_000)]
    # K (1 - alpha) from 6e-8 to 4.5e-7, 1 - alpha from 2^-30 down to 2^-43 (every form of the
    # sum, closed or summed, holds to half of 1e-9 there): E is below K + 1 by 30 to 230 times
    # 1e-9 of it, so "K + 1 once K (1 - alpha) is small" or "alpha is 1 within 1e-12" answers
    # otherwise
    hand += [(1 - 2**-30, 64), (1 - 2**-33, 1300), (1 - 2**-36, 12_000), (1 - 2**-39, 100_000),
             (1 - 2**-41, 1_000_000), (1 - 2**-43, 3_000_000)]
    # drafts nearly useless (alpha^2 still counts; alpha is not 0), a tail alpha^(K + 1) of 1e-7
    # and 2e-9 beside 1 / (1 - alpha) = 10 and 100 (not yet gone), and alpha = 1 as NumPy's
    # float64 (whose 0 / 0 is nan, no ZeroDivisionError)
    hand += [(5e-4, 2), (5e-7, 2), (0.9, 151), (0.99, 1994), (np.float64(1.0), 2)]
    # one draft nearly useless: E = 1 + alpha exactly, alpha^2 (8e-7, 8e-9) not in it (a shortcut
    # below some small alpha that ignores K answers otherwise)
    hand += [(9e-4, 1), (9e-5, 1)]
    # alpha of 5e-8 and 5e-9, E = 1 + alpha (alpha below some floor taken as 0 answers otherwise);
    # alpha as Python's int 0 and 1, E still a float (1 + alpha for one draft is an int there)
    hand += [(5e-8, 1), (5e-9, 1), (0, 1), (1, 3)]
    drawn = [(float(rng.random()), int(rng.integers(1, 17))) for _ in range(60)]
    return [(f"alpha={a!r}, K={K}", (a, K)) for a, K in hand + drawn]


def compare(yours, expected):
    return named("E", same_array(yours, expected))


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(seed), compare,
                       "picospec.theory.expected_tokens_per_call (to 1e-9)", known=WRONG)


# WRONG: plausible mistakes, each one the grader rejects
def no_own_token(alpha, K):
    """Only the accepted drafts, without the target's own token."""
    return reference(alpha, K) - 1


def one_draft_short(alpha, K):
    """(1 - alpha^K) / (1 - alpha), the exponent one short."""
    return K if alpha == 1 else (1 - alpha ** K) / (1 - alpha)


def no_edge_case(alpha, K):
    """At alpha = 1 only: the closed form divides 0 by 0 there."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1 - np.float64(alpha) ** (K + 1)) / (1 - np.float64(alpha))


def guarded_near_one(alpha, K):
    """K + 1 wherever alpha is close to 1 (np.isclose): off by about 1e-3 just below 1."""
    return K + 1.0 if np.isclose(alpha, 1) else (1 - alpha ** (K + 1)) / (1 - alpha)


def int_at_one(alpha, K):
    """K + 1 at alpha = 1, an int where the statement asks for a float64."""
    return K + 1 if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)


def array_of_one_number(alpha, K):
    """np.array(E, dtype=np.float64): an array of shape (), not the float64 asked."""
    return np.array(reference(alpha, K), dtype=np.float64)


WRONG = (no_own_token, one_draft_short, no_edge_case, guarded_near_one, int_at_one,
         array_of_one_number)
