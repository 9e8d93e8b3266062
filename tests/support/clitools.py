"""Run a command as a user does and hold it to the door's promise for a mistake: a non-zero exit,
one line on stderr that matches what was wrong, no traceback, no file left behind, and (for a
mistake in the options) no time spent: CPU time, which a busy machine does not stretch as it does
the wall clock.

    r = run_cli(["main.py", "--temprature", "0.8"], tmp_path)
    assert_refused(r, "did you mean --temperature", tmp_path)
"""
import contextlib
import io
import os
import re
import runpy
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

import threadpoolctl

ROOT = Path(__file__).resolve().parents[2]


def children_cpu():
    """-> CPU seconds the ended child processes of this one have spent (user + system)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_cli(args, cwd, stdin=None, env=None, timeout=120):
    """python ARGS in folder cwd (a fresh tmp_path, so new files are seen), offline, with the
    checkout importable."""
    args = [str(ROOT / a) if i == 0 and a.endswith(".py") else a for i, a in enumerate(args)]
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
                   "PICOSPEC_OFFLINE": "1",
                   "PICOSPEC_CACHE": str(Path(cwd) / ".cache"), "HOME": str(cwd), **(env or {})}
    start = children_cpu()
    r = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, env=environment, input=stdin)
    r.seconds = children_cpu() - start  # the command's CPU time
    return r


class _Stdin(io.TextIOWrapper):
    """Standard input for run_here: text, with .buffer, as a terminal's pipe gives it."""


def blas_threads():
    return min((i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas"), default=1)


def run_here(args, cwd, stdin=None, env=None, timeout=None):
    """run_cli's command, run inside this process (runpy as `python -m` / `python FILE` would), the
    same result fields (returncode, stdout, stderr, seconds of CPU) and the same surroundings:
    the folder, offline, the cache and home in cwd. An exception that escapes the door is
    written to stderr as a traceback, as Python would."""
    # bytes -> str with surrogate escapes, as Python's own argv decoding
    args = [os.fsdecode(a) for a in args]
    saved = os.getcwd(), dict(os.environ), sys.argv[:], sys.stdin, blas_threads()
    out, err = io.StringIO(), io.StringIO()
    os.environ.update({"PICOSPEC_OFFLINE": "1", "PICOSPEC_CACHE": str(Path(cwd) / ".cache"),
                       "HOME": str(cwd), **(env or {})})
    os.chdir(cwd)
    sys.stdin = _Stdin(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    start, code = time.process_time(), 0
    try:
        with (contextlib.redirect_stdout(out), contextlib.redirect_stderr(err),
              warnings.catch_warnings()):
            # runpy: the module was imported before, by a test
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                if args[0] == "-m":
                    sys.argv = [args[1], *args[2:]]
                    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
                else:
                    sys.argv = [str(ROOT / args[0]), *args[1:]]
                    runpy.run_path(str(ROOT / args[0]), run_name="__main__")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            except BaseException:  # a bug past the door, shown as Python shows it
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
        sys.argv, sys.stdin = saved[2], saved[3]
        # main.py applies its thread policy
        threadpoolctl.threadpool_limits(saved[4], user_api="blas")
    result = subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    result.seconds = time.process_time() - start  # CPU time, this process's
    return result


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def file_bytes(folder):
    """{path under folder: its bytes} of every file: what a refused command must leave as it was."""
    folder = Path(folder)
    return {p: (folder / p).read_bytes() for p in files_under(folder) if (folder / p).is_file()}


def assert_refused(r, pattern, cwd=None, before=(), max_seconds=None):
    """The command failed the way a user's mistake should: see the module docstring."""
    assert r.returncode not in (0, None), f"exit 0 for a mistake; stdout: {r.stdout[-500:]}"
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {r.stderr[-800:]}"
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
    if cwd is not None:
        assert files_under(cwd) == sorted(before), (f"files left behind: "
                                                    f"{set(files_under(cwd)) - set(before)}")
    if max_seconds is not None:
        assert r.seconds < max_seconds, (f"took {r.seconds:.1f} s of CPU: the options should be "
                                         f"refused before any work")


def sigint_as_in_a_terminal():
    """Popen(preexec_fn=...) for a test that sends Ctrl-C: a suite started in the background of a
    non-interactive shell (`bash .ci/run &`) passes SIGINT on ignored, and Python keeps an inherited
    SIG_IGN; a user's terminal does not. The child gets the default disposition, so Python installs
    its KeyboardInterrupt handler."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


# --- the tables of bad command lines (tests/cli/): one case is (module, arguments, pattern)

def case_ids(cases, width):
    """Test ids for (module, arguments, pattern) cases: the command line, cut to width."""
    return [f"{m}:{' '.join(a)}"[:width] for m, a, _ in cases]


def assert_bad_command_refused(folder, module, args, pattern, max_seconds=3):
    """`python -m module args` in folder exits 2 with one `error:` line matching pattern, within
    max_seconds and leaving no file behind."""
    before = files_under(folder)
    r = run_here(["-m", module, *args], folder)
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    assert_refused(r, "^error: .*" + pattern, folder, before, max_seconds=max_seconds)


def assert_help(folder, module, shows):
    """`python -m module --help` prints its usage and options (the text shows among them), exits 0
    and writes nothing."""
    r = run_here(["-m", module, "--help"], folder)
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert r.stdout.startswith(f"usage: python -m {module} ") and shows in r.stdout
    assert files_under(folder) == []


def assert_gpu_refused_without_cupy(folder, args):
    """A command line with --device gpu is one `error:` line, exit 2, where CuPy is missing (the
    caller's test is skipped where CuPy is installed)."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here: this refusal is for machines without it")
    before = files_under(folder)
    r = run_here(args, folder)
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    assert_refused(r, r"^error: --device gpu needs CuPy, which is not importable here", folder,
                   before, max_seconds=3)
    assert not r.stdout.strip(), f"printed before the refusal: {r.stdout[-300:]}"
