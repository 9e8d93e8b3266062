"""python -m picospec.check MODULE:FUNCTION ... [options]: a table per sampler (or one JSON
object), the verdicts as exit status."""
import contextlib
import difflib
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np

from picospec.check.battery import (DEFAULT_SAMPLES, PARTLY, Report, cases_of, check_sampler,
                                    run_controls, signature_problem)
from picospec.check.cases import CASES
from picospec.check.exact_law import ALPHA, SAMPLES, SAMPLES_HIGH, SHAPES, power_table
from picospec_cli import Option, UsageError, guarded, parse, usage

OPTIONS = [
    Option("contract", str, "chain", "the sampler's signature: " + ", ".join(CASES),
           choices=tuple(CASES), means={"vllm": "rejection", "rejection_sampler": "rejection",
                                        "wor": "tree_without_replacement",
                                        "without_replacement": "tree_without_replacement"}),
    Option("samples", int, None,
           f"sequences per case (default {DEFAULT_SAMPLES:,}; more: more power)", low=100),
    Option("seed", int, 0,
           "seed of the run (every case and control derives its generators from it)", low=0),
    Option("cases", "ints", None, "run only these cases of the battery, e.g. 1,3 (default: all)",
           low=1),
    Option("first_failure", bool, False, "stop a sampler's battery at its first failing case (the "
           "first law case runs first, then the others by number)"),
    Option("json", bool, False, "print one JSON object instead of the table"),
    Option("power", bool, False, "print the checker's power, measured by simulation, and exit"),
]
PROG = "python -m picospec.check"
SAMPLER_ONLY = ("contract", "seed", "cases", "first_failure")  # nothing of --power's measure


def parse_command(argv):
    """argv -> (sampler specs, {option: value}); UsageError for a mistake."""
    values, given = parse(argv, OPTIONS, words="MODULE:FUNCTION")
    if values.get("help"):
        print(help_text())
        raise SystemExit(0)
    specs = values.pop("words")
    if values["power"] and specs:
        raise UsageError("--power measures the checker itself and takes no sampler: drop "
                         + " ".join(specs))
    if values["power"] and (unused := [f"--{n}" for n in SAMPLER_ONLY if n in given]):
        raise UsageError(f"--power measures the checker itself, on its own laws: "
                         f"{', '.join(unused)} {'shape' if len(unused) > 1 else 'shapes'} a "
                         f"sampler's check; drop {'them' if len(unused) > 1 else 'it'}")
    if not values["power"] and not specs:
        raise UsageError("name the sampler to check as MODULE:FUNCTION or FILE.py:FUNCTION, e.g. "
                         "picospec.verify:verify_chain (see --help)")
    check_memory(values["samples"] or DEFAULT_SAMPLES)
    numbers = range(1, len(CASES[values["contract"]]) + 1)
    if values["cases"] and not set(values["cases"]) <= set(numbers):
        raise UsageError(f"--cases {','.join(map(str, values['cases']))}: the {values['contract']} "
                         f"battery has cases 1 to {numbers[-1]}")
    return specs, values


BYTES_PER_SEQUENCE = 1024  # an upper bound on a case's arrays per sequence


def check_memory(samples):
    """UsageError before any case runs when a case's sequences (held at once) exceed free memory."""
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no such count on this system: no check
        return
    if samples * BYTES_PER_SEQUENCE > free:
        raise UsageError(f"--samples {samples:,}: a case holds its sequences at once, about "
                         f"{samples * BYTES_PER_SEQUENCE / 2**30:,.0f} GB at ~1 KB each, more than "
                         f"the {free / 2**30:.1f} GB of memory free here: give --samples "
                         f"{free // BYTES_PER_SEQUENCE:,} or fewer (the power at each size: "
                         f"--power)")


def help_text():
    cases = "\n".join(f"  {contract}: " + "; ".join(f"{i}. {c.name}" for i, c in cases_of(contract))
                      for contract in CASES)
    doc = ("Check a speculative sampler against the exact law of toy targets (the contracts: "
           f"docs/checker.md).\n{PROG} --power [--samples N] [--json] measures the checker itself.")
    epilog = (f"batteries:\n{cases}\n\nexit status: 0 every case passed (a support case may be "
              "untested: the sampler drew not all its uniforms from rng), 1 a case failed, 2 a "
              "usage error, 3 no verdict (a negative control passed)")
    return usage(PROG, doc, OPTIONS, words="MODULE:FUNCTION", epilog=epilog)


def load(spec):
    """'package.module:function' or 'path/file.py:function' -> the function, or UsageError."""
    where, colon, name = spec.rpartition(":")
    if not colon or not where or not name:
        raise UsageError(f"give the sampler as MODULE:FUNCTION or FILE.py:FUNCTION, e.g. "
                         f"picospec.verify:verify_chain; got {spec!r}")
    path = Path(where)
    if not where.endswith(".py") and ("/" in where or os.sep in where or path.is_file()):
        # a path, not a module's dotted name (a package's folder, named bare, imports)
        raise UsageError(f"{where} is a folder: name the .py file that holds the sampler"
                         if path.is_dir() else
                         f"{where} is not a .py file: give the sampler as FILE.py:FUNCTION"
                         if path.exists() else
                         f"{where}: no such file (give the sampler as FILE.py:FUNCTION)")
    if where.endswith(".py"):
        if path.is_dir():
            raise UsageError(f"{where} is a folder: name the .py file that holds the sampler")
        if not path.is_file():
            raise UsageError(f"{where}: no such file")
        sys.path.insert(0, str(path.resolve().parent))  # so the file can import its neighbours
    errors = np.geterr()
    try:
        # what the module prints goes to stderr, not into the report (--json)
        with contextlib.redirect_stdout(sys.stderr):
            if where.endswith(".py"):
                module_spec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(module_spec)
                sys.modules[path.stem] = module
                module_spec.loader.exec_module(module)
            else:
                module = importlib.import_module(where)
    except UsageError:
        raise
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if not where.endswith(".py") and not (where + ".").startswith(missing + "."):
            raise UsageError(f"{where} is found, but it imports {missing}, which is not installed "
                             f"here: install the package that provides {missing}") from None
        if where.endswith(".py"):
            raise UsageError(f"{where} is found, but it imports {missing}, which is not installed "
                             f"here (nor beside {where}): install the package that provides "
                             f"{missing}") from None
        raise UsageError(f"cannot import {where}: {e} (run from the folder that holds it, or pass "
                         f"FILE.py:FUNCTION)") from None
    except KeyboardInterrupt:  # Ctrl-C while it imports
        raise
    # the module itself fails to import (or calls sys.exit, or raises any BaseException)
    except BaseException as e:
        raise UsageError(f"importing {where} raised {type(e).__name__}: {e}") from None
    finally:  # a module's np.seterr(all="raise") is its own: the checker's statistics underflow
        np.seterr(**errors)
    fn = module
    for part in name.split("."):
        fn = getattr(fn, part, None)
    if fn is not None and not callable(fn):
        raise UsageError(f"{where}: {name} is not a function (its type: {type(fn).__name__}): name "
                         f"the sampler function")
    if not callable(fn) and getattr(module, "__file__", None) is None:  # a folder, imported bare
        raise UsageError(f"{where} is a folder (a package with no __init__.py): name the .py file "
                         f"that holds the sampler, as FILE.py:FUNCTION")
    if not callable(fn):
        functions = [n for n in dir(module) if callable(getattr(module, n))]
        near = difflib.get_close_matches(name, functions, 1)
        raise UsageError(f"{where} has no function {name!r}"
                         + (f": did you mean {near[0]}?" if near else ""))
    return fn


def number(x, digits=3):
    return "-" if x != x else f"{x:.{digits}f}" if x >= 10**-digits else f"{x:.1e}"


def table(spec, contract, values, report, controls=True):
    """One sampler's printout: a header, the negative controls (controls=True), a row per case."""
    lines = [f"{spec}: contract {contract}, {values['samples']:,} sequences per case, seed "
             f"{values['seed']}, alpha {ALPHA:g} per case"]
    if controls and report.controls:
        lines.append("negative controls (broken samplers the run must catch): " + "; ".join(
            f"{name} caught by case {case}" if case else f"{name} NOT CAUGHT"
            for name, case in report.controls))
    if report.verdict == "no verdict":
        lines.append(f"no verdict: a deliberately broken sampler passed every case at --samples "
                     f"{values['samples']:,}, so this run cannot tell a broken sampler from a "
                     "right one; raise --samples")
        return "\n".join(lines)
    width = max(len(r.name) for r in report.cases)
    lines += ["", f" #  {'case':<{width}}  {'samples':>8}  {'p-value':>8}  {'tv90':>6}  verdict"]
    # every case raised the same error (a sampler that cannot run at all): said once, below
    errors = {r.detail for r in report.cases if r.verdict == "error"}
    shared = len(report.cases) > 1 and len(errors) == 1 and all(r.verdict == "error"
                                                                 for r in report.cases)
    numbers = report.numbers or [i for i, _ in cases_of(contract, values["cases"])]
    for i, r in zip(numbers, report.cases):
        lines.append(f"{i:>2}  {r.name:<{width}}  {r.samples:>8,}  {number(r.p_value):>8}  "
                     f"{'>1' if r.tv90 >= 1 else number(r.tv90):>6}  {r.verdict}")
        if r.detail and not shared:
            lines.append(f"      {r.detail}")
    if shared:
        lines.append(f"every case: {errors.pop()}")
    passed = sum(r.verdict == "pass" for r in report.cases)
    untested = sum(r.verdict == "untested" for r in report.cases)
    tvs = [r.tv90 for r in report.cases if r.tv90 == r.tv90]  # NaN (the support case) left out
    if not tvs:
        caught = ""
    elif max(tvs) < 1:
        caught = f"; each law case catches any error of TV >= {max(tvs):.3f} with probability 0.9"
    else:  # a TV of 1 or more is no error's: too few samples for a case to promise one caught
        caught = ("; too few samples for every law case to catch even the largest error with "
                  "probability 0.9 (more --samples: a power stated)")
    # a call repeated gave another answer: draws from elsewhere, or state kept between calls
    partly = any(r.verdict == "untested" and r.detail == PARTLY for r in report.cases)
    why = ("the sampler's uniforms are not all the rng's, or it answers from state kept between "
           "calls" if partly else "the sampler's uniforms are not all the rng's")
    unset = (f", {untested} untested: {why}, so ties at u = q/p and the ends of its laws went "
             f"unchecked" if untested else "")
    lines.append(f"verdict: {report.verdict} ({passed} of {len(report.cases)} cases passed"
                 f"{unset}{caught})")
    return "\n".join(lines)


def as_json(contract, values, reports):
    """One JSON object for the run (NaN, which JSON lacks, as null)."""
    def row(i, case):
        return {"number": i, **{k: None if v != v else v for k, v in case._asdict().items()}}
    return json.dumps({"contract": contract, "samples": values["samples"], "seed": values["seed"],
                       "alpha": ALPHA,
                       "controls": [{"name": n, "caught_by": c} for n, c in reports[0][1].controls],
                       "results": [{"sampler": spec, "verdict": r.verdict,
                                    "cases": [row(i, c) for i, c in zip(r.numbers, r.cases)]}
                                   for spec, r in reports]})


def print_power(values):
    rows = power_table((values["samples"],) if values["samples"]
                       else (DEFAULT_SAMPLES, SAMPLES, SAMPLES_HIGH))
    if values["json"]:  # NaN (no error of the shape caught), which JSON lacks, as null
        return print(json.dumps([{"samples": n, "shape": how, "tv90": None if tv != tv else tv}
                                 for n, how, tv in rows]))
    print(f"smallest TV error caught with probability 0.9 at alpha {ALPHA:g} (measured by "
          f"simulation: 100 runs per point; law of 5 tokens over 3, 243 sequences)\n")
    print(f"{'samples':>8}  " + "  ".join(f"{how:>24}" for how in SHAPES))
    for n in dict.fromkeys(n for n, _, _ in rows):
        print(f"{n:>8,}  " + "  ".join(f"{'-' if tv != tv else f'{tv:.4f}':>24}"
                                       for m, _, tv in rows if m == n))
    if any(tv != tv for _, _, tv in rows):
        print("\n-: no error of that shape, up to the largest the law allows, is caught with "
              "probability 0.9 at that many samples")


class HardExit(SystemExit):  # os._exit called by a sampler or its module
    pass


@contextlib.contextmanager
def no_hard_exit():
    """os._exit raises HardExit while samplers load and run (it would end the process at once,
    with no report: exit status 0 reads as a pass)."""
    def refused(status):
        raise HardExit(f"os._exit({status}): a sampler returns its answer, it does not end the "
                       f"process")
    was = os._exit
    os._exit = refused
    try:
        yield
    finally:
        os._exit = was


def main(argv=None):
    """The command; returns its exit status (0 pass, 1 a case failed, 2 usage error, 3 no
    verdict)."""
    with no_hard_exit():
        return checked(argv)


def checked(argv):  # main's work
    try:
        specs, values = parse_command(sys.argv[1:] if argv is None else argv)
        if values["power"]:
            return print_power(values) or 0
        fns = [load(spec) for spec in specs]
        for spec, fn in zip(specs, fns):
            if problem := signature_problem(fn, values["contract"]):
                raise UsageError(f"{spec}: {problem}")
    except UsageError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    contract, values["samples"] = values["contract"], values["samples"] or DEFAULT_SAMPLES
    if (times := values["samples"] / DEFAULT_SAMPLES) >= 10:  # say so before a long wait
        print(f"--samples {values['samples']:,}: each case runs {times:,.0f} times the default's "
              f"sequences, and takes about that many times as long", file=sys.stderr, flush=True)
    out = sys.stdout  # the report's; what the samplers print goes to standard error
    with contextlib.redirect_stdout(sys.stderr):  # the samplers' prints too
        # the negative controls, run once for every sampler
        controls = run_controls(contract, values["samples"], values["seed"], values["cases"])
        reports = []
        for spec, fn in zip(specs, fns):
            if any(case is None for _, case in controls):
                report = Report("no verdict", [], controls)
            else:
                report = check_sampler(fn, contract, values["samples"], values["seed"],
                                       values["cases"], controls=False,
                                       first_failure=values["first_failure"])
                report = report._replace(controls=controls)
            reports.append((spec, report))
            if not values["json"]:
                print(table(spec, contract, values, report, controls=len(reports) == 1) + "\n",
                      file=out, flush=True)
    if values["json"]:
        print(as_json(contract, values, reports))
    verdicts = {r.verdict for _, r in reports}
    return 3 if "no verdict" in verdicts else 1 if "fail" in verdicts else 0


if __name__ == "__main__":
    sys.exit(guarded(main))  # Ctrl-C: one line and exit status 130; a closed pipe: quiet
