"""The door's guard (picospec_cli.guarded) in this process: what each way a command can end
prints and exits with, and the signal handlers it holds while the work runs and puts back after.
Real processes, pipes and signals: tests/cli/test_picospec_cli.py."""
import errno
import io
import os
import signal
import sys
import threading

import pytest

from picospec_cli import Option, Terminated, command, guarded, terminate


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


def test_out_of_memory_is_one_error_line_on_stderr_and_exit_2(handlers, capsys):
    """A model or a batch larger than the memory free: no traceback, and nothing on the standard
    output, which a caller may be reading as JSON."""
    with pytest.raises(SystemExit) as e:
        guarded(raising(MemoryError()))
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert err.startswith("error: out of memory: ") and err.count("\n") == 1


@pytest.mark.parametrize("closed", ["stdout", "both"])
def test_a_standard_output_closed_before_the_start_is_exit_2(closed, monkeypatch, capsys):
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


def test_a_standard_error_closed_before_the_start_leaves_the_output_whole(monkeypatch, capsys):
    """`2>&-`: the work runs; what it says on stderr goes nowhere, not into the output (Python's
    print(file=None) writes to stdout), and an error is its exit status alone."""
    monkeypatch.setattr(sys, "stderr", None)

    def work():
        print("a note", file=sys.stderr)
        print("the result")
        return 0
    assert guarded(work) == 0
    with pytest.raises(SystemExit) as e:
        guarded(raising(ValueError("bad input")))
    assert sys.stderr is None  # put back as it was
    monkeypatch.undo()
    assert e.value.code == 2 and capsys.readouterr() == ("the result\n", "")


class Full(io.StringIO):
    """An output on a full disk: every write fails with ENOSPC."""
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("name, said", [("stdout", "standard output"),
                                        ("stderr", "standard error")])
def test_a_failed_write_names_its_stream(name, said, monkeypatch, capsys):
    """`> /dev/full`: one line naming the stream and the system's reason, exit 2."""
    err = io.StringIO()
    monkeypatch.setattr(sys, name, Full())
    if name == "stdout":
        monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(SystemExit) as e:
        guarded(lambda: print("the result", file=getattr(sys, name)))
    assert e.value.code == 2
    assert err.getvalue() == (f"error: cannot write the {said} (No space left on device)\n"
                              if name == "stdout" else "")


def test_text_the_output_cannot_encode_is_written_escaped(monkeypatch):
    """PYTHONIOENCODING=ascii, a latin-1 terminal: the result is written, its other characters
    escaped, rather than lost with the run behind it."""
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    guarded(lambda: print("speedup 1.5\u00d7, \u2603"))
    assert raw.getvalue() == b"speedup 1.5\\xd7, \\u2603\n"


def test_a_closed_pipe_is_exit_141_and_quiet(tmp_path, monkeypatch, capsys):
    with open(tmp_path / "out", "w") as out:
        monkeypatch.setattr(sys, "stdout", out)  # a stream with a file descriptor of its own
        with pytest.raises(SystemExit) as e:
            guarded(raising(BrokenPipeError(errno.EPIPE, "Broken pipe")))
        # what Python flushes at exit goes nowhere: no second error
        assert os.path.samestat(os.fstat(out.fileno()), os.stat(os.devnull))
    assert e.value.code == 141 and capsys.readouterr().err == ""


def test_a_pipe_closed_under_the_last_output_is_found_inside_the_guard(tmp_path, monkeypatch):
    """Output still buffered when the work returns is flushed by the guard: a closed pipe is
    exit 141 there, not a traceback at exit."""
    class Pipe(io.StringIO):
        def __init__(self, fd):
            super().__init__()
            self.fd, self.closed_pipe = fd, True

        def fileno(self):
            return self.fd

        def flush(self):
            if self.closed_pipe:
                self.closed_pipe = False
                raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    with open(tmp_path / "out", "w") as out:
        monkeypatch.setattr(sys, "stdout", Pipe(out.fileno()))
        with pytest.raises(SystemExit) as e:
            guarded(lambda: print("the last line"))
    assert e.value.code == 141


def test_a_sigterm_is_terminated_and_a_second_one_ignored(handlers):
    with pytest.raises(Terminated):
        terminate(signal.SIGTERM, None)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_ctrl_c_and_sigterm_are_ignored_while_it_says_so(handlers, monkeypatch):
    seen = []

    class Stderr:
        def write(self, text):
            seen.append((signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)))

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stderr", Stderr())
    with pytest.raises(SystemExit):
        guarded(raising(KeyboardInterrupt()))
    assert seen and set(seen) == {(signal.SIG_IGN, signal.SIG_IGN)}
    assert signal.getsignal(signal.SIGINT) is handlers  # and put back after


def test_a_ctrl_c_handler_set_outside_python_is_left_alone(handlers, monkeypatch):
    """signal.getsignal says None for a handler not set from Python: it cannot be put back, and
    the work still runs and returns."""
    getsignal = signal.getsignal
    monkeypatch.setattr(signal, "getsignal",
                        lambda signum: None if signum == signal.SIGINT else getsignal(signum))
    assert guarded(lambda: 5) == 5
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is handlers


def test_command_reads_argv_past_the_program_checks_then_calls(monkeypatch, capsys, handlers):
    """command(fn, options): fn(**values) of sys.argv[1:] (or argv), after check(values, names
    given); -h prints the help under the program's name (no module: the script's file name)."""
    def fn(K, json):
        """Draft K tokens."""
        return ("ran", K, json)

    fn.__module__ = "no.such.module"
    options = [Option("K", int, 4, "drafts", low=1), Option("json", bool, False, "JSON")]
    checked = []
    monkeypatch.setattr(sys, "argv", ["/somewhere/tool.py", "--K", "2"])
    assert command(fn, options, check=lambda *a: checked.append(a)) == ("ran", 2, False)
    assert checked == [({"K": 2, "json": False}, {"K"})]
    assert command(fn, options, argv=["--json"]) == ("ran", 4, True)
    assert command(fn, options, argv=["-h"]) is None
    out = capsys.readouterr().out
    assert out.startswith("usage: tool.py [--option value ...]\n\nDraft K tokens.\n")

    def refuse(values, given):
        raise ValueError(f"--K {values['K']}: too few")

    with pytest.raises(SystemExit) as e:
        command(fn, options, argv=["--K", "2"], check=refuse)
    assert e.value.code == 2 and capsys.readouterr().err == "error: --K 2: too few\n"
