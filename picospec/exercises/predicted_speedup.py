"""Exercise: the speedup the cost model predicts from measured call costs (Leviathan et al. 2023,
Theorem 3.8)."""
import numpy as np

from picospec.exercises.grading import grade_cases, named, same_array
from picospec.theory import cost_model_speedup

NAME, FAMILY = "predicted_speedup", "the cost model"
STATEMENT = """\
**Exercise `predicted_speedup(E, c, K, c_d)`: predict the walltime improvement over autoregressive
decoding.** Measured: E tokens per target call; c, the time of one verifying target call over a
one-token target call (autoregressive decoding's call); K draft calls per target call, each costing
c_d one-token target calls. One step then costs c + K c_d target calls' time and yields E tokens,
where autoregressive decoding yields one token per call. Return the predicted speedup, a float64
(to 1e-9).
Example: E = 2.36, c = 2.2, K = 4, c_d = 0.19 -> 0.797."""
STUB = '''def predicted_speedup(E, c, K, c_d):
    """E tokens per target call; c, c_d in one-token target calls; K draft calls -> speedup."""
    raise NotImplementedError'''
ANSWER = '''from picospec.theory import cost_model_speedup


def predicted_speedup(E, c, K, c_d):  # the project's answer: one drafter called K times a step
    return cost_model_speedup(E, c, [(K, c_d)])'''


def reference(E, c, K, c_d):
    return cost_model_speedup(E, c, [(K, c_d)])


def cases(seed=0):
    """The worked example, free and nearly free drafts, K = 0, c < 1, E past K + 1, then random
    ones."""
    rng = np.random.default_rng(seed)
    out = [(2.36, 2.2, 4, 0.19), (3.0, 1.0, 2, 0.0), (1.0, 1.0, 1, 1.0), (3.0, 2.0, 4, 0.0)]
    # no drafts (one token a call, at c's cost), and a verifying call measured below one token's
    out += [(1.0, 1.1, 0, 0.2), (2.0, 0.9, 1, 0.05)]
    # drafts nearly free, not free: K c_d still counts (a draft below some cost taken as free
    # answers otherwise)
    out += [(2.0, 1.0, 8, 5e-4), (2.0, 1.0, 8, 1e-7), (2.0, 1.0, 8, 5e-9), (2.0, 1.0, 1000, 5e-10),
            (2.0, 1.0, 100_000, 1e-13), (2.0, 1.0, 10**9, 1e-17), (2.0, 1.0, 10**12, 1e-19)]
    # more tokens a call than K + 1: drafts that cost no draft call (prompt lookup: K = 0) or one
    # call for several (Medusa's heads)
    out += [(2.5, 1.2, 0, 0.0), (3.5, 1.3, 1, 0.05)]
    # past the figures measured here: drafting under 1e-9 of a call in all, a verifying call of
    # 0.3 or 1.0005 of a token's, a draft call dearer than the target's, 20 tokens a call, a
    # speedup of 200 (none is capped, floored or taken as noise)
    out += [(1.0, 0.1, 1, 9e-10), (1.0, 0.3, 0, 0.0), (2.0, 1.0005, 0, 0.0), (2.0, 1.0, 2, 1.5),
            (20.0, 1.5, 24, 0.01), (2.0, 0.01, 0, 0.0)]
    # speedups of 2,000 to 10^12 (a verifying call a millionth of a token's, 1,000 tokens a call)
    # and of 1e-4 and 1e-7 (drafts dearer than a thousand target calls): none is capped or floored
    out += [(2.0, 1e-3, 0, 0.0), (1000.0, 0.5, 0, 0.0), (5.0, 1e-6, 0, 0.0),
            (1000.0, 1e-9, 0, 0.0), (1.0, 1.0, 1000, 10.0), (1.0, 1000.0, 10**6, 10.0)]
    # a step of 1e-13 of a call (a floor on the cost answers otherwise), a verifying call of 5,000
    # and of 2e8 calls' time (c capped, or a speedup of 5e-9 taken as 0, answers otherwise)
    out += [(1.0, 1e-13, 0, 0.0), (1.0, 5000.0, 1, 0.1), (1.0, 2e8, 0, 0.0)]
    for _ in range(60):
        K = int(rng.integers(1, 9))
        out.append((float(1 + K * rng.random()), float(1 + 2 * rng.random()), K,
                    float(rng.random() * 0.5)))
    return [(f"E={E!r}, c={c!r}, K={K}, c_d={c_d!r}", (E, c, K, c_d)) for E, c, K, c_d in out]


def compare(yours, expected):
    return named("speedup", same_array(yours, expected))


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(seed), compare,
                       "picospec.theory.cost_model_speedup (to 1e-9)", known=WRONG)


# WRONG: plausible mistakes, each one the grader rejects
def verification_free(E, c, K, c_d):
    """The target's call counted as one token's, whatever it verifies (c = 1)."""
    return E / (1 + K * c_d)


def one_draft_call(E, c, K, c_d):
    """The draft's cost counted once per step, not K times."""
    return E / (c + c_d)


def free_draft_shortcut(E, c, K, c_d):
    """E alone for a free draft: the verifying call's cost c forgotten."""
    return float(E) if c_d == 0 else E / (c + K * c_d)


def speedup_by_where(E, c, K, c_d):
    """np.where(cost > 0, E / cost, inf): an array of shape (), not the float64 asked."""
    cost = np.float64(c + K * c_d)
    return np.where(cost > 0, E / cost, np.inf)


WRONG = (verification_free, one_draft_call, free_draft_shortcut, speedup_by_where)
