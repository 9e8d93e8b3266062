"""NumPy or CuPy, chosen in one place.

`get_xp("cpu")` is NumPy; `get_xp("gpu")` imports CuPy only when asked and says clearly why it
cannot when it cannot. `xp_of(a)` gives the module an array belongs to, so array code runs unchanged
on either.
"""
import contextlib
import functools

import numpy as np


DEVICES = ("cpu", "gpu")


def get_xp(device="cpu"):
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use one of {', '.join(DEVICES)}")
    if device == "cpu":
        return np
    try:
        import cupy
    except ImportError as e:
        raise ValueError(f"--device gpu needs CuPy, which is not importable here ({e}); "
                         "install the wheel for your CUDA version, e.g. `pip install "
                         "cupy-cuda12x`, or use --device cpu") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # the CUDA driver or runtime is missing
        raise ValueError(f"--device gpu: CuPy is installed but CUDA is not usable ({e}); use "
                         f"--device cpu") from None
    if n == 0:
        raise ValueError("--device gpu: CuPy is installed but no GPU is visible; use --device cpu")
    return cupy


def xp_of(a):
    """The array module (numpy or cupy) that owns array `a`."""
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy
    return np


def to_numpy(a):
    """A host NumPy array from a NumPy or CuPy array."""
    return a if isinstance(a, np.ndarray) else a.get()


def tree_map(f, tree):
    """f applied to every array of a tree of dicts and lists (a model's params), the tree's shape
    kept."""
    if isinstance(tree, dict):
        return {k: tree_map(f, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [tree_map(f, v) for v in tree]
    return f(tree)


def to_device(tree, xp):
    """A tree of arrays, each moved to array module xp: numpy brings CuPy arrays to the host."""
    return tree_map(to_numpy if xp is np else xp.asarray, tree)


# ---- BLAS threads: one policy, applied in one place ----
# Measured on 2 shared cores: with one other busy process, default BLAS threading made
# autoregressive decoding of the tiny model 2x slower and speculative decoding slower than not
# speculating (0.68-0.73x); one thread kept 0.90-0.97x, and a quiet machine ran the tiny models as
# fast with one thread as with two. Small matrices gain nothing from more threads; large ones gain
# from the cores that are actually free.
SMALL_MODEL = 30_000_000  # parameters: below this, one BLAS thread


def idle_cpus(cpus, seconds=0.1):
    """How many of the CPUs `cpus` (ids) other processes left idle over the next `seconds`, from
    Linux's /proc/stat -> a float, or None where that cannot be read. Unlike the 1-minute load
    average it is measured now, and this process's own CPU time in the window (its BLAS threads may
    still spin after a product) counts as free. Steal time counts as busy: a VM's host took it.
    Example: two CPUs, one spinning process elsewhere -> about 1.0."""
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
    # CPUs this process kept busy
    mine = (own_after.user + own_after.system - own.user - own.system) / wall
    return min(len(shares), sum(shares) + mine) if shares else None


def free_cores():
    """-> (free, cpus, how it was measured): the cores usable by this process that sat idle over the
    last 0.1 s (/proc/stat; elsewhere: cores minus the 1-minute load of every process), at least
    1."""
    import os

    ids = os.sched_getaffinity(0) if hasattr(os,
                                             "sched_getaffinity") else set(range(os.cpu_count()
                                                                                 or 1))
    cpus = len(ids)
    idle = idle_cpus(ids)
    if idle is not None:
        return max(1, min(cpus, round(idle))), cpus, f"{idle:.1f} idle now"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, min(cpus, round(cpus - load))), cpus, f"1-minute load {load:.1f}"


def free_memory(device="cpu"):
    """Bytes free now: the GPU's (CuPy) for device "gpu", else the host's MemAvailable (Linux),
    else its physical memory, else None where neither can be read."""
    import os

    if device == "gpu":
        return int(get_xp("gpu").cuda.Device().mem_info[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def requested_threads(requested=None):
    """--threads (`requested`), else PICOSPEC_THREADS, else None: the count a user asked for, if
    any."""
    import os

    env = os.environ.get("PICOSPEC_THREADS")
    if requested is None and env:
        if not env.isdigit() or not 1 <= int(env) <= 256:
            raise ValueError(f"PICOSPEC_THREADS={env!r}: set it to a whole number from 1 to 256 "
                             f"(as --threads), or unset it for the policy")
        requested = int(env)
    return None if requested is None else int(requested)


def choose_threads(n_params, requested=None):
    """-> (threads, why): `requested` (--threads) or PICOSPEC_THREADS if set, else 1 for a model
    below SMALL_MODEL parameters, else the free cores. Example: choose_threads(5_850_000) -> (1,
    "small model (5.85M parameters)")."""
    requested = requested_threads(requested)
    if requested is not None:
        return requested, "requested (--threads or PICOSPEC_THREADS)"
    if n_params < SMALL_MODEL:
        return 1, f"small model ({n_params / 1e6:.2f}M parameters)"
    free, cpus, how = free_cores()
    return free, f"{free} of {cpus} cores free ({how})"


def choose_wide(n_params, threads, requested=None):
    """-> (threads, why) for a forward of at least WIDE_ROWS token rows (a batch of rows, a long
    prompt, a big tree): what was requested, else for a small model the free cores, else `threads`.
    Such products are too big for the weight panels and go through OpenBLAS's packed GEMM, which
    splits them over threads: on the tiny target's matrices 40 rows took 1.2-1.6x less time on 2
    threads than the best on 1 (the measurements above WIDE_ROWS)."""
    if requested_threads(requested) is not None or n_params >= SMALL_MODEL:
        return threads, "as every product"
    free, cpus, how = free_cores()
    return free, f"{free} of {cpus} cores free ({how})"


def set_threads(n):
    """Limit the BLAS libraries NumPy uses to n threads, for the rest of the process -> the count
    now in force (None where threadpoolctl is not installed: then the BLAS default stays, and says
    so)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    threadpool_limits(limits=int(n), user_api="blas")
    return blas_threads()


def blas_threads():
    """Threads of the BLAS library NumPy loaded, as the library itself reports it (None if
    unknown)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = [lib["num_threads"] for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return max(counts) if counts else None


def thread_policy(n_params, requested=None, device="cpu"):
    """Choose and apply the BLAS thread count -> {"threads", "why", "blas" (what the library
    reports), "wide" (threads for forwards of WIDE_ROWS token rows or more: choose_wide; where it is
    not applied, on a GPU or without threadpoolctl, the same as "threads"), "panels" (the weight
    panel choice for a model of n_params on the CPU: panel_policy)} for --json and benchmark
    headers."""
    n, why = choose_threads(n_params, requested)
    asked = requested_threads(requested) is not None
    blas = set_threads(n)
    if device != "cpu":
        wide, wide_why = n, "the model runs on the GPU"
    elif blas is None:
        wide, wide_why = n, "threadpoolctl is not installed: no switch"
    else:
        wide, wide_why = choose_wide(n_params, n, requested)
    APPLIED.clear()
    policy = {"threads": n, "why": why, "blas": blas, "panels": panel_policy(n_params),
              "wide": {"threads": wide, "rows": WIDE_ROWS, "why": wide_why}}
    APPLIED.update(threads=n, wide=wide, n_params=n_params, requested=asked, policy=policy)
    return policy


def engine_policy(n_params, device="cpu"):
    """thread_policy for an engine being built (gpt2/engine.py), so that notebooks, benchmarks and
    library code get main.py's BLAS count without asking -> thread_policy's dict, or None where the
    policy in force stays: on a GPU, after a requested count (--threads, PICOSPEC_THREADS), or after
    the policy ran for a model at least as large (a draft built after its target keeps the target's
    count). Example: tiny-target (5.83M) then tiny-draft -> one policy, 1 thread; gpt2-xl after
    tiny-draft -> the free cores."""
    if device != "cpu" or APPLIED.get("requested") or APPLIED.get("n_params", -1) >= n_params:
        return None
    return thread_policy(n_params, device=device)


def machine():
    """The CPU this runs on, for reports: its model name (Linux's /proc/cpuinfo, else the
    platform's) and the CPUs this process may use. Example: "AMD EPYC, 2 CPUs"."""
    import os
    import platform

    name = platform.processor() or platform.machine() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")),
                        name)
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{name}, {cpus} CPU{'s' if cpus != 1 else ''}"


def blas_line(policy):
    """thread_policy's dict -> the report's BLAS line: library, kernel family, threads and whether
    the small-matrix path (OpenBLAS's direct SGEMM on weight panels, gpt2/fast/panels.py) is on.
    Example: "BLAS: openblas, Haswell kernels (OPENBLAS_CORETYPE=Haswell) on AMD EPYC, 2 CPUs; 1
    thread (small model (5.83M parameters)); small-matrix path off (...)"."""
    import os

    library, arch = blas_kernels()
    core = os.environ.get("OPENBLAS_CORETYPE") if library == "openblas" else None
    chosen = f" (OPENBLAS_CORETYPE={core})" if core else ""
    n = policy["threads"]
    threads = f"{n} thread{'s' if n != 1 else ''} ({policy['why']}{wide_line(policy)})"
    return (f"BLAS: {library or 'unknown'}, {arch or 'unknown'} kernels{chosen} on {machine()}; "
            f"{threads}; small-matrix path {panels_line(policy)}")


# ---- Wide forwards: a small model's products over many rows gain from the cores that a one-row
# step cannot use ---- Measured on a 2-core AVX-512 machine (one thread runs a large SGEMM at 93
# GFLOP/s, two at 198): the tiny target's products over 40 rows (a batch of 8 rows verifying 4
# drafts each) took 40-596 us on 2 threads against 49-800 us for the best on 1 (panels or not):
# 1.2-1.6x less, the LM head 1.34x; products of 5-8 rows gain nothing from a second thread (the
# panels' direct SGEMM runs on one). The wide count is chosen once, when the policy runs (like the
# policy's own count): a core that gets busy later slows the wide products, as it would a large
# model's.
# products of 2..MAX_ROWS rows go through weight panels (gpt2/fast/panels.py); more use W itself
MAX_ROWS = 32
# token rows in one forward from which it runs on the wide count: what the panels leave
WIDE_ROWS = MAX_ROWS + 1
APPLIED = {}  # what thread_policy set for this process (the BLAS count is process-wide)


@functools.lru_cache(maxsize=1)
def blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def threads_for(rows, xp=np):
    """The BLAS count for a forward over `rows` token rows on arrays of module xp -> a context
    manager (use it in a `with`): on NumPy at WIDE_ROWS rows or more the policy's wide count,
    restored on exit (a few microseconds for both: 2.6 us measured on a quiet machine), else (CuPy,
    fewer rows) nothing changes. Example: after thread_policy(5.83M) on a quiet 2-core machine
    (threads 1, wide 2), `with threads_for(40): ...` runs the BLAS on 2 threads."""
    if xp is not np or rows < WIDE_ROWS or APPLIED.get("wide", 0) <= APPLIED.get("threads", 0):
        return contextlib.nullcontext()
    return blas_controller().limit(limits=APPLIED["wide"], user_api="blas")


# ---- Weight panels (gpt2/fast/panels.py): where OpenBLAS multiplies a few rows by small panels
# without packing ----
# OpenBLAS kernels with the direct (unpacked) SGEMM
DIRECT_SGEMM = ("SkylakeX", "Cooperlake", "SapphireRapids")
# the panels are one more copy of the weights: up to 355M's shape (+1.4 GB)
PANEL_MAX_PARAMS = 400_000_000


@functools.lru_cache(maxsize=1)  # the library NumPy loaded does not change within a process
def blas_kernels():
    """-> (library, architecture) of the BLAS NumPy loaded, as threadpoolctl reports it (None where
    unknown).
    Example on this project's machines: ("openblas", "SkylakeX")."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None, None
    libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return (libs[0].get("internal_api"), libs[0].get("architecture")) if libs else (None, None)


def panel_policy(n_params):
    """Whether a CPU engine for a model of n_params keeps its weights also as column panels ->
    {"on", "why"}. PICOSPEC_PANELS=1 or 0 decides; else on where the BLAS is OpenBLAS with a direct
    SGEMM (AVX-512 kernels) and the model is at most PANEL_MAX_PARAMS. Example:
    panel_policy(5_830_000) on a SkylakeX machine -> {"on": True, "why": "OpenBLAS SkylakeX kernels:
    direct SGEMM for small products"}."""
    import os

    env = os.environ.get("PICOSPEC_PANELS")
    if env:
        if env not in ("0", "1"):
            raise ValueError(f"PICOSPEC_PANELS={env!r}: set it to 1 (weight panels on) or 0 (off), "
                             f"or unset it for the policy")
        return {"on": env == "1", "why": "requested (PICOSPEC_PANELS)"}
    library, arch = blas_kernels()
    if library != "openblas" or arch not in DIRECT_SGEMM:
        return {"on": False,
                "why": f"BLAS {library} {arch}: no direct SGEMM for small products, panels would "
                       f"not help"}
    if n_params > PANEL_MAX_PARAMS:
        return {"on": False,
                "why": f"{n_params / 1e6:.0f}M parameters: a second copy of the weights would cost "
                       f"too much memory"}
    return {"on": True, "why": f"OpenBLAS {arch} kernels: direct SGEMM for small products"}


def panels_line(policy):  # thread_policy's dict -> "on (why)" / "off (why)" for headers
    return f"{'on' if policy['panels']['on'] else 'off'} ({policy['panels']['why']})"


# thread_policy's dict -> ", 2 for forwards of 33+ token rows (why)", or "" where it is the same
def wide_line(policy):
    wide = policy.get("wide", {})
    if wide.get("threads", policy["threads"]) == policy["threads"]:
        return ""
    return f", {wide['threads']} for forwards of {wide['rows']}+ token rows ({wide['why']})"
