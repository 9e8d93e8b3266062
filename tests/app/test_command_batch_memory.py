"""--batch's memory plan (picospec_app/plan.py row_groups, run.py run_batch): rows run in groups
that fit half the free memory, as --batch_memory's help says, or the MB given; an allocation that
still fails (a group's caches, or its run) ends in one line naming --batch_memory."""
import types

import pytest

from picospec_app import plan, run
from picospec_cli import UsageError

MB = 2**20


@pytest.fixture
def rows_of_10_mb(monkeypatch):
    monkeypatch.setattr(plan, "batch_row_bytes", lambda loaded, tokens: 10 * MB)


def groups(n_rows, batch_memory=None):
    asked = types.SimpleNamespace(batch_memory=batch_memory, n_tokens=8, device="cpu")
    return plan.row_groups(asked, [[1, 2]] * n_rows, {}).rows


@pytest.mark.parametrize("free_mb, sizes", [(100, [5, 5, 2]), (60, [3, 3, 3, 3]),
                                            (1000, [12]), (None, [12])])
def test_groups_fit_half_the_free_memory(monkeypatch, rows_of_10_mb, free_mb, sizes):
    """Rows of 10 MB: 100 MB free -> 50 MB -> groups of 5; unreadable -> the default 4096 MB."""
    monkeypatch.setattr(plan, "free_memory",
                        lambda device: None if free_mb is None else free_mb * MB)
    assert [len(g) for g in groups(12)] == sizes


def test_a_budget_of_one_row_runs_the_rows_one_by_one(rows_of_10_mb):
    assert [len(g) for g in groups(3, batch_memory=10)] == [1, 1, 1]


def test_a_row_is_sized_for_the_longest_prompt_and_the_new_tokens(monkeypatch):
    asked = []
    monkeypatch.setattr(plan, "batch_row_bytes", lambda loaded, tokens: asked.append(tokens) or MB)
    rows = types.SimpleNamespace(batch_memory=10, n_tokens=8, device="cpu")
    plan.row_groups(rows, [[1, 2], [1, 2, 3, 4, 5], [1]], {})
    assert asked == [5 + 8]


def test_a_row_over_half_the_free_memory_says_how_much_that_is(monkeypatch):
    monkeypatch.setattr(plan, "batch_row_bytes", lambda loaded, tokens: 80 * MB)
    monkeypatch.setattr(plan, "free_memory", lambda device: 100 * MB)
    with pytest.raises(UsageError, match=r"one row needs about 80 MB .*, more than half the free "
                                         r"memory \(50 MB\): pass --batch_memory 80 or more"):
        groups(2)


def test_unreadable_free_memory_plans_on_4096_mb(monkeypatch):
    """Rows of 1000 MB, free memory unreadable: 4096 MB hold 4 of them a group."""
    monkeypatch.setattr(plan, "batch_row_bytes", lambda loaded, tokens: 1000 * MB)
    monkeypatch.setattr(plan, "free_memory", lambda device: None)
    assert [len(g) for g in groups(9)] == [4, 4, 1]


def test_batch_memory_is_the_budget_and_free_memory_is_not_read(monkeypatch, rows_of_10_mb):
    monkeypatch.setattr(plan, "free_memory", lambda device: pytest.fail("read free memory"))
    assert [len(g) for g in groups(7, batch_memory=30)] == [3, 3, 1]
    with pytest.raises(UsageError, match=r"one row needs about 10 MB .* pass --batch_memory 10"):
        groups(2, batch_memory=9)


@pytest.mark.parametrize("where", ["caches", "run"])
def test_out_of_memory_in_a_group_is_one_line(monkeypatch, where):
    """A group whose caches (or whose run) cannot be allocated: ValueError naming --batch_memory."""
    def fail(*args, **kw):
        raise MemoryError

    if where == "caches":
        monkeypatch.setattr(run, "batched_models", fail)
    else:
        monkeypatch.setattr(run, "batched_models", lambda loaded, rows: {})
        monkeypatch.setattr(run, "call", fail)
    with pytest.raises(ValueError, match=r"^--batch: out of memory with groups of 2 rows: pass a "
                                         r"smaller --batch_memory than 20$"):
        run.run_batch(run.find("speculative"), [[1], [2], [3]], {},
                      plan.Groups([[0, 1], [2]], 10 * MB), 4, 0, {}, {}, progress=False)


@pytest.mark.parametrize("lines, files, free", [
    # v2 (a container's --memory=1g): 1 GiB - 600 MiB used + 100 MiB of page cache it may drop
    (["0::/"], {"memory.max": f"{2**30}", "memory.current": f"{600 * MB}",
                "memory.stat": f"anon 1\ninactive_file {100 * MB}\n"}, 2**30 - 500 * MB),
    (["0::/"], {"memory.max": "max", "memory.current": "5", "memory.stat": ""}, None),
    # no page cache named in memory.stat: none added
    (["0::/"], {"memory.max": f"{100 * MB}", "memory.current": f"{40 * MB}",
                "memory.stat": "anon 5\n"}, 60 * MB),
    # a slice above grants less than its service: the least holds
    (["0::/a.slice/b.service"], {"a.slice/memory.max": f"{300 * MB}",
                                 "a.slice/memory.current": f"{100 * MB}", "a.slice/memory.stat": "",
                                 "a.slice/b.service/memory.max": f"{2**30}",
                                 "a.slice/b.service/memory.current": f"{100 * MB}",
                                 "a.slice/b.service/memory.stat": ""}, 200 * MB),
    # a service folder of no limit files (none set there, or unreadable): the slice above holds
    (["0::/a.slice/b.service"], {"a.slice/memory.max": f"{300 * MB}",
                                 "a.slice/memory.current": f"{100 * MB}",
                                 "a.slice/memory.stat": ""}, 200 * MB),
    # v1: "no limit" is written as about 2^63; a limit in a parent folder holds
    (["4:memory:/a/b"], {"memory/a/b/memory.limit_in_bytes": "9223372036854771712",
                         "memory/a/b/memory.usage_in_bytes": "7", "memory/a/b/memory.stat": "",
                         "memory/a/memory.limit_in_bytes": f"{300 * MB}",
                         "memory/a/memory.usage_in_bytes": f"{400 * MB}",
                         "memory/a/memory.stat": f"total_inactive_file {50 * MB}\n"}, 0),
    (["4:memory:/"], {"memory/memory.limit_in_bytes": "9223372036854771712",
                      "memory/memory.usage_in_bytes": "7", "memory/memory.stat": ""}, None),
    ([], {}, None)])
def test_a_cgroup_memory_limit_is_read(tmp_path, lines, files, free):
    from gpt2.fast.policy import cgroup_folders
    from picospec_app import machine
    from tests.support.cgroups import cgroup_tree

    proc, mount = cgroup_tree(tmp_path, lines, files)
    assert machine.cgroup_memory_free(cgroup_folders("memory", proc, mount)) == free


@pytest.mark.parametrize("host, limit, free", [(8 * MB, None, 8 * MB), (8 * MB, 3 * MB, 3 * MB),
                                               (None, 3 * MB, 3 * MB), (None, None, None)])
def test_free_memory_is_the_least_of_the_host_and_a_cgroup_limit(monkeypatch, host, limit, free):
    """A container with 1 GiB on a 64 GiB host plans --batch for 1 GiB."""
    from picospec_app import machine

    monkeypatch.setattr(machine, "host_memory", lambda: host)
    monkeypatch.setattr(machine, "cgroup_memory_free", lambda: limit)
    assert machine.free_memory() == free


@pytest.mark.parametrize("meminfo, free", [
    ("MemTotal:       16384 kB\nMemFree:         2048 kB\nMemAvailable:    8192 kB\n",
     8192 * 1024),
    # a kernel before 3.14 writes no MemAvailable; no /proc/meminfo (macOS): physical memory
    ("MemTotal:       16384 kB\nMemFree:         2048 kB\n", 4096 * 1000), (None, 4096 * 1000)])
def test_host_memory_is_memavailable_else_the_physical_memory(monkeypatch, meminfo, free):
    import io
    import os

    from picospec_app import machine

    def read(path):
        if meminfo is None:
            raise FileNotFoundError(path)
        return io.StringIO(meminfo)

    monkeypatch.setattr(machine, "open", read, raising=False)
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096,
                                                     "SC_PHYS_PAGES": 1000}[name])
    assert machine.host_memory() == free


def test_no_meminfo_and_no_page_count_is_no_host_figure(monkeypatch):
    import os

    from picospec_app import machine

    def fail(*args):
        raise OSError("none here")

    def no_page_count(name):
        raise ValueError(f"unrecognized configuration name {name!r}")

    monkeypatch.setattr(machine, "open", fail, raising=False)
    monkeypatch.setattr(os, "sysconf", no_page_count)
    assert machine.host_memory() is None


def test_the_cgroup_limit_read_is_this_process_s_memory_cgroup(tmp_path, monkeypatch):
    """With no folders given, cgroup_memory_free reads the folders of the memory controller."""
    from gpt2.fast.policy import cgroup_folders
    from picospec_app import machine
    from tests.support.cgroups import cgroup_tree

    proc, mount = cgroup_tree(tmp_path, ["0::/"], {"memory.max": f"{100 * MB}",
                                                   "memory.current": f"{40 * MB}",
                                                   "memory.stat": ""})
    asked = []
    monkeypatch.setattr(machine, "cgroup_folders",
                        lambda controller: asked.append(controller)
                        or cgroup_folders(controller, proc, mount))
    assert machine.cgroup_memory_free() == 60 * MB and asked == ["memory"]


def test_the_gpus_free_memory_is_its_free_bytes(monkeypatch):
    """CuPy's Device().mem_info is (free, total): --batch plans on the free bytes."""
    from types import SimpleNamespace

    from gpt2 import backend
    from picospec_app import machine

    cuda = SimpleNamespace(Device=lambda: SimpleNamespace(mem_info=(3 * MB, 16 * MB)))
    monkeypatch.setattr(backend, "get_xp", lambda device: SimpleNamespace(cuda=cuda))
    assert machine.free_memory("gpu") == 3 * MB


def test_panels_on_a_gpu_are_off_and_on_the_cpu_the_policys(monkeypatch):
    """A benchmark's header for an engine not built yet: on the GPU no panels (the products are
    CuPy's); on the CPU, the panel policy of this BLAS."""
    from gpt2.fast import policy
    from picospec_app import machine

    monkeypatch.setattr(policy, "blas_kernels", lambda: ("openblas", "Haswell"))
    gpu = machine.thread_policy(5_850_000, 1, device="gpu")
    assert gpu["panels"] == {"on": False, "why": "the model runs on the GPU"}
    assert machine.thread_policy(5_850_000, 1)["panels"] == policy.panel_policy(5_850_000)
    assert machine.thread_policy(5_850_000, 1)["panels"]["on"]


@pytest.mark.parametrize("row_bytes, mb", [(10 * MB + 1, 21), (1000, 1), (MB // 2, 1)])
def test_out_of_memory_advice_rounds_the_groups_megabytes_up(monkeypatch, row_bytes, mb):
    """Groups of 2 rows of 10 MB and a byte ask for 21 MB, of 1000 bytes for 1 MB, of half a MB
    exactly 1: the --batch_memory to go below is never 0 and never one under what a group
    took."""
    def fail(*args, **kw):
        raise MemoryError

    monkeypatch.setattr(run, "batched_models", fail)
    with pytest.raises(ValueError, match=rf"groups of 2 rows: pass a smaller --batch_memory than "
                                         rf"{mb}$"):
        run.run_batch(run.find("speculative"), [[1], [2], [3]], {},
                      plan.Groups([[0, 1], [2]], row_bytes), 4, 0, {}, {}, progress=False)



def test_the_progress_text_counts_groups_from_one(monkeypatch):
    """Three rows in groups of 2 and 1: the bar says "group 1 of 2", then "group 2 of 2"."""
    said = []

    class Bar:  # a progress bar that keeps the texts shown after it
        def __init__(self, **kw):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def set_postfix_str(self, text):
            said.append(text)

        def update(self, n):
            pass

    def call(method, rows, n, rng, needs, sampling, options, stats, batch):
        stats.append({"accepted": [n] * len(rows)})  # one batched call, every row active
        return [list(row) + [0] * n for row in rows]

    monkeypatch.setattr(run, "tqdm", Bar)
    monkeypatch.setattr(run, "batched_models", lambda loaded, rows: {})
    monkeypatch.setattr(run, "call", call)
    out = run.run_batch(run.find("speculative"), [[1], [2], [3]], {},
                        plan.Groups([[0, 1], [2]], MB), 4, 0, {}, {}, progress=True)
    assert said == ["group 1 of 2", "group 2 of 2"]
    assert out["groups"] == [2, 1] and out["target_calls"] == 2
