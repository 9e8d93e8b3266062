"""The runner's parts, each alone: what it keeps of an answer's output, the near names it
suggests, what it says while grading and where a run stopped, and the process group it ends."""
import io
import subprocess
import sys
import time

import numpy as np
import pytest

from picospec.exercises import runner
from picospec.exercises.runner import (SHOWN, Capped, captured, doing, drain, near_names, stop,
                                       take)


def test_what_an_answer_prints_keeps_its_first_600_characters_and_counts_all():
    assert SHOWN == 600
    capped = Capped()
    printed = captured(capped)
    assert printed.write("a" * 500) == 500
    assert printed.write("b" * 200) == 200  # 100 kept, 100 counted
    assert printed.write("c") == 1
    assert "".join(capped.kept) == "a" * 500 + "b" * 100
    assert capped.total == 701
    # characters, not bytes: a character of 2 bytes written a byte at a time counts once
    assert printed.buffer.write("é".encode()[:1]) == 1 and capped.total == 701
    assert printed.buffer.write("é".encode()[1:]) == 1 and capped.total == 702
    printed.close()
    with pytest.raises(ValueError):  # closed, as a file is
        printed.buffer.write(b"x")


def test_what_bypasses_print_keeps_its_first_2400_bytes_read_to_the_end():
    stream = io.BufferedReader(io.BytesIO(bytes(range(256)) * 1000), buffer_size=1000)
    kept = bytearray()
    drain(stream, kept)
    assert bytes(kept) == (bytes(range(256)) * 10)[:2400]
    assert stream.read() == b""  # read to its end, so the child never blocks on a full pipe


def test_near_names_map_each_exercise_to_the_files_first_close_function():
    # "tri" (2 * 3 / 7 = 0.86 alike) is near "trie"; "tr" (2 * 2 / 6 = 0.67) is not
    assert near_names(["tr"]) == {}
    assert near_names(["verify_chains", "verify_chainz", "tri", "trie"]) == {
        "verify_chain": "verify_chains", "trie": "tri"}
    assert near_names([]) == {}


def test_a_function_near_two_exercises_is_suggested_for_the_nearer_alone():
    # "expected_tokspeedup" is near both: "expected_tok" + "e" of expected_tokens, 2 * 13 / 34
    # = 0.76 alike; "p", "e", "cted_", "speedup" of predicted_speedup, 2 * 14 / 36 = 0.78
    assert near_names(["expected_tokspeedup"]) == {"predicted_speedup": "expected_tokspeedup"}


def test_a_progress_line_is_said_only_past_10_seconds_and_a_stop_past_the_time_left():
    said, result = [], {"verdicts": {}}

    def say(text, **kw):
        said.append(text)

    for seconds in (9.5, 10.0, 10.4, 11.0):
        take({"estimate": "trie", "seconds": seconds}, result, 12.0, say)
    assert said == ["grading trie: about 10 s", "grading trie: about 11 s"]
    assert "stopped" not in result
    take({"estimate": "trie", "seconds": 12.0}, result, 12.0, say)
    assert "stopped" not in result  # exactly the time left still fits
    take({"estimate": "trie", "seconds": 30.4}, result, -3.0, say)
    assert result["stopped"] == ("trie would take about 30 s at these --samples, more than the 0 s "
                                 "left of the time limit: lower --samples or raise --timeout")


def test_a_run_is_said_to_stop_where_it_was():
    result, say = {"verdicts": {}}, print
    assert doing(result) == "while reading the file (does it loop or exit at import?)"
    take({"loaded": ["trie"], "defined": ["trie"], "untagged": []}, result, 1, say)
    assert doing(result) == "after reading it"
    take({"start": "trie"}, result, 1, say)
    assert doing(result) == "while grading trie"
    take({"name": "trie", "passed": True}, result, 1, say)
    assert doing(result) == "after grading trie" and result["verdicts"]["trie"]["passed"]
    take({"loaded": None, "why": "SyntaxError"}, result, 1, say)
    assert result["why"] == "SyntaxError"


def test_stop_ends_the_answers_whole_process_group_and_reaps_it():

    # a child that starts a grandchild in its group, both sleeping
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)']); print(p.pid, flush=True); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               start_new_session=True)
    grandchild = int(process.stdout.readline())
    stop(process)
    assert process.returncode == -9
    process.stdout.close()
    for _ in range(200):  # the grandchild, killed with its group: gone, or a zombie
        try:
            with open(f"/proc/{grandchild}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    break
        except FileNotFoundError:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the answer's own process was left running")
    stop(process)  # a group that has ended already: nothing to do


def test_picospecs_own_answer_is_found_by_any_name_or_through_its_module():
    import picospec.tree
    from picospec.exercises.grading import own_objects
    from picospec.exercises.runner import uses_own

    assert own_objects("trie") == {picospec.tree.trie: "picospec.tree.trie"}

    def trie(sequences):
        return [], [], []

    assert uses_own("trie", {"trie": trie, "n": 3, "np": io}) is None
    assert uses_own("trie", {"trie": trie, "mine": picospec.tree.trie}) == "picospec.tree.trie"
    assert uses_own("trie", {"trie": trie, "t": picospec.tree}) == "picospec.tree.trie"
    # another exercise's answer is not this one's
    assert uses_own("residual", {"t": picospec.tree}) is None
    # the same answer elsewhere in picospec (TWINS): the batched residual, one draft's step
    from picospec.batched.rejection import recovered_probs
    from picospec.verify import accept_or_resample

    assert uses_own("residual", {"r": recovered_probs}) == (
        "picospec.batched.rejection.recovered_probs")
    assert uses_own("verify_chain", {"a": accept_or_resample}) == (
        "picospec.verify.accept_or_resample")


def test_picospecs_own_answer_run_by_the_first_call_is_found_however_reached(monkeypatch):
    """In a learner's file, an answer that reaches picospec's own answer where no name of the
    file holds it (a dotted path through the package, an import inside the function, a class's
    method) is told so by what its first call runs; a right answer (calling the sampler the
    statement names, picospec.sampling.sample) is not, and grade() called directly, as the
    notebooks call it on picospec's own answers, allows them."""
    import picospec.verify
    from picospec.exercises import EXERCISES, grading
    from tests.support import learner_answers

    assert EXERCISES["residual"].grade(picospec.sampling.residual).passed
    monkeypatch.setattr(grading, "FORBID_OWN", True)

    def dotted(drafts, P, Q, rng):
        return picospec.verify.verify_chain(drafts, P, Q, rng)

    def inside(q, p):
        from picospec.sampling import residual
        return residual(q, p)

    def through_a_class(corpus, context, max_suffix):
        import picospec.rest
        return picospec.rest.Datastore.build(np.array(corpus), max_suffix).search(context, 1,
                                                                                   1)[1]

    for name, fn, own in (("verify_chain", dotted, "picospec.verify.verify_chain"),
                          ("residual", inside, "picospec.sampling.residual"),
                          ("longest_suffix", through_a_class, "picospec.rest.Datastore")):
        verdict = EXERCISES[name].grade(fn, samples=300)
        assert verdict.failed == "uses picospec's own answer" and own in str(verdict), verdict
    for name in ("verify_chain", "residual", "longest_suffix"):
        right = EXERCISES[name].grade(getattr(learner_answers, name), samples=300)
        assert right.failed != "uses picospec's own answer", right


def test_the_time_left_handed_on_with_each_event_only_shrinks(tmp_path, monkeypatch):
    """Each event of the child is taken with the time left of the limit: less than the limit
    from the first, and less with each event after."""
    from picospec.exercises import runner

    lefts = []

    def spy(event, result, left, say):
        lefts.append(left)
        take(event, result, left, say)

    monkeypatch.setattr(runner, "take", spy)
    path = tmp_path / "mine.py"
    path.write_text("import numpy as np\n\n\ndef residual(q, p):\n    r = np.maximum(q - p, 0)\n"
                    "    return r / r.sum()\n")
    result = runner.grade_in_process(path, ["residual"], 300, 0, 50.0, say=print)
    assert result["verdicts"]["residual"]["passed"], result
    assert len(lefts) >= 3  # read, start, verdict, printed
    assert all(0 < left < 50.0 for left in lefts)
    assert lefts == sorted(lefts, reverse=True)


def test_a_gradings_time_is_estimated_from_two_runs_its_fixed_cost_counted_once(monkeypatch):
    """A grading of n sequences taking 2 s + 0.01 s x n: runs of 100 and 300 take 3 s and 5 s,
    so 20,000 take 5 + 19,700 x 0.01 = 202 s (not 3 s x 200 = 600 s, the fixed 2 s counted 200
    times); one taking longer at 100 than at 300 (a busy moment) counts the 300's time alone."""
    clock = [0.0]
    monkeypatch.setattr(runner.time, "perf_counter", lambda: clock[0])

    class Graded:
        def __init__(self, cost):
            self.cost, self.asked = cost, []

        def grade(self, fn, samples, seed):
            self.asked.append((samples, seed))
            clock[0] += self.cost(samples)

    module = Graded(lambda n: 2.0 + 0.01 * n)
    assert runner.estimate(module, None, 20_000, 7) == 202.0
    assert module.asked == [(100, 7), (300, 7)]
    busy = Graded(lambda n: 9.0 if n == 100 else 5.0)
    assert runner.estimate(busy, None, 20_000, 0) == 5.0


def raised_by(path, name, *args):
    """What the runner says of the exception that `name` of the answers read from path raises."""
    from picospec.exercises.answers import read_answers

    fn = read_answers(path)[name]
    try:
        fn(*args)
    except Exception as e:
        return runner.raised(e, path)
    raise AssertionError(f"{name} raised nothing")


def test_an_exception_in_a_notebook_names_its_cell_and_line(tmp_path):
    """An answer cell, the notebook's second code cell (cell 1 from 0), raising on its line 3:
    the error is placed "at nb.ipynb cell 1, line 3"."""
    import json

    answer = {"cell_type": "code", "metadata": {"tags": ["answer"], "exercise": "trie"},
              "source": "def trie(sequences):\n    x = 1\n    return {}['missing']\n"}
    cells = [{"cell_type": "code", "metadata": {}, "source": "y = 2\n"}, answer]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert raised_by(path, "trie", [[1]]) == "KeyError: 'missing' (at nb.ipynb cell 1, line 3)"


def test_an_exception_in_a_function_of_the_learners_is_placed_at_its_raise(tmp_path):
    """trie calls the learner's own function count, which raises: the error is placed at
    count's line 5, where it raised, not at line 9, where trie called it."""
    path = tmp_path / "mine.py"
    path.write_text("import numpy as np\n\n\ndef count(sequences):\n    return len(sequences) / 0"
                    "\n\n\ndef trie(sequences):\n    return count(sequences), [], []\n")
    assert raised_by(path, "trie", [[1]]) == ("ZeroDivisionError: division by zero (at mine.py, "
                                              "line 5)")


def test_a_private_function_is_never_offered_as_a_near_name(tmp_path, monkeypatch):
    """A file defining _trie (leading underscore: the learner's own private function) and tri:
    the file's functions read by the grading process list tri alone, so "did you mean" offers
    tri for trie, never _trie (which sorts first and is as near)."""
    import json
    import sys

    from picospec.exercises import grading

    monkeypatch.setattr(sys, "stdout", sys.stdout)  # the reading replaces both streams
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    monkeypatch.setattr(grading, "FORBID_OWN", grading.FORBID_OWN)
    path, events = tmp_path / "mine.py", tmp_path / "events"
    path.write_text("def _trie(sequences):\n    return [], [], []\n\n\n"
                    "def tri(sequences):\n    return [], [], []\n")
    runner.child(str(path), str(events), 300, 0, [])
    loaded = json.loads(events.read_text().splitlines()[0])
    assert loaded["defined"] == ["tri"], loaded
    assert near_names(loaded["defined"]) == {"trie": "tri"}
    assert near_names(["_trie", "tri"]) == {"trie": "_trie"}  # were it listed, it would win
