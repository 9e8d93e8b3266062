"""Graders: a sampled law through the exact-law checker, or a function against its reference on
cases from the smallest up -> Verdict."""
import copy
import functools
import inspect
import itertools
import operator
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from picospec.check.battery import FAILED, cases_of, check_case, first_catch, target_law
from picospec.check.drivers import filled, run
from picospec.check.controls import CONTROLS
from picospec.check.exact_law import ALPHA, detectable_tv


PICOSPEC = str(Path(__file__).resolve().parents[1])  # the package's frames are not the learner's
# nor are Python's, the installed packages' (NumPy's) or a compiled module's (_generator.pyx)
LIBRARIES = tuple(str(Path(f).parents[k]) + os.sep for f, k in ((os.__file__, 0),
                                                                  (np.__file__, 1)))
# the checker's details that say in full what their test saw (pairs, kept): no table of gaps
SAID_WHOLE = ("the first tokens of neighbouring", "keeps fewer drafts than the rule")


class Battery(NamedTuple):
    """An exercise's own law cases, run as the checker runs `contract`'s samplers around the
    learner's function (case.sampler(fn))."""
    about: str  # the cases, as the verdict names them: "9 toy cases of ..."
    cases: tuple  # ((number from 1, case), ...)


class Verdict(NamedTuple):
    exercise: str
    passed: bool
    checked: str  # what was checked, and how hard
    evidence: str  # pass: the numbers; fail: the smallest case that shows it
    failed: str = ""  # fail: the case (law) or the part of the output (function) that differs
    answered: bool = True  # False: the stub still raises NotImplementedError

    def __str__(self):
        head = f"{self.exercise}: {'pass' if self.passed else 'FAIL'}"
        return "\n".join([head, f"  checked: {self.checked}"]
                         + [f"  {line}" for line in self.evidence.splitlines()])

    def line(self):
        """One line: pass, FAIL and where, or not answered."""
        if not self.answered:
            return self.evidence
        return "pass" if self.passed else f"FAIL at {self.failed}"


def own_objects(exercise):
    """{object: name} of picospec's objects in the exercise's ANSWER and TWINS."""
    module, namespace = sys.modules[f"picospec.exercises.{exercise}"], {}
    exec(f"{module.ANSWER}\n{getattr(module, 'TWINS', '')}", namespace)
    return {v: f"{v.__module__}.{v.__qualname__}" for v in namespace.values()
            if (getattr(v, "__module__", None) or "").startswith("picospec.")}


def own_code(exercise):
    """{code object: name} of own_objects' functions (a class's methods), and `answer`'s."""
    module, out = sys.modules[f"picospec.exercises.{exercise}"], {}
    mine = {module.answer: f"{module.__name__}.answer"} if hasattr(module, "answer") else {}
    for v, name in {**own_objects(exercise), **mine}.items():
        for f in vars(v).values() if isinstance(v, type) else [v]:
            f = getattr(f, "__func__", f)  # a classmethod's or staticmethod's function
            if hasattr(f, "__code__"):
                out[f.__code__] = name
    return out


# True where learners' files are graded (the runner): a first call that runs picospec's own
# answer fails. grade() called directly, as the notebooks grade picospec's answers, allows it.
FORBID_OWN = False


def unanswered(exercise, fn, args):
    """A stub still raising NotImplementedError, or (FORBID_OWN) a first call running
    picospec's own answer -> its Verdict, else None."""
    code, ran = own_code(exercise) if FORBID_OWN else {}, []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in code:
            ran.append(code[frame.f_code])

    before = sys.getprofile()
    sys.setprofile(watch)
    try:
        out = fn(*args)
        if inspect.iscoroutine(out):
            out.close()  # an async def's call, graded with its case
    except NotImplementedError:
        return Verdict(exercise, False, "nothing yet", "not answered: the function still raises "
                       "NotImplementedError", "not answered", answered=False)
    except Exception:  # any other error: the grader reports it with its case
        pass
    finally:
        sys.setprofile(before)
    if ran:
        return Verdict(exercise, False, "what your function's first call runs",
                       f"your function runs picospec's own answer, {ran[0]}: the exercise is to "
                       f"write it yourself", "uses picospec's own answer")
    return None


def outside_rng(fn, args, calls=40):
    """The first call whose output changed with the global generators' seeds, rng's the same
    (randomness outside `rng`), or None; the global states are put back."""
    import random

    saved = random.getstate(), np.random.get_state()
    try:
        for i in range(calls):
            outs = []
            for g in (2 * i, 2 * i + 1):  # the global generators differ, rng does not
                random.seed(g)
                np.random.seed(g)
                try:
                    outs.append(repr(fn(*clone(args[:-1]), np.random.default_rng(i))))
                except Exception:  # the battery reports it with its case
                    return None
            if outs[0] != outs[1]:
                return i
        return None
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])


# the failing Verdict of an answer whose call i changed with the global generators
def outside(exercise, i):
    return Verdict(exercise, False, "that every random number comes from rng", (
        f"the same call twice, rng = np.random.default_rng({i}) both times, gave two answers "
        f"once NumPy's and Python's global generators were seeded differently: draw every "
        f"random number from rng (rng.random()), not from np.random, random or a generator of "
        f"your own"), "randomness outside rng")


def drawn_elsewhere(exercise, fn, *uncertain, calls=40):
    """outside()'s Verdict for the first of `uncertain` (arguments of a random outcome) whose
    answer changes with the global generators' seeds within `calls` calls, else None."""
    for args in uncertain:
        if (i := outside_rng(fn, args, calls)) is not None:
            return outside(exercise, i)
    return None


def ignores_rng(fn, args, calls=40):
    """True when `calls` calls, each with its own rng, all return one answer (args: a random
    outcome; a generator made inside fn draws the same numbers every call)."""
    outs = set()
    for i in range(calls):
        try:
            outs.add(repr(fn(*clone(args[:-1]), np.random.default_rng(i))))
        except Exception:  # the battery reports it with its case
            return False
    return len(outs) == 1


def wrong_return(fn, probe, contract):
    """What is wrong with fn's value on the probe for its contract, or None (a raise: the
    battery's)."""
    try:
        value = fn(*clone(probe))
    except Exception:
        return None
    whole = (np.integer, int)
    if contract == "chain":
        want = "(n accepted, next token): two integers"
        ok = (isinstance(value, (tuple, list)) and len(value) in (2, 3)
              and all(isinstance(v, whole) and not isinstance(v, bool) for v in value[:2]))
    else:
        want = "(path, next token): a list of node indices and an integer"
        ok = (isinstance(value, (tuple, list)) and len(value) in (2, 3)
              and (isinstance(value[0], (list, tuple))  # node indices, not 0.0 (the probe's: [0])
                   and all(isinstance(v, whole) and not isinstance(v, bool) for v in value[0])
                   or isinstance(value[0], np.ndarray) and value[0].ndim == 1
                   and (value[0].dtype.kind in "iu" or not value[0].size))
              and isinstance(value[1], whole))
    if ok:
        return None
    kinds = type(value).__name__  # an array shows as a list: its type named, and each part's
    if isinstance(value, (tuple, list)):
        kinds = f"a {kinds} of {', '.join(map(kind_of, value))}"
    return f"your function returned {show(value)} ({kinds}); it must return {want}"


def kind_of(v):  # a list's type with its first part's: "list of float"
    inner = f" of {type(v[0]).__name__}" if isinstance(v, (list, tuple)) and v else ""
    return type(v).__name__ + inner


def grade_law(exercise, fn, contract, samples, seed=0, probe=None, uncertain=None, known=(),
              rules=None, battery=None):
    """fn through `contract`'s battery (or battery), law cases first, to the first failing case
    -> Verdict with its evidence. uncertain: arguments of random outcomes; known: the kept wrong
    answers, named where fn behaves as one."""
    if probe is not None and (stub := unanswered(exercise, fn, clone(probe))) is not None:
        return stub
    if probe is not None and (wrong := wrong_return(fn, probe, contract)) is not None:
        return Verdict(exercise, False, "what your function returns", wrong, "what it returns")
    if uncertain is not None and (elsewhere := drawn_elsewhere(exercise, fn, *uncertain)):
        return elsewhere
    cases = battery_cases(contract, battery)
    n_cases, tv90 = len(cases), battery_tv90(contract, samples, battery)
    where = (f"the checker's {n_cases} toy cases of the {contract} contract (picospec.check)"
             if battery is None else battery.about)
    # what the run promises, checked and when passed: a total variation of 1 or more (or none
    # found) is no error's, so too few sequences to promise one caught
    if tv90 < 1:
        power = f"each case catches any error of total variation >= {tv90:.3f} with probability 0.9"
        seen = (f"no difference from the target's exact law as large as total variation "
                f"{tv90:.3f}, the smallest this run catches with probability 0.9 (more --samples: "
                f"smaller)")
    else:
        power = ("too few sequences for each case to catch even the largest error with "
                 "probability 0.9 (more --samples: a power stated)")
        seen = ("no difference from the target's exact law seen, at too few sequences to promise "
                "any is caught with probability 0.9 (more --samples: a power stated)")
    checked = (f"the law of whole sequences sampled through your function on {where}, "
               f"{samples:,} sequences each, G-test at alpha {ALPHA:g}; {power}"
               + (f"; each case's first {WATCHED:,} calls checked one by one (inputs left as "
                  f"they were, no token the rule gives probability 0)" if rules else ""))
    caught = controls(contract, samples, seed, battery)
    missed = [name for name, case in caught if case is None]
    if missed:
        return Verdict(exercise, False, checked, f"no verdict: the broken sampler {missed[0]} "
                       f"passed every case at {samples:,} sequences, so this run cannot tell a "
                       f"wrong answer from a right one: grade with more samples", "no verdict")
    # where the rng goes in a call: the probe's Generator
    rng_at = next((k for k, a in enumerate(probe or ()) if isinstance(a, np.random.Generator)), 0)
    low, untested = 1.0, []
    for i, case in sorted(cases, key=lambda ic: ic[1].support):  # the support cases last
        watch = watched(fn, rules, rng_at) if rules and rng_at else fn
        sampler = watch if battery is None else case.sampler(watch)
        bad = check_case(sampler, contract, case, samples, (seed, i))
        if bad.verdict in FAILED:  # "untested": a support case it drew not all uniforms in
            break
        low = min(low, bad.p_value) if bad.p_value == bad.p_value else low
        untested += [case.name] if bad.verdict == "untested" else []
    else:
        passed = (f"{n_cases - len(untested)} of {n_cases} cases passed and {len(untested)} went "
                  f"untested, your function drawing not all its uniforms from rng "
                  f"(rng.random(), rng.uniform(), rng.choice()) in them: "
                  f"{'; '.join(untested)}." if untested else f"all {n_cases} cases passed")
        return Verdict(exercise, True, checked, f"{passed} (smallest p-value "
                       f"{low:.3g}; the checker's broken samplers "
                       f"{' and '.join(name for name, _ in caught)} were caught): {seen}")
    if getattr(sampler, "broken", None):
        why = sampler.broken
    elif bad.verdict == "error":
        why = f"your function raised or broke the contract: {bad.detail}"
    elif bad.p_value != bad.p_value:  # a support case: every uniform 0, or every one near 1
        why = (f"{bad.detail} (every uniform your rng gave was "
               f"{'0.0' if case.lowest else '1 - 2^-53, the largest below 1'}: a token the "
               f"target gives probability 0 came out)")
    elif bad.detail.startswith(SAID_WHOLE):  # the checker's pairs or kept test
        why = f"p-value {bad.p_value:.2g} < {ALPHA:g}: {bad.detail}"
    else:
        why = (f"p-value {bad.p_value:.2g} < {ALPHA:g}: the law of what you sampled differs "
               f"from the exact one; sequences (new tokens) with the largest gaps:\n  "
               + bad.detail.replace("; ", "\n  "))
    if uncertain is not None and ignores_rng(fn, uncertain[0]):
        why += ("\nthe same call with rng = np.random.default_rng(0), (1), ... (39) gave one "
                "answer each time: your function ignores the rng it is given (one made inside "
                "it, such as rng = np.random.default_rng(42), draws the same numbers on every "
                "call): draw every random number from rng, the argument")
    if (like := same_mistake(fn, known, contract, seed, battery=battery, first=i)) is not None:
        why += (f"\nyour answer draws exactly what a known mistake draws on every case: "
                f"{' '.join((like.__doc__ or like.__name__).split())}")
    return Verdict(exercise, False, checked, f"first failing case: {i}. {bad.name}\n{why}",
                   f"case {i}. {bad.name}")


def same_mistake(fn, known, contract, seed, n=200, battery=None, first=None):
    """The kept wrong answer among `known` whose n sequences are fn's on every case of the
    battery, or None; case `first` (where fn failed, and most mistakes differ) compared first,
    and each case at GLANCE sequences before n (an answer apart there is apart)."""
    cases = sorted(battery_cases(contract, battery), key=lambda ic: ic[0] != first)
    yours = {}
    for wrong in known:
        if wrong is fn:  # the kept answer itself, handed in whole: it is its own mistake
            return wrong
        for (i, case), m in itertools.product(cases, (min(GLANCE, n), n)):
            if (i, m) not in yours:
                yours[i, m] = sequences(fn, contract, case, m, (seed, i), battery)
            if not np.array_equal(yours[i, m], drawn_by(wrong, contract, seed, m, battery, i)):
                break
        else:
            return wrong
    return None


GLANCE = 25  # sequences a kept answer is first compared at, on each case


def sequences(fn, contract, case, n, seed, battery):
    """fn's n sequences [n, N] on the case, or what it raised."""
    sampler = fn if battery is None else case.sampler(fn)
    try:
        with np.errstate(all="ignore"):
            return run(sampler, contract, case, n, seed)
    except Exception as e:
        return f"{type(e).__name__}: {e}"


@functools.lru_cache(maxsize=1024)  # [200, N] each: 13 MB at most
def drawn_by(wrong, contract, seed, n, battery, i):
    """A kept wrong answer's sequences on case i, drawn once per process: drawn from the case's
    seeded generators they are the same at every grading; one that also draws from NumPy's global
    generator matches no answer, drawn again or not."""
    case = dict(battery_cases(contract, battery))[i]
    return sequences(wrong, contract, case, n, (seed, i), battery)


WATCHED = 1_000  # calls of each case checked one by one against the exercise's rules


class BrokenRule(Exception):
    """A call of the learner's sampler broke a rule that needs no statistics."""


def watched(fn, rules, rng_at, limit=WATCHED):
    """fn whose first `limit` calls are each checked: inputs left as they were, rules(*inputs,
    returned) -> what broke or None. The first call that breaks one raises BrokenRule, and
    .broken holds that call written out."""
    def call(*args):
        call.calls += 1
        if call.calls > limit:
            return fn(*args)
        inputs, drawn = copied(args[:rng_at]), []
        rng = recording(type(args[rng_at]))(args[rng_at].bit_generator)
        rng.drawn = drawn
        out, problem = judged(lambda: fn(*args[:rng_at], rng, *args[rng_at + 1:]), rules, inputs,
                              args[:rng_at], ARGS.get(rng_at))
        if problem is not None:
            call.broken = written(call.calls, inputs, drawn, problem)
            raise BrokenRule(call.broken)
        return out
    call.calls, call.broken = 0, None
    return call


def judged(call, rules, inputs, args, names, shown=None,
           returned="not what the statement asks the function to return"):
    """call() -> (its value, what is wrong or None): what it raised, what rules(*inputs, value)
    say, or an input it changed."""
    try:
        out = call()
    except Exception as e:
        return None, (f"it raised {type(e).__name__}: {' '.join(str(e).split())}"
                      f"{learners_line(e)}")
    try:
        problem = rules(*inputs, out)
    except (TypeError, ValueError, IndexError):  # not numbers where numbers belong
        problem = returned
    problem = None if problem is None else f"it returned {(shown or show)(out)}: {problem}"
    return out, changed_input(args, inputs[:len(args)], names) or problem


PLAIN = frozenset({int, float, bool, complex, str, bytes, type(None)})  # deepcopy keeps them
HOLDERS = (list, tuple, dict, np.ndarray)  # what an input or an answer holds others in


def clone(x, memo=None):
    """copy.deepcopy(x), at C speed on lists and tuples of plain numbers (the cases' sequences);
    an object held twice is copied once, as deepcopy copies it."""
    if type(x) not in (list, tuple):
        return copy.deepcopy(x, memo)
    memo = {} if memo is None else memo
    if (made := memo.get(id(x))) is not None:
        return made
    if type(x) is tuple:
        if set(map(type, x)) <= PLAIN:
            return x
        made = tuple(clone(v, memo) for v in x)
        made = x if all(map(operator.is_, made, x)) else made
    elif (kinds := set(map(type, x))) <= PLAIN:
        made = x[:]
    elif kinds == {list} and plain_rows(x) and not any(map(memo.__contains__, map(id, x))):
        made = [row[:] for row in x]  # rows of numbers, none held twice: at C speed
        memo.update(zip(map(id, x), made))
    else:  # the list is its own copy's key before its items: a list holding itself ends
        made = memo[id(x)] = []
        made += (clone(v, memo) for v in x)
    memo[id(x)] = made
    return made


def copied(args):
    """Copies of a call's lists and arrays, to compare after it and to show."""
    return [a.copy() if isinstance(a, np.ndarray) else clone(a) for a in args]


@functools.lru_cache
def recording(base):
    """A Generator subclass of `base` keeping each uniform it hands out in .drawn (on the
    caller's bit generator: the same draws)."""
    class Recording(base):
        def random(self, size=None, dtype=np.float64, out=None):
            u = super().random(size, dtype, out)
            self.drawn.extend(np.ravel(u).tolist())
            return u

        def uniform(self, low=0.0, high=1.0, size=None):
            u = super().uniform(low, high, size)
            self.drawn.extend(np.ravel(u).tolist())
            return u
    return Recording


def written(number, inputs, drawn, what):
    """A call and what went wrong in it, a line each."""
    names = ARGS.get(len(inputs)) or [f"input {k}" for k in range(1, len(inputs) + 1)]
    # 4 digits, unless that rounds a uniform to 1, which rng.random() never gives
    uniforms = ", ".join(f"{u:.4g}" if float(f"{u:.4g}") < 1 else repr(float(u))
                         for u in drawn[:8]) + (", ..." if len(drawn) > 8 else "")
    return "\n".join([f"call {number} of this case, the first that broke a rule:",
                      *(f"  {name} = {show(value)}" for name, value in zip(names, inputs)),
                      f"  the uniforms your rng gave: [{uniforms}]", what])


ARGS = {3: ("drafts", "P", "Q"), 4: ("tokens", "parents", "Q", "P")}


def one_call(exercise, fn, args, rules, what, failed, times=1):
    """A failing Verdict when fn(*args) (the rng last), made `times` times, raises, changes an
    input or returns what rules forbid whatever the uniforms, else None."""
    inputs, problem = copied(args[:-1]), None  # as they were before each call
    for _ in range(times):
        call = (*copied(inputs), args[-1])  # the call's own copies: a write stays in them
        with np.errstate(all="ignore"):
            _, problem = judged(lambda: fn(*call), rules, inputs, call[:-1], ARGS[len(inputs)])
        if problem is not None:
            break
    if problem is None:
        return None
    return Verdict(exercise, False, f"one call {what}, once the law passed", "\n".join(
        ["the call:", *(f"  {name} = {cut(show(a))}" for name, a in zip(ARGS[len(inputs)],
                                                                      inputs)),
         problem]), failed)


def cut(text, keep=300):
    """text, or its first `keep` characters and how many it has."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text):,} characters)"


class Halves(np.random.Generator):
    """A Generator whose uniforms (random(), uniform()) are all u, 0.5 unless set: a draft with
    q / p = 0.5 meets its tie u == q / p, which the rule rejects (keep when u < q / p). u may be a
    script instead, a tuple of uniforms handed out in turn, its last one ever after."""
    u, given = 0.5, 0

    def random(self, size=None, dtype=np.float64, out=None):
        return filled(self.next(size if out is None else out.shape), size, dtype, out)

    def uniform(self, low=0.0, high=1.0, size=None):
        return filled(np.add(low, np.subtract(high, low) * self.next(size)), size)

    def next(self, size):
        """u, or as many of the script's next uniforms as size holds."""
        if not isinstance(self.u, tuple):
            return self.u
        if size is None:  # one uniform (the most asked, made faster)
            self.given += 1
            return self.u[min(self.given, len(self.u)) - 1]
        n = int(np.prod(size))
        k = np.minimum(np.arange(self.given, self.given + n), len(self.u) - 1)
        self.given += n
        return np.reshape(np.take(self.u, k), size)


def answers_at(fn, args, u, read=lambda out: out):
    """fn(*args, rng) on 20 bit generators, every uniform of rng u (or u's script in turn) -> their
    20 answers, read; InputChanged where a call wrote into its inputs. An answer that draws
    elsewhere too (rng.binomial, rng.gumbel) answers otherwise on some."""
    outs = []
    for i in range(20):
        rng = Halves(np.random.PCG64(i))
        rng.u = u
        call = copied(args)
        outs.append(read(fn(*call, rng)))
        if (changed := changed_input(call, args, ARGS.get(len(args)))) is not None:
            raise InputChanged(changed)
    return outs


class InputChanged(Exception):
    """A call past the battery wrote into one of its inputs."""


def uniforms_said(u):
    """u as a call's message writes it: a number, or a script's runs ("0.25 (39 times), 0.75")."""
    if not isinstance(u, tuple):
        return f"every uniform of rng: {u!r}"
    runs = [[v, sum(1 for _ in group)] for v, group in itertools.groupby(u)]
    return ("the uniforms of rng, in turn: " + ", ".join(
        f"{v!r}" + (f" ({n} times)" if n > 1 else "") for v, n in runs) + " ever after")


def hair_calls(exercise, fn, calls, read, rules):
    """A failing Verdict at the first of calls [(args, u, want, about, failed)] where fn(*args,
    rng), every uniform of rng u, answers other than want (read(out): the answer as want writes
    it), else None. An answer that draws elsewhere too is judged from then on by rules (what no
    uniform allows) alone."""
    # each call's laws to draw from are one-hot, so the rule alone decides
    elsewhere = False
    for args, u, want, about, failed in calls:
        try:
            outs = answers_at(fn, args, u)
            # as in tie_call: an answer that draws elsewhere too (a coin from rng.binomial, say)
            # answers otherwise on some of 20 bit generators at the first call, whose q / p is
            # 0.5; u decides none of its calls (near q / p = 1 its coin would land the same on
            # all), so each answer of it is held to rules alone: a draft q >= p always kept, a
            # token the target forbids never
            elsewhere = elsewhere or len({show(read(o)) for o in outs}) > 1
            if elsewhere:
                out = next(filter(None, (rules(*args, o) for o in outs)), None)
                if out is None:
                    continue
                out = f"it returned {show(read(outs[0]))}: " + out
            elif read(outs[0]) == want:
                continue
            else:
                out = f"it returned {show(read(outs[0]))}, not {show(want)}"
        except InputChanged as e:
            out = str(e)
        except Exception as e:
            out = (f"it raised {type(e).__name__}: {' '.join(str(e).split())}, not "
                   f"{show(want)}")
        said = f"every uniform {u!r}" if not isinstance(u, tuple) else "scripted uniforms"
        return Verdict(exercise, False, f"one call with {said}, once the law passed",
                       "\n".join(["the call (every digit):", *(
                           f"  {name} = {cut(repr(np.asarray(a).tolist()), 400)}"
                           for name, a in zip(ARGS[len(args)], args)),
                                  f"  {uniforms_said(u)}; {about}", out]), failed)
    return None


def rare_token_calls(exercise, fn, calls, even, read, tails=(), seed=0):
    """A failing Verdict at the first of calls [(args, token, about, failed)] where fn(*args, rng)
    never returns `token` (read(out): the token it drew) under every uniform 0, nor under every
    uniform 1 - 2^-53, else None. An answer that draws its tokens elsewhere (rng.gumbel) is judged
    on tails instead (tail_calls)."""
    # an inverse CDF read either way reaches the token of least mass at one end, a law taken as
    # certain or cut to its largest masses never does; only an answer drawing its token from
    # rng's uniforms is judged: on `even` (a call whose law is [0.5, 0.5]) the two ends give it
    # two tokens, the same on 20 bit generators
    def ends(call):  # the token drawn at u = 0 and at u = 1 - 2^-53, or None where it varied
        outs = []
        for u in (0.0, 1 - 2**-53):
            drawn = set(answers_at(fn, call, u, read))
            if len(drawn) > 1:  # drawn elsewhere too (rng.multinomial, rng.gumbel): not judged
                return None
            outs += drawn
        return outs
    try:
        calibrated = ends(even)
    except Exception:  # the law passed it: what it raises here is no rule of this call's
        return None
    if calibrated is None:
        return tail_calls(exercise, fn, tails, read, seed)
    if len(set(calibrated)) < 2:
        return None
    for args, token, about, failed in calls:
        try:
            outs = ends(args)
        except Exception:  # as above: this call judges no raise
            continue
        if outs is None or token in outs:
            continue
        shown = (show(a) if a.size < 20 else f"a [{', '.join(map(str, a.shape))}] array"
                 for a in map(np.asarray, args))
        V, law = args[2].shape[-1], args[2][0]  # [V]: Q[0], the law (or residual) drawn from
        fix = "compare u times the sum's last entry, as picospec.sampling.sample does"
        if not all(0 <= t < V for t in outs):
            why = (f"there is no token {max(outs)} (V = {V}): a cumulative sum rounds to just "
                   f"below 1, and a uniform past its last entry runs off the end; {fix}")
        elif zero := [t for t in outs if law[t] == 0]:
            why = (f"token {zero[0]} has no mass: a cumulative sum rounds to just below 1, and a "
                   f"uniform past its last entry was taken for the last token; {fix}")
        else:
            why = (f"token {token}, of mass {law[token]:g}, never came out; a law is drawn from "
                   f"whole, whatever its largest masses (no argmax for a law that is nearly "
                   f"certain, no top-k, no floor under its small entries)")
        return Verdict(exercise, False, "one call with every uniform 0, then 1 - 2^-53, once the "
                       "law passed", "\n".join(
                           ["the call:", *(f"  {name} = {s}"
                                           for name, s in zip(ARGS[len(args)], shown)),
                            f"  {about}",
                            f"it returned token {outs[0]} at u = 0 and {outs[1]} at u = "
                            f"1 - 2^-53: {why}"]), failed)
    return None


def tail_calls(exercise, fn, tails, read, seed):
    """A failing Verdict at the first of tails [(args, first, about, failed)] where fn(*args, rng),
    on n fresh generators, never returns a token >= first (read(out)), else None; the rule gives
    those tokens mass m together, n = 16 / m: a law drawn whole misses them all with probability
    (1 - m)^n < 1.2e-7. For answers that draw their tokens other than from rng's uniforms."""
    for i, (args, first, about, failed) in enumerate(tails):
        V, mass = args[2].shape[-1], tail_mass(args, first)
        n = int(np.ceil(16 / mass))
        try:  # (a right answer reaches them in about n / 16 calls: the first one ends it)
            if any(first <= read(fn(*copied(args), np.random.default_rng([seed, i, k]))) < V
                   for k in range(n)):
                continue
        except Exception:  # as in rare_token_calls: the law passed it
            continue
        shown = (show(a) if np.asarray(a).size < 20 else
                 f"a [{', '.join(map(str, np.shape(a)))}] array" for a in args)
        return Verdict(exercise, False, f"{n:,} calls with fresh generators, once the law passed",
                       "\n".join(["the call:", *(f"  {name} = {s}"
                                               for name, s in zip(ARGS[len(args)], shown)),
                                  f"  {about}",
                                  f"it returned no token >= {first:,} in {n:,} calls, each with "
                                  f"np.random.default_rng([{seed}, {i}, k]) (its tokens drawn "
                                  f"other than from rng's uniforms), though the rule gives them "
                                  f"mass {mass:.3g} together (all miss with probability "
                                  f"{(1 - mass) ** n:.1g}): a law is drawn from whole, whatever "
                                  f"its largest masses (no argmax for a law that is nearly "
                                  f"certain, no top-k, no floor under its small entries)"]), failed)
    return None


def tail_mass(args, first):
    """The mass the call's law to draw the next token from gives tokens >= first: Q[0] with no
    drafts, or the residual of the first draft, which the target forbids."""
    Q, P = (args[2], args[1]) if len(args) == 3 else (args[2], args[3])
    law = Q[0] if len(P) == 0 else np.maximum(Q[0] - P[0], 0)  # [V]
    return float(law[first:].sum() / law.sum())


def tie_call(exercise, fn, args, kept):
    """A failing Verdict when fn(*args, Halves) keeps the draft whose q / p is 0.5 (kept(out):
    whether out keeps it), else None."""
    try:
        # on 20 bit generators: an answer that draws elsewhere too (rng.binomial, say) answers
        # otherwise on some, and its tie is not this call's to judge
        outs = answers_at(fn, args, 0.5)
        out = outs[0]
        if len({show(o) for o in outs}) > 1 or not kept(out):
            return None
    except InputChanged as e:
        out = str(e)
    except Exception as e:  # raised, or returned what kept() cannot read
        out = f"nothing: it raised {type(e).__name__}: {' '.join(str(e).split())}"
    return Verdict(exercise, False, "one call with every uniform 0.5, once the law passed",
                   "\n".join(["the call:", *(f"  {name} = {show(a)}" for name, a in
                                             zip(ARGS[len(args)], args)),
                              f"  every uniform of rng: 0.5, so u = q(x) / p(x) = 0.5 for the "
                              f"first draft x = {show(args[0][0])}",
                              (out if isinstance(out, str) else
                               f"it returned {show(out)}: the draft was kept at the tie u == "
                               f"q / p; keep only when u < min(1, q / p) (the tie rejects)")]),
                   "a tie u == q / p")


def battery_cases(contract, battery=None):
    """[(number, case)]: the checker's battery of the contract, or an exercise's own battery."""
    return cases_of(contract) if battery is None else battery.cases


@functools.lru_cache
def controls(contract, samples, seed, battery=None):
    """The negative controls over the law cases of contract's battery (or battery), once per
    samples and seed, as run_controls runs them -> [(name, the first case to catch it, or None)]."""
    cases = battery_cases(contract, battery)
    law_cases = [(i, case) for i, case in cases if not case.support]
    return [(control.__name__, first_catch(control, contract, law_cases, samples, seed))
            for control in CONTROLS[contract]]


@functools.lru_cache
def battery_tv90(contract, samples, battery=None):
    """The largest tv90 of the battery's law cases at `samples` sequences: the total variation
    error every case catches with probability 0.9, wherever it lies."""
    cases = battery_cases(contract, battery)
    return max(detectable_tv(target_law(case), samples, "anywhere")
               for _, case in cases if not case.support)


def grade_cases(exercise, fn, reference, cases, compare, about, known=()):
    """fn against reference on cases [(label, args)] -> Verdict naming the first that differs;
    compare(yours, expected) -> the part that differs, or None; known: the kept wrong answers,
    named where fn returns what one returns."""
    if cases and (stub := unanswered(exercise, fn, clone(cases[0][1]))) is not None:
        return stub
    reference = remembered(reference)
    checked = f"your function against {about} on {len(cases)} cases, smallest first" + (
        ", then again on one list or array per argument refilled in place"
        if any(isinstance(a, (list, np.ndarray)) for _, args in cases for a in args) else "") + (
        f"; the {min(len(cases), DIRTY)} smallest again on memory left holding NaN") + (
        "; each law given again as its twin, two of its inner values changed"
        if any(heaviest_inner(a) is not None for _, args in cases for a in args) else "")
    answers = []  # [(label, yours, a copy of it, the case)]: each answer as it came back
    for label, args in cases:
        expected, before = reference(*args), clone(args)
        try:
            yours = fn(*args)
        except Exception as e:  # the learner's function raised: that case fails
            part, shown = "raises", (f"raised {type(e).__name__}: {' '.join(str(e).split())}"
                                     f"{learners_line(e)}")
        else:
            part = compared(compare, yours, expected)
            if part is None:
                part = changed_input(args, before) or held_input(yours, args)
            shown = None if part is None else show(yours)  # a large answer's text costs time
            if not (isinstance(yours, Iterator) or inspect.isawaitable(yours)):
                answers.append((label, yours, clone(yours), before))
        if part is not None:
            again = "" if part == "raises" else second_call(fn, before, yours, shown)
            if part != "raises" and (like := returns_as(fn, known, cases, compare)) is not None:
                again += (f"\n  your answer returns what a known mistake returns on every case: "
                          f"{' '.join((like.__doc__ or like.__name__).split())}")
            right = show(expected)
            if part != "raises" and right == shown:  # apart past the rounding: both in full
                right, shown = show(expected, None), show(yours, None)
            right, shown = apart(right, shown)
            return Verdict(exercise, False, checked,
                           f"smallest case that differs ({part}): {label}\n  expected: "
                           f"{right}\n  yours:    {shown}{again}", part)
    if (reused := changed_answer(answers)) is not None:
        return Verdict(exercise, False, checked, reused, "answers reused")
    firsts = {label: yours for label, yours, _, _ in answers}
    if (stale := refilled_call(fn, reference, cases, compare, firsts)) is not None:
        if stale[1] is SHARED:
            return Verdict(exercise, False, checked, returned_again(stale[0]), "answers reused")
        return again_otherwise(exercise, checked, stale, "objects refilled in place", (
            "given new objects, your function returned the expected answer; given the list or "
            "array objects the case before was given, refilled in place with this case's values, "
            "it returned the above: it keeps an answer by the object (a cache keyed by id(), "
            "say), stale once the caller changes the values in place, as a decoding loop "
            "appending to its tokens does; compute every answer from the values"))
    if (dirty := dirty_call(fn, reference, cases[:DIRTY], compare)) is not None:
        return again_otherwise(exercise, checked, dirty, "memory never written", (
            "on fresh memory your function returned the expected answer; after NumPy's freed "
            "memory was left holding NaN (as freed memory may hold anything), it returned the "
            "above: it reads array entries it never wrote (np.empty, or a ufunc's where= without "
            "out=, such as np.log(q, where=q > 0), whose skipped entries keep what the memory "
            "held); write every entry you read, e.g. np.log(q, out=np.zeros_like(q), "
            "where=q > 0)"))
    if (twin := twin_call(fn, reference, cases, compare)) is not None:
        found, as_the_case = twin
        return again_otherwise(exercise, checked, found, "a law's twin", (
            "called on the case, then at once on its twin (each law among the arguments with half "
            "the mass of its heaviest inner token moved to the next, its first, middle and last "
            "entries kept), your function returned the above for the twin"
            + (": the case's answer, as an answer kept by a few of a law's entries (a cache keyed "
               "by its ends, say) does once two laws share them; compute every answer from the "
               "whole law" if as_the_case else "")))
    return Verdict(exercise, True, checked, f"all {len(cases)} cases agree")


def twin_call(fn, reference, cases, compare):
    """The first case whose twin (twin_of) fn answers otherwise, called on it right after the
    case itself -> ((label, expected, yours shown), whether yours is the case's answer), or None."""
    for label, args in cases:
        if (twin := twin_of(args)) is None:
            continue
        expected, label = reference(*twin), f"the twin of {label}"
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the first pass showed them
                fn(*clone(args))
                yours = fn(*clone(twin))
        except Exception as e:
            return (label, expected, f"raised {type(e).__name__}: {' '.join(str(e).split())}"
                                     f"{learners_line(e)}"), False
        if compared(compare, yours, expected) is not None:
            return ((label, expected, show(yours)),
                    compared(compare, yours, reference(*args)) is None)
    return None


def twin_of(args):
    """args with each law among them twinned (heaviest_inner), or None where none is a law."""
    out = [a if (pair := heaviest_inner(a)) is None else twinned(a, *pair) for a in args]
    return None if all(b is a for a, b in zip(args, out)) else out


def heaviest_inner(a):
    """A law's (float rows over 5 tokens or more, each summing to 1) two heaviest inner tokens
    over all its rows, its first, middle and last left out -> (heaviest, next), or None where a
    is no such law or its inner tokens hold no mass."""
    n = a.shape[-1] if isinstance(a, np.ndarray) and a.ndim else 0
    if (n < 5 or a.dtype.kind != "f" or not a.size or not np.all(a >= 0)
            or not np.allclose(a.sum(-1), 1)):
        return None
    mass = a.reshape(-1, n).sum(0)  # [n]: each token's over every row
    mass[[0, n // 2, (n - 1) // 2, n - 1]] = -1  # the entries a twin keeps
    j = int(np.argmax(mass))
    if mass[j] <= 0:
        return None
    mass[j] = -1
    return j, int(np.argmax(mass))


def twinned(a, j, i):
    """a with half the mass of token j moved to token i, in every row."""
    b, moved = a.copy(), a[..., j] / 2
    b[..., i] += moved
    b[..., j] -= moved
    return b


DIRTY = 50  # the smallest cases called again on memory left holding NaN


def remembered(reference):
    """reference, its answer to each case made once (keyed by the case's argument objects, kept
    alive beside it) and handed to every pass after the first."""
    made = {}

    def answer(*args):
        key = tuple(map(id, args))
        if key not in made:
            made[key] = (args, reference(*args))
        return made[key][1]
    return answer


def dirty_call(fn, reference, cases, compare):
    """The first case fn answers otherwise on memory left holding NaN -> (label, expected,
    yours shown), or None."""
    def given(args):
        mine = clone(args)
        dirty()
        return mine
    return answered_otherwise(fn, reference, cases, compare, given, {})


def dirty():
    """Fill NumPy's cache of freed small buffers (7 a size below 1,024 bytes) with 0xFF bytes."""
    # 0xFF bytes: NaN as floats, True as bools, -1 as ints, in the next arrays of those sizes
    held = [np.empty(n, np.uint8) for n in (*range(1, 65), *range(72, 1024, 8))
            for _ in range(7)]
    for buffer in held:  # (empty then fill: np.full takes twice as long)
        buffer.fill(0xFF)
    del held


def changed_answer(answers):
    """What is wrong when an answer changed after the calls that followed it, or None."""
    for label, yours, was, _ in answers:  # (a copy is writeable: flags not compared)
        if not unchanged(yours, was, flags=False):
            return (f"the answer to {label} changed after the calls that followed it: now "
                    f"{apart(show(was), show(yours))[1]}; your function returns an object it "
                    f"writes into again (a module-level buffer, out= kept between calls): "
                    f"return a new one each call")
    return None


def reused_answer(fn, answers):
    """changed_answer's finding, or what is wrong when a case called again returns an object its
    first call returned, or None (grade_cases' refilled pass makes that call itself)."""
    if (changed := changed_answer(answers)) is not None:
        return changed
    for label, first, _, args in answers:  # each case: a cache may keep only some
        try:
            again = fn(*args)  # (a copy made before the first call: the answer did not change it)
        except Exception:  # the refilled pass's business (it calls every case again), not this
            continue
        if shared(first, again):
            return returned_again(label)
    return None


def returned_again(label):
    return (f"called again on {label}, your function returned the very object (or memory) it "
            f"returned the first time: a caller that changes one answer changes the other (a "
            f"cache such as functools.lru_cache handing out one array); return a new object "
            f"each call")


def held_input(answer, args):
    """"input N handed back" when the answer holds one of the call's lists or arrays (its memory,
    for arrays), else None."""
    def parts(v):  # the lists, dicts and arrays inside v (and v), the numbers between skipped
        stack = [v]
        while stack:
            v = stack.pop()
            if not isinstance(v, tuple):
                yield v
            if isinstance(v, (list, tuple)) and not set(map(type, v)) <= PLAIN:
                stack += [x for x in v if isinstance(x, HOLDERS)]
            elif isinstance(v, dict):
                stack += [x for x in v.values() if isinstance(x, HOLDERS)]
    mine = list(parts(answer)) if isinstance(answer, HOLDERS) else []
    ids, arrays = {id(x) for x in mine}, [x for x in mine if isinstance(x, np.ndarray) and x.size]
    for i, a in enumerate(args):
        for b in parts(a) if isinstance(a, HOLDERS) else ():
            if id(b) in ids or isinstance(b, np.ndarray) and any(
                    np.shares_memory(x, b) for x in arrays):
                return (f"input {i + 1} handed back: the answer holds the caller's own "
                        f"{type(b).__name__}, so a caller that changes one changes the other; "
                        f"return a new one")
    return None


def shared(a, b):
    """Whether the answers a and b hold a list, dict or array in common (memory, for arrays)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.size > 0 and np.shares_memory(a, b)
    if isinstance(a, (list, dict)) and a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return any(shared(a[k], b[k]) for k in a if k in b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):  # numbers share nothing
        return any(shared(x, y) for x, y in zip(a, b) if isinstance(x, HOLDERS))
    return False



def refilled_call(fn, reference, cases, compare, firsts=None):
    """The first case fn answers otherwise when each list and array argument is the object of
    its place (and shape) the case before was given, refilled in place with this case's values
    -> (label, expected, yours shown), or None; firsts {label: the case's first answer}: an
    answer sharing an object with it is (label, SHARED, None), a cache handing it out again."""
    pool = {}

    def given(args):
        same = []
        for k, a in enumerate(args):
            if isinstance(a, list):
                same.append(pool.setdefault((k, "list"), []))
                same[-1][:] = clone(a)
            elif isinstance(a, np.ndarray):
                same.append(pool.setdefault((k, a.shape, a.dtype.str), a.copy()))
                same[-1][...] = a
            else:
                same.append(a)
        return same
    return answered_otherwise(fn, reference, cases, compare, given, firsts or {})


SHARED = object()  # refilled_call's mark of an answer that shares an object with its first


def answered_otherwise(fn, reference, cases, compare, given, firsts):
    """The first case fn answers otherwise when called on given(args) -> (label, expected, yours
    shown), or None; (label, SHARED, None) where the answer shares an object with
    firsts[label]."""
    for label, args in cases:
        expected = reference(*args)
        mine = given(args)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the first pass showed them
                yours = fn(*mine)
        except Exception as e:
            return label, expected, (f"raised {type(e).__name__}: {' '.join(str(e).split())}"
                                     f"{learners_line(e)}")
        if label in firsts and shared(firsts[label], yours):
            return label, SHARED, None
        if compared(compare, yours, expected) is not None:
            return label, expected, show(yours)
    return None


def again_otherwise(exercise, checked, found, what, why):
    """The failing Verdict of a pass made again: found = (label, expected, yours shown)."""
    label, expected, shown = found
    expected, shown = apart(show(expected), shown)
    return Verdict(exercise, False, checked, f"smallest case that differs ({what}): {label}\n  "
                   f"expected: {expected}\n  yours:    {shown}\n  {why}", what)


def returns_as(fn, known, cases, compare):
    """The kept wrong answer among `known` that fn agrees with on every case, or None (None too
    when fn raises or writes into its inputs: what it returns then is no kept answer's)."""
    yours = []  # fn's answers to the first cases, each made once, as far as a kept one agrees

    def answer(k):  # fn's answer to case k, the cases before it answered first
        while len(yours) <= k:
            mine = clone(cases[len(yours)][1])
            with np.errstate(all="ignore"):
                yours.append(fn(*mine))
            if changed_input(mine, cases[len(yours) - 1][1]) is not None:
                raise ValueError("an input changed")
        return yours[k]

    for wrong in known:
        for k, (_, args) in enumerate(cases):
            try:
                y = answer(k)
            except Exception:  # fn raised, or changed an input: no kept answer's
                return None
            try:
                with np.errstate(all="ignore"):
                    if compared(compare, y, wrong(*clone(args))) is not None:
                        break
            except Exception:  # the kept answer raised: not this one
                break
        else:
            return wrong
    return None


def apart(expected, yours, keep=300):
    """Two values shown, cut to `keep` characters around where they first differ."""
    if max(len(expected), len(yours)) <= keep:
        return expected, yours
    at = next((i for i, (a, b) in enumerate(zip(expected, yours)) if a != b),
              min(len(expected), len(yours)))
    start = max(0, at - keep // 3)
    return tuple(f"{'...' * (start > 0)}{s[start:start + keep]}"
                 f"{'...' * (start + keep < len(s))} (characters {start:,} to "
                 f"{min(start + keep, len(s)):,} of {len(s):,})" for s in (expected, yours))


def second_call(fn, args, yours, shown):
    """A line when fn(*args) called again returns other than `yours` (shown: as it was; state
    kept between calls), else ""."""
    if isinstance(yours, Iterator) or inspect.isawaitable(yours):
        return ""
    try:
        again = fn(*clone(args))
    except Exception:
        return ""
    if inspect.iscoroutine(again):
        again.close()
    if show(again) == shown:
        return ""
    return (f"\n  called again on this case, your function returned {show(again)}: it keeps state "
            f"between calls (a mutable default argument such as out=[], a module-level list or "
            f"dict); build every answer afresh in each call")


def compared(compare, yours, expected):
    """compare(yours, expected), or what kind of value came back when it cannot be compared."""
    if isinstance(yours, Iterator) or inspect.isawaitable(yours):  # one pass, or nothing yet
        if inspect.iscoroutine(yours):
            yours.close()  # never run: no warning that it was not awaited
        how = ("an async def's call" if inspect.isawaitable(yours) else
               "a function with yield" if inspect.isgenerator(yours) else
               "an iterator, used up by one pass")
        asked = type(expected).__name__
        return (f"what it returns: a {type(yours).__name__} ({how}), not a {asked}: return the "
                f"{asked}")
    try:
        return compare(yours, expected)
    except Exception:  # None, a number for a list, ...: not the kind of value asked
        return f"what it returns: a {type(yours).__name__}, not a {type(expected).__name__}"


def changed_input(args, before, names=None):
    """"input N changed" (or its name's) when the call wrote into one of its arguments, else
    None."""
    for i, (now, was) in enumerate(zip(args, before)):
        if not unchanged(now, was):
            return (f"{names[i] if names else f'input {i + 1}'} changed: an answer must leave "
                    f"its inputs as they were")
    return None


def unchanged(now, was, flags=True):
    """now is was: the same types at every level, shapes, dtypes, values (NaN as NaN) and, with
    flags, arrays writeable alike (one made read-only: the caller can no longer write into it)."""
    if type(now) is not type(was):
        return False
    if isinstance(was, np.ndarray):
        return (now.shape == was.shape and now.dtype == was.dtype
                and (not flags or now.flags.writeable == was.flags.writeable)
                and (was.dtype.kind != "O" and now.tobytes() == was.tobytes()  # the same bits
                     or np.array_equal(now, was, equal_nan=was.dtype.kind in "fc")))
    if isinstance(was, dict):
        return list(now) == list(was) and all(unchanged(now[k], was[k], flags) for k in was)
    if isinstance(was, (list, tuple)):
        if len(now) != len(was):
            return False
        if all(map(operator.is_, now, was)):  # a clone's own numbers, each still in its place
            return True
        if list(map(type, now)) != list(map(type, was)):
            return False
        kinds = set(map(type, was))
        if type(was) is list and kinds == {list} and rows_unchanged(now, was):
            return True  # lists of numbers, as the cases' sequences: at C speed
        if any(issubclass(k, HOLDERS) for k in kinds):
            # containers inside: each compared alike
            return all(unchanged(n, w, flags) for n, w in zip(now, was))
        return now == was or all(map(unchanged, now, was))  # numbers: at C speed, then NaNs
    try:
        return bool(now == was) or bool(now != now and was != was)  # NaN stays NaN
    except (TypeError, ValueError):
        return np.array_equal(np.asarray(now, dtype=object), np.asarray(was, dtype=object))


def plain_rows(rows):
    """Whether the list of lists `rows` holds plain numbers alone, and each row once."""
    return (set(map(type, itertools.chain.from_iterable(rows))) <= PLAIN
            and len(set(map(id, rows))) == len(rows))


def rows_unchanged(now, was):
    """Whether the lists of lists now and was hold plain numbers of the same types and values
    row by row (False: unchanged() looks row by row)."""
    return (list(map(len, now)) == list(map(len, was))
            and set(map(type, itertools.chain.from_iterable(was))) <= PLAIN
            and list(map(type, itertools.chain.from_iterable(now)))
            == list(map(type, itertools.chain.from_iterable(was))) and now == was)


def learners_line(e):
    """` (at FILE, line N)`: the last frame of the raise outside picospec, or ""."""
    tb, at = e.__traceback__, ""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith((PICOSPEC, "<", *LIBRARIES)) and not name.endswith(".pyx"):
            at = f" (at {Path(name).name}, line {tb.tb_lineno})"
        tb = tb.tb_next
    return at


def show(value, digits=4):
    """A value on one line: arrays as nested lists (rounded to `digits`; None: in full), NumPy
    scalars as Python's."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {show(v, digits)}" for k, v in value.items()) + "}"
    if isinstance(value, np.ndarray) and wide_and_sparse(value):
        return f"{by_id(value)} (the entries not 0, by id, of {value.shape[-1]:,} a row)"
    if isinstance(value, np.ndarray):  # text or objects as they are: np.round takes numbers
        shown = value.astype(int) if value.dtype == bool else value
        rounded = digits is not None and shown.dtype.kind in "iuf"
        return str((np.round(shown, digits) if rounded else shown).tolist())
    if isinstance(value, (tuple, list)):
        inner = ", ".join(show(v, digits) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value.item() if isinstance(value, np.generic) else value)


def wide_and_sparse(a):
    """Laws over more than 64 ids, three quarters of their entries 0 (a wide case's)."""
    return (a.dtype.kind == "f" and a.ndim > 0 and a.shape[-1] > 64
            and np.count_nonzero(a) <= a.size // 4)


def by_id(a):
    """Each row of a as {id: entry} of its entries not 0. Example: [0, 0.25, 0, 0.75] ->
    {1: 0.25, 3: 0.75}."""
    if a.ndim > 1:
        return "[" + ", ".join(by_id(row) for row in a) + "]"
    return "{" + ", ".join(f"{i}: {round(float(a[i]), 4)!r}" for i in np.flatnonzero(a)) + "}"


def not_ids(values):
    """What is wrong with values as token ids, node indices or counts (ints), or None."""
    if type(values) is list and set(map(type, values)) <= {int}:  # at C speed
        return None
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            return f"{show(v)} ({type(v).__name__}), not an int"
    return None


def named(part, differs):
    """The part that differs, with its dtype or shape when that is what differs; None if none."""
    return None if differs is None else part if differs == "values" else f"{part}: {differs}"


def not_ndarray(value):
    """What value is when not a plain NumPy array (a list, np.matrix), or None."""
    if type(value) is np.ndarray:
        return None
    if isinstance(value, np.matrix):
        return "a matrix (np.matrix), expected a NumPy array: np.asarray() it"
    return f"a {type(value).__name__}, expected a NumPy array"


def same_array(yours, expected, tol=1e-9):
    """None when yours equals expected (shape, dtype, then values within tol), else what
    differs."""
    if isinstance(expected, np.ndarray) and expected.ndim and (odd := not_ndarray(yours)):
        return odd  # a list is no mask, no law
    if not np.ndim(expected) and isinstance(yours, np.ndarray):  # json.dumps, hash refuse it
        return f"a NumPy array of shape {yours.shape}, expected a number: return .item() of it"
    yours, right = np.asarray(yours), np.asarray(expected).dtype
    if yours.shape != np.shape(expected):
        return f"shape {yours.shape}, expected {np.shape(expected)}"
    if right.kind == "b" and yours.dtype.kind != "b":
        return f"dtype {yours.dtype}, expected bool"
    if right.kind in "iu" and yours.dtype.kind not in "iu":
        return f"dtype {yours.dtype}, expected integers"
    if right.kind == "f" and yours.dtype.kind in "iu":  # K + 1, not K + 1.0
        return f"dtype {yours.dtype}, expected {right}: an integer where a float is asked"
    if right.kind == "f" and yours.dtype.kind != "f":  # text "0.797" converts to 0.797
        kind = type(yours.ravel().tolist()[0]).__name__ if yours.size else yours.dtype
        return f"dtype {yours.dtype}, expected {right}: numbers, not {kind}"
    if right.kind == yours.dtype.kind == "f" and yours.dtype.itemsize < right.itemsize:
        return f"dtype {yours.dtype}, expected {right}: {tol:g} needs its digits"
    if right.kind == yours.dtype.kind == "f" and yours.dtype != right:  # longdouble: not asked
        return f"dtype {yours.dtype}, expected {right}"
    if right.kind in "biu":  # masks, ids, counts: equal, not within tol
        return None if np.array_equal(yours, expected) else "values"
    if not np.allclose(yours.astype(float), np.asarray(expected, dtype=float), atol=tol, rtol=tol):
        return "values"
    return None


# polynomial hashes of token windows, h = h * base + token modulo m, as learners write them: bases
# past GPT-2's vocabulary (below it, [1, b] and [0, base + b] hash alike, as the graders' packing
# cases show) and primes that keep a hash within 32 bits
HASH_BASES = (50_257, 65_537, 100_003, 1_000_003, 911_382_323, 1_000_000_007, 1_000_000_009)
HASH_MODULI = (998_244_353, 10**9 + 7, 10**9 + 9, 2**31 - 1)


def hash_twins(bases=HASH_BASES, moduli=HASH_MODULI, vocab=50_257):
    """For each base and modulus, the first 3-token window [a, b, c] of ids 1 to
    vocab - 1 (no 0) whose polynomial hash is that of [0, 0, 0]: a * base^2 + b * base + c is 0
    modulo m, so a hash taken for equality finds [0, 0, 0] there -> [[a, b, c], ...]. A base
    within vocab of a multiple of m is left out: modulo m it is a small base (packing)."""
    out, b = [], np.arange(1, vocab, dtype=np.int64)
    for base in bases:
        for m in moduli:
            if min(base % m, -base % m) < vocab:
                continue
            for a in range(1, vocab):
                c = (-(a * base * base % m) - b * (base % m)) % m  # [vocab - 1], below 2^62
                hit = np.flatnonzero((c >= 1) & (c < vocab))
                if hit.size:
                    out.append([a, int(b[hit[0]]), int(c[hit[0]])])
                    break
    return out


def thue_morse(n, zero=0, one=1):
    """The first n tokens of the Thue-Morse sequence (token k: the parity of k's 1 bits). With
    n = 2^k, its polynomial hash and its complement's differ by (one - zero) times
    prod over i < k of (1 - base^(2^i)), divisible by 2^64 for every odd base once k >= 10."""
    return [one if bin(k).count("1") % 2 else zero for k in range(n)]
