"""The door's guard (picospec_cli.guarded) in this process: what each way a command can end
prints and exits with, and the signal handlers it holds while the work runs and puts back after.
Real processes, pipes and signals: tests/cli/test_picospec_cli.py."""
import errno
import signal
import sys
import threading

import pytest

from picospec_cli import Terminated, guarded, terminate


@pytest.fixture
def handlers():
    """SIGTERM as a shell leaves it, SIGINT a handler of the caller's own; both put back after."""
    def own(signum, frame):
        raise KeyboardInterrupt

    before = (signal.signal(signal.SIGTERM, signal.SIG_DFL), signal.signal(signal.SIGINT, own))
    yield own
    signal.signal(signal.SIGTERM, before[0])
    signal.signal(signal.SIGINT, before[1])


def raising(error):
    def work():
        raise error
    return work


@pytest.mark.parametrize("error, code, err", [
    (ValueError("bad\n   value"), 2, "error: bad value\n"),  # one line
    (OSError(errno.ENOENT, "No such file or directory", "x.txt"), 2,
     "error: x.txt: No such file or directory\n"),
    (OSError("no reason given"), 2, "error: no reason given\n"),
    (KeyboardInterrupt(), 130, "\ninterrupted\n"),
    (Terminated(), 143, "\nterminated\n"),
])
def test_each_ending_is_its_exit_status_and_one_line(error, code, err, handlers, capsys):
    with pytest.raises(SystemExit) as e:
        guarded(raising(error))
    assert e.value.code == code and capsys.readouterr() == ("", err)
    # the handlers as they were before
    assert signal.getsignal(signal.SIGINT) is handlers
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_the_work_runs_with_sigterm_as_ctrl_c_and_its_result_comes_back(handlers):
    seen = []

    def work():
        seen.append(signal.getsignal(signal.SIGTERM))
        return 5

    assert guarded(work) == 5 and seen == [terminate]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sigterm_handled_already_or_off_the_main_thread_is_left_alone(handlers):
    seen, results = [], []

    def work():
        seen.append(signal.getsignal(signal.SIGTERM))
        return 7

    thread = threading.Thread(target=lambda: results.append(guarded(work)))
    thread.start()
    thread.join()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ignored by whoever started the command
    assert guarded(work) == 7 and results == [7]
    assert seen == [signal.SIG_DFL, signal.SIG_IGN]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


@pytest.mark.parametrize("closed", ["stdout", "stderr", "both"])
def test_a_stream_closed_before_the_start_is_exit_2(closed, monkeypatch, capsys):
    for name in ("stdout", "stderr") if closed == "both" else (closed,):
        monkeypatch.setattr(sys, name, None)
    ran = []
    with pytest.raises(SystemExit) as e:
        guarded(lambda: ran.append(True))
    monkeypatch.undo()
    out, err = capsys.readouterr()
    assert e.value.code == 2 and ran == [] and out == ""
    assert err == ("error: the standard output is closed: send it to a file or a terminal\n"
                   if closed == "stdout" else "")
