"""The CPU policies (gpt2/fast/policy.py): BLAS threads chosen by model size and free cores,
overridable, applied inside an engine's own calls (the count is read back from the BLAS library
there) and restored after them; weight panels with OpenBLAS, in the form its kernels favour."""
import json
import re

import numpy as np
import pytest

from gpt2.fast import policy

from tests.support.clitools import run_here
from tests.support.cgroups import CappedBlas, cgroup_tree

# a runtime requirement; absent only where requirements.txt was not installed
pytest.importorskip("threadpoolctl")


def test_small_models_get_one_thread_and_the_library_reports_it_inside_a_call():
    threads = policy.Threads(5_850_000)
    report = threads.report()
    assert report["threads"] == 1 and "small model" in report["why"] and report["blas"] == 1


FREE = (2, 2, "2.0 idle now")  # free_cores()'s figures on a quiet 2-core machine


def test_large_models_get_the_free_cores():
    assert policy.choose_threads(124_000_000, free=(3, 4, "3.2 idle now")) == (
        3, "3 of 4 cores free (3.2 idle now)")
    cpus = policy.usable_cores()[0]  # nobody measured: every usable core, and no wait for it
    # said as what it is: every core taken, not "free", which nobody looked at
    assert policy.choose_threads(124_000_000) == (cpus, f"all {cpus} cores (their load not "
                                                        f"measured)")
    assert policy.choose_wide(5_850_000, 1) == (cpus, f"all {cpus} cores (their load not measured)")


def test_the_app_measures_the_machine_once_and_the_engines_take_its_figures(monkeypatch):
    from gpt2.engine import GPT2
    from tests.support.micro import random_gpt2
    from picospec_app.settings import Settings, engine_choices

    calls = []
    monkeypatch.setattr(policy, "free_cores", lambda: calls.append(1) or (1, 2, "1.0 idle now"))
    choices = engine_choices(Settings())
    assert calls == [1] and choices["free"] == (1, 2, "1.0 idle now")
    model = GPT2(*random_gpt2(), **choices)
    assert model.plan.threads.wide == (1, "1 of 2 cores free (1.0 idle now)") and calls == [1]
    assert engine_choices(Settings(), threads=2)["free"] is None and calls == [1]  # asked: no need


def test_one_thread_below_30m_parameters_and_panels_up_to_400m(monkeypatch):
    """docs/performance.md's thresholds, at their edges: below 30M parameters one BLAS thread (and
    the free cores for forwards of many rows); with OpenBLAS, panels up to 400M parameters."""
    assert policy.choose_threads(29_999_999, free=FREE)[0] == 1
    assert policy.choose_threads(30_000_000, free=FREE) == (2, "2 of 2 cores free (2.0 idle now)")
    assert policy.choose_wide(29_999_999, 1, free=FREE) == (2, "2 of 2 cores free (2.0 idle now)")
    assert policy.choose_wide(30_000_000, 2, free=FREE) == (2, "as every product")
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", "Haswell"))
    assert policy.panel_policy(400_000_000)["on"]
    assert policy.panel_policy(400_000_001) == {
        "on": False, "why": "400M parameters: a second copy of the weights would cost too much "
                            "memory"}


def test_a_request_wins():
    assert policy.choose_threads(5_000_000, requested=3)[0] == 3
    assert policy.choose_threads(124_000_000, requested=2)[0] == 2


@pytest.mark.parametrize("requested", [0, -2, 2.5, "2"])
def test_a_request_of_no_whole_thread_count_is_refused(requested):
    """OpenBLAS takes 0 or fewer threads as its own default count: the engine would report 0 and
    run on every core; 2.5 would run on 2."""
    from gpt2.engine import GPT2
    from tests.support.micro import random_gpt2

    with pytest.raises(ValueError, match=re.escape(f"threads={requested!r}: give a whole number")):
        GPT2(*random_gpt2(), threads=requested)
    assert policy.choose_threads(5_000_000, requested=np.int64(3)) == (3, "requested")


def test_free_cores_never_below_one():
    free, cpus, how = policy.free_cores()
    assert 1 <= free <= cpus


def test_the_usable_cpus_are_this_process_affinity():
    """taskset -c 0 python main.py ...: the CPUs this process may run on, not the machine's (nor
    another process's)."""
    import os

    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("no affinity to narrow here")
    before = os.sched_getaffinity(0)
    one = {min(before)}
    os.sched_setaffinity(0, one)
    try:
        assert policy.usable_cpus() == (one, 1)
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.parametrize("count, ids", [(6, set(range(6))), (None, {0})])
def test_the_usable_cpus_without_affinity_are_the_cpu_count(monkeypatch, count, ids):
    """No sched_getaffinity (macOS, Windows): every CPU os.cpu_count() names, or 1 where it names
    none."""
    import os

    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: count)
    monkeypatch.setattr(policy, "cpu_quota", lambda: None)
    assert policy.usable_cpus() == (ids, len(ids))


def test_a_busy_core_is_seen_at_once():
    """/proc/stat, measured while one process spins on one of this process's cores: that core is not
    idle. (The 1-minute load average would take a minute to see it, and counts this process's own
    past work as busy.)"""
    import multiprocessing
    import os
    import time

    if policy.idle_cpus({0}) is None:
        pytest.skip("no /proc/stat here: free_cores falls back to the load average")
    cpu = min(os.sched_getaffinity(0))
    spinner = multiprocessing.get_context("spawn").Process(target=spin_on, args=(cpu,), daemon=True)
    spinner.start()
    try:
        time.sleep(0.5)
        assert policy.idle_cpus({cpu}, seconds=0.3) < 0.2
    finally:
        spinner.terminate()
        spinner.join()


def test_idle_cpus_measures_over_its_default_window(monkeypatch):
    """Called as free_cores calls it, with no window given: a figure between 0 and the CPUs named,
    over a window of some time (none would measure a few ticks, or none) short enough to wait
    for at every start (under half a second)."""
    import os
    import time

    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else {0}
    if not os.path.exists("/proc/stat"):
        pytest.skip("no /proc/stat here: free_cores falls back to the load average")
    windows, sleep = [], time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: windows.append(s) or sleep(s))
    idle = policy.idle_cpus(cpus)
    assert len(windows) == 1 and 0 < windows[0] < 0.5
    assert idle is not None and 0 <= idle <= len(cpus)


def test_choosing_again_with_no_request_is_the_policy():
    """bench.load re-chooses an engine's threads: given no count, the policy's (one thread for a
    small model, the free cores for its wide forwards), not the count asked before."""
    threads = policy.Threads(5_850_000, requested=2, free=FREE)
    threads.choose(free=FREE)
    assert (threads.n, threads.wide.threads) == (1, 2)


def test_no_proc_stat_is_no_idle_figure(monkeypatch):
    """Where /proc/stat cannot be read (macOS, Windows): None, so that free_cores reads the load
    average instead (0 idle CPUs would be a figure, and 1 free core)."""
    def unreadable(path):
        raise FileNotFoundError(path)

    monkeypatch.setattr(policy, "open", unreadable, raising=False)
    assert policy.idle_cpus({0}, seconds=0) is None


def test_the_threads_read_back_are_the_most_any_library_runs(monkeypatch):
    """NumPy's BLAS and SciPy's each run their own count: the report names the most."""
    monkeypatch.setattr(policy, "blas_libraries", lambda: (CappedBlas(64, 2), CappedBlas(64, 4)))
    assert policy.blas_threads() == 4


def test_no_cpu_of_the_ids_in_proc_stat_is_no_idle_figure(monkeypatch):
    """/proc/stat names none of the CPUs asked about: None (free_cores then reads the load
    average), not 0 idle CPUs."""
    import io

    monkeypatch.setattr(policy, "open", lambda path: io.StringIO("cpu  1 0 0 9 0 0 0 0\n"),
                        raising=False)
    assert policy.idle_cpus({0}, seconds=0) is None


def test_no_blas_found_is_no_library_and_no_family(monkeypatch):
    """threadpoolctl lists no BLAS (Apple's Accelerate): (None, None), which the report's line reads
    as no library to set."""
    import threadpoolctl

    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: [])
    assert policy.blas_kernels.__wrapped__() == (None, None)


@pytest.mark.parametrize("stat, own, idle", [
    # a busy CPU, this process asleep: its times as floats leave (u + s) - u - s = -3.5e-18
    (("cpu0 100 0 100 1000 50 0 0 0", "cpu0 190 0 110 1000 50 0 0 0"), (0.01, 0.02), 0.0),
    # a busy CPU whose iowait ticks fell (Linux counts iowait per CPU, not monotonically)
    (("cpu0 100 0 100 1000 50 0 0 0", "cpu0 190 0 110 1000 40 0 0 0"), (0.0, 0.0), 0.0),
    # one CPU idle, one busy: 1
    (("cpu0 0 0 0 1000 0 0 0 0\ncpu1 50 0 0 10 0 0 0 0",
      "cpu0 0 0 0 1100 0 0 0 0\ncpu1 150 0 0 10 0 0 0 0"), (0.0, 0.0), 1.0)])
def test_idle_cpus_never_below_zero(monkeypatch, stat, own, idle):
    """/proc/stat and this process's times as read before and after: the idle CPUs, at least 0
    (free_cores' line would say "-0.0 idle now")."""
    import io
    import os
    from types import SimpleNamespace

    reads = iter(stat)
    monkeypatch.setattr(policy, "open", lambda path: io.StringIO(next(reads)), raising=False)
    monkeypatch.setattr(os, "times", lambda: SimpleNamespace(user=own[0], system=own[1]))
    found = policy.idle_cpus({0, 1}, seconds=0.001)
    assert found == idle and str(found) != "-0.0"


BEFORE = """cpu  110 0 0 2405 0 7 0 0 50 0
cpu0 0 0 0 1000 0 0 0 0 50 0
cpu1 100 0 0 1000 0 7 0 0 0 0
cpu2 10 0 0 400 0 0 0 0 0 0
cpu3 0 0 0 5 0 0 0 0 0 0
intr 123 4 5
"""
AFTER = """cpu  260 0 0 2985 20 7 0 50 150 0
cpu0 0 0 0 1050 0 0 0 50 150 0
cpu1 250 0 0 1030 20 7 0 0 0 0
cpu2 10 0 0 400 0 0 0 0 0 0
cpu3 0 0 0 5 0 0 0 0 0 0
cpu4 0 0 0 100 0 0 0 0 0 0
intr 456 7 8
"""


def test_idle_cpus_reads_proc_stat_as_linux_writes_it(monkeypatch):
    """The whole of /proc/stat: the all-CPU line and the others skipped, idle + iowait over the
    first 8 columns (guest time is inside user already), steal counted as not idle, a CPU of no
    ticks in between or none before (brought online meanwhile) left out, a CPU outside the ids
    too, and this process's own CPU time (busy, but on its own behalf) counted as idle."""
    import io
    import os
    import time
    from types import SimpleNamespace

    reads, clock = iter([BEFORE, AFTER]), iter([1.0, 1.5])
    times = iter([SimpleNamespace(user=0.25, system=0.25), SimpleNamespace(user=0.5, system=0.5)])
    monkeypatch.setattr(policy, "open", lambda path: io.StringIO(next(reads)), raising=False)
    monkeypatch.setattr(os, "times", lambda: next(times))
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    # cpu0: 50 idle of 100 ticks (50 of them stolen) = 0.5; cpu1: 30 idle + 20 iowait of 200
    # = 0.25; cpu2 no ticks, cpu3 not ours, cpu4 new; own: 0.5 s of CPU over 0.5 s = 1.0
    assert policy.idle_cpus({0, 1, 2, 4}, seconds=0) == 0.5 + 0.25 + 1.0


def spin_on(cpu):
    import os

    os.sched_setaffinity(0, {cpu})
    while True:
        pass


@pytest.mark.parametrize("args, env, expected", [([], {}, 1), (["--threads", "2"], {}, 2),
                                                  ([], {"PICOSPEC_THREADS": "2"}, 2)])
def test_main_applies_and_reports_the_policy(args, env, expected, tmp_path):
    r = run_here(["main.py", "--method", "autoregressive", "--n_tokens", "2", "--runs", "1",
                  "--json", *args], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)["threads"]
    # read from the library inside an engine call
    assert threads["threads"] == expected and threads["blas"] == expected


def test_wide_forwards_get_the_free_cores_on_small_models_only():
    assert policy.choose_wide(5_850_000, 1, free=FREE) == (2, "2 of 2 cores free (2.0 idle now)")
    # a large model: its own count
    assert policy.choose_wide(124_000_000, 3, free=FREE) == (3, "as every product")
    # --threads decides all
    assert policy.choose_wide(5_850_000, 1, requested=1, free=FREE) == (1, "as every product")


def test_no_wide_count_and_no_scope_on_a_gpu(monkeypatch):
    from picospec_app.machine import wide_line

    assert policy.Threads(5_850_000, free=FREE).report()["wide"]["threads"] == 2
    gpu = policy.Threads(5_850_000, device="gpu", free=FREE)
    report = gpu.report()
    assert report["wide"]["threads"] == 1 and wide_line(report) == ""
    with policy.blas_limit(2):
        with gpu.scope(100):
            assert policy.blas_threads() == 2


@pytest.mark.parametrize("engine_kind", ["single", "batched", "self_draft", "eagle"])
def test_wide_forwards_run_on_the_wide_count_and_restore_it(monkeypatch, engine_kind):
    """Inside a forward of WIDE_ROWS token rows or more (layers and LM head) the BLAS library
    reports the engine's wide count; a short forward runs on its own count; after either, the
    process has the count it had before."""
    import numpy as np

    import gpt2.engine as engine
    import gpt2.self_draft as self_draft
    from gpt2.eagle import EagleHead, init_eagle
    from tests.support.micro import random_gpt2

    seen = []

    def spy(f):
        def g(*args, **kwargs):
            seen.append(policy.blas_threads())
            return f(*args, **kwargs)
        return g

    hparams, params = random_gpt2(n_ctx=128, n_embd=32, n_head=2)
    model = engine.GPT2(hparams, params, ops="cpu", free=FREE)
    threads = model.plan.threads
    assert (threads.n, threads.wide.threads) == (1, 2)
    # every product of the forward and the LM head records the count it ran on
    object.__setattr__(model.plan, "ops", model.plan.ops._replace(
        matmul=spy(model.plan.ops.matmul)))
    if engine_kind == "batched":
        model = engine.BatchGPT2(model, 8)
        wide, narrow = (lambda: model([list(range(10))] * 8, 5)), (lambda: model([[1, 2]] * 8))
    elif engine_kind == "self_draft":  # the target side's verification: every sublayer, the head
        sd = self_draft.SelfDraft(hparams, model.params, skip=[1], plan=model.plan)
        model = self_draft.BatchSelfDraft(sd, 8).target
        wide, narrow = (lambda: model([list(range(10))] * 8, 5)), (lambda: model([[1, 2]] * 8))
    elif engine_kind == "eagle":
        head, config = init_eagle(hparams["n_embd"], 2, np.random.default_rng(0))
        eagle = EagleHead(head, config, model.params["wte"], 64, model.plan.ops, threads)
        F = np.zeros((40, hparams["n_embd"]), np.float32)
        wide, narrow = (lambda: eagle(list(range(41)), F)), (lambda: eagle([1, 2], F[:1]))
    else:
        wide, narrow = (lambda: model(list(range(40)), 40)), (lambda: model([1, 2]))
    with policy.blas_limit(3):
        wide()
        if engine_kind == "eagle":  # its LM head multiplies the last pair's guess only: one row
            assert seen.pop() == 1
        assert seen and set(seen) == {2}  # every product of the 40-row forward ran on 2 threads
        seen.clear()
        narrow()
        assert seen and set(seen) == {1}
        assert policy.blas_threads() == 3


def test_building_engines_changes_nothing_in_the_process(monkeypatch):
    """Library code (a notebook, a benchmark) gets main.py's policy in each engine it builds, a
    small draft its own count beside a large target's, and the process keeps its count."""
    import gpt2.engine as engine
    from tests.support.micro import random_gpt2

    with policy.blas_limit(3):
        small = engine.GPT2(*random_gpt2(n_ctx=64, n_embd=32, n_head=2), free=FREE)
        monkeypatch.setattr(policy, "SMALL_MODEL", small.n_params + 1)
        large = engine.GPT2(*random_gpt2(n_ctx=64, n_embd=48, n_head=2), free=FREE)
        asked = engine.GPT2(*random_gpt2(n_ctx=64, n_embd=48, n_head=2), threads=1, free=FREE)
        assert (small.plan.threads.n, large.plan.threads.n, asked.plan.threads.n) \
            == (1, 2, 1)
        assert policy.blas_threads() == 3


def test_the_blas_libraries_are_found_once():
    """Every engine call opens a blas_limit, which asks for the libraries: threadpoolctl walks
    every loaded library to find them, once per process, not once per forward."""
    assert policy.blas_libraries() is policy.blas_libraries()


def test_no_threadpoolctl_is_no_library_to_set(monkeypatch):
    """Without threadpoolctl (requirements.txt not installed): no library found, no count read,
    and a scope that sets nothing, not a crash at the first forward."""
    import sys

    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # its import raises ImportError
    policy.blas_libraries.cache_clear()
    policy.blas_kernels.cache_clear()
    try:
        assert policy.blas_libraries() == () and policy.blas_threads() is None
        assert policy.blas_kernels() == (None, None)
        with policy.blas_limit(2):
            assert policy.blas_threads() is None
    finally:
        policy.blas_libraries.cache_clear()
        policy.blas_kernels.cache_clear()


def test_panels_with_openblas_and_a_request_over_it(monkeypatch):
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", "SkylakeX"))
    assert policy.panel_policy(5_000_000)["on"]
    assert not policy.panel_policy(policy.PANEL_MAX_PARAMS + 1)["on"]
    assert not policy.panel_policy(5_000_000, requested=False)["on"]
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("mkl", None))
    assert not policy.panel_policy(5_000_000)["on"]
    assert policy.panel_policy(5_000_000, requested=True)["on"]


def scoped_counts(threads, rows):
    """The BLAS count each forward of `rows` token rows would be scoped to."""
    seen = []

    class Recording:
        def __init__(self, n):
            seen.append(n)

        def __enter__(self):
            pass

        def __exit__(self, *exc):
            pass

    original, policy.blas_limit = policy.blas_limit, Recording
    try:
        for r in rows:
            with threads.scope(r):
                pass
    finally:
        policy.blas_limit = original
    return seen


def test_the_wide_count_starts_past_the_panels_range():
    """Rows 1..MAX_ROWS are the panels' range and run on the engine's count; from MAX_ROWS + 1 on,
    the wide count (the free cores, for a small model)."""
    from gpt2.fast.panels import MAX_ROWS

    threads = policy.Threads(5_850_000, free=FREE)
    assert scoped_counts(threads, [1, 2, MAX_ROWS, MAX_ROWS + 1, 200]) == [1, 1, 1, 2, 2]
    assert MAX_ROWS == 32 and policy.WIDE_ROWS == 33


@pytest.mark.parametrize("requested", [1, 2])
def test_threads_requested_caps_every_forward(requested):
    """--threads N (or PICOSPEC_THREADS) is every forward's count, wide ones included."""
    threads = policy.Threads(5_850_000, requested=requested, free=(4, 4, "4.0 idle now"))
    assert scoped_counts(threads, [1, 33, 500]) == [requested] * 3
    assert threads.report()["wide"]["threads"] == requested


def test_the_app_passes_threads_to_every_engine():
    """main.py's --threads 1 reaches the engine's wide count."""
    from gpt2.engine import GPT2
    from picospec_app.settings import Settings, engine_choices
    from tests.support.micro import random_gpt2

    model = GPT2(*random_gpt2(n_ctx=64, n_embd=32, n_head=2),
                 **engine_choices(Settings(), threads=1))
    assert scoped_counts(model.plan.threads, [1, 40]) == [1, 1]


@pytest.mark.parametrize("idle, cpus, free", [(1.8, 2, 2), (1.4, 2, 1), (0.2, 2, 1),
                                              (3.6, 4, 4), (2.7, 4, 3), (9.0, 4, 4)])
def test_free_cores_are_the_idle_ones_rounded(monkeypatch, idle, cpus, free):
    """1.8 idle cores are 2 free ones (rounded, not cut), at least 1, at most the usable cores."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(policy, "idle_cpus", lambda ids: idle)
    assert policy.free_cores()[:2] == (free, cpus)


@pytest.mark.parametrize("arch", ["SkylakeX", "Cooperlake", "SapphireRapids"])
def test_panels_on_every_kernel_family_with_direct_sgemm(monkeypatch, arch):
    """OpenBLAS's AVX-512 families share the direct SGEMM for small products: panels on."""
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", arch))
    assert policy.panel_policy(5_850_000) == {
        "on": True, "why": f"OpenBLAS {arch} kernels: direct SGEMM for small products"}


@pytest.mark.parametrize("arch", ["Haswell", "Zen", "Sandybridge", "Nehalem"])
def test_panels_by_row_on_openblas_without_direct_sgemm(monkeypatch, arch):
    """Without the direct SGEMM, OpenBLAS packs all of W for any product of two rows or more: a
    few rows go one by one through the panels (GEMVs)."""
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", arch))
    report = policy.panel_policy(5_850_000)
    assert report["on"] and arch in report["why"] and "one by one" in report["why"]
    assert policy.panel_form() == "panel_rows"


@pytest.mark.parametrize("arch", ["Prescott", "Katmai", "Core2", "NEOVERSEN1", None])
def test_no_panels_with_kernels_whose_gemv_is_slow(monkeypatch, arch):
    """numpy 1.26's OpenBLAS runs its Prescott kernels on CPUs newer than it knows: their GEMV is so
    slow that five rows one by one through the panels cost 4.2-4.4 one-row calls against 1.6 for
    one SGEMM (results/ops.md, Katmai's kernels). Panels stay off with any kernels they were not
    measured to gain with, and the reason names those; a request still turns them on, in the
    by-row form."""
    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", arch))
    assert policy.panel_policy(5_850_000) == {
        "on": False, "why": f"OpenBLAS {arch or 'unknown'} kernels: the panels gain only with the "
                            f"Nehalem, Sandybridge, Haswell, Zen and AVX-512 kernels"}
    assert policy.panel_policy(5_850_000, requested=True)["on"]
    assert policy.panel_form() == "panel_rows"


@pytest.mark.parametrize("library, arch, found", [
    ("mkl", None, "mkl"), ("blis", "zen3", "blis zen3"), ("flexiblas", None, "flexiblas"),
    (None, None, "unknown")])
def test_panels_off_on_other_libraries(monkeypatch, library, arch, found):
    """threadpoolctl names no kernel family for MKL, and no library where it finds none (Apple's
    Accelerate): the reason names what it found, never "None"."""
    monkeypatch.setattr(policy, "blas_kernels", lambda: (library, arch))
    assert policy.panel_policy(5_850_000) == {
        "on": False, "why": f"BLAS {found}: the panels are measured on OpenBLAS only"}


@pytest.mark.parametrize("kind, pad_rows", [("cpu", 4), ("reference", 1), ("panels", 1),
                                            ("panel_rows", 1),
                                            ("own ops", 4)])
def test_row_padding_follows_the_operations(kind, pad_rows):
    """The CPU operations pad a pass's rows to a multiple of 4, a caller's own Ops value too (it
    runs on the same BLAS); the reference and the panels do not; a request wins."""
    from gpt2.fast import Choices, build, ops
    from tests.support.micro import random_gpt2

    hparams, params = random_gpt2(n_ctx=32, n_embd=16, n_head=2)
    asked = ops.CPU._replace(gelu=ops.CPU.gelu) if kind == "own ops" else kind
    assert build(params, 10_000, Choices(ops=asked)).pad_rows == pad_rows
    assert build(params, 10_000, Choices(ops=asked, pad_rows=2)).pad_rows == 2


@pytest.mark.parametrize("requested, most, line", [
    (8, 4, "8 threads (requested; the library runs 4, its most)"),
    (4, 4, "4 threads (requested)"), (2, 64, "2 threads (requested)")])
def test_the_blas_line_says_the_threads_the_library_ran(monkeypatch, requested, most, line):
    """More threads than the library can run (--threads 256 on a wheel's OpenBLAS: 64): the line
    names the count it ran; the JSON's "blas" is that count too."""
    from picospec_app.machine import blas_line, thread_policy

    library = CappedBlas(most)
    monkeypatch.setattr(policy, "blas_libraries", lambda: (library,))
    report = thread_policy(124_000_000, requested)
    assert report["blas"] == min(requested, most)
    assert f"; {line}; small-matrix path " in blas_line(report)
    library.n = 3  # on a GPU the report reads the process's count: the model calls no BLAS
    assert "; 1 thread (GPU); " in blas_line(thread_policy(124_000_000, 1, device="gpu"))


@pytest.mark.parametrize("lines, files, quota", [
    # cgroup v2 alone (a container's --cpus=2): the process's folder
    (["0::/"], {"cpu.max": "200000 100000\n"}, 2.0),
    (["0::/"], {"cpu.max": "max 100000\n"}, None),
    # a systemd slice two levels up grants 1.5; its child grants more: the least holds
    (["0::/a.slice/b.service"], {"a.slice/cpu.max": "150000 100000",
                                 "a.slice/b.service/cpu.max": "400000 100000"}, 1.5),
    # cgroup v1, cpu and cpuacct mounted together, and v2 beside it (hybrid) with no limit
    (["4:memory:/", "2:cpu,cpuacct:/docker/1f", "0::/"],
     {"cpu,cpuacct/docker/1f/cpu.cfs_quota_us": "50000", "cpu,cpuacct/docker/1f/cpu.cfs_period_us":
      "100000", "unified/cgroup.procs": ""}, 0.5),
    (["1:cpu:/"], {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}, None),
    # a v1 path the container does not mount (no cgroup namespace): its root's files hold
    (["1:cpu:/docker/9c"], {"cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us":
                            "100000"}, 3.0),
    # a folder's name may hold colons (the line's third field is the rest of it)
    (["0::/a:b.slice"], {"a:b.slice/cpu.max": "150000 100000"}, 1.5),
    ([], {}, None), (["garbage"], {"cpu.max": "200000 100000"}, None),
    # no quota of 0 CPUs, no division by a period of 0; 1 microsecond is a quota and a period
    (["0::/"], {"cpu.max": "0 100000\n"}, None), (["0::/"], {"cpu.max": "100000 0\n"}, None),
    (["0::/"], {"cpu.max": "1 1\n"}, 1.0),
    # a line of no three fields is skipped, and the lines after it still read
    (["garbage", "0::/"], {"cpu.max": "200000 100000"}, 2.0),
    # v1: another controller's line is not the cpu one's; a controller not mounted here is none
    (["4:memory:/other", "1:cpu:/"], {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us":
                                      "100000", "cpu/other/cpu.cfs_quota_us": "100000",
                                      "cpu/other/cpu.cfs_period_us": "100000"}, None),
    (["2:cpu:/x"], {}, None)])
def test_a_cgroup_cpu_quota_is_read(tmp_path, lines, files, quota):
    proc, mount = cgroup_tree(tmp_path, lines, files)
    assert policy.cpu_quota(policy.cgroup_folders("cpu", proc, mount)) == quota


def test_no_proc_file_is_no_cgroup(tmp_path):
    """No /proc/self/cgroup (macOS, Windows): no folders to read, and no quota."""
    proc = str(tmp_path / "no-proc")
    assert policy.cgroup_folders("cpu", proc, str(tmp_path)) == []
    assert policy.cpu_quota(policy.cgroup_folders("cpu", proc, str(tmp_path))) is None


def test_a_cgroup_named_in_bytes_of_no_encoding_is_read(tmp_path):
    """A cgroup folder's name is any bytes (mkdir by hand, a Latin-1 name): /proc/self/cgroup names
    it in those bytes; its quota is read there, not a UnicodeDecodeError at every start."""
    import os

    name = os.fsdecode(b"caf\xe9")  # not UTF-8
    try:
        proc, mount = cgroup_tree(tmp_path, [], {f"{name}/cpu.max": "150000 100000\n"})
    except (OSError, UnicodeError):
        pytest.skip("this file system takes UTF-8 names only")
    with open(proc, "wb") as f:
        f.write(b"0::/caf\xe9\n")
    assert policy.cpu_quota(policy.cgroup_folders("cpu", proc, mount)) == 1.5


@pytest.mark.parametrize("quota, cpus, idle, free", [(None, 8, 7.6, (8, 8)), (2.0, 8, 7.6, (2, 2)),
                                                     (1.5, 8, 7.6, (1, 1)), (0.5, 8, 0.2, (1, 1)),
                                                     (3.0, 8, 2.2, (2, 3))])
def test_a_cpu_quota_bounds_the_cores(monkeypatch, quota, cpus, idle, free):
    """A container given 2 CPUs on an 8-core host sees 8 idle host cores: 2 threads, not 8."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(policy, "cpu_quota", lambda: quota)
    monkeypatch.setattr(policy, "idle_cpus", lambda ids: idle)
    assert policy.free_cores()[:2] == free
    assert policy.usable_cores()[:2] == (free[1], free[1])


@pytest.mark.parametrize("quota, idle, load, how", [
    (2.0, 60.3, None, "60.3 idle now of 64 CPUs, 2 within the CPU quota"),
    (1.5, 60.3, None, "60.3 idle now of 64 CPUs, 1 within the CPU quota"),
    (2.0, None, 3.5, "1-minute load 3.5 of 64 CPUs, 2 within the CPU quota"),
    (None, 60.3, None, "60.3 idle now"), (64.0, 60.3, None, "60.3 idle now")])
def test_the_free_cores_line_says_the_quota_bounds_them(monkeypatch, quota, idle, load, how):
    """A container given 2 CPUs on a 64-core host measures the host's idle CPUs: "2 of 2 cores
    free (60.3 idle now)" would name more idle CPUs than the process may use; the line says which
    CPUs the figure counts, and what the quota leaves."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load), raising=False)
    monkeypatch.setattr(policy, "cpu_quota", lambda: quota)
    monkeypatch.setattr(policy, "idle_cpus", lambda ids: idle)
    assert policy.free_cores()[2] == how


@pytest.mark.parametrize("loadavg", ["missing", "unreadable"])
def test_no_idle_figure_and_no_load_average_is_not_measured(monkeypatch, loadavg):
    """No /proc/stat and no load average (Windows has no os.getloadavg; it raises OSError where
    the system gives none): every usable core, said "not measured", not "1-minute load 0.0" (a
    load nobody read)."""
    import os

    def unreadable():
        raise OSError("Load averages are unobtainable")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(policy, "cpu_quota", lambda: None)
    monkeypatch.setattr(policy, "idle_cpus", lambda ids: None)
    if loadavg == "missing":
        monkeypatch.delattr(os, "getloadavg", raising=False)
    else:
        monkeypatch.setattr(os, "getloadavg", unreadable)
    assert policy.free_cores() == (3, 3, "not measured")
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 1.0, 1.0), raising=False)
    assert policy.free_cores() == (2, 3, "1-minute load 1.2")
    # a load above the CPUs leaves none idle: still 1 to run on, and the line says none is free
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 1.0, 1.0), raising=False)
    assert policy.free_cores() == (1, 3, "none free: 1-minute load 5.0")
    assert policy.cores_free(*policy.free_cores()) == "1 of 3 cores (none free: 1-minute load 5.0)"
    monkeypatch.setattr(policy, "idle_cpus", lambda ids: 0.2)
    assert policy.cores_free(*policy.free_cores()) == "1 of 3 cores (none free: 0.2 idle now)"
    monkeypatch.setattr(policy, "idle_cpus", lambda ids: 0.6)  # rounds to one free core
    assert policy.cores_free(*policy.free_cores()) == "1 of 3 cores free (0.6 idle now)"


def test_numpy_blas_is_numpys_where_another_library_loaded_its_own_first():
    """SciPy (or torch) may load its own OpenBLAS before NumPy's is listed: the kernel family and
    version reported are those of the BLAS under NumPy's folder; elsewhere (a conda BLAS) the
    first one."""
    from pathlib import Path

    home = Path(np.__file__).resolve().parent
    scipy = {"user_api": "blas", "internal_api": "openblas", "version": "0.3.30",
             "architecture": "Zen", "filepath": str(home.parent / "scipy.libs" / "libopenblas.so")}
    mine = {**scipy, "version": "0.3.31", "architecture": "Haswell",
            "filepath": str(home.parent / "numpy.libs" / "libscipy_openblas64_.so")}
    omp = {"user_api": "openmp", "filepath": str(home / "libgomp.so")}
    assert policy.numpy_blas([omp, scipy, mine]) is mine
    assert policy.numpy_blas([scipy]) is scipy and policy.numpy_blas([omp]) is None
    lookalike = {**mine, "filepath": str(home.parent / "numpy_extra" / "libopenblas.so")}
    assert policy.numpy_blas([scipy, lookalike]) is scipy
