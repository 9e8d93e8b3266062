"""What a run reports about its machine: CPU, BLAS and kernel family, threads, weight panels, and
the memory free for --batch."""
import os
import platform

from gpt2.fast.policy import (Threads, blas_kernels, cgroup_folders, free_cores, panel_policy,
                              usable_cpus)


def machine():
    """The CPU's model name and how many CPUs this process may use: "NAME, N CPUs"."""
    name = platform.processor() or platform.machine() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), name)
    except OSError:
        pass
    cpus = usable_cpus()[1]  # its affinity, within a cgroup CPU quota
    return f"{name}, {cpus} CPU{'s' if cpus != 1 else ''}"


def policy(model):
    """An engine's threads and panels -> {"threads", "why", "blas", "wide", "panels", "ops"}."""
    plan = getattr(model, "plan", None)
    if plan is None or not hasattr(plan, "threads"):
        return {"threads": 1, "why": "no BLAS products", "blas": None, "ops": None,
                "static": False,
                "wide": {"threads": 1, "rows": 0, "why": "as every product", "blas": None},
                "panels": {"on": False, "why": "no weights"}}
    return {**plan.threads.report(), "panels": plan.panels_report, "ops": plan.kind,
            "static": plan.static}


def blas_line(policy, environ=None):
    """policy()'s dict -> the report's BLAS line: library, kernel family, machine, threads, and
    whether the small-matrix path (gpt2/fast/panels.py) is on."""
    library, arch = blas_kernels()
    environ = os.environ if environ is None else environ
    core = environ.get("OPENBLAS_CORETYPE") if library == "openblas" else None
    chosen = f" (OPENBLAS_CORETYPE={core})" if core else ""
    # a request OpenBLAS did not take: a name it does not know, a family this CPU cannot run
    if core and arch and core.lower() != arch.lower():
        chosen = f" (OPENBLAS_CORETYPE={core!r} asked for others)"
    n, ran = policy["threads"], policy.get("blas")  # asked, and what the library took inside
    capped = cap_line(n, ran)
    if ran is None and library is None:  # no library to set (Apple's Accelerate): its own count
        capped = "; not applied: threadpoolctl finds no BLAS library to set"
    threads = f"{n} thread{'s' if n != 1 else ''} ({policy['why']}{capped}{wide_line(policy)})"
    static = "; the static-shape step (PICOSPEC_STATIC)" * bool(policy.get("static"))
    return (f"BLAS: {library or 'unknown'}, {arch or 'unknown'} kernels{chosen} on {machine()}; "
            f"{threads}; small-matrix path {panels_line(policy)}{static}")


def panels_line(policy):  # -> "on (why)" / "off (why)"
    return f"{'on' if policy['panels']['on'] else 'off'} ({policy['panels']['why']})"


def wide_line(policy):  # -> ", 2 for forwards of 33+ token rows (why)", or "" where the same
    wide = policy.get("wide", {})
    n, ran = wide.get("threads", policy["threads"]), wide.get("blas")
    if n == policy["threads"]:
        return ""
    return f", {n} for forwards of {wide['rows']}+ token rows ({wide['why']}{cap_line(n, ran)})"


def cap_line(n, ran):  # n threads asked, `ran` run -> "; the library runs 64, its most", or ""
    return f"; the library runs {ran}, its most" if ran is not None and ran < n else ""


def free_memory(device="cpu"):
    """Bytes free now on the GPU or the host (MemAvailable, else physical memory), or None; on the
    host at most what a cgroup memory limit leaves (cgroup_memory_free)."""
    if device == "gpu":
        from gpt2.backend import get_xp

        return int(get_xp("gpu").cuda.Device().mem_info[0])
    host, limit = host_memory(), cgroup_memory_free()
    return host if limit is None else limit if host is None else min(host, limit)


def host_memory():
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


def cgroup_memory_free(folders=None):
    """-> bytes that cgroup memory limits leave this process (limit - usage, the page cache it
    may drop not counted as used; the least), or None where none is set (a container's --memory,
    a systemd MemoryMax)."""
    found = []
    for folder, v2 in cgroup_folders("memory") if folders is None else folders:
        limit, used, cache = (("memory.max", "memory.current", "inactive_file") if v2 else
                              ("memory.limit_in_bytes", "memory.usage_in_bytes",
                               "total_inactive_file"))
        try:
            limit, used = ((folder / n).read_text().strip() for n in (limit, used))
            if limit == "max" or int(limit) >= 1 << 60:  # v1 writes "no limit" as about 2^63
                continue
            stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines()
                        if line.count(" ") == 1)
            found.append(max(0, int(limit) - int(used) + int(stat.get(cache, 0))))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def thread_policy(n_params, requested=None, device="cpu", panels=None):
    """policy()'s dict for an engine of n_params not built yet (benchmark headers)."""
    panel = panel_policy(n_params, panels) if device == "cpu" else {
        "on": False, "why": "the model runs on the GPU"}
    free = free_cores() if requested is None else None
    return {**Threads(n_params, requested, device, free).report(), "panels": panel, "ops": None}

