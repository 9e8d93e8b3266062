"""Sequences per sampled law test, sized by power: each statistical test of the suite uses the
smallest number of sequences n at which the broken variant it is paired with is rejected with
probability >= 0.999 at ALPHA = 1e-4.

    python -m tests.suite.power                     # every sized test: n it needs, n it uses, power
    python -m tests.suite.power --only speculative,medusa # the tests of these files (names: --list)
    python -m tests.suite.power --list

How n is measured. The broken variant is planted as its test plants it and run M times (at least
20,000, and at least 10 n); its empirical law of whole sequences p^ [C] is shrunk toward the exact
target law q [C] until its chi-square distance from q is a lower confidence bound on the true one
(M draws add (C - 1) / M to it on average, with sd 2 sqrt(chi2 / M); two sd are taken off), so an
estimate's noise can only ask for more sequences. Then REPEATS = 20,000 multinomial draws of n
sequences from that law are each G-tested against q at ALPHA exactly as check_law tests
(picospec.check.exact_law.g_statistic: rare cells pooled, a sequence of probability 0 rejects); the
power is the share rejected, and n the smallest on a grid of two significant digits with power >=
0.999, and at least LEAST = 100 (fewer sequences pool nearly every cell: the G-test would check the
support alone). A test with several cases (parametrized, or one check per batch row) uses one n,
the largest its cases need; its line gives the least power over its cases at the n it uses,
measured again on fresh draws (below 0.999 there, within the noise of 20,000 draws, the test gets
the next n on the grid). Needs pytest (its MonkeyPatch plants the broken variants).

A line: `tests/picospec/test_speculative.py::test_joint_law_equals_target  resample-from-target
12 cases  needs 2,300  uses 2,300  power 0.9990  (57 s)`. Exit status 1 when a test uses fewer than
it needs or its power on fresh draws is below 0.999.
"""
import importlib
import math
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from picospec.check.exact_law import ALPHA, chi2_isf, g_statistic

ROOT = Path(__file__).resolve().parents[2]
AT, REPEATS, Z = 0.999, 20_000, 2.0
LEAST = 100  # fewer sequences pool nearly every cell into one
WARPED = [{}, dict(temperature=0.7, top_k=2)]  # the cases of several pass tests


# ---- the measurement ----

def as_vectors(samples, law):
    """Samples (sequences) and {sequence: probability} -> counts [C + 1], q [C + 1]; the last cell
    holds every sequence the law gives probability 0."""
    seqs = list(law)
    where = {s: i for i, s in enumerate(seqs)}
    counts = np.zeros(len(seqs) + 1)
    for s in samples:
        counts[where.get(tuple(s), len(seqs))] += 1
    return counts, np.array([law[s] for s in seqs] + [0.0])


def shrunk(counts, q, z=Z):
    """The law estimated from counts [C], moved toward q [C] until its chi-square distance from q
    is the estimate's lower confidence bound (mass on q's impossible cells is left as drawn)."""
    M, possible = counts.sum(), q > 0
    p = counts / M
    if p[~possible].any():
        return p
    chi2 = float(np.sum((p - q)[possible] ** 2 / q[possible]))
    low = chi2 - (possible.sum() - 1) / M - z * 2 * math.sqrt(chi2 / M)
    return q + math.sqrt(max(low, 0.0) / chi2) * (p - q) if chi2 > 0 else q


def power(p, q, n, repeats=REPEATS, seed=0):
    """The share of `repeats` draws of n sequences from p [C] that the G-test rejects against q."""
    counts = np.random.default_rng(seed).multinomial(n, p / p.sum(), size=repeats)  # [repeats, C]
    G, df = g_statistic(counts.astype(float), q)  # [repeats]
    return float(np.mean(G > chi2_isf(ALPHA, df))) if df > 0 else float(np.mean(G == np.inf))


def grid(n):
    """n rounded up to two significant digits. Example: grid(2125) -> 2200; grid(87) -> 87."""
    step = 10 ** max(0, len(str(int(n))) - 2)
    return -(-int(n) // step) * step


def smallest_n(p, q, at=AT, limit=2_000_000):
    """The smallest n (on the grid, at least LEAST) whose power is >= at, or None above `limit`:
    doubling and bisection at a tenth of the repeats bracket it, then bisection at all of them
    inside the bracket widened by half on each side."""
    if power(p, q, LEAST) >= at:
        return LEAST
    high = LEAST
    while power(p, q, high, REPEATS // 10) < at:
        high *= 2
        if high > limit:
            return None
    low = max(high // 2, LEAST)
    while high - low > high // 10:
        mid = (low + high) // 2
        low, high = (low, mid) if power(p, q, mid, REPEATS // 10) >= at else (mid, high)
    low, high = max(low // 2, LEAST - 1), grid(high * 3 // 2)
    while power(p, q, high) < at:
        low, high = high, grid(high * 2)
    while grid(low + 1) < high:
        mid = grid((low + high) // 2)
        if mid >= high:
            break
        low, high = (low, mid) if power(p, q, mid) >= at else (mid, high)
    return high


# ---- the sized tests ----

class Case(NamedTuple):
    label: str
    plant: Callable  # (module, monkeypatch) -> None: the broken variant, as the test plants it
    run: Callable  # (module, n, seed) -> sequences, or a list of such lists (one check each)
    law: Callable  # (module) -> {sequence: probability}, or a list of such laws


class Sized(NamedTuple):
    test: str  # file::test, every case of it
    constant: str  # the test module's name for the sequences the test uses
    broken: str  # the broken variant it is sized against
    cases: tuple


def patch(name, value):
    """A plant: set `name` (owner.attribute, the owner a name in the test module; or an attribute
    of the test module itself) to the test module's function called `value` (or to value)."""
    owner, attr = name.rsplit(".", 1) if "." in name else (None, name)

    def plant(m, mp):
        new = getattr(m, value) if isinstance(value, str) else value
        mp.setattr(m if owner is None else vars(m)[owner], attr, new)
    return plant


def both(*plants):
    return lambda m, mp: [plant(m, mp) for plant in plants]


def clean(m, mp):
    pass


def law_of(options, target="TARGET", length="N"):
    """(module) -> the exact law of the module's target after its PROMPT (candidates dropped)."""
    sampling = {k: v for k, v in options.items() if k not in ("candidates", "n_tokens")}
    return lambda m: m.exact_law(getattr(m, target), m.PROMPT,
                                 options.get("n_tokens", getattr(m, length)), **sampling)


def toy_run(options):
    return lambda m, n, seed: m.runs(n, seed, **options)


def speculative():
    from tests.picospec.test_speculative import OPTIONS

    resample = patch("sps.verify_chain", "resample_from_target")
    T = "tests/picospec/test_speculative.py::"

    def sps(K=2, options=None, **kw):
        models = lambda m: {k: getattr(m, v) for k, v in kw.items()}  # noqa: E731  draft=, target=
        return lambda m, n, seed: m.sps_runs(K, n, seed, **models(m), **(options or {}))
    joint = tuple(Case(f"K={K},{o or 'T=1'}", resample, sps(K, o), law_of(o))
                  for K in (1, 2, 4) for o in OPTIONS)
    argmax = patch("sps.sample", "argmax_sample")
    edge = tuple(Case(label, plant, lambda m, n, seed, i=i: m.sps_runs(2, n, seed,
                                                                      draft=m.EDGE_DRAFTS[i]),
                      law_of({}))
                 for i, (label, plant) in enumerate([("zeros", resample), ("one-hot", resample),
                                                     ("identical", argmax)]))
    broken = {"accept-everything": ("sps.verify_chain", "accept_everything", {}),
              "resample-from-target": ("sps.verify_chain", "resample_from_target", {}),
              "argmax-draft": ("sps.sample", "argmax_sample", {}),
              "warp-draft-only": ("sps.warp", "warp_draft_only", dict(temperature=0.6))}
    close = (Case("", resample, sps(draft="CLOSE"), law_of({})),)
    filters = {"temperature": 1.2, "top_k": 2, "top_p": 0.7}  # test_speculative.FILTERS
    together = tuple(Case(f"K={K}", patch("sps.warp", "warp_draft_only"), sps(K, filters),
                          law_of(filters)) for K in (1, 2, 4))
    return [
        Sized(T + "test_joint_law_equals_target", "JOINT", "resample-from-target", joint),
        Sized(T + "test_joint_law_edge_drafts", "EDGE", "resample-from-target; argmax-draft for "
              "the identical draft", edge),
        Sized(T + "test_disjoint_supports", "DISJOINT", "accept-everything",
              (Case("", patch("sps.verify_chain", "accept_everything"),
                    sps(draft="ONE_HOT", target="SPREAD"), law_of({}, "SPREAD")),)),
        Sized(T + "test_joint_law_with_top_k_then_top_p", "TOGETHER", "warp-draft-only", together),
        Sized(T + "test_both_filters_on_the_draft_only_are_rejected", "TOGETHER", "itself",
              together),
        Sized(T + "test_joint_law_high_power", "HIGH", "resample-from-target, close draft", close),
        Sized(T + "test_residual_matters_even_for_close_models", "HIGH", "itself", close),
    ] + [Sized(T + f"test_broken_samplers_are_rejected[{name}]", "BROKEN[name]", "itself",
               (Case("", patch(at, value), sps(options=o), law_of(o)),))
         for name, (at, value, o) in broken.items()]


def autoregressive():
    T = "tests/picospec/test_autoregressive.py::"
    unwarped = (Case("", patch("ars.warp", "unwarped"),
                     lambda m, n, seed: m.ars_runs(n, seed, temperature=0.6),
                     law_of(dict(temperature=0.6))),)
    return [Sized(T + "test_autoregressive_law_equals_target", "AUTOREGRESSIVE",
                  "autoregressive-unwarped", unwarped),
            Sized(T + "test_an_unwarped_autoregressive_sampler_is_rejected", "AUTOREGRESSIVE",
                  "itself", unwarped)]


def cascade():
    from tests.picospec.test_cascade import CASES

    smallest = patch("cs.review_step", "review_step_with_the_smallest_law")
    resample = patch("cs.verify_chain", "resample_from_target")
    plants = {"vertical": smallest, "horizontal": resample, "both": smallest}
    T = "tests/picospec/test_cascade.py::"

    def run(name):
        return lambda m, n, seed: m.runs(m.CASCADES[name], n, seed, **CASES[name])
    return [
        Sized(T + "test_joint_law_equals_target", "JOINT", "verified-against-the-smallest-"
              "drafter's-law (resample-from-target, horizontal)",
              tuple(Case(k, plants[k], run(k), law_of(o)) for k, o in CASES.items())),
        Sized(T + "test_verifying_against_the_smallest_drafters_law_is_rejected", "BROKEN",
              "itself", (Case("", smallest, run("vertical"), law_of({})),)),
        Sized(T + "test_resampling_from_the_target_is_rejected", "RESAMPLE", "itself",
              (Case("", resample, run("horizontal"), law_of(CASES["horizontal"])),)),
    ]


def self_draft():
    from tests.picospec.test_self_draft import OPTIONS

    unwarped = patch("sd.draft_token", "raw_law_draft_token")
    resample = patch("sd.verify_chain", "resample_from_target")
    T = "tests/picospec/test_self_draft.py::"
    joint = (Case("T=1", resample, toy_run({}), law_of({})),) + \
        tuple(Case(str(o), unwarped, toy_run(o), law_of(o)) for o in OPTIONS[1:])
    warm = dict(temperature=0.6)
    return [
        Sized(T + "test_joint_law_equals_target_with_adaptive_stop", "JOINT",
              "verified-against-the-unwarped-draft-law (resample-from-target at T=1)", joint),
        Sized(T + "test_a_draft_that_always_stops_after_one_token", "ONE", "resample-from-target",
              (Case("", resample, lambda m, n, seed: m.runs(n, seed, stop=m.ONE_TOKEN),
                    law_of({})),)),
        Sized(T + "test_verifying_against_the_unwarped_draft_law_is_rejected", "UNWARPED", "itself",
              (Case("", unwarped, toy_run(warm), law_of(warm)),)),
        Sized(T + "test_resampling_from_the_target_is_rejected", "RESAMPLE", "itself",
              (Case("", resample, toy_run({}), law_of({})),)),
    ]


def eagle():
    from tests.picospec.test_eagle import FOLLOWS

    replacement = patch("eagle1.sample_without_replacement", "with_replacement")
    no_residual = patch("eagle1.verify_tree", "one_hot_without_residual")
    plants = {"sampled-top_k": replacement, "sampled-top_p": replacement,
              "topk-one-hot-top_p": no_residual}
    duplicates = both(patch("eagle1.verify_tree", "distinct_shortcut"),
                      patch("eagle1.top_ranked", "with_duplicates"))
    T = "tests/picospec/test_eagle.py::"

    def run(options):
        return lambda m, n, seed: m.runs(n, seed, **options)
    topk = (Case("", no_residual, run(dict(candidates="topk", temperature=1.0)), law_of({})),)
    twice = (Case("", duplicates, run(dict(candidates="topk", temperature=1.0)), law_of({})),)
    return [
        Sized(T + "test_follows_the_target_exactly", "FOLLOWS_N", "drawn-with-replacement (sampled "
              "children), one-hot-without-residual (one-hot)",
              tuple(Case(k, plants[k], run(v), law_of(v)) for k, v in FOLLOWS.items())),
        Sized(T + "test_duplicate_one_hot_candidates_are_harmless_with_the_residual", "DUPLICATES",
              "duplicates-verified-as-distinct", twice),
        Sized(T + "test_distinct_shortcut_is_right_for_distinct_siblings", "SHORTCUT",
              "one-hot-without-residual", topk),
        Sized(T + "test_broken_one_hot_rules_are_rejected[duplicates-verified-as-distinct]",
              "BROKEN[name]", "itself", twice),
        Sized(T + "test_broken_one_hot_rules_are_rejected[one-hot-without-residual]",
              "BROKEN[name]", "itself", topk),
        Sized(T + "test_sampled_children_drawn_with_replacement_are_rejected",
              "BROKEN['drawn-with-replacement']", "itself",
              (Case("", replacement, run(FOLLOWS["sampled-top_k"]),
                    law_of(FOLLOWS["sampled-top_k"])),)),
    ]


def eagle2():
    from tests.picospec.test_eagle2 import OPTIONS

    return [Sized("tests/picospec/test_eagle2.py::test_follows_the_target_exactly", "FOLLOWS_N",
                  "one-hot-without-residual",
                  (Case("", patch("eagle2.verify_tree", "one_hot_without_residual"),
                        lambda m, n, seed: m.runs(n, seed, **OPTIONS), law_of(OPTIONS)),))]


def eagle3():
    from tests.picospec.test_eagle3 import WARPED

    return [Sized("tests/picospec/test_eagle3.py::test_follows_the_target_exactly", "FOLLOWS_N",
                  "verified over the draft vocabulary",
                  tuple(Case(f"{o}", patch("VERIFIER", "BROKEN"), toy_run(o), law_of(o))
                        for o in WARPED))]


def medusa():
    longest = patch("medusa.verify_tree", "longest_match")
    T = "tests/picospec/test_medusa.py::"

    def run(options):
        return lambda m, n, seed: m.runs(*m.model_and_heads(**m.SMALL), n, seed, **options)

    def law(options):
        return lambda m: m.exact_law(m.model_and_heads(**m.SMALL)[0], m.PROMPT, m.N, **options)
    typical = dict(posterior="typical", epsilon=0.3, delta=0.6)
    return [
        Sized(T + "test_lossless_follows_target", "LOSSLESS_N", "longest-match",
              tuple(Case(str(o), longest, run(o), law(o)) for o in WARPED)),
        Sized(T + "test_longest_match_flaw_is_rejected", "LONGEST", "itself",
              (Case("", longest, run({}), law({})),)),
        Sized(T + "test_typical_acceptance_is_not_lossless", "TYPICAL", "itself",
              (Case("", clean, run(typical), law({})),)),
    ]


def simple(file, tests, constant, plants, options, run=toy_run, law=law_of, by_id=False):
    """A file whose pass test runs the `options` cases, sized against the last of `plants`
    ({id: plant}), and whose broken test plants each at the first case (by_id: parametrized by
    id, its n in constant[id])."""
    T = f"tests/picospec/test_{file}.py::"
    last = list(plants)[-1]
    return [Sized(T + tests[0], "JOINT", last,
                  tuple(Case(str(o), plants[last], run(o), law(o)) for o in options))] + \
        [Sized(T + tests[1] + (f"[{name}]" if by_id else ""),
               f"{constant}[name]" if by_id else constant, "itself",
               (Case("", plant, run(options[0]), law(options[0])),))
         for name, plant in plants.items()]



def rest():
    return simple("rest", ("test_joint_law_equals_target", "test_broken_verification_is_rejected"),
                  "BROKEN", {name: patch("rest.verify_tree", name)
                             for name in ("unverified", "first_matching_path")},
                  WARPED, by_id=True)


def lookahead():
    return simple("lookahead", ("test_joint_law_equals_target",
                                "test_broken_variants_are_rejected"),
                  "BROKEN", {"verify_tree": patch("la.verify_tree", "first_guess_unverified"),
                             "verification_branch": patch("la.verification_branch",
                                                          "rows_of_the_window")},
                  WARPED, by_id=True)


def prompt_lookup():
    return simple("prompt_lookup", ("test_joint_law_equals_target",
                                    "test_accepting_every_match_is_rejected"),
                  "BROKEN",
                  {"accepting-every-match": patch("pl.verify_chain", "accept_every_match")},
                  [{}, dict(temperature=0.6, top_k=2)])


def sequoia():
    return simple("sequoia", ("test_joint_law_equals_target",
                              "test_without_replacement_judged_as_iid_is_rejected"),
                  "BROKEN", {"without-replacement-judged-as-iid":
                             patch("sequoia.verify_without_replacement", "verify_iid")},
                  [{}, dict(n_tokens=2, top_p=0.8)])


def specinfer():
    from tests.support.toy import MaskedToyTree
    from tests.picospec.test_specinfer import DRAFTS

    def siblings(m, mp):  # the same runs, the target's rows under a mask that shows siblings
        mp.setattr(m, "MaskedToyTree", lambda table: MaskedToyTree(table, mask=m.sibling_mask))
    cases = {"k=3,2": ((3, 2), DRAFTS[0], {}),
             "two-drafters-T0.7-top_k2": ((1, 1), DRAFTS, dict(temperature=0.7, top_k=2))}
    T = "tests/picospec/test_specinfer.py::"

    def run(expansion, draft, options):
        return lambda m, n, seed: m.runs(n, expansion, draft, seed=seed, **options)
    return [Sized(T + "test_joint_law_equals_target", "JOINT", "a-mask-that-shows-siblings",
                  tuple(Case(k, siblings, run(*v), law_of(v[2])) for k, v in cases.items())),
            Sized(T + "test_a_mask_that_shows_siblings_is_rejected", "BROKEN", "itself",
                  (Case("", siblings, run(*cases["k=3,2"]), law_of({})),))]


def tree():
    from tests.picospec.test_tree import CASES

    no_residual = patch("verify.residual", lambda q, p: q)
    longest = patch("verify_tree", "longest_match")
    T = "tests/picospec/test_tree.py::"

    def run(branch, depth, sampled, options, **kw):
        return lambda m, n, seed: m.runs(n, seed, branch=branch, depth=depth, sampled=sampled,
                                         options=options, **kw)
    return [
        Sized(T + "test_tree_verification_follows_target", "FOLLOWS", "siblings-without-residual",
              tuple(Case(f"{b},{d},{s},{o}", no_residual, run(b, d, s, o), law_of(o))
                    for b, d, s, o in CASES)),
        Sized(T + "test_one_hot_semantics_is_lossless_for_any_independent_draft", "ONE_HOT",
              "longest-match", (Case("", longest, run(2, 2, True, {}, one_hot=True), law_of({})),)),
        Sized(T + "test_siblings_without_residual_are_rejected", "NO_RESIDUAL", "itself",
              (Case("", no_residual, run(3, 2, True, {}), law_of({})),)),
    ] + [Sized(T + f"test_longest_match_of_independent_samples_is_rejected[{s}]", "LONGEST[name]",
               "itself", (Case("", longest, run(2, 2, s == "True", {}), law_of({})),))
         for s in ("False", "True")]


def verify():
    from tests.picospec.test_verify import RULES, WRONG

    no_residual = patch("verify.residual", "no_residual")
    T = "tests/picospec/test_verify.py::"

    def run(draw, rule, options, draw_options):
        return lambda m, n, seed: m.decode(draw, rule, options, n, seed=seed, **draw_options)
    return [Sized(T + "test_rule_follows_the_target", "FOLLOWS", "iid-without-residual",
                  tuple(Case(k, no_residual, run(*v), law_of(v[2])) for k, v in RULES.items()))] + \
        [Sized(T + f"test_wrong_rule_is_rejected[{k}]", "BROKEN[name]", "itself",
               (Case("", no_residual if p else clean, run(d, r, {}, {}), law_of({})),))
         for k, (d, r, p) in WRONG.items()]


def generate():
    return [Sized("tests/gpt2/train/test_generate.py::test_sampled_rows_follow_the_exact_law",
                  "ROWS",
                  "sampled at temperature 1.5",
                  tuple(Case(f"T={t}", clean, lambda m, n, seed: m.sampled_rows(n, 1.5, seed),
                             lambda m, t=t: m.law_at(t)) for t in (1.0, 0.7)))]


def batched_speculative():
    from tests.picospec.batched.test_speculative import CASES

    recovered = patch("rej.recovered_probs", lambda q, p: q)
    T = "tests/picospec/batched/test_speculative.py::"

    def law(options):
        return lambda m: [m.exact_law(m.LAW_TARGET, x, m.LAW_N, **options) for x in m.PROMPTS]
    return [Sized(T + "test_batch_joint_law_per_row", "PER_ROW", "recovered-from-the-target",
                  tuple(Case(f"K={K},{o}", recovered, lambda m, n, seed, K=K, o=o:
                             m.batch_runs(K, n, seed, **o), law(o)) for K, o in CASES)),
            Sized(T + "test_broken_batch_sampler_is_rejected", "BROKEN", "itself (row 0)",
                  (Case("", recovered, lambda m, n, seed: m.batch_runs(2, n, seed)[:1],
                        lambda m: law({})(m)[:1]),))]


FILES = {"autoregressive": autoregressive, "speculative": speculative, "cascade": cascade,
         "self_draft": self_draft, "eagle": eagle, "eagle2": eagle2, "eagle3": eagle3,
         "medusa": medusa, "rest": rest,
         "lookahead": lookahead, "prompt_lookup": prompt_lookup, "sequoia": sequoia,
         "specinfer": specinfer, "tree": tree, "verify": verify, "generate": generate,
         "batched_speculative": batched_speculative}


# ---- running them ----

def measure(sized, module, seed=1):
    """-> [(label, n needed or None, M)] over the cases of one sized test, the n the test uses, and
    the least power at that n."""
    import pytest

    used = eval(sized.constant, {"name": sized.test.split("[")[-1].rstrip("]")}, vars(module))
    rows, least = [], 1.0
    for case in sized.cases:
        laws, M = case.law(module), 20_000
        while True:
            with pytest.MonkeyPatch.context() as mp:
                case.plant(module, mp)
                samples = case.run(module, M, seed)
            checks = [(samples, laws)] if isinstance(laws, dict) else list(zip(samples, laws))
            pairs = [(shrunk(counts, q), q) for counts, q in (as_vectors(*c) for c in checks)]
            needs = [smallest_n(p, q) for p, q in pairs]
            needed = None if None in needs else max(needs)
            if needed is None or M >= 10 * needed:
                break
            M = 10 * needed
        least = min([least] + [power(p, q, used, seed=2) for p, q in pairs])
        rows.append((case.label, needed, M))
    return rows, used, least


def main(only=None, list=False):
    """Measure the n each sized test needs, beside the n it uses; exit 1 if one uses fewer."""
    sys.path.insert(0, str(ROOT))  # the test modules, as tests.picospec.test_speculative
    unknown = sorted(set(only or ()) - set(FILES))
    if unknown:
        raise ValueError(f"unknown file {', '.join(unknown)}: choose from {', '.join(FILES)}")
    short = []
    for name in [f for f in FILES if not only or f in only]:
        for sized in FILES[name]():
            if list:
                print(f"{sized.test}  against {sized.broken}  ({len(sized.cases)} cases)")
                continue
            module = importlib.import_module(sized.test.split("::")[0][:-3].replace("/", "."))
            start = time.process_time()
            rows, used, least = measure(sized, module)
            needs = [n for _, n, _ in rows]
            need = None if None in needs else max(needs)
            print(f"{sized.test}  {sized.broken}  {len(rows)} case{'s' * (len(rows) > 1)}  needs "
                  f"{'>2,000,000' if need is None else f'{need:,}'}  uses {used:,}  "
                  f"power {least:.4f}  ({time.process_time() - start:.0f} s)", flush=True)
            for label, n, M in rows if len(rows) > 1 else ():
                print(f"    {label}: needs {'-' if n is None else f'{n:,}'} (M = {M:,})")
            if need is None or used < need or least < AT:
                short.append(sized.test)
    if short:
        print(f"\nusing fewer sequences than they need (or power below {AT} on fresh draws): "
              f"{', '.join(short)}")
        sys.exit(1)


if __name__ == "__main__":
    from picospec_cli import Option, command

    command(main, [Option("only", "strs", None, "measure only these files' tests (see --list)"),
                   Option("list", bool, False, "print the sized tests and measure nothing")])
