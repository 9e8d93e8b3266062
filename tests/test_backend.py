"""The BLAS thread policy (gpt2/backend.py): chosen by model size and free cores, overridable,
applied for real (the count is read back from the BLAS library inside a run)."""
import json

import pytest

from clitools import run_here
from gpt2 import backend

# a runtime requirement; absent only where requirements.txt was not installed
pytest.importorskip("threadpoolctl")


@pytest.fixture(autouse=True)
def policy_restored():
    """Every test here leaves the thread policy's process-wide state (the BLAS count and
    backend.APPLIED) as it found it: the other tests of the worker run on it."""
    applied, blas = dict(backend.APPLIED), backend.blas_threads()
    yield
    backend.APPLIED.clear()
    backend.APPLIED.update(applied)
    if blas is not None:
        backend.set_threads(blas)


def test_small_models_get_one_thread_and_the_library_reports_it(monkeypatch):
    monkeypatch.delenv("PICOSPEC_THREADS", raising=False)
    import numpy as np  # noqa: F401  (loads the BLAS library that threadpoolctl limits)

    policy = backend.thread_policy(5_850_000)
    assert policy["threads"] == 1 and "small model" in policy["why"] and backend.blas_threads() == 1


def test_large_models_get_the_free_cores(monkeypatch):
    monkeypatch.delenv("PICOSPEC_THREADS", raising=False)
    monkeypatch.setattr(backend, "free_cores", lambda: (3, 4, "3.2 idle now"))
    assert backend.choose_threads(124_000_000) == (3, "3 of 4 cores free (3.2 idle now)")


def test_overrides_win(monkeypatch):
    monkeypatch.setenv("PICOSPEC_THREADS", "2")
    assert backend.choose_threads(5_000_000)[0] == 2
    assert backend.choose_threads(5_000_000, requested=3)[0] == 3  # --threads over the variable
    for bad in ("many", "0", "99999"):  # the bounds of --threads
        monkeypatch.setenv("PICOSPEC_THREADS", bad)
        message = f"PICOSPEC_THREADS='{bad}': set it to a whole number from 1 to 256"
        with pytest.raises(ValueError, match=message):
            backend.choose_threads(5_000_000)


def test_free_cores_never_below_one():
    free, cpus, how = backend.free_cores()
    assert 1 <= free <= cpus


def test_a_busy_core_is_seen_at_once():
    """/proc/stat, measured while one process spins on one of this process's cores: that core is not
    idle. (The 1-minute load average would take a minute to see it, and counts this process's own
    past work as busy.)"""
    import multiprocessing
    import os
    import time

    if backend.idle_cpus({0}) is None:
        pytest.skip("no /proc/stat here: free_cores falls back to the load average")
    cpu = min(os.sched_getaffinity(0))
    spinner = multiprocessing.get_context("spawn").Process(target=spin_on, args=(cpu,), daemon=True)
    spinner.start()
    try:
        time.sleep(0.5)
        assert backend.idle_cpus({cpu}, seconds=0.3) < 0.2
    finally:
        spinner.terminate()
        spinner.join()


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
    # read from the library inside the run
    assert threads["threads"] == expected and threads["blas"] == expected


def test_wide_forwards_get_the_free_cores_on_small_models_only(monkeypatch):
    monkeypatch.delenv("PICOSPEC_THREADS", raising=False)
    monkeypatch.setattr(backend, "free_cores", lambda: (2, 2, "2.0 idle now"))
    assert backend.choose_wide(5_850_000, 1) == (2, "2 of 2 cores free (2.0 idle now)")
    # a large model: its own count
    assert backend.choose_wide(124_000_000, 3) == (3, "as every product")
    # --threads decides all
    assert backend.choose_wide(5_850_000, 1, requested=1) == (1, "as every product")
    monkeypatch.setenv("PICOSPEC_THREADS", "1")
    assert backend.choose_wide(5_850_000, 1)[0] == 1


def test_no_wide_count_on_a_gpu(monkeypatch):
    monkeypatch.delenv("PICOSPEC_THREADS", raising=False)
    monkeypatch.setattr(backend, "free_cores", lambda: (2, 2, "2.0 idle now"))
    assert backend.thread_policy(5_850_000)["wide"]["threads"] == 2
    policy = backend.thread_policy(5_850_000, device="gpu")
    assert policy["wide"]["threads"] == 1 and backend.wide_line(policy) == ""


@pytest.mark.parametrize("engine_kind", ["single", "batched", "self_draft"])
def test_wide_forwards_run_on_the_wide_count_and_restore_it(monkeypatch, engine_kind):
    """Inside a forward of WIDE_ROWS token rows or more (layers and LM head) the BLAS library
    reports the policy's wide count; a short forward and everything after run on the policy's own
    count."""
    import gpt2.engine as engine
    import gpt2.model as model_module
    import gpt2.self_draft as self_draft
    from micro import random_gpt2

    monkeypatch.delenv("PICOSPEC_THREADS", raising=False)
    monkeypatch.setattr(backend, "free_cores", lambda: (2, 2, "2.0 idle now"))
    policy = backend.thread_policy(5_850_000)
    assert (policy["threads"], policy["wide"]["threads"]) == (1, 2)
    seen = []

    def spy(f):
        def g(*args, **kwargs):
            seen.append(backend.blas_threads())
            return f(*args, **kwargs)
        return g

    class SpiedHead:  # the LM head's weight: x @ it records the BLAS count of the product
        __array_ufunc__ = None

        def __init__(self, w):
            self.w = w

        def __rmatmul__(self, x):
            seen.append(backend.blas_threads())
            return x @ self.w

    hparams, params = random_gpt2(n_ctx=128, n_embd=32, n_head=2)
    model = engine.GPT2(hparams, params)
    model.head = SpiedHead(model.head)
    if engine_kind == "batched":
        monkeypatch.setattr(model_module, "ffn", spy(model_module.ffn))
        model = engine.BatchGPT2(model, 8)
        wide, narrow = (lambda: model([list(range(10))] * 8,
                                      5)), (lambda: model([list(range(11))] * 8))
    # the target side's verification: every sublayer, then the LM head
    elif engine_kind == "self_draft":
        monkeypatch.setattr(self_draft, "ffn", spy(self_draft.ffn))
        monkeypatch.setattr(self_draft, "lm_head", spy(self_draft.lm_head))
        model = self_draft.BatchSelfDraft(self_draft.SelfDraft(hparams, params, skip=[1]), 8).target
        wide, narrow = (lambda: model([list(range(10))] * 8,
                                      5)), (lambda: model([list(range(11))] * 8))
    else:
        monkeypatch.setattr(model_module, "ffn", spy(model_module.ffn))
        wide, narrow = (lambda: model(list(range(40)), 40)), (lambda: model(list(range(41))))
    wide()
    assert seen and set(seen) == {2}  # every spied product of the 40-row forward ran on 2 threads
    seen.clear()
    narrow()
    assert seen and set(seen) == {1}
    assert backend.blas_threads() == 1


def test_building_an_engine_applies_the_policy(monkeypatch):
    """Library code (a notebook, a benchmark) that builds an engine gets main.py's BLAS count
    without asking; a smaller model built after it (a draft) keeps it, a larger one gets its own,
    and a requested count is never overridden."""
    import gpt2.engine as engine
    from micro import random_gpt2

    monkeypatch.delenv("PICOSPEC_THREADS", raising=False)
    monkeypatch.setattr(backend, "free_cores", lambda: (2, 2, "2.0 idle now"))
    backend.set_threads(2)
    backend.APPLIED.clear()
    big = engine.GPT2(*random_gpt2(n_ctx=64, n_embd=32, n_head=2))
    # small model: 1 thread
    assert backend.APPLIED["n_params"] == big.n_params and backend.blas_threads() == 1
    # models of big's size and up count as large now
    monkeypatch.setattr(backend, "SMALL_MODEL", big.n_params)
    engine.GPT2(*random_gpt2(n_ctx=32, n_embd=16, n_head=2))
    # a draft keeps the count
    assert backend.APPLIED["n_params"] == big.n_params and backend.blas_threads() == 1
    bigger = engine.GPT2(*random_gpt2(n_ctx=64, n_embd=48, n_head=2))
    # the free cores
    assert backend.APPLIED["n_params"] == bigger.n_params and backend.blas_threads() == 2
    backend.thread_policy(5_850_000, requested=1)
    engine.GPT2(*random_gpt2(n_ctx=128, n_embd=64, n_head=2))
    assert backend.blas_threads() == 1 and backend.APPLIED["requested"]
