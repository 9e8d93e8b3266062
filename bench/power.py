"""Sequences per sampled law test, sized by power: each statistical test of the suite uses the smallest number of
sequences n at which the broken variant it is paired with is rejected with probability >= 0.999 at ALPHA = 1e-4.

    python -m bench.power                              # every sized test: n it needs, n it uses, power at that n
    python -m bench.power --only speculative,medusa    # the tests of these files only (names as --list prints)
    python -m bench.power --list

How n is measured. The broken variant is planted as its test plants it and run M times (at least 20,000, and at
least 10 n); its empirical law of whole sequences p^ [C] is shrunk toward the exact target law q [C] until its
chi-square distance from q is a lower confidence bound on the true distance (M draws add (C - 1) / M to it on
average, with sd 2 sqrt(chi2 / M); two sd are taken off), so an estimate's noise can only ask for more sequences.
Then `repeats` = 20,000 multinomial draws of n sequences from that law are each G-tested against q at ALPHA exactly
as check_law tests (picospec.exact_law.g_statistic: rare cells pooled, a sequence of probability 0 rejects); the
power is the share rejected, and n the smallest on a grid of two significant digits with power >= 0.999 (and at
least LEAST = 100: fewer sequences pool nearly every cell, so the G-test would check the support alone). A test
with several cases (parametrized, or one check per batch row) uses one n, the largest its cases need, and its line
reports the least power over its cases. Needs pytest (its MonkeyPatch plants the broken variants).

A line: `tests/test_speculative.py::test_joint_law_equals_target  resample-from-target  12 cases  needs 2,100  uses
2,200  power 0.9993`. Exit status 1 when a test uses fewer sequences than it needs.
"""
import importlib
import math
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from picospec.exact_law import ALPHA, chi2_isf, g_statistic

ROOT = Path(__file__).resolve().parents[1]
AT, REPEATS, Z = 0.999, 20_000, 2.0
LEAST = 100  # fewer sequences pool nearly every cell into one: the G-test would check the support alone


# ---- the measurement ----

def as_vectors(samples, law):
    """Samples (sequences) and {sequence: probability} -> counts [C + 1], q [C + 1]; the last cell holds every
    sequence the law gives probability 0."""
    seqs = list(law)
    where = {s: i for i, s in enumerate(seqs)}
    counts = np.zeros(len(seqs) + 1)
    for s in samples:
        counts[where.get(tuple(s), len(seqs))] += 1
    return counts, np.array([law[s] for s in seqs] + [0.0])


def shrunk(counts, q, z=Z):
    """The law estimated from counts [C], moved toward q [C] so that its chi-square distance from q is the estimate's
    lower confidence bound (mass on q's impossible cells, a sure rejection, is left as drawn)."""
    M, possible = counts.sum(), q > 0
    p = counts / M
    if p[~possible].any():
        return p
    chi2 = float(np.sum((p - q)[possible] ** 2 / q[possible]))
    low = chi2 - (possible.sum() - 1) / M - z * 2 * math.sqrt(chi2 / M)
    return q + math.sqrt(max(low, 0.0) / chi2) * (p - q) if chi2 > 0 else q


def power(p, q, n, repeats=REPEATS, seed=0):
    """The share of `repeats` draws of n sequences from p [C] that the G-test rejects against q [C] at ALPHA."""
    counts = np.random.default_rng(seed).multinomial(n, p / p.sum(), size=repeats).astype(float)
    G, df = g_statistic(counts, q)
    return float(np.mean(G > chi2_isf(ALPHA, df))) if df > 0 else float(np.mean(G == np.inf))


def grid(n):
    """n rounded up to two significant digits. Example: grid(2125) -> 2200; grid(87) -> 87."""
    step = 10 ** max(0, len(str(int(n))) - 2)
    return -(-int(n) // step) * step


def smallest_n(p, q, at=AT, limit=2_000_000):
    """The smallest n (on the grid, at least LEAST) whose power is >= at: doubling and bisection at a tenth of the
    repeats bracket it, then bisection at all of them inside the bracket widened by half on each side."""
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
    plant: Callable  # (module, monkeypatch) -> None: the broken variant, planted as the test plants it
    run: Callable  # (module, n, seed) -> samples (sequences), or a list of such lists (one check each)
    law: Callable  # (module) -> {sequence: probability}, or a list of such laws


class Sized(NamedTuple):
    test: str  # file::test, every case of it
    constant: str  # the module's name for the sequences the test uses
    broken: str  # the broken variant it is sized against
    cases: tuple


def patch(name, value):
    """A plant: set `name` (owner.attribute, the owner a name in the test module; or an attribute of the test
    module itself) to the test module's function called `value` (or to value itself)."""
    owner, attr = name.rsplit(".", 1) if "." in name else (None, name)

    def plant(m, mp):
        mp.setattr(m if owner is None else vars(m)[owner], attr, getattr(m, value) if isinstance(value, str) else value)
    return plant


def clean(m, mp):
    pass


def cases(label, plant, run, law, options):
    return tuple(Case(f"{label}{'-' if label else ''}{o}", plant, run(**v), law(**v)) for o, v in options.items())


def speculative():
    from test_speculative import OPTIONS
    K_OPTIONS = {f"K={K},{o or 'T=1'}": dict(K=K, opts=o) for K in (1, 2, 4) for o in OPTIONS}
    resample = patch("sps.verify_chain", "resample_from_target")
    run = lambda K, opts: lambda m, n, seed: m.sps_runs(K, n=n, seed=seed, **opts)  # noqa: E731
    law = lambda K, opts: lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, **opts)  # noqa: E731
    edge = lambda i: lambda m, n, seed: m.sps_runs(2, n=n, seed=seed, draft=m.EDGE_DRAFTS[i])  # noqa: E731
    target = lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N)  # noqa: E731
    close = lambda m, n, seed: m.sps_runs(2, n=n, seed=seed, draft=m.CLOSE)  # noqa: E731
    broken = {"accept-everything": ("sps.verify_chain", "accept_everything", {}),
              "resample-from-target": ("sps.verify_chain", "resample_from_target", {}),
              "argmax-draft": ("sps.sample", "argmax_sample", {}),
              "warp-draft-only": ("sps.warp", "warp_draft_only", dict(temperature=0.6))}
    return [
        Sized("tests/test_speculative.py::test_joint_law_equals_target", "JOINT", "resample-from-target",
              cases("", resample, run, law, K_OPTIONS)),
        Sized("tests/test_speculative.py::test_joint_law_edge_drafts", "EDGE", "resample-from-target; argmax-draft "
              "for the identical draft", (Case("zeros", resample, edge(0), target),
                                          Case("one-hot", resample, edge(1), target),
                                          Case("identical", patch("sps.sample", "argmax_sample"), edge(2), target))),
        Sized("tests/test_speculative.py::test_disjoint_supports", "DISJOINT", "accept-everything",
              (Case("", patch("sps.verify_chain", "accept_everything"),
                    lambda m, n, seed: m.sps_runs(2, n=n, seed=seed, draft=m.ONE_HOT, target=m.SPREAD),
                    lambda m: m.exact_law(m.SPREAD, m.PROMPT, m.N)),)),
        Sized("tests/test_speculative.py::test_autoregressive_law_equals_target", "AUTOREGRESSIVE",
              "autoregressive-unwarped", (Case("", patch("ars.warp", "unwarped"),
                                               lambda m, n, seed: m.ars_runs(n, seed, temperature=0.6),
                                               lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, temperature=0.6)),)),
        Sized("tests/test_speculative.py::test_joint_law_high_power", "HIGH", "resample-from-target with a close "
              "draft", (Case("", resample, close, target),)),
        Sized("tests/test_speculative.py::test_residual_matters_even_for_close_models", "HIGH",
              "itself", (Case("", resample, close, target),)),
    ] + [Sized(f"tests/test_speculative.py::test_broken_samplers_are_rejected[{name}]", "BROKEN[name]", "itself",
               (Case("", patch(at, value), lambda m, n, seed, o=o: m.sps_runs(2, n=n, seed=seed, **o),
                     lambda m, o=o: m.exact_law(m.TARGET, m.PROMPT, m.N, **o)),))
         for name, (at, value, o) in broken.items()]


def cascade():
    from test_cascade import CASES
    smallest = patch("cs.review_step", "review_step_with_the_smallest_law")
    resample = patch("cs.verify_chain", "resample_from_target")
    run = lambda name, o: lambda m, n, seed: m.runs(m.CASCADES[name], n, seed, **o)  # noqa: E731
    law = lambda name, o: lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, **o)  # noqa: E731
    plants = {"vertical": smallest, "horizontal": resample, "both": smallest}
    return [
        Sized("tests/test_cascade.py::test_joint_law_equals_target", "JOINT", "verified-against-the-smallest-"
              "drafter's-law (resample-from-target, horizontal)",
              tuple(Case(k, plants[k], run(k, o), law(k, o)) for k, o in CASES.items())),
        Sized("tests/test_cascade.py::test_verifying_against_the_smallest_drafters_law_is_rejected", "BROKEN",
              "itself", (Case("", smallest, run("vertical", {}), law("vertical", {})),)),
        Sized("tests/test_cascade.py::test_resampling_from_the_target_is_rejected", "RESAMPLE", "itself",
              (Case("", resample, run("horizontal", CASES["horizontal"]), law("horizontal", CASES["horizontal"])),)),
    ]


def self_draft():
    from test_self_draft import OPTIONS
    unwarped, resample = patch("sd.draft_token", "raw_law_draft_token"), patch("sd.verify_chain", "resample_from_target")
    run = lambda o: lambda m, n, seed: m.runs(n, seed, **o)  # noqa: E731
    law = lambda o: lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, **o)  # noqa: E731
    joint = tuple(Case(f"T=1-{name}", plant, run(OPTIONS[0]), law(OPTIONS[0]))
                  for name, plant in (("resample-from-target", resample),)) + \
        tuple(Case(str(o), unwarped, run(o), law(o)) for o in OPTIONS[1:])
    return [
        Sized("tests/test_self_draft.py::test_joint_law_equals_target_with_adaptive_stop", "JOINT",
              "verified-against-the-unwarped-draft-law (resample-from-target at T=1)", joint),
        Sized("tests/test_self_draft.py::test_a_draft_that_always_stops_after_one_token", "ONE",
              "resample-from-target", (Case("", resample, lambda m, n, seed: m.runs(n, seed, stop=m.ONE_TOKEN),
                                            law({})),)),
        Sized("tests/test_self_draft.py::test_verifying_against_the_unwarped_draft_law_is_rejected", "UNWARPED",
              "itself", (Case("", unwarped, run(dict(temperature=0.6)), law(dict(temperature=0.6))),)),
        Sized("tests/test_self_draft.py::test_resampling_from_the_target_is_rejected", "RESAMPLE", "itself",
              (Case("", resample, run({}), law({})),)),
    ]


def eagle():
    from test_eagle import FOLLOWS
    replacement = patch("eagle1.draw_without_replacement", "with_replacement")
    no_residual1 = patch("eagle1.verify_tree", "one_hot_without_residual")
    no_residual2 = patch("eagle2.verify_tree", "one_hot_without_residual")
    distinct = patch("eagle1.verify_tree", "distinct_shortcut")

    def both(*plants):
        return lambda m, mp: [plant(m, mp) for plant in plants]

    def run(method, options):
        return lambda m, n, seed: m.runs(method, n, seed, **options)

    def law(options):
        return lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, **{k: v for k, v in options.items() if k != "candidates"})
    plants = {"sampled-top_k": replacement, "sampled-top_p": replacement, "topk-one-hot-top_p": no_residual1,
              "eagle2-one-hot-top_k": no_residual2}
    topk = dict(candidates="topk", temperature=1.0)
    duplicates = patch("eagle1.top_ranked", "with_duplicates")
    return [
        Sized("tests/test_eagle.py::test_follows_the_target_exactly", "FOLLOWS_N", "drawn-with-replacement "
              "(sampled children), one-hot-without-residual (one-hot)",
              tuple(Case(k, plants[k], run(*v), law(v[1])) for k, v in FOLLOWS.items())),
        Sized("tests/test_eagle.py::test_duplicate_one_hot_candidates_are_harmless_with_the_residual", "DUPLICATES",
              "duplicates-verified-as-distinct", (Case("", both(distinct, duplicates), run("eagle", topk), law({})),)),
        Sized("tests/test_eagle.py::test_distinct_shortcut_is_right_for_distinct_siblings", "SHORTCUT",
              "one-hot-without-residual", (Case("", no_residual1, run("eagle", topk), law({})),)),
        Sized("tests/test_eagle.py::test_broken_one_hot_rules_are_rejected[duplicates-verified-as-distinct]",
              "BROKEN[name]", "itself", (Case("", both(distinct, duplicates), run("eagle", topk), law({})),)),
        Sized("tests/test_eagle.py::test_broken_one_hot_rules_are_rejected[one-hot-without-residual]",
              "BROKEN[name]", "itself", (Case("", no_residual1, run("eagle", topk), law({})),)),
        Sized("tests/test_eagle.py::test_sampled_children_drawn_with_replacement_are_rejected",
              "BROKEN['drawn-with-replacement']", "itself",
              (Case("", replacement, run(*FOLLOWS["sampled-top_k"]), law(FOLLOWS["sampled-top_k"][1])),)),
    ]


def medusa():
    longest = patch("medusa.verify_tree", "longest_match")
    run = lambda o: lambda m, n, seed: m.runs(*m.model_and_heads(**m.SMALL), n, seed, **o)  # noqa: E731
    law = lambda o: lambda m: m.exact_law(m.model_and_heads(**m.SMALL)[0], m.PROMPT, m.N, **o)  # noqa: E731
    typical = dict(posterior="typical", epsilon=0.3, delta=0.6)
    return [
        Sized("tests/test_medusa.py::test_lossless_follows_target", "LOSSLESS_N", "longest-match",
              tuple(Case(str(o), longest, run(o), law(o)) for o in [{}, dict(temperature=0.7, top_k=2)])),
        Sized("tests/test_medusa.py::test_longest_match_flaw_is_rejected", "LONGEST", "itself",
              (Case("", longest, run({}), law({})),)),
        Sized("tests/test_medusa.py::test_typical_acceptance_is_not_lossless", "TYPICAL", "itself",
              (Case("", clean, run(typical), law({})),)),
    ]


def simple(file, joint, broken, plants, options, run, law, broken_ids=None):
    """A file whose pass test runs `options` cases and whose broken test(s) plant `plants` ({id: plant}) at the
    first case; the pass test is sized against the last plant."""
    last = list(plants.values())[-1]
    pass_test, broken_test = joint
    return [Sized(f"tests/test_{file}.py::{pass_test}", "JOINT", list(plants)[-1],
                  tuple(Case(str(o), last, run(o), law(o)) for o in options))] + \
        [Sized(f"tests/test_{file}.py::{broken_test}" + (f"[{name}]" if broken_ids else ""),
               f"{broken}[name]" if broken_ids else broken, "itself", (Case("", plant, run(options[0]),
                                                                            law(options[0])),))
         for name, plant in plants.items()]


def toy_run(o):
    return lambda m, n, seed: m.runs(n, seed, **o)


def toy_law(o):
    return lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, **o)


def rest():
    return simple("rest", ("test_joint_law_equals_target", "test_broken_verification_is_rejected"), "BROKEN",
                  {"unverified": patch("rest.verify_tree", "unverified"),
                   "first_matching_path": patch("rest.verify_tree", "first_matching_path")},
                  [{}, dict(temperature=0.7, top_k=2)], toy_run, toy_law, broken_ids=True)


def lookahead():
    return simple("lookahead", ("test_joint_law_equals_target", "test_broken_variants_are_rejected"), "BROKEN",
                  {"verify_tree": patch("la.verify_tree", "unverified"),
                   "verification_branch": patch("la.verification_branch", "rows_of_the_window")},
                  [{}, dict(temperature=0.7, top_k=2)], toy_run, toy_law, broken_ids=True)


def prompt_lookup():
    return simple("prompt_lookup", ("test_joint_law_equals_target", "test_accepting_every_match_is_rejected"),
                  "BROKEN", {"accepting-every-match": patch("pl.verify_chain", "accept_every_match")},
                  [{}, dict(temperature=0.6, top_k=2)], toy_run, toy_law)


def sequoia():
    run = lambda o: lambda m, n, seed: m.runs(n, seed, **o)  # noqa: E731
    law = lambda o: lambda m: m.exact_law(m.Toy(m.TABLE), m.PROMPT, o.get("n_tokens", m.N),  # noqa: E731
                                          **{k: v for k, v in o.items() if k != "n_tokens"})
    return simple("sequoia", ("test_joint_law_equals_target", "test_without_replacement_judged_as_iid_is_rejected"),
                  "BROKEN", {"without-replacement-judged-as-iid": patch("sequoia.verify_without_replacement",
                                                                        "verify_iid")},
                  [{}, dict(n_tokens=2, top_p=0.8)], run, law)


def specinfer():
    def plant(m, mp):
        mp.setattr(m, "MaskedToyTree", lambda table: MASKED(table, mask=m.sibling_mask))
    from test_specinfer import DRAFTS, MaskedToyTree as MASKED
    cases_ = {"k=3,2": ((3, 2), DRAFTS[0], {}), "two-drafters-T0.7-top_k2": ((1, 1), DRAFTS, dict(temperature=0.7,
                                                                                                    top_k=2))}
    run = lambda e, d, o: lambda m, n, seed: m.runs(n, e, d, seed=seed, **o)  # noqa: E731
    law = lambda o: lambda m: m.exact_law(m.Toy(m.TABLE), m.PROMPT, m.N, **o)  # noqa: E731
    return [Sized("tests/test_specinfer.py::test_joint_law_equals_target", "JOINT", "a-mask-that-shows-siblings",
                  tuple(Case(k, plant, run(*v), law(v[2])) for k, v in cases_.items())),
            Sized("tests/test_specinfer.py::test_a_mask_that_shows_siblings_is_rejected", "BROKEN", "itself",
                  (Case("", plant, run(*cases_["k=3,2"]), law({})),))]


def tree():
    from test_tree import CASES
    no_residual = patch("verify.residual", lambda q, p: q)
    longest = patch("verify_tree", "longest_match")
    run = lambda b, d, s, o, **kw: lambda m, n, seed: m.runs(n, seed, branch=b, depth=d, sampled=s,  # noqa: E731
                                                             options=o, **kw)
    law = lambda o: lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, **o)  # noqa: E731
    return [
        Sized("tests/test_tree.py::test_tree_verification_follows_target", "FOLLOWS", "siblings-without-residual",
              tuple(Case(f"{b},{d},{s},{o}", no_residual, run(b, d, s, o), law(o)) for b, d, s, o in CASES)),
        Sized("tests/test_tree.py::test_one_hot_semantics_is_lossless_for_any_independent_draft", "ONE_HOT",
              "longest-match", (Case("", longest, run(2, 2, True, {}, one_hot=True), law({})),)),
        Sized("tests/test_tree.py::test_siblings_without_residual_are_rejected", "NO_RESIDUAL", "itself",
              (Case("", no_residual, run(3, 2, True, {}), law({})),)),
    ] + [Sized(f"tests/test_tree.py::test_longest_match_of_independent_samples_is_rejected[{s}]", "LONGEST[name]",
               "itself", (Case("", longest, run(2, 2, s == "True", {}), law({})),)) for s in ("False", "True")]


def verify_rules():
    from test_verify_rules import RULES, WRONG
    no_residual = patch("verify.residual", "no_residual")  # tests/test_verify_rules.py imports picospec.verify
    run = lambda d, r, o, do: lambda m, n, seed: m.decode(d, r, o, n, seed=seed, **do)  # noqa: E731
    law = lambda o: lambda m: m.exact_law(m.TARGET, m.PROMPT, m.N, **o)  # noqa: E731
    return [Sized("tests/test_verify_rules.py::test_rule_follows_the_target", "FOLLOWS", "iid-without-residual",
                  tuple(Case(k, no_residual, run(*v), law(v[2])) for k, v in RULES.items()))] + \
        [Sized(f"tests/test_verify_rules.py::test_wrong_rule_is_rejected[{k}]", "BROKEN[name]", "itself",
               (Case("", no_residual if p else clean, run(d, r, {}, {}), law({})),)) for k, (d, r, p) in WRONG.items()]


def generate():
    return [Sized("tests/test_generate.py::test_sampled_rows_follow_the_exact_law", "ROWS", "sampled at 1.5",
                  tuple(Case(f"T={t}", clean, lambda m, n, seed: m.sampled_rows(n, 1.5, seed),
                             lambda m, t=t: m.law_at(t)) for t in (1.0, 0.7)))]


def rejection():
    from test_rejection import CASES
    recovered = patch("rej.recovered_probs", lambda q, p: q)
    run = lambda K, o: lambda m, n, seed: m.batch_runs(K, n, seed, **o)  # noqa: E731
    law = lambda o: lambda m: [m.exact_law(m.TARGET, x, m.N, **o) for x in m.PROMPTS]  # noqa: E731
    return [Sized("tests/test_rejection.py::test_batch_joint_law_per_row", "PER_ROW", "recovered-from-the-target",
                  tuple(Case(f"K={K},{o}", recovered, run(K, o), law(o)) for K, o in CASES)),
            Sized("tests/test_rejection.py::test_broken_batch_sampler_is_rejected", "BROKEN", "itself (row 0)",
                  (Case("", recovered, lambda m, n, seed: m.batch_runs(2, n, seed)[:1],
                        lambda m: [m.exact_law(m.TARGET, m.PROMPTS[0], m.N)]),))]


FILES = {"speculative": speculative, "cascade": cascade, "self_draft": self_draft, "eagle": eagle, "medusa": medusa,
         "rest": rest, "lookahead": lookahead, "prompt_lookup": prompt_lookup, "sequoia": sequoia,
         "specinfer": specinfer, "tree": tree, "verify_rules": verify_rules, "generate": generate,
         "rejection": rejection}


# ---- running them ----

def measure(sized, module, seed=1):
    """[(label, n needed or None)] over the cases of one sized test, and the least power at the n the test uses."""
    import pytest

    used = eval(sized.constant, {"name": sized.test.split("[")[-1].rstrip("]")}, vars(module))
    rows, least = [], 1.0
    for case in sized.cases:
        laws = case.law(module)
        M, needed = 20_000, None
        while True:
            with pytest.MonkeyPatch.context() as mp:
                case.plant(module, mp)
                samples = case.run(module, M, seed)
            checks = [(samples, laws)] if isinstance(laws, dict) else list(zip(samples, laws))
            vectors = [as_vectors(s, law) for s, law in checks]
            laws_p = [(shrunk(counts, q), q) for counts, q in vectors]
            needs = [smallest_n(p, q) for p, q in laws_p]
            needed = None if None in needs else max(needs)
            if needed is None or M >= 10 * needed:
                break
            M = 10 * needed
        least = min([least] + [power(p, q, used, seed=2) for p, q in laws_p])
        rows.append((case.label, needed, M))
    return rows, used, least


def main(only=None, list=False):
    """Measure the n each sized test needs (and print it beside the n it uses); exit 1 if one uses fewer."""
    sys.path.insert(0, str(ROOT / "tests"))
    unknown = sorted(set(only or ()) - set(FILES))
    if unknown:
        raise ValueError(f"unknown file {', '.join(unknown)}: choose from {', '.join(FILES)}")
    short = []
    for name in [f for f in FILES if not only or f in only]:
        module = importlib.import_module(f"test_{name}")
        for sized in FILES[name]():
            if list:
                print(f"{sized.test}  against {sized.broken}  ({len(sized.cases)} cases)")
                continue
            start = time.process_time()
            rows, used, least = measure(sized, module)
            needs = [n for _, n, _ in rows]
            need = None if None in needs else max(needs)
            print(f"{sized.test}  {sized.broken}  {len(rows)} case{'s' * (len(rows) > 1)}  needs "
                  f"{'>2,000,000' if need is None else f'{need:,}'}  uses {used:,}  power {least:.4f}  "
                  f"({time.process_time() - start:.0f} s)", flush=True)
            for label, n, M in rows if len(rows) > 1 else ():
                print(f"    {label}: needs {'-' if n is None else f'{n:,}'} (M = {M:,})")
            if need is None or used < need:
                short.append(sized.test)
    if short:
        print(f"\nusing fewer sequences than they need: {', '.join(short)}")
        sys.exit(1)


if __name__ == "__main__":
    from gpt2.cli import Option, command

    command(main, [Option("only", "strs", None, "measure only the tests of these files (names as --list prints)"),
                   Option("list", bool, False, "print the sized tests and measure nothing")])
