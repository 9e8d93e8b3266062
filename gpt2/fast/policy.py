"""The CPU policies an engine is built with: how many BLAS threads its forwards run on, and whether
its weights get column panels (panels.py). Both are decided once, when the engine is built, from
what the caller passes (the app: the user's --threads, the PICOSPEC_* settings and the cores it
found idle, measured once by free_cores) and what the BLAS is; the thread count applies inside the
engine's own calls only (Threads.scope), so building a model changes nothing in the process. Why
these rules: docs/performance.md, "Threads and panels".
"""
import contextlib
import functools

from gpt2.fast.panels import MAX_ROWS

SMALL_MODEL = 30_000_000  # parameters: below this, one BLAS thread
WIDE_ROWS = MAX_ROWS + 1  # token rows in one forward from which it runs on the wide count
DIRECT_SGEMM = ("SkylakeX", "Cooperlake", "SapphireRapids")  # OpenBLAS kernels with direct SGEMM
PANEL_MAX_PARAMS = 400_000_000  # the panels are one more copy of the weights: up to 355M's shape


def idle_cpus(cpus, seconds=0.1):
    """How many of the CPUs `cpus` (ids) other processes left idle over the next `seconds`, from
    Linux's /proc/stat -> a float, or None where that cannot be read. This process's own CPU time
    counts as free; steal time as busy. Example: two CPUs, one process spinning elsewhere -> about
    1.0."""
    import os
    import time

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
    return min(len(shares), sum(shares) + mine) if shares else None


def free_cores():
    """-> (free, cpus, how it was measured): the usable cores that sat idle over the last 0.1 s
    (/proc/stat; elsewhere: cores minus the 1-minute load), at least 1."""
    import os

    if hasattr(os, "sched_getaffinity"):
        ids = os.sched_getaffinity(0)
    else:
        ids = set(range(os.cpu_count() or 1))
    idle = idle_cpus(ids)
    if idle is not None:
        return max(1, min(len(ids), round(idle))), len(ids), f"{idle:.1f} idle now"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, min(len(ids), round(len(ids) - load))), len(ids), f"1-minute load {load:.1f}"


def usable_cores():
    """-> (cores, cores, how): every CPU this process may use, as free_cores gives its figures when
    nobody measured the machine (the library's default)."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpus or 1, cpus or 1, "not measured"


def choose_threads(n_params, requested=None, free=None):
    """-> (threads, why): `requested` if given, else 1 for a model below SMALL_MODEL parameters,
    else the free cores (free: free_cores()'s figures; default usable_cores()).
    Example: choose_threads(5_850_000) -> (1, "small model (5.85M parameters)")."""
    if requested is not None:
        return int(requested), "requested (--threads or PICOSPEC_THREADS)"
    if n_params < SMALL_MODEL:
        return 1, f"small model ({n_params / 1e6:.2f}M parameters)"
    n, cpus, how = free or usable_cores()
    return n, f"{n} of {cpus} cores free ({how})"


def choose_wide(n_params, threads, requested=None, free=None):
    """-> (threads, why) for forwards of WIDE_ROWS token rows or more: too big for the panels, they
    go through OpenBLAS's packed GEMM, which splits over threads; a small model takes the free
    cores there, anything else its own count."""
    if requested is not None or n_params >= SMALL_MODEL:
        return threads, "as every product"
    n, cpus, how = free or usable_cores()
    return n, f"{n} of {cpus} cores free ({how})"


@functools.lru_cache(maxsize=1)
def blas_libraries():  # the BLAS libraries NumPy loaded (threadpoolctl's controllers); () if none
    try:
        import numpy  # noqa: F401  (threadpoolctl finds the libraries NumPy has loaded)
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return ()
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def blas_threads():
    """Threads of the BLAS NumPy loaded, as the library reports it now (None if unknown)."""
    counts = [lib.get_num_threads() for lib in blas_libraries()]
    return max(counts) if counts else None


class blas_limit:
    """`with blas_limit(n):` the BLAS on n threads inside, the count before restored after."""

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
    """The BLAS thread counts of one engine: `n` for its products, `wide` (threads, why) for
    forwards of WIDE_ROWS token rows or more. free: free_cores()'s figures where the caller measured
    the machine (default: every usable core). Each engine call runs inside scope(rows); on a GPU
    (device "gpu") nothing is set."""

    def __init__(self, n_params, requested=None, device="cpu", free=None):
        self.n_params, self.device = n_params, device
        self.choose(requested, free)

    def choose(self, requested=None, free=None):
        """Choose the counts again (as when the engine was built), for `requested` and `free`."""
        if self.device != "cpu":
            self.n, self.why, self.wide = 1, "GPU", (1, "the model runs on the GPU")
            return
        self.n, self.why = choose_threads(self.n_params, requested, free)
        self.wide = choose_wide(self.n_params, self.n, requested, free)

    def scope(self, rows):
        """A context manager: the BLAS count for a forward over `rows` token rows."""
        if self.device != "cpu":
            return contextlib.nullcontext()
        return blas_limit(self.wide[0] if rows >= WIDE_ROWS else self.n)

    def report(self):
        """-> {"threads", "why", "blas" (what the library reports inside a call), "wide"}."""
        with self.scope(1):
            blas = blas_threads()
        wide, why = self.wide
        return {"threads": self.n, "why": self.why, "blas": blas,
                "wide": {"threads": wide, "rows": WIDE_ROWS, "why": why}}


@functools.lru_cache(maxsize=1)  # the library NumPy loaded does not change within a process
def blas_kernels():
    """-> (library, architecture) of the BLAS NumPy loaded, as threadpoolctl reports it (None where
    unknown). Example: ("openblas", "SkylakeX")."""
    try:
        import numpy  # noqa: F401
        from threadpoolctl import threadpool_info
    except ImportError:
        return None, None
    libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return (libs[0].get("internal_api"), libs[0].get("architecture")) if libs else (None, None)


def panel_policy(n_params, requested=None):
    """Whether a CPU engine for a model of n_params keeps its weights also as column panels ->
    {"on", "why"}: `requested` (True/False) decides; else on where the BLAS is OpenBLAS with a
    direct SGEMM (AVX-512 kernels) and the model is at most PANEL_MAX_PARAMS."""
    if requested is not None:
        return {"on": bool(requested), "why": "requested (PICOSPEC_PANELS)"}
    library, arch = blas_kernels()
    if library != "openblas" or arch not in DIRECT_SGEMM:
        return {"on": False, "why": f"BLAS {library} {arch}: no direct SGEMM for small products, "
                                    f"panels would not help"}
    if n_params > PANEL_MAX_PARAMS:
        return {"on": False, "why": f"{n_params / 1e6:.0f}M parameters: a second copy of the "
                                    f"weights would cost too much memory"}
    return {"on": True, "why": f"OpenBLAS {arch} kernels: direct SGEMM for small products"}
