"""`python -m picospec.exercises grade`: what a teacher reads of a class (the table, its marks and
counts, the notes below it, --json and --csv) and the exit status, worked out by hand from the
results the graders hand back. The grading process is replaced by fixed results, so each case is
quick and names exactly what the command did with them."""
import csv
import io
import json
from pathlib import Path

import pytest

from picospec.exercises import EXERCISES, runner

from tests.support.clitools import run_here

NAMES = list(EXERCISES)
FIRST, SECOND = NAMES[0], NAMES[1]


def passed(name):
    return {"name": name, "passed": True, "line": "pass", "text": f"{name}: pass"}


def failed(name, answered=True):
    """A failure; an answer's raise or its use of picospec's own answer names no `answered`."""
    return {"name": name, "passed": False, "line": f"FAIL at case {name}",
            "text": f"{name}: FAIL\n  case {name}", **({} if answered else {"answered": False})}


def loaded(verdicts, defined=(), untagged=(), names=None, **more):
    """What a file that read yields: the exercises it defines (those graded unless named)."""
    names = [v["name"] for v in verdicts] if names is None else names
    return {"loaded": names, "defined": list(defined),
            "untagged": list(untagged), "verdicts": {v["name"]: v for v in verdicts}, **more}


# each learner's results, as grade_in_process returns them
CLASS = {
    "ann.py": loaded([passed(n) for n in NAMES]),
    # a failure, a stub left as it is, ten passes; it printed two lines
    "bob.py": loaded([failed(FIRST), failed(SECOND, answered=False)]
                     + [passed(n) for n in NAMES[2:]], printed=1234, head="hello\nworld\n"),
    "cyd.py": {"verdicts": {}, "why": "SyntaxError: invalid syntax (line 3)"},
    # nothing under an exercise's name: one near name, one function in an untagged cell
    "dan.py": loaded([], defined=["verify_chains"], untagged=["trie"]),
    # stopped after grading three: the rest not graded
    "eve.py": loaded([passed(n) for n in NAMES[:3]], names=NAMES,
                     stopped="stopped after 5 s, past the limit"),
}


@pytest.fixture
def calls(monkeypatch):
    """Each call of the grader: (file name, names, samples, seed, limit); results from CLASS."""
    made = []

    def fake(path, names, samples, seed, limit, say=print):
        made.append((Path(path).name, list(names), samples, seed, limit))
        say(f"grading {names[0]}: about 20 s", flush=True)
        name = Path(path).name  # ann_twin.py: ann.py's results
        return json.loads(json.dumps(CLASS.get(name) or CLASS[name.split("_")[0] + ".py"]))

    monkeypatch.setattr(runner, "grade_in_process", fake)
    return made


def classroom(tmp_path, names):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in names:
        (folder / name).write_text("import numpy as np\n")
    (folder / "notes.txt").write_text("not graded")
    return folder


def grade(tmp_path, *args):
    return run_here(["-m", "picospec.exercises", "grade", *map(str, args)], tmp_path)


def test_the_class_table_rows_marks_counts_and_notes(tmp_path, calls):
    r = grade(tmp_path, classroom(tmp_path, CLASS))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    width = len("ann.py")  # the longest file name
    assert lines[0] == "learner  " + "  ".join(f"{i:>4}" for i in range(1, 13))
    x, dash = ["   x"] * 12, ["   -"] * 12
    by_hand = {
        "ann.py": (["pass"] * 12, 12),
        "bob.py": (["FAIL", "   -"] + ["pass"] * 10, 10),
        "cyd.py": (x, 0),
        "dan.py": (dash, 0),
        "eve.py": (["pass"] * 3 + x[3:], 3),
    }
    rows = [line for line in lines if line.endswith(" of 12")]
    assert rows == [f"{name:<{width}}  " + "  ".join(marks) + f"  {k} of 12"
                    for name, (marks, k) in by_hand.items()]
    assert "columns: " + ", ".join(f"{i} {n}" for i, n in enumerate(NAMES, 1)) in lines
    assert f"bob.py {FIRST}: FAIL at case {FIRST}" in lines
    assert f"bob.py {SECOND}: FAIL at case {SECOND}" not in lines
    assert f"bob.py: not answered: {SECOND}" in lines
    assert "bob.py printed 1,234 characters while graded; the first:" in lines
    assert lines[lines.index("bob.py printed 1,234 characters while graded; the first:") + 1:][
        :2] == ["    hello", "    world"]
    assert "cyd.py: SyntaxError: invalid syntax (line 3)" in lines
    assert "cyd.py: not answered" not in r.stdout
    assert ("dan.py verify_chain: not answered: the file defines no function verify_chain "
            "(did you mean verify_chains? rename it verify_chain)") in lines
    assert ("dan.py trie: not answered: the file defines no function trie in an answer cell "
            "(trie is defined in a cell without the 'answer' tag: tag that cell)") in lines
    assert "dan.py residual: " not in r.stdout  # no hint to give: in the not-answered line only
    assert f"dan.py: not answered: {', '.join(NAMES)}" in lines
    assert "eve.py: stopped after 5 s, past the limit" in lines
    assert "eve.py: not answered" not in r.stdout
    assert lines[-1] == "1 of 5 learners pass every exercise graded"
    assert [c[0] for c in calls] == list(CLASS)  # the notes file is not graded


def test_a_file_not_graded_says_why_in_full(tmp_path, calls):
    for name, why in (("cyd.py", "the file could not be read"),
                      ("eve.py", "the run stopped before it")):
        path = tmp_path / name
        path.write_text("import numpy as np\n")
        r = grade(tmp_path, path)
        assert r.returncode == 1
        assert f"{NAMES[-1]}: FAIL\n  not graded: {why}\n" in r.stdout
    assert f"{FIRST}: FAIL\n  not graded" not in r.stdout  # eve's first three passed


def test_a_class_passes_when_each_learner_passes_every_exercise_graded(tmp_path, calls):
    folder = classroom(tmp_path, ["ann.py"])
    assert grade(tmp_path, folder).stdout.splitlines()[-1] == (
        "1 of 1 learners pass every exercise graded")
    assert grade(tmp_path, folder).returncode == 0
    # bob fails the first exercise only: graded on another he passes, and so does the class
    (folder / "bob.py").write_text("")
    one = grade(tmp_path, folder, "--exercise", NAMES[5])
    assert one.returncode == 0, one.stdout
    assert [line.split() for line in one.stdout.splitlines() if line.endswith(" of 1")] == [
        ["ann.py", "pass", "1", "of", "1"], ["bob.py", "pass", "1", "of", "1"]]
    assert one.stdout.splitlines()[0] == "learner     1"
    assert grade(tmp_path, folder, "--exercise", FIRST).returncode == 1
    assert grade(tmp_path, folder, "--exercise", SECOND).returncode == 1  # a stub: not a pass
    # the learner column is as wide as the longest file name
    (folder / "ann_twin.py").write_text("")
    lines = [line for line in grade(tmp_path, folder, "--exercise", NAMES[5]).stdout.splitlines()
             if line.startswith(("learner", "ann", "bob")) and "printed" not in line]
    # 11 characters of ann_twin.py, two spaces, then each mark right-aligned in 4
    assert lines == ["learner" + " " * 9 + "1", "ann.py" + " " * 7 + "pass  1 of 1",
                     "ann_twin.py  pass  1 of 1", "bob.py" + " " * 7 + "pass  1 of 1"]


def test_a_file_exit_status_and_count(tmp_path, calls):
    path = tmp_path / "bob.py"
    path.write_text("")
    r = grade(tmp_path, path, "--samples", "500", "--seed", "3", "--timeout", "7.5")
    assert r.returncode == 1
    assert calls[-1] == ("bob.py", NAMES, 500, 3, 7.5)
    assert r.stdout.splitlines()[-1] == "10 of 12 exercises pass (see above)"
    assert r.stdout.splitlines()[0] == f"grading {FIRST}: about 20 s"
    assert f"{FIRST}: FAIL\n  case {FIRST}\n\n" in r.stdout
    ok = grade(tmp_path, path, "--exercise", NAMES[4])
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1] == "1 of 1 exercises pass"
    assert calls[-1] == ("bob.py", [NAMES[4]], 20_000, 0, 300.0)  # the defaults
    assert grade(tmp_path, path, "--exercise", NAMES[4], "--seed", "0").returncode == 0
    assert f"{FIRST}:" not in ok.stdout


def test_the_class_as_json_and_csv(tmp_path, calls):
    folder = classroom(tmp_path, ["bob.py", "cyd.py", "dan.py"])
    as_json = grade(tmp_path, folder, "--json")
    assert as_json.returncode == 1
    table = json.loads(as_json.stdout)  # the progress line is not printed into it
    assert table["exercises"] == NAMES
    bob, cyd, dan = table["learners"]
    assert (bob["file"], bob["passed"], bob["of"]) == ("bob.py", 10, 12)
    assert bob["verdicts"][FIRST] == f"FAIL at case {FIRST}"
    assert bob["verdicts"][NAMES[2]] == "pass"
    assert bob["notes"] == ["bob.py printed 1,234 characters while graded; the first:\n    hello"
                            "\n    world"]
    assert (cyd["passed"], cyd["notes"]) == (0, ["cyd.py: SyntaxError: invalid syntax (line 3)"])
    assert cyd["verdicts"][FIRST] == "not graded: the file could not be read"
    assert dan["verdicts"]["trie"].startswith("not answered: the file defines no function trie")
    as_csv = grade(tmp_path, folder, "--csv")
    assert as_csv.returncode == 1
    rows = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows[0] == ["learner", *NAMES, "passed", "of", "notes"]
    assert rows[1][0] == "bob.py" and rows[1][-3:-1] == ["10", "12"]
    assert rows[1][1:3] == [f"FAIL at case {FIRST}", f"FAIL at case {SECOND}"]
    assert rows[2][-3:] == ["0", "12", "cyd.py: SyntaxError: invalid syntax (line 3)"]
    assert len(rows) == 4
    assert "\r" not in as_csv.stdout  # lines end as the command's other output does, in "\n"
    (tmp_path / "all").mkdir()
    passing = classroom(tmp_path / "all", ["ann.py"])
    for flag in ("--json", "--csv"):
        assert grade(tmp_path, passing, flag).returncode == 0
