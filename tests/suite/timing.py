"""The test suite's cost: run it as CI does, then list where the time went.

    # the whole suite on 2 workers: wall time, the 40 slowest
    python -m tests.suite.timing
    python -m tests.suite.timing --marks "not slow"         # the quick tier
    python -m tests.suite.timing --out docs/results/suite.md   # once per kernel family

Each test's time is its wall time inside its pytest-xdist worker (pytest's --junitxml), so the sums
per file are what a file costs the workers; the suite's wall time and the CPU time of all its
processes are measured around it. The exit status is pytest's: non-zero when a test fails.
"""
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from tools.page import page_of_output

ROOT = Path(__file__).resolve().parents[2]


def run_suite(workers, marks, xml):
    """pytest as CI runs it, results into the JUnit file xml -> (exit status, wall s, CPU s)."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    argv += ["-n", str(workers), "--dist", "worksteal"] if workers > 1 else []
    argv += ["-m", marks] if marks else []
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.returncode, wall, cpu


def cases(xml):
    """[(file, test name, seconds, outcome)] from pytest's JUnit file."""
    out = []
    for case in ET.parse(xml).iter("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        module = case.get("classname") or case.get("name")  # a module skipped whole has no class
        parts = module.split(".")  # tests.picospec.test_eagle, then a class's name if any
        last = max(i for i, part in enumerate(parts) if part.startswith("test_"))
        out.append(("/".join(parts[:last + 1]) + ".py", case.get("name"),
                    float(case.get("time") or 0), outcome))
    return out


def main(workers=2, marks=None, slowest=40, out=None):
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        status, wall, cpu = run_suite(workers, marks, Path(tmp) / "suite.xml")
        found = cases(Path(tmp) / "suite.xml") if (Path(tmp) / "suite.xml").exists() else []
    if status not in (0, 1) or not found:  # 0 passed, 1 a test failed; else pytest did not run
        raise ValueError(f"pytest ran no test (exit status {status})"
                         + (f": check --marks {marks!r}" if marks else ""))
    outcomes = Counter(c[3] for c in found)
    per_file = Counter()
    for file, _, seconds, _ in found:
        per_file[file] += seconds
    selected = f"`-m \"{marks}\"`" if marks else "every test"
    with page_of_output(out, threads=f"{workers} pytest-xdist workers, one BLAS thread each"):
        print(f"Suite: {selected}, {workers} worker(s): {wall:.0f} s wall, {cpu:.0f} s CPU in all "
              f"its processes; {len(found)} tests: "
              + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))
              + f"; 1-minute load {load:.2f} before the run.\n")
        print("| file | seconds in workers |\n|---|---|")
        for file, seconds in per_file.most_common(15):
            print(f"| `{file}` | {seconds:.1f} |")
        print(f"\nThe {slowest} slowest tests:\n\n| seconds | test |\n|---|---|")
        for file, name, seconds, _ in sorted(found, key=lambda c: -c[2])[:slowest]:
            print(f"| {seconds:.1f} | `{file}::{name}` |")
        failed = [f"`{file}::{name}` ({outcome})" for file, name, _, outcome in found
                  if outcome in ("failure", "error")]
        if failed:
            print("\nFailed:\n\n" + "\n".join(f"- {f}" for f in failed))
    if status != 0:
        raise SystemExit(status)


if __name__ == "__main__":
    from tools.families import command
    from picospec_cli import Option

    command(main, [Option("workers", int, 2, "pytest-xdist workers (1: no xdist)", low=1, high=64),
                   Option("marks", str, None,
                          "run only tests matching this marker expression, e.g. 'not slow'"),
                   Option("slowest", int, 40, "how many of the slowest tests to list", low=1),
                   Option("out", "out", None,
                          "also write the results page here (docs/results/suite.md)")])
