"""Results pages: what a benchmark printed, under the protocol it ran with, written by itself;
the protocol line every benchmark prints first (header).

    python -m bench.harness --out docs/results/harness.md   # each benchmark with figures has --out

The header names the command (run it again to regenerate the page), the commit, the CPU and its BLAS
kernel family, the threads, the machine's load, the versions and the date of the run, so that a
figure cannot outlive the code or the machine it was measured on without saying so.
"""
import contextlib
import io
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from picospec_app.machine import panels_line, wide_line
from picospec_app.settings import read_settings
from picospec_cli import replace_file

ROOT = Path(__file__).resolve().parents[1]
# what a figure depends on: the algorithms, the model, the app and its door, the benchmarks and
# the tools that run them
CODE = ("main.py", "bench", "gpt2", "picospec", "picospec_app", "picospec_cli", "tools")


# a family's own part of a page (tools/families.py), which its parent combines and announces
FAMILY_PAGE = "BENCH_FAMILY_PAGE"


def program():
    """The module run, as typed: bench.NAME."""
    module = getattr(sys.modules["__main__"], "__spec__", None)
    return module.name if module else Path(sys.argv[0]).name


def command_line(args=None):
    """The command as it was typed (or with args): python -m bench.NAME ARGS."""
    args = sys.argv[1:] if args is None else args
    return " ".join(["python", "-m", program()] + [shlex.quote(a) for a in args])


def without(argv, names):
    """argv without the options `names` and their values (--name value, --name=value)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word.split("=")[0] in names:
            skip = "=" not in word
        else:
            out.append(word)
    return out


def measured_command():
    """The command of what is measured, as typed, less where its page goes and how the kernel
    families run (--out, --families, --quiet, --child): what reproduces the figures printed."""
    args = [a for a in sys.argv[1:] if a.split("=")[0] not in ("--child", "--no-child")]
    return command_line(without(args, ("--out", "--families", "--quiet")))


def commit(root=ROOT):
    """The short commit id, and whether the measured code (CODE's tracked files) differs from it."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)

    try:
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", *CODE)
    except (OSError, subprocess.SubprocessError):
        return "unknown (git not found)"
    if head.returncode != 0:
        return "unknown (not a git tree)"
    return head.stdout.strip() + (" with uncommitted changes" if changed.stdout.strip() else "")


def cpu_model():
    """The CPU's model name (Linux: /proc/cpuinfo; elsewhere: platform) and its logical CPUs."""
    name = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    return f"{name}, {os.cpu_count()} logical CPUs"


def blas():
    """The BLAS library NumPy calls, its version, kernel family and thread limit (threadpoolctl)."""
    import numpy  # noqa: F401 (loads the BLAS that threadpoolctl reports)

    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl missing)"
    from gpt2.fast.policy import numpy_blas

    i = numpy_blas(threadpool_info())  # NumPy's, where SciPy or torch loaded their own too
    if i is None:
        return "none found"
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    forced = f", OPENBLAS_CORETYPE={coretype}" if coretype else ""
    kernels = i.get("architecture", "unknown")
    return (f"{i.get('internal_api')} {i.get('version')}, kernel family {kernels}{forced}, "
            f"thread limit {i.get('num_threads')}")


def versions():
    import numpy

    found = [f"Python {platform.python_version()}", f"NumPy {numpy.__version__}"]
    runtime, device = cuda()
    for name in ("cupy", "torch", "transformers"):
        if name in sys.modules:
            found.append(f"{name} {getattr(sys.modules[name], '__version__', '?')}"
                         + (runtime if name == "cupy" else ""))
    return ", ".join(found) + device


def cuda():
    """-> (", CUDA runtime N", "; GPU: name") where this process imported CuPy, else ("", "")."""
    if "cupy" not in sys.modules:
        return "", ""
    cupy = sys.modules["cupy"]
    try:
        return f", CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}", f"; GPU: {gpu_name(cupy)}"
    except Exception as e:  # noqa: BLE001 - CuPy imported, no device: the row says so
        return "", f"; no GPU ({type(e).__name__})"


def gpu_name(cupy):
    """-> the name of CuPy's first GPU (its properties give bytes)."""
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else name


def load():
    if not hasattr(os, "getloadavg"):
        return "unknown"
    one, five, fifteen = os.getloadavg()
    return (f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15-minute averages at the end of the "
            f"run; {os.cpu_count()} logical CPUs)")


def protocol(threads, kernels=None):
    """The header table: one row per field (kernels: what replaces this process's BLAS row)."""
    rows = [("command", f"`{command_line()}`"), ("commit", commit()),
            ("date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())), ("CPU", cpu_model()),
            ("BLAS", kernels or blas()), ("threads", threads or "as the first line below says"),
            ("load", load()), ("versions", versions())]
    return ["| protocol | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]


def write_page(path, text, threads=None, fenced=False, blas=None):
    """Write the results page at path atomically: title, protocol header, then text (Markdown;
    fenced: plain lines, kept as printed in a code block; blas: the BLAS row, if not this
    process's)."""
    name = program()
    page = [f"# Results: `{name}`", "",
            "Written by the command below; run it again to regenerate this page. Timings depend "
            "on the machine and its load, both recorded here.", ""]
    body = f"```\n{text.strip()}\n```" if fenced else text.strip()
    page += protocol(threads, blas) + ["", body, ""]
    write_text(path, "\n".join(page))
    if os.environ.get(FAMILY_PAGE) != str(path):  # a family's part: its parent says
        print(f"wrote {path}", file=sys.stderr)


def read_page(path):
    """A page write_page wrote -> (its protocol rows {field: value}, its body)."""
    title, intro, header, body = Path(path).read_text(encoding="utf-8").split("\n\n", 3)
    return dict(re.findall(r"^\| (\w[\w ]*) \| (.*) \|$", header, flags=re.M)), body.strip()


@contextlib.contextmanager
def page_of_output(path, threads=None, fenced=False):
    """Print as usual; when the block ends without an error and path is set, also write what it
    printed as the results page at path."""
    if not path:
        yield
        return
    printed, real = io.StringIO(), sys.stdout

    class Both(io.TextIOBase):
        def write(self, s):
            printed.write(s)
            return real.write(s)

        def flush(self):
            real.flush()

    sys.stdout = Both()
    try:
        yield
    finally:
        sys.stdout = real
    write_page(path, printed.getvalue(), threads, fenced)


def header(threads):
    """The protocol line every benchmark prints first: BLAS threads, weight panels, the static step
    (gpt2/fast/static.py) and the machine's load when it started."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    static = "on (PICOSPEC_STATIC=1; CUDA graphs on a GPU)" if read_settings().static else "off"
    return (f"BLAS threads {threads['threads']} ({threads['why']}; the library reports "
            f"{threads['blas']}{wide_line(threads)}), weight panels {panels_line(threads)}, static "
            f"step {static}, {os.cpu_count()} CPUs, 1-minute load {load:.2f} at start")


def write_text(path, text):
    """Write a table atomically: a temp file in the same folder, renamed over path."""
    replace_file(path, [text.encode("utf-8")])
