"""One benchmark, once per OpenBLAS kernel family, each in its own process, on one results page.

    python -m bench.harness --out docs/results/harness.md               # every family this CPU runs
    python -m bench.harness --families Haswell                          # one family, no page

OpenBLAS picks its kernels when it loads (OPENBLAS_CORETYPE chooses them), so a family is measured
in a child process: Haswell on every x86-64 CPU with AVX2, SkylakeX where the CPU has AVX-512 (its
default there); --families may also name the older families of KERNELS where the CPU runs them.
Before each family of a page (--out) the parent waits for the machine to be quiet (1-minute load
below --quiet, at most QUIET_WAIT seconds) and records the load it starts at; each child writes its
own page, and the parent keeps their bodies, a section per family, under one header. Each family's
output comes under its header, which a command line its process refuses (before any output) does
not get: that is its one line. A --device gpu run is one process: the BLAS kernels time nothing of
it.
"""
import codecs
import functools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from picospec_cli import Option, UsageError, command as plain_command

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("Haswell", "SkylakeX")  # what a page measures by default, where the CPU runs them
# the x86-64 families --families can name -> the CPU flag their kernels need (as /proc/cpuinfo
# names it: SSE3 is "pni"), and its name
KERNELS = {"Haswell": ("avx2", "AVX2"), "SkylakeX": ("avx512f", "AVX-512"),
           "Prescott": ("pni", "SSE3"), "Core2": ("ssse3", "SSSE3"),
           "Nehalem": ("sse4_2", "SSE4.2"), "Sandybridge": ("avx", "AVX"), "Zen": ("avx2", "AVX2")}
QUIET_WAIT = 300  # seconds


@functools.cache
def cpu_flags():
    """-> the CPU's flags (/proc/cpuinfo), or None where they cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            return set(next((line for line in f if line.startswith("flags")), "").split()[2:])
    except OSError:
        return None


def runs(family):
    """Whether this CPU runs the family's kernels (Haswell is assumed where no flags are read)."""
    flags = cpu_flags()
    return family == "Haswell" if flags is None else KERNELS[family][0] in flags


def families_here():
    """The families a page measures on this CPU: Haswell (AVX2), and SkylakeX with AVX-512."""
    return [f for f in FAMILIES if runs(f)]


def family_env(family):
    """This process's environment with OPENBLAS_CORETYPE = family and the repository importable
    (a child finds bench from any folder)."""
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "OPENBLAS_CORETYPE": family, "PYTHONPATH": path}


def wait_quiet(below, most=QUIET_WAIT):
    """Wait until the 1-minute load is below `below` (at most `most` s) -> the load then."""
    if not hasattr(os, "getloadavg"):
        return float("nan")
    start = time.monotonic()
    if round(os.getloadavg()[0], 2) >= below:
        print(f"waiting for a quiet machine: 1-minute load {os.getloadavg()[0]:.2f}, at most "
              f"{most // 60} minutes until it is below {below} (--quiet 0 starts at once)",
              flush=True)
    while round(os.getloadavg()[0], 2) >= below and time.monotonic() - start < most:
        time.sleep(5)
    return os.getloadavg()[0]


def relay(stream, to, ended=None):
    """Copy a child's output to this process's stream as it comes (progress bars included); once
    the reader is gone (a pipe to `head` closed), or `ended` is set (this process ends the child and
    says so itself), the rest is read and dropped."""
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    for chunk in iter(lambda: os.read(stream.fileno(), 4096), b""):
        if ended is not None and ended.is_set():
            to = None
            break
        try:
            to.write(decode(chunk))
            to.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
            to = None
            break
    if to is None:
        for _ in iter(lambda: os.read(stream.fileno(), 4096), b""):
            pass


def ignore_ctrl_c():  # in a family's process: Ctrl-C reaches the whole group; its parent ends it
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Headed:
    """The family's header, printed before the first of its process's output; what the process
    says on stderr before anything on stdout is held (at most HELD seconds), so that a command
    line the process refuses (exit status 2, nothing on stdout) shows as its one line alone."""

    def __init__(self, header):
        self.header, self.held, self.lock = header, [], threading.Lock()

    def release(self, headed=True):  # under the lock: the header, then what was held
        if self.held is not None:
            if headed and self.header is not None:
                print(self.header, flush=True)
            sys.stderr.write("".join(self.held))
            sys.stderr.flush()
            self.held = None  # from now on everything streams

    def write(self, to, text):
        with self.lock:
            if self.held is not None and to is sys.stderr:
                self.held.append(text)
                return
            self.release()
            to.write(text)

    def end(self, code):
        """At the process's end (None: HELD passed): a refusal before any output is its line."""
        with self.lock:
            self.release(headed=code != 2)


class HeadedStream:
    """`to`, written through its family's Headed."""

    def __init__(self, headed, to):
        self.headed, self.to = headed, to

    def write(self, text):
        self.headed.write(self.to, text)

    def flush(self):
        self.to.flush()


HELD = 3.0  # seconds stderr waits for stdout before the header comes (a progress bar first)


def run_child(args, env, header=None):
    """Run a family's process, its output relayed through sys.stdout and sys.stderr (after
    header) -> exit code. Ctrl-C or SIGTERM here ends it (SIGTERM), its words about that dropped:
    one line says it."""
    ended, headed = threading.Event(), Headed(header)
    child = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=ignore_ctrl_c)
    relays = [threading.Thread(target=relay, args=(pipe, HeadedStream(headed, to), ended))
              for pipe, to in ((child.stdout, sys.stdout), (child.stderr, sys.stderr))]
    timer = threading.Timer(HELD, lambda: headed.end(None))  # a bar on stderr shows, headed
    for r in (*relays, timer):
        r.start()
    try:
        for r in relays:
            r.join()
        code = child.wait()
        timer.cancel()
        headed.end(code)
        return code
    except BaseException:  # Ctrl-C, or SIGTERM sent to this process: the family's ends too
        ended.set()  # before it is ended: what it says from then on is not relayed
        timer.cancel()
        child.terminate()
        child.wait()
        raise


def by_family(module, families, quiet, out):
    """Run `python -m module ARGS --child` once per family; with out, one page of their pages."""
    from tools.page import FAMILY_PAGE, read_page, without, write_page

    argv, sections = without(sys.argv[1:], ("--out", "--families", "--quiet")), []
    for family in families:
        if not runs(family):
            print(f"{family}: this CPU cannot run these kernels (no {KERNELS[family][1]}); "
                  f"skipped", flush=True)
            continue
        load = wait_quiet(quiet) if quiet and out else os.getloadavg()[0]
        header = (f"\n── {family} kernels (OPENBLAS_CORETYPE={family}; 1-minute load "
                  f"{load:.2f} at the start) ──")
        page = None
        try:
            if out:  # the child's page: a fresh name beside OUT, never a file of the user's
                fd, page = tempfile.mkstemp(dir=Path(out).resolve().parent,
                                            prefix=f".{Path(out).name}.{family}.", suffix=".tmp")
                os.close(fd)
            args = [sys.executable, "-m", module, *argv, "--child"] + (["--out", page] if out
                                                                         else [])
            # the child's page is this process's to combine: it says "wrote" of OUT alone
            code = run_child(args, {**family_env(family), FAMILY_PAGE: page or ""}, header)
            if code:
                raise SystemExit(code)
            if out:
                rows, body = read_page(page)
        finally:  # a failed or interrupted family leaves no page behind
            if page and os.path.exists(page):
                os.remove(page)
        if out:
            table = ["| protocol | |", "|---|---|",
                     f"| BLAS | {rows.get('BLAS', 'not recorded')} |",
                     f"| threads | {rows.get('threads', 'as the first line below says')} |",
                     f"| load | {load:.2f} at the start (1-minute average); "
                     f"{rows.get('load', 'not recorded')} |"]
            sections.append("\n".join([f"## {family} kernels", ""] + table + ["", body]))
    if out and sections:
        names = ", ".join(s.split("\n", 1)[0][3:] for s in sections)
        write_page(out, "\n\n".join(sections), threads="each section names its own",
                   blas=f"a section per kernel family: {names}")


FAMILY_OPTIONS = [
    Option("families", "strs", None, "OpenBLAS kernel families to measure, each in its own "
           "process (default: Haswell, and SkylakeX where the CPU has AVX-512)",
           choices=tuple(KERNELS),
           check_list=lambda names: "names a family twice: give each once"
           if len(set(names)) < len(names) else None),
    Option("quiet", float, None, "with --out, before each family, wait (at most 5 minutes) until "
           "the 1-minute load is below this; 0: do not wait (default with --out: 0.5)", low=0),
    Option("child", bool, False, "measure in this process only, with the BLAS as loaded (what "
           "each family's process runs)"),
]


def command(main, options, alone=lambda values: False):
    """`command(main, OPTIONS)` under `if __name__ == "__main__"`: main's command line, run once per
    kernel family (or, with --child, in this process; alone(values): a run that measures nothing,
    in this process too)."""
    module = sys.modules[main.__module__].__spec__.name

    @functools.wraps(main)
    def run(families=None, quiet=None, child=False, **values):
        if child and (families is not None or quiet is not None):
            raise UsageError(f"--child measures in this process, as loaded: drop "
                             f"{'--families' if families is not None else '--quiet'}")
        if quiet is not None and values.get("out") is None:
            raise UsageError("--quiet waits for a quiet machine before a page is written: add "
                             "--out FILE, or drop --quiet")
        if values.get("device") == "gpu":  # a GPU run: OpenBLAS's kernels time nothing of it
            if families is not None:
                raise UsageError("--families picks OpenBLAS's kernels, which a --device gpu run "
                                 "does not time: drop --families")
            return main(**values)
        if child or alone(values):
            return main(**values)
        return by_family(module, families or families_here(), 0.5 if quiet is None else quiet,
                         values.get("out"))
    return plain_command(run, options + FAMILY_OPTIONS)
