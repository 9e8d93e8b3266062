"""Run a command as a user does and hold it to the door's promise for a mistake: a non-zero exit, one line on stderr
that matches what was wrong, no traceback, no file left behind, and (for a mistake in the options) no time spent.

    r = run_cli(["main.py", "--temprature", "0.8"], tmp_path)
    assert_refused(r, "did you mean --temperature", tmp_path)
"""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(args, cwd, stdin=None, env=None, timeout=120):
    """python ARGS in folder cwd (a fresh tmp_path, so new files are seen), offline, with the checkout importable."""
    args = [str(ROOT / a) if i == 0 and a.endswith(".py") else a for i, a in enumerate(args)]
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "PICOSPEC_OFFLINE": "1",
                   "PICOSPEC_CACHE": str(Path(cwd) / ".cache"), "HOME": str(cwd), **(env or {})}
    start = time.perf_counter()
    r = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env=environment, input=stdin)
    r.seconds = time.perf_counter() - start
    return r


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def assert_refused(r, pattern, cwd=None, before=(), max_seconds=None):
    """The command failed the way a user's mistake should: see the module docstring."""
    assert r.returncode not in (0, None), f"exit 0 for a mistake; stdout: {r.stdout[-500:]}"
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {r.stderr[-800:]}"
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
    if cwd is not None:
        assert files_under(cwd) == sorted(before), f"files left behind: {set(files_under(cwd)) - set(before)}"
    if max_seconds is not None:
        assert r.seconds < max_seconds, f"took {r.seconds:.1f} s: the options should be refused before any work"


def sigint_as_in_a_terminal():
    """Popen(preexec_fn=...) for a test that sends Ctrl-C: a suite started in the background of a non-interactive
    shell (`bash .ci/run &`) passes SIGINT on ignored, and Python keeps an inherited SIG_IGN; a user's terminal does
    not. The child gets the default disposition, so Python installs its KeyboardInterrupt handler."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
