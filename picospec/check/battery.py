"""Run a sampler on every case of its contract, after the negative controls -> a verdict.
Example: check_sampler(picospec.verify.verify_chain, contract="chain").verdict -> "pass".
"""
import functools
import inspect
from typing import NamedTuple

import numpy as np

from picospec.check.cases import CASES, PROMPT
from picospec.check.controls import CONTROLS
from picospec.check.drivers import (HighestUniforms, LowestUniforms, alone, in_medium_batches,
                                     in_small_batches, run)
from picospec.check.exact_law import (ALPHA, KEPT_ALPHA, PAIRS_ALPHA, Toy, chi2_sf,
                                      detectable_tv, g_statistic, index, kept_p_value, law_vector,
                                      pairs_p_value)

DEFAULT_SAMPLES = 20_000  # sequences per case of the command and of check_sampler


# a support case's detail when the sampler drew no uniform from the rng it was handed
UNTESTED = ("the sampler drew no uniform from the rng it was handed (rng.random(), rng.uniform() "
            "or rng.choice()), so this case could not set them: draw them from rng to have its "
            "ties and the ends of its laws checked")
# ... when it drew some there, and a call repeated on the same inputs with every uniform set again
# gave another answer
PARTLY = ("a call repeated on the same inputs, every uniform of rng set again, gave another "
          "answer: some of the sampler's draws come from elsewhere (NumPy's global generator, "
          "Python's random, torch, rng.integers()), or its answers from state kept between calls "
          "(a call counter, a cache), so this case could not set them: draw every random number "
          "from rng.random(), rng.uniform() or rng.choice(), and answer each call from its "
          "inputs alone, to have them checked")
FAILED = ("FAIL", "error")  # the verdicts of a case that fails a sampler; "untested" does not


class CaseResult(NamedTuple):
    name: str
    samples: int
    p_value: float  # nan for the support case (it counts forbidden sequences, it tests no law)
    # a TV error caught with probability 0.9 wherever it lies: the spread error's threshold plus
    # the mass of the pooled rare sequences (nan for the support case)
    tv90: float
    # "pass", "FAIL", "error" or "untested" (a support case whose sampler drew not all its uniforms
    # from rng)
    verdict: str
    detail: str = ""


class Report(NamedTuple):
    verdict: str  # "pass", "fail" or "no verdict" (a negative control passed every case: no power)
    cases: list  # [CaseResult] of the cases run, by number
    controls: list  # [(control name, the first case that caught it, or None)]
    numbers: tuple = ()  # the cases' numbers (none given: 1, 2, ...)


def target_law(case):
    """The case's exact law [V^N] after PROMPT, made once per case (read-only)."""
    return kept_law(Fields(case)) if isinstance(case, tuple) else made_law(case)


class Fields:  # a case as a key by its fields (its repr): its `sampling` dict is unhashable

    def __init__(self, case):
        self.case, self.text = case, repr(case)

    def __eq__(self, other):
        return self.text == other.text

    def __hash__(self):
        return hash(self.text)


@functools.lru_cache(maxsize=512)
def kept_law(fields):
    return made_law(fields.case)


def made_law(case):
    probs = law_vector(Toy(case.laws()[0]), PROMPT, case.N)  # [V^N]
    probs.flags.writeable = False
    return probs


def check_case(fn, contract, case, samples, seed, alpha=ALPHA, tv=True):
    """Run fn on one case and G-test the law of its sequences -> CaseResult (tv=False: no tv90)."""
    probs = target_law(case)  # [V^N]: the warped target's exact law
    # chain, rejection, a tree that is one chain: [(the rule's chance of keeping every draft, kept
    # every one)]
    kept = []
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            seqs = run(fn, contract, case, samples, seed, kept)  # [samples, N]
    except KeyboardInterrupt:  # Ctrl-C stops the battery
        raise
    except BaseException as e:
        # the sampler raised (sys.exit, or any BaseException, too) or broke its contract: its case
        # fails, the battery goes on
        problem = signature_problem(fn, contract)  # None where the signature fits
        hint = f" ({problem})" if problem else ""
        return CaseResult(case.name, samples, float("nan"), float("nan"), "error",
                          f"{type(e).__name__}: {' '.join(str(e).split())}{hint}")
    counts = np.bincount(index(seqs, case.V), minlength=case.V**case.N).astype(float)  # [V^N]
    forbidden = int(counts[probs == 0].sum())
    if case.support:
        extreme = LowestUniforms if case.lowest else HighestUniforms
        if not forbidden and not extreme.draws:  # its uniforms came from elsewhere: none extreme
            return CaseResult(case.name, samples, float("nan"), float("nan"), "untested",
                              UNTESTED)
        if not forbidden and extreme.varied:  # some of them came from elsewhere
            return CaseResult(case.name, samples, float("nan"), float("nan"), "untested", PARTLY)
        detail = f"{forbidden} sequences the target forbids" if forbidden else ""
        return CaseResult(case.name, samples, float("nan"), float("nan"),
                          "FAIL" if forbidden else "pass", detail)
    p = g_p_value(counts, probs)
    pairs = pairs_p_value(seqs, probs, case.V)
    # the rejection contract's sequences drawn a row a call, two and three rows a call, then in
    # batches of 4 to 512 rows: each part's law on its own, at the pairs test's level (a bug at
    # batch size 1 or 2, at a row's place in a batch, or at a range of sizes, is diluted fivefold
    # or more in the whole case's)
    one, few = alone(contract, samples), in_small_batches(contract, samples)
    mid = in_medium_batches(contract, samples)
    single, small, medium = (g_p_value(np.bincount(index(part, case.V), minlength=case.V**case.N)
                                       .astype(float), probs) if len(part) else 1.0
                             for part in (seqs[:one], seqs[one:one + few],
                                          seqs[one + few:one + few + mid]))
    # [calls] each: did the call keep every draft, and the token rule's chance of that
    full = np.concatenate([f for _, f in kept]) if kept else np.zeros(0)
    rule = np.concatenate([r for r, _ in kept]) if kept else np.zeros(0)
    short = kept_p_value(full, rule)
    detail = ""
    if p < alpha:
        worst = np.argsort(-np.abs(counts - samples * probs))[:3]  # [3]: the farthest sequences
        detail = "; ".join(f"{tuple(int(t) for t in np.unravel_index(i, (case.V,) * case.N))}: "
                           f"observed {int(counts[i])}, expected {samples * probs[i]:.1f}"
                           for i in worst)
    elif pairs < PAIRS_ALPHA:
        # an error in the first token's own law shows here too, at times before the G-test's
        detail = (f"the first tokens of neighbouring sequences are not independent draws from the "
                  f"target's law (p = {pairs:.1e}): a state kept across calls or rows, or a first "
                  f"token off that law")
    elif single < PAIRS_ALPHA:
        detail = (f"the {one:,} sequences drawn a row a call (batches of one row) do not follow "
                  f"the target's law (p = {single:.1e}): a bug at batch size 1")
    elif small < PAIRS_ALPHA:
        detail = (f"the {few:,} sequences drawn two and three rows a call do not follow the "
                  f"target's law (p = {small:.1e}): a bug in small batches (a batch of two rows, "
                  f"or a row's place in its batch, first or last)")
    elif medium < PAIRS_ALPHA:
        detail = (f"the {mid:,} sequences drawn in batches of 4 to 512 rows do not follow the "
                  f"target's law (p = {medium:.1e}): a bug at some batch sizes (a path taken by "
                  f"size, as for CUDA graphs, or a kernel's partial tile)")
    elif short < KEPT_ALPHA and contract.startswith("tree"):  # a tree that is one chain
        detail = (f"keeps fewer drafts than the rule: the whole chain of {len(case.parents)} nodes "
                  f"in {int(full.sum()):,} of {len(full):,} calls where the rule expects about "
                  f"{rule.sum():,.0f} (p = {short:.1e}); on a tree that is one chain every "
                  f"lossless verifier is a chain verifier: the rule keeps each node with "
                  f"probability min(1, q/p) and, at the leaf, adds the bonus token: one that ends "
                  f"its path a node before the leaf, or accepts less often, loses tokens")
    elif short < KEPT_ALPHA:
        K, calls = ("k", "rows") if contract == "rejection" else ("K", "calls")
        detail = (f"keeps fewer drafts than the rule: n = {K} in {int(full.sum()):,} of "
                  f"{len(full):,} {calls} where the rule expects about {rule.sum():,.0f} (p = "
                  f"{short:.1e}); the rule keeps each draft with probability min(1, q/p) and, "
                  f"all {K} kept, adds the bonus token: one that drops it, or accepts less often, "
                  f"loses tokens")
    tv90 = detectable_tv(probs, samples, "anywhere") if tv else float("nan")
    # the case's p-value: the smallest of the tests', the pairs, one-row and kept tests' on alpha's
    # scale
    p = min(p, 1.0, pairs * alpha / PAIRS_ALPHA)
    p = min(p, single * alpha / PAIRS_ALPHA, small * alpha / PAIRS_ALPHA,
            medium * alpha / PAIRS_ALPHA)
    p = min(p, short * alpha / KEPT_ALPHA)
    return CaseResult(case.name, samples, p, tv90, "pass" if p >= alpha else "FAIL", detail)


def g_p_value(counts, probs):
    """The G-test's p-value of counts [V^N] against the exact law probs [V^N]."""
    G, df = g_statistic(counts, probs)
    return 0.0 if G == np.inf else chi2_sf(float(G), df) if df > 0 else 1.0


# how each contract calls its sampler (drivers.STEPS): the names it passes by place, then by name
CALLS = {"chain": (("drafts", "P", "Q", "rng"), ()),
         "tree": (("tokens", "parents", "Q", "rng"), ("P",)),
         "tree_without_replacement": (("tokens", "parents", "Q", "P", "rng"), ()),
         "rejection": (("target_with_bonus_probs", "bonus_token_ids", "draft_probs",
                        "draft_token_ids"), ("rng",))}


def call_text(contract):  # e.g. "fn(tokens, parents, Q, rng, P=P)"
    by_place, by_name = CALLS[contract]
    return f"fn({', '.join(by_place + tuple(f'{k}={k}' for k in by_name))})"


def signature_problem(fn, contract):
    """Why fn cannot be called as `contract` calls its sampler, or None (also when its signature
    cannot be read)."""
    for test, what in ((inspect.iscoroutinefunction, "an async function"),
                       (inspect.isasyncgenfunction, "an async generator"),
                       (inspect.isgeneratorfunction, "a generator (it yields)")):
        if test(fn):  # a call would hand back an object, not the sampler's answer
            return (f"it is {what}: the {contract} contract takes what a call returns, so "
                    f"write it as a plain def that returns its answer")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: its cases will tell
        return None
    names = tuple(signature.parameters)
    if not bindable(signature, contract):
        # the contracts the call binds to, the one whose names it shares most first
        fits = sorted((c for c in CALLS if bindable(signature, c)), key=lambda c: -shared(names, c))
        if fits and shared(names, fits[0]) >= shared(names, contract):
            return (f"it takes {signature} and the {contract} contract calls "
                    f"{call_text(contract)}: give --contract {fits[0]}")
        missing = [n for n in sum(CALLS[contract], ()) if n not in names]
        return (f"it takes {signature} and the {contract} contract calls {call_text(contract)}: "
                + (f"name its parameters as the call does ({', '.join(missing)} missing)"
                   if shared(names, contract) and missing else
                   "wrap it in a contract's signature"))
    # it binds, but its parameters are another contract's: a tree sampler given the chain
    # contract would take the drafts as its tokens
    named = [c for c in CALLS if names[:len(CALLS[c][0])] == CALLS[c][0]
             and set(CALLS[c][1]) <= set(names)]
    if named and contract not in named:
        return (f"it takes {signature}, the parameters of the {named[0]} contract's call "
                f"{call_text(named[0])}, and the {contract} contract calls {call_text(contract)}: "
                f"give --contract {named[0]}")
    return None


def shared(names, contract):  # how many of the contract's parameter names a signature has
    return len(set(names) & set(sum(CALLS[contract], ())))


def bindable(signature, contract):
    by_place, by_name = CALLS[contract]
    try:
        signature.bind(*(0,) * len(by_place), **dict.fromkeys(by_name))
    except TypeError:
        return False
    return True


def cases_of(contract, numbers=None):
    """[(number from 1, Case)] of a contract's battery: all, or those numbered."""
    battery = list(enumerate(CASES[contract], 1))
    return [(i, c) for i, c in battery if numbers is None or i in numbers]


def run_controls(contract, samples=DEFAULT_SAMPLES, seed=0, numbers=None):
    """Each negative control over the law cases -> [(name, the first case to catch it, or None)]."""
    law_cases = [(i, case) for i, case in cases_of(contract, numbers) if not case.support]
    # no law case selected: no controls (the support case needs no power)
    return [(control.__name__, first_catch(control, contract, law_cases, samples, seed))
            for control in (CONTROLS[contract] if law_cases else ())]


def first_catch(control, contract, law_cases, samples, seed):
    """The first of law_cases [(number, case)] whose law fails control, as "number. name", or
    None. A control that raises or breaks its contract shows no power: it is not caught."""
    for i, case in law_cases:
        if check_case(control, contract, case, samples, (seed, i), tv=False).verdict == "FAIL":
            return f"{i}. {case.name}"
    return None


def check_sampler(fn, contract="chain", samples=DEFAULT_SAMPLES, seed=0, cases=None, controls=True,
                  first_failure=False):
    """fn through the battery of contract (a key of CASES), after the negative controls unless
    controls=False -> Report. cases: numbers to run (default all); first_failure: stop at the
    first case that fails."""
    if contract not in CASES:
        raise ValueError(f"unknown contract {contract!r}: choose one of {', '.join(CASES)}")
    caught = run_controls(contract, samples, seed, cases) if controls else []
    if any(case is None for _, case in caught):
        return Report("no verdict", [], caught)
    results = {}
    # the first law case first, then the rest by number: a sampler's first calls go to a law (one
    # wrong only while it warms up, for its first tens of thousands of calls, fails there; the
    # first case, a support case, would take them all)
    battery = cases_of(contract, cases)
    first = next((i for i, case in battery if not case.support), None)
    for i, case in sorted(battery, key=lambda ic: ic[0] != first):  # (a stable sort)
        results[i] = check_case(fn, contract, case, samples, (seed, i))
        if first_failure and results[i].verdict in FAILED:
            break
    numbers = tuple(sorted(results))
    return Report("fail" if any(r.verdict in FAILED for r in results.values()) else "pass",
                  [results[i] for i in numbers], caught, numbers)
