"""The curated mutant list (tests/suite/mutants.py) is well formed, so it cannot rot silently: every
mutant's text occurs exactly once in its file, its test files exist, the five bugs the suite once
missed are on it, and every area and every method of the table has a mutant on its rule and one on
its record. The mutants themselves are not run here (that is `python -m tests.suite.mutants`,
minutes); only the list is read."""
import subprocess
import sys
from pathlib import Path

from tests.suite.mutants import KINDS, MUTANTS, Mutant, problems
from picospec.methods import TABLE

ROOT = Path(__file__).resolve().parents[2]
AREAS = {"sampling", "verify", "rejection", "batch", "cache", "tree", "methods",
         "record"} | set(TABLE)
ONCE_MISSED = {"verify-tree-origins", "batch-generators-by-row", "medusa-typical-max",
               "medusa-hidden-one-row-early",
            "recovered-reuses-accept-uniform"}


def test_every_mutant_text_occurs_exactly_once():
    assert problems() == []


def test_a_rotten_mutant_is_reported():
    """The check can fail: a text that is gone, or occurs twice, or a test file that does not
    exist."""
    gone = Mutant("gone", "verify", "rule", "picospec/verify.py", "this text is nowhere", "x",
                  ("tests/picospec/test_tree.py",), "")
    twice = gone._replace(name="twice", old="np.")
    no_test = gone._replace(name="no_test", old="def step_record(",
                            tests=("tests/test_nothing.py",))
    found = problems([gone, twice, no_test])
    assert any("gone: its text occurs 0 times" in f for f in found)
    assert any(f.startswith("twice: its text occurs") and "0 times" not in f for f in found)
    assert any("no_test: no test file tests/test_nothing.py" in f for f in found)


def test_the_list_covers_the_issue_every_area_and_every_method():
    names = {m.name for m in MUTANTS}
    assert ONCE_MISSED <= names
    assert {m.area for m in MUTANTS} >= AREAS and all(m.kind in KINDS for m in MUTANTS)
    for method in TABLE:
        kinds = {m.kind for m in MUTANTS if m.area == method}
        assert kinds == set(KINDS), (f"method {method} needs a 'rule' and a 'record' mutant; has "
                                     f"{sorted(kinds)}")


def test_list_and_unknown_names_through_the_door():
    run = [sys.executable, "-m", "tests.suite.mutants"]
    listed = subprocess.run(run + ["--list"], cwd=ROOT, capture_output=True, text=True)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == len(MUTANTS)
    wrong = subprocess.run(run + ["--only", "no-such-mutant"], cwd=ROOT, capture_output=True,
                           text=True)
    assert wrong.returncode == 2 and "unknown mutant no-such-mutant" in wrong.stderr
