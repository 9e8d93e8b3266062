"""An engine's CPU policies, decided once when it is built: its BLAS thread counts (Threads, set
inside its own calls only), whether its weights get column panels and in which form a few rows use
them (docs/performance.md).
"""
import contextlib
import functools
import numbers
from typing import NamedTuple

from gpt2.fast.panels import MAX_ROWS

SMALL_MODEL = 30_000_000  # parameters: below this, one BLAS thread
WIDE_ROWS = MAX_ROWS + 1  # token rows in one forward from which it runs on the wide count
DIRECT_SGEMM = ("SkylakeX", "Cooperlake", "SapphireRapids")  # OpenBLAS kernels with direct SGEMM
# OpenBLAS kernels whose GEMV makes a few rows one by one through the panels cheaper than SGEMM
# (results/ops.md); with older ones (Katmai's, Prescott's) it costs 2-3x SGEMM: no panels there
ROW_PANELS = ("Nehalem", "Sandybridge", "Haswell", "Zen")
PANEL_MAX_PARAMS = 400_000_000  # the panels are one more copy of the weights: up to 355M's shape
REQUESTED = "requested"  # the why of a count the caller gave (the command names who gave it)
IDLE_WINDOW = 0.1  # seconds free_cores() watches /proc/stat for the cores idle now


def idle_cpus(cpus, seconds=None):
    """-> how many of `cpus` (ids) other processes leave idle over `seconds` (float; None:
    IDLE_WINDOW), or None."""
    import os
    import time

    seconds = IDLE_WINDOW if seconds is None else seconds

    def ticks():  # -> {cpu id: (idle ticks, total ticks)}
        out = {}
        with open("/proc/stat") as f:
            for line in f:
                name, *values = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                    # user nice system idle iowait irq softirq steal
                    v = [int(x) for x in values[:8]]
                    out[int(name[3:])] = (v[3] + v[4], sum(v))
        return out

    try:
        before, own, start = ticks(), os.times(), time.perf_counter()
        time.sleep(seconds)
        after, own_after, wall = ticks(), os.times(), time.perf_counter() - start
    except (OSError, ValueError, IndexError):
        return None
    shares = [(after[c][0] - before[c][0]) / (after[c][1] - before[c][1]) for c in after
              if c in before and after[c][1] > before[c][1]]
    mine = (own_after.user + own_after.system - own.user - own.system) / wall  # CPUs we kept busy
    # at least 0: a CPU's iowait ticks can fall, and float sums of equal times leave -1e-18
    return max(0.0, min(len(shares), sum(shares) + mine)) if shares else None


def cgroup_folders(controller, proc="/proc/self/cgroup", mount="/sys/fs/cgroup"):
    """-> [(folder, v2)]: this process's cgroup folder for `controller` ("cpu", "memory") in each
    hierarchy (v2, or v1), then the folders above it; a limit set on any of them holds."""
    import os
    from pathlib import Path

    try:  # a folder's name may be any bytes: decoded as the file system decodes its names
        lines = os.fsdecode(Path(proc).read_bytes()).splitlines()
    except OSError:
        return []
    out, mount = [], Path(mount)
    for line in lines:
        parts = line.split(":", 2)  # hierarchy id : controllers ("" on v2) : path
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        v2 = controllers == ""
        if not v2 and controller not in controllers.split(","):
            continue
        # v2 alone at the mount, or beside v1 at mount/unified; v1 at mount/cpu (or cpu,cpuacct)
        base = (mount / "unified" if (mount / "unified").is_dir() else mount) if v2 else next(
            (mount / n for n in (controller, controllers) if (mount / n).is_dir()), None)
        if base is not None:
            folder = base / path.strip("/")
            out += [(f, v2) for f in (folder, *folder.parents) if f == base or base in f.parents]
    return out


def cpu_quota(folders=None):
    """-> the CPUs that cgroup CPU quotas grant this process (quota / period, the least), or
    None where none is set (a container's --cpus, a systemd CPUQuota)."""
    found = []
    for folder, v2 in cgroup_folders("cpu") if folders is None else folders:
        try:
            if v2:
                quota, period = (folder / "cpu.max").read_text().split()[:2]
            else:
                quota, period = ((folder / f"cpu.cfs_{k}_us").read_text().strip()
                                 for k in ("quota", "period"))
            if quota != "max" and int(quota) > 0 and int(period) > 0:
                found.append(int(quota) / int(period))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def usable_cpus():
    """-> (CPU ids this process may run on, how many CPUs it may keep busy): its affinity, and
    within a cgroup CPU quota (rounded down, at least 1)."""
    import os

    ids = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(
        range(os.cpu_count() or 1))
    quota = cpu_quota()
    return ids, max(1, min(len(ids), int(quota))) if quota is not None else max(1, len(ids))


def free_cores():
    """-> (free, cpus, how measured): the cores idle now, at least 1."""
    import os

    ids, cpus = usable_cpus()
    # idle and load are of all the CPUs of the affinity, more than a CPU quota lets this use
    quota = f" of {len(ids)} CPUs, {cpus} within the CPU quota" if cpus < len(ids) else ""
    idle = idle_cpus(ids)
    if idle is not None:  # (cores_free reads NONE_FREE: 1 taken, though none is free)
        none = NONE_FREE * (round(idle) < 1)
        return max(1, min(cpus, round(idle))), cpus, f"{none}{idle:.1f} idle now{quota}"
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average here (Windows), or none to read
        return cpus, cpus, "not measured"
    none = NONE_FREE * (round(len(ids) - load) < 1)
    return (max(1, min(cpus, round(len(ids) - load))), cpus,
            f"{none}1-minute load {load:.1f}{quota}")


def usable_cores():
    cpus = usable_cpus()[1]
    return cpus, cpus, "not measured"


def choose_threads(n_params, requested=None, free=None):
    """-> (threads, why): `requested`, else 1 below SMALL_MODEL parameters, else the free cores."""
    if requested is not None:
        # (0 or fewer: OpenBLAS would run its own default count; 2.5 would run as 2)
        if not isinstance(requested, numbers.Integral) or requested < 1:
            raise ValueError(f"threads={requested!r}: give a whole number of BLAS threads, 1 or "
                             f"more, or None for the policy")
        return int(requested), REQUESTED
    if n_params < SMALL_MODEL:
        return 1, f"small model ({n_params / 1e6:.2f}M parameters)"
    n, cpus, how = free or usable_cores()
    return n, cores_free(n, cpus, how)


class Wide(NamedTuple):  # the BLAS threads of forwards of WIDE_ROWS token rows or more, and why
    threads: int
    why: str


def choose_wide(n_params, threads, requested=None, free=None):
    """-> Wide(threads, why) for forwards of WIDE_ROWS token rows or more."""
    if requested is not None or n_params >= SMALL_MODEL:
        return Wide(threads, "as every product")
    n, cpus, how = free or usable_cores()
    return Wide(n, cores_free(n, cpus, how))


NONE_FREE = "none free: "  # free_cores' how when no core is idle and one is taken anyway


def cores_free(n, cpus, how):
    # unmeasured, every usable core is taken: not "free", which nobody looked at
    if how == "not measured":
        return f"all {cpus} cores (their load not measured)"
    if how.startswith(NONE_FREE):
        return f"1 of {cpus} cores ({how})"  # "1 of 2 cores (none free: 0.2 idle now)"
    return f"{n} of {cpus} cores free ({how})"


@functools.lru_cache(maxsize=1)
def blas_libraries():  # the BLAS libraries NumPy loaded (threadpoolctl's controllers); () if none
    try:
        import numpy  # noqa: F401  (threadpoolctl finds the libraries NumPy has loaded)
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return ()
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def blas_threads():
    counts = [lib.get_num_threads() for lib in blas_libraries()]
    return max(counts) if counts else None


class blas_limit:
    """`with blas_limit(n):` the BLAS on n threads inside."""

    def __init__(self, n):
        self.n, self.libraries = n, blas_libraries()

    def __enter__(self):
        self.before = [lib.get_num_threads() for lib in self.libraries]
        for lib, count in zip(self.libraries, self.before):
            if count != self.n:
                lib.set_num_threads(self.n)

    def __exit__(self, *exc):
        for lib, count in zip(self.libraries, self.before):
            if count != self.n:
                lib.set_num_threads(count)


class Threads:
    """An engine's BLAS threads: n for its products, wide for WIDE_ROWS rows or more."""

    def __init__(self, n_params, requested=None, device="cpu", free=None):
        self.n_params, self.device = n_params, device
        self.choose(requested, free)

    def choose(self, requested=None, free=None):
        if self.device != "cpu":
            self.n, self.why, self.wide = 1, "GPU", Wide(1, "the model runs on the GPU")
            return
        self.n, self.why = choose_threads(self.n_params, requested, free)
        self.wide = choose_wide(self.n_params, self.n, requested, free)

    def scope(self, rows):
        if self.device != "cpu":
            return contextlib.nullcontext()
        return blas_limit(self.wide.threads if rows >= WIDE_ROWS else self.n)

    def report(self):  # the counts chosen, and those the library runs inside (None: no library)
        with self.scope(1):
            blas = blas_threads()
        with self.scope(WIDE_ROWS):
            wide = blas_threads()
        return {"threads": self.n, "why": self.why, "blas": blas,
                "wide": {"threads": self.wide.threads, "rows": WIDE_ROWS, "why": self.wide.why,
                         "blas": wide}}


@functools.lru_cache(maxsize=1)  # the library NumPy loaded does not change within a process
def blas_kernels():
    """-> (library, architecture) of NumPy's BLAS, e.g. ("openblas", "SkylakeX")."""
    try:
        import numpy  # noqa: F401
        from threadpoolctl import threadpool_info
    except ImportError:
        return None, None
    lib = numpy_blas(threadpool_info())
    return (lib.get("internal_api"), lib.get("architecture")) if lib else (None, None)


def numpy_blas(info):
    """threadpoolctl's threadpool_info() -> the entry of the BLAS NumPy calls (the one under
    NumPy's folder where SciPy or torch loaded their own too), or None."""
    import os
    from pathlib import Path

    import numpy

    libs = [lib for lib in info if lib.get("user_api") == "blas"]
    home = Path(numpy.__file__).resolve().parent  # numpy/ (macOS: numpy/.dylibs/)
    folders = (f"{home}{os.sep}", f"{home}.libs{os.sep}")  # the Linux wheel's numpy.libs/
    own = [lib for lib in libs if str(Path(lib.get("filepath") or "").resolve()).startswith(
        folders)]
    return (own or libs or [None])[0]


def panel_policy(n_params, requested=None):
    """-> {"on", "why"}: requested, else on with OpenBLAS kernels they gain with (DIRECT_SGEMM,
    ROW_PANELS), up to PANEL_MAX_PARAMS."""
    if requested is not None:
        return {"on": bool(requested), "why": "requested (PICOSPEC_PANELS)"}
    library, arch = blas_kernels()
    if library != "openblas":  # MKL has no kernel family in threadpoolctl; None: none found
        found = " ".join(name for name in (library, arch) if name) or "unknown"
        return {"on": False, "why": f"BLAS {found}: the panels are measured on OpenBLAS only"}
    if n_params > PANEL_MAX_PARAMS:
        return {"on": False, "why": f"{n_params / 1e6:.0f}M parameters: a second copy of the "
                                    f"weights would cost too much memory"}
    if panel_form() == "panels":
        return {"on": True, "why": f"OpenBLAS {arch} kernels: direct SGEMM for small products"}
    if arch in ROW_PANELS:
        return {"on": True, "why": f"OpenBLAS {arch} kernels: SGEMM packs all of W, however few "
                                   f"the rows; a few rows go one by one through the panels"}
    return {"on": False, "why": f"OpenBLAS {arch or 'unknown'} kernels: the panels gain only with "
                                f"the {', '.join(ROW_PANELS)} and AVX-512 kernels"}


def panel_form():
    """-> how a few rows use the panels: "panels" (a small product per panel) where OpenBLAS has a
    direct SGEMM, else "panel_rows" (each row times each panel)."""
    library, arch = blas_kernels()
    return "panels" if library == "openblas" and arch in DIRECT_SGEMM else "panel_rows"
