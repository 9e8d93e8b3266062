"""When the grader ends its wait for an answer's process, for any reason (Ctrl-C, SIGTERM, its own
end), takes that process's whole group with it: the answer's file and what it started are never
left running. Ctrl-C is one line and exit 130, SIGTERM one line and exit 143 (128 + the signal)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.clitools import ROOT, sigint_as_in_a_terminal

SLEEP = "__import__('time').sleep(600)"
# the answer's processes: its own, and a grandchild it starts that shares its standard output
GRANDCHILD = ("import subprocess, sys\n"
              "kid = subprocess.Popen([sys.executable, '-c', \"import time; time.sleep(600)\"])\n")
LEARNERS = {  # the file, its PIDs written to PIDS once every process is running
    "import": f"import os\nPIDS.write_text(str(os.getpid()))\n{SLEEP}\n",
    "function": f"import os\n\n\ndef trie(sequences):\n    PIDS.write_text(str(os.getpid()))\n"
                f"    {SLEEP}\n",
    "grandchild": f"import os\n{GRANDCHILD}PIDS.write_text(f'{{os.getpid()}} {{kid.pid}}')\n"
                  f"{SLEEP}\n",
}


def running(pid):
    """Whether process `pid` runs: a zombie (ended, not yet reaped by init) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no /proc here: a process that answers runs
        return True


def start_grading(tmp_path, learner, *options, stdin=None):
    """The grader, a real process on `learner` (with `options`), and the PIDs of the answer's
    processes once they all run."""
    pids = tmp_path / "pids"
    path = tmp_path / "mine.py"
    path.write_text(f"from pathlib import Path\nPIDS = Path({str(pids)!r})\n{learner}")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    grader = subprocess.Popen([sys.executable, "-m", "picospec.exercises", "grade", str(path),
                               "--exercise", "trie", *options], cwd=tmp_path, env=env,
                              stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, preexec_fn=sigint_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while not pids.exists() or not pids.read_text():
        assert grader.poll() is None, grader.communicate()
        assert time.monotonic() < deadline, "the answer never started"
        time.sleep(0.05)
    return grader, [int(p) for p in pids.read_text().split()]


def assert_ended(pids):
    """Every process of `pids` ends within a generous bound; any left is killed, then named."""
    deadline = time.monotonic() + 20
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in pids if running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"the answer's processes still ran after the grader ended: {left}"


def finish(grader, pids, timeout):
    """-> the grader's (stdout, stderr) within timeout s; the grader and the answer's `pids` are
    ended however it goes."""
    try:
        return grader.communicate(timeout=timeout)
    finally:
        grader.kill()
        assert_ended(pids)


@pytest.mark.parametrize("learner", LEARNERS)
@pytest.mark.parametrize("sig, status, line", [(signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGTERM, 143, "terminated")],
                         ids=["ctrl-c", "sigterm"])
def test_a_stopped_grader_leaves_no_process_of_the_answer(tmp_path, learner, sig, status, line):
    grader, pids = start_grading(tmp_path, LEARNERS[learner])
    grader.send_signal(sig)
    _, err = finish(grader, pids, 60)
    assert grader.returncode == status and "Traceback" not in err, err
    assert err.strip().splitlines() == [line]


def test_what_an_answer_starts_and_leaves_running_ends_with_its_grading(tmp_path):
    """A file that starts a process and ends: its grading ends too, at once (the process held the
    grader's pipe of its output open), and the process goes with it."""
    grader, pids = start_grading(tmp_path, f"import os\n{GRANDCHILD}"
                                           f"PIDS.write_text(f'{{kid.pid}}')\n")
    out, err = finish(grader, pids, 60)
    assert grader.returncode == 1 and "trie: FAIL\n  not answered" in out, out + err


def test_a_process_that_leaves_the_answers_group_holds_no_grading_open(tmp_path):
    """A process started with start_new_session=True outlives the group's end and holds the pipe of
    the answer's output open: the grader still ends at once, leaving only that process."""
    grader, pids = start_grading(tmp_path, GRANDCHILD.replace("])", "], start_new_session=True)")
                                 + "PIDS.write_text(f'{kid.pid}')\n")
    try:
        out, err = grader.communicate(timeout=30)
    finally:
        grader.kill()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    assert grader.returncode == 1 and "trie: FAIL\n  not answered" in out, out + err


@pytest.mark.parametrize("learner, where", [
    ("import", "while reading the file ("),
    ("function", "while grading trie, on its case sequences=[[0]]")])
def test_an_answer_that_never_returns_is_stopped_at_the_time_limit(tmp_path, learner, where):
    """An answer asleep for 600 s, graded with --timeout 2: the grader ends by itself within a
    bound (it never waits on the answer past its limit) and says where the answer was: the file
    being read, or the exercise and the case it had not finished (a right answer too slow for a
    large case learns which)."""
    grader, pids = start_grading(tmp_path, LEARNERS[learner], "--timeout", "2")
    out, err = finish(grader, pids, 30)
    assert grader.returncode == 1, out + err
    assert f"past the time limit of 2 s (--timeout), {where}" in out, out + err


def test_an_answer_that_reads_its_input_meets_its_end_at_once(tmp_path):
    """The answer's standard input is empty, whatever the grader's is (here a pipe held open, as a
    terminal is): a forgotten input() raises EOFError at once, not a wait to the time limit."""
    held, keep = os.pipe()
    try:
        grader, pids = start_grading(tmp_path, "import os\n\n\ndef trie(sequences):\n"
                                               "    PIDS.write_text(str(os.getpid()))\n"
                                               "    return input()\n",
                                     "--timeout", "20", stdin=held)
        os.close(held)
        out, err = finish(grader, pids, 60)
    finally:
        os.close(keep)
    assert grader.returncode == 1 and "trie: FAIL\n" in out, out + err
    assert "raised EOFError: EOF when reading a line (at mine.py, line 8)" in out, out + err
