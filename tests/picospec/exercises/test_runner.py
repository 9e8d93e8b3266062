"""Each answer file graded in its own process (picospec/exercises/runner.py): an answer that
exits, kills its process, loops (in a function or at import), prints megabytes or raises is
reported as what it did, with its file and line, and never decides the grader's exit status or
silences the other learners; a grading that would outlast the time limit says so at once."""
import json

import pytest

from picospec.exercises import EXERCISES

from tests.support.clitools import ROOT, run_here

LEARNER = (ROOT / "tests" / "support" / "learner_answers.py").read_text(encoding="utf-8")
SLOW = 2  # seconds: the time limit of the tests that loop
# seconds: the time limit of tests whose answer ends at once, so that a grader that fails to see
# the end (and waits) fails them within it
BOUND = 20


def grade(folder, *args):
    return run_here(["-m", "picospec.exercises", "grade", *map(str, args)], folder)


def answer(tmp_path, text, name="mine.py"):
    path = tmp_path / name
    path.write_text("import numpy as np\n\n\n" + text + "\n")
    return path


RESIDUAL = "def residual(q, p):\n    r = np.maximum(q - p, 0)\n    return r / r.sum()\n\n\n"


@pytest.mark.parametrize("code", [0, 3])
def test_sys_exit_in_a_function_is_its_failure(tmp_path, code):
    path = answer(tmp_path, RESIDUAL + f"def trie(sequences):\n    import sys\n"
                  f"    sys.exit({code})")
    r = grade(tmp_path, path, "--exercise", "trie", "--timeout", BOUND)
    assert r.returncode == 1, r.stdout + r.stderr
    assert (f"trie: FAIL\n  your function raised SystemExit({code}) (at mine.py, line 11): "
            f"sys.exit() ends a program") in r.stdout
    both = grade(tmp_path, path, "--samples", "300")
    assert "residual: pass" in both.stdout and both.returncode == 1


@pytest.mark.parametrize("exit_call", ["import sys\nsys.exit(0)", "import os\nos._exit(0)",
                                       "raise KeyboardInterrupt"])
def test_an_exit_at_import_fails_the_file_and_the_class_goes_on(tmp_path, exit_call):
    folder = tmp_path / "class"
    folder.mkdir()
    answer(folder, exit_call, "ann.py")
    (folder / "bob.py").write_text(LEARNER)
    r = grade(tmp_path, folder, "--exercise", "predicted_speedup", "--timeout", BOUND)
    rows = [line.split() for line in r.stdout.splitlines() if line.endswith("of 1")]
    assert r.returncode == 1, r.stdout + r.stderr
    assert rows == [["ann.py", "x", "0", "of", "1"], ["bob.py", "pass", "1", "of", "1"]]
    assert "ann.py: " in r.stdout and ("reading it raised" in r.stdout
                                        or "ended the grading process" in r.stdout)


@pytest.mark.parametrize("where", ["function", "import"])
def test_an_answer_that_loops_is_stopped_and_the_class_goes_on(tmp_path, where):
    folder = tmp_path / "class"
    folder.mkdir()
    looping = "def predicted_speedup(E, c, K, c_d):\n    while True:\n        pass"
    loop = looping if where == "function" else "while True:\n    pass"
    answer(folder, loop, "ann.py")
    (folder / "bob.py").write_text(LEARNER)
    # (the quickest grading, so that bob's right answer ends well within the limit on a busy
    # machine)
    r = grade(tmp_path, folder, "--exercise", "predicted_speedup", "--timeout", SLOW)
    assert r.returncode == 1
    assert f"past the time limit of {SLOW} s (--timeout), " + (
        "while grading predicted_speedup" if where == "function" else "while reading the file"
    ) in r.stdout
    assert "bob.py  pass  1 of 1" in " ".join(r.stdout.split("\n")).replace("   ", "  ")


def test_what_an_answer_prints_is_captured_and_cut(tmp_path):
    path = answer(tmp_path, "def predicted_speedup(E, c, K, c_d):\n    print('x' * 100_000)\n"
                  "    return E / (c + K * c_d)")
    r = grade(tmp_path, path, "--exercise", "predicted_speedup")
    assert r.returncode == 0, r.stdout
    assert "mine.py printed " in r.stdout and "characters while graded; the first:" in r.stdout
    assert len(r.stdout) < 5_000


def test_a_right_answer_may_use_its_output_as_a_file_is_used(tmp_path):
    """The captured output is a text stream as a file's (not a terminal's): isatty() is False,
    it has an encoding, writelines, a buffer of bytes and reconfigure, and fileno() is a real
    descriptor (faulthandler.enable() takes it; what faulthandler writes there is shown)."""
    path = answer(tmp_path, "import faulthandler\nimport sys\n\nfaulthandler.enable()\n"
                  "print('a terminal?', sys.stdout.isatty(), sys.stderr.isatty(), flush=True)\n"
                  "sys.stdout.reconfigure(line_buffering=True)\n"
                  "sys.stdout.writelines(['encoding ', sys.stdout.encoding, '\\n'])\n"
                  "sys.stdout.buffer.write('bytes \u00e9\\n'.encode())\n"
                  "sys.stderr.write('to stderr\\n')\n"
                  "faulthandler.dump_traceback(all_threads=False)\n\n\n" + RESIDUAL)
    r = grade(tmp_path, path, "--exercise", "residual", "--timeout", BOUND)
    assert r.returncode == 0 and "residual: pass" in r.stdout, r.stdout + r.stderr
    assert ("mine.py printed 57 characters while graded; the first:\n    a terminal? False False\n"
            "    encoding utf-8\n    bytes \u00e9\n    to stderr\n    Stack (most recent call "
            "first)") in r.stdout, r.stdout
    assert r.stderr == ""


def test_output_past_print_neither_blocks_nor_floods(tmp_path):
    """200 kB written straight to the output's file descriptor (as a C library writes, past print)
    is more than a pipe holds: the answer is still graded, not stopped at the time limit."""
    path = answer(tmp_path, "import os\n\nos.write(1, b'x' * 200_000)\n\n\n"
                  + LEARNER.split("\n\n\n", 1)[1])
    r = grade(tmp_path, path, "--exercise", "predicted_speedup", "--timeout", 20)
    assert r.returncode == 0 and "past the time limit" not in r.stdout, r.stdout
    assert len(r.stdout) < 5_000


def test_output_past_print_is_shown_after_what_was_printed(tmp_path):
    """Bytes written to the answer's file descriptors 1 and 2 (past print) are read from its one
    pipe, shown after what print wrote, and decoded as UTF-8 with U+FFFD for a byte that is not:
    none of it reaches the grader's own error stream, and none of it breaks the grader."""
    path = answer(tmp_path, "import os\n\nprint('said')\nos.write(1, b'one \\xff\\n')\n"
                            "os.write(2, b'two\\n')\n\n\n" + LEARNER.split("\n\n\n", 1)[1])
    r = grade(tmp_path, path, "--exercise", "predicted_speedup")
    assert r.returncode == 0 and "predicted_speedup: pass" in r.stdout, r.stdout + r.stderr
    assert "; the first:\n    said\n    one \ufffd\n    two\n" in r.stdout, r.stdout + r.stderr
    assert r.stderr == ""


def test_the_last_words_of_an_answer_that_ends_its_process_are_shown(tmp_path):
    """A file that writes past print (as a C library that gives up does) and ends its process:
    printed nothing, it is still shown, under the line that says the process ended."""
    path = answer(tmp_path, "import os\n\nos.write(2, b'boom: gave up\\n')\nos._exit(3)")
    r = grade(tmp_path, path, "--exercise", "trie", "--timeout", BOUND)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("mine.py: the answer ended the grading process (exit status 3), "
                               "while reading the file"), r.stdout
    assert "\nmine.py wrote to its output while graded; the first:\n    boom: gave up\n" in r.stdout


def test_an_exception_names_the_learners_file_and_line(tmp_path):
    path = answer(tmp_path, "def trie(sequences):\n    return {}['missing']")
    r = grade(tmp_path, path, "--exercise", "trie")
    assert "KeyError" in r.stdout and "(at mine.py, line 5)" in r.stdout


def test_a_byte_order_mark_is_read_as_python_reads_it(tmp_path):
    path = tmp_path / "notepad.py"
    path.write_bytes(LEARNER.encode("utf-8-sig"))
    r = grade(tmp_path, path, "--exercise", "predicted_speedup")
    assert r.returncode == 0 and "predicted_speedup: pass" in r.stdout, r.stdout


def test_a_grading_past_the_time_limit_says_so_before_it_runs(tmp_path):
    """A law-graded answer asked for 200,000 sequences a case: the first calls are timed, and the
    run that would outlast the limit (by about 30 times) stops at once with what to do."""
    path = answer(tmp_path, LEARNER)
    r = grade(tmp_path, path, "--exercise", "verify_chain", "--samples", "200000", "--timeout", 20)
    assert r.returncode == 1
    assert "verify_chain would take about" in r.stdout
    assert "lower --samples or raise --timeout" in r.stdout


def test_a_function_in_an_untagged_notebook_cell_is_named_as_such(tmp_path):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": RESIDUAL},
                    {"cell_type": "code", "metadata": {"tags": ["answer"], "exercise": "trie"},
                     "source": "x = 1"}]}
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    r = grade(tmp_path, tmp_path / "nb.ipynb", "--exercise", "residual")
    assert "residual is defined in a cell without the 'answer' tag: tag that cell" in r.stdout


def test_every_exercise_is_reported_even_when_none_is_defined(tmp_path):
    path = answer(tmp_path, "def unrelated():\n    return 1")
    r = grade(tmp_path, path)
    assert r.returncode == 1
    assert all(f"{name}: FAIL\n  not answered" in r.stdout for name in EXERCISES)


@pytest.mark.parametrize("text, why", [("def residual(q, p:\n", "SyntaxError"),
                                       ("import sys\nsys.exit(3)\n", "SystemExit(3)"),
                                       (b"x = '\xff'\n", "not UTF-8")])
def test_a_file_that_cannot_be_read_is_named_once(tmp_path, text, why):
    """One note, the true one: the file was read and failed; the process did not end early."""
    path = tmp_path / "mine.py"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    r = grade(tmp_path, path, "--exercise", "residual")
    notes = [line for line in r.stdout.splitlines() if line.startswith("mine.py: ")]
    assert len(notes) == 1 and why in notes[0], r.stdout
    assert "ended the grading process" not in r.stdout


def test_a_near_name_is_suggested_only_for_a_function_the_file_defines(tmp_path):
    """"tries", imported from elsewhere, and "tree", a number, are near "trie" but no function
    of the file: no rename is suggested for them; "tri", a function it defines, is."""
    path = answer(tmp_path, "from os.path import join as tries\n\ntree = 5\n")
    r = grade(tmp_path, path, "--exercise", "trie")
    assert "trie: FAIL\n  not answered: the file defines no function trie\n" in r.stdout, r.stdout
    path = answer(tmp_path, "def tri(sequences):\n    return [], [], []\n", "near.py")
    r = grade(tmp_path, path, "--exercise", "trie")
    assert "no function trie (did you mean tri? rename it trie)" in r.stdout, r.stdout


@pytest.mark.parametrize("ending", ["import sys\n    sys.exit(2)", "raise KeyboardInterrupt"])
def test_the_exercises_after_one_that_exits_are_still_graded(tmp_path, ending):
    """residual ends its process (or raises Ctrl-C's exception): it fails, and trie, graded
    after it, still passes."""
    import inspect

    from tests.support import learner_answers

    path = answer(tmp_path, f"def residual(q, p):\n    {ending}\n\n\n"
                  + inspect.getsource(learner_answers.trie))
    r = grade(tmp_path, path, "--exercise", "residual")
    assert "residual: FAIL\n  your function raised " in r.stdout, r.stdout + r.stderr
    r = grade(tmp_path, path)
    assert "residual: FAIL" in r.stdout and "trie: pass" in r.stdout, r.stdout + r.stderr


def test_a_stub_left_as_it_is_is_marked_not_answered_in_the_class_table(tmp_path):
    """A learner who left trie's stub raising NotImplementedError gets "-" in the table and is
    listed as not answering it, not as failing it."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ann.py").write_text("import numpy as np\n\n\n" + EXERCISES["trie"].STUB + "\n")
    r = grade(tmp_path, folder, "--exercise", "trie")
    rows = [line.split() for line in r.stdout.splitlines() if line.endswith("of 1")]
    assert rows == [["ann.py", "-", "0", "of", "1"]], r.stdout + r.stderr
    assert "ann.py: not answered: trie" in r.stdout and "ann.py trie: FAIL" not in r.stdout
