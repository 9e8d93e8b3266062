"""The static-shape step (gpt2/fast/static.py) against the dynamic engine: equal logits at every
cache length, for decode steps, (K+1)-token verifications, rollbacks, token trees and ragged rows;
fixed addresses from call to call; every method of the table still equal to autoregressive decoding
at temperature 0 with it on. The CUDA graph path runs only where CuPy sees a GPU and is skipped,
saying why, elsewhere."""
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpt2.engine import BatchGPT2, GPT2
from gpt2.fast.static import StaticStep, bucket, replay
from gpt2.model import gpt2
from tests.support.micro import random_gpt2

HP, PARAMS = random_gpt2(n_vocab=50, n_ctx=32, n_embd=16, n_head=2, n_layer=2, seed=1)
TOL = 1e-5
TREE_TOKENS, TREE_PARENTS = [5, 6, 7, 8, 9, 10], [-1, 0, 0, -1, 3, 4]


def pair(rows=1, **static):  # the dynamic engine and the static one on the same weights
    dynamic, on = GPT2(HP, PARAMS), GPT2(HP, PARAMS, static=True)
    for k, v in static.items():
        setattr(on.engine.static, k, v)
    return (dynamic, on) if rows == 1 else (BatchGPT2(dynamic, rows), BatchGPT2(on, rows))


def full(x):
    return gpt2(np.array(x), **PARAMS, n_head=HP["n_head"])


def test_bucket_by_hand():
    assert [bucket(n) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, 16] and bucket(3, 16) == 16


def test_off_by_default_and_on_when_asked():
    """The app turns it on with PICOSPEC_STATIC=1 (tests/app/test_settings.py)."""
    assert GPT2(HP, PARAMS).engine.static is None
    assert isinstance(GPT2(HP, PARAMS, static=True).engine.static, StaticStep)
    assert GPT2(HP, PARAMS, static=False).engine.static is None


def test_buckets_on_by_default_and_graphs_only_off_numpy():
    """The engine's step buckets the cache length and, on NumPy, records no graph: no pass is
    counted toward one, and asking for graphs there still runs each pass eagerly."""
    dynamic, static = pair()
    assert static.engine.static.buckets and not static.engine.static.graphs
    _, graphed = pair(graphs=True)
    for L in (3, 4, 5, 6):
        x = list(range(1, L + 1))
        want = dynamic.logits(x)
        assert np.abs(static.logits(x) - want).max() < TOL
        assert np.abs(graphed.logits(x) - want).max() < TOL
    for step in (static, graphed):
        assert all(b["calls"] == 0 and b["graph"] is None
                   for b in step.engine.static.buffers.values())


@pytest.mark.parametrize("buckets", [True, False])
@pytest.mark.parametrize("K", [0, 1, 4])
def test_every_cache_length(buckets, K):
    """At every length L the cache can hold: a decode step after L tokens, then K drafts verified
    in one (K+1)-token pass and rolled back, equal the dynamic engine's and the full forward's."""
    dynamic, static = pair(buckets=buckets)
    rng = np.random.default_rng(K)
    x = [int(t) for t in rng.integers(0, 50, HP["n_ctx"])]
    for L in range(1, HP["n_ctx"] + 1):
        want = dynamic.logits(x[:L])
        assert np.abs(static.logits(x[:L]) - want).max() < TOL, L
        assert np.abs(want - full(x[:L])[-1]).max() < TOL
        if L + K <= HP["n_ctx"] and K:
            drafts = x[:L] + [int(t) for t in rng.integers(0, 50, K)]
            want = dynamic.logits(drafts, K + 1)
            assert np.abs(static.logits(drafts, K + 1) - want).max() < TOL, (L, K)
    assert static.tokens == dynamic.tokens and static.cache.n == dynamic.cache.n


@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 6), st.integers(1, 4)),
                min_size=1, max_size=6), st.integers(0, 10**6))
@settings(max_examples=40, deadline=None)
def test_any_calls_equal_the_dynamic_engine(steps, seed):
    """Grow, roll back, change the tail, ask for n rows: the same logits and hidden states."""
    rng = np.random.default_rng(seed)
    (dynamic, static), x = pair(), []
    for grow, cut, n in steps:
        x = (x[:max(0, len(x) - cut)] + [int(t) for t in rng.integers(0, 50, grow)])[-32:]
        n = min(n, len(x))
        (a, ha), (b, hb) = dynamic.logits(x, n, hidden=True), static.logits(x, n, hidden=True)
        assert np.abs(a - b).max() < TOL and np.abs(ha - hb).max() < TOL
        assert dynamic.tokens_run == static.tokens_run


@pytest.mark.parametrize("path", [[], [0], [0, 2], [3, 4, 5]])
def test_trees_and_accepted_paths(path):
    """A tree verification (tree mask) at several prefix lengths, its path kept, then decoding."""
    dynamic, static = pair()
    x = [int(t) for t in np.random.default_rng(2).integers(0, 50, 20)]
    for L in (1, 4, 11, 20):
        a = dynamic.tree(x[:L], TREE_TOKENS, TREE_PARENTS)
        b = static.tree(x[:L], TREE_TOKENS, TREE_PARENTS)
        assert np.abs(a - b).max() < TOL, L
        dynamic.accept(path), static.accept(path)
        kept = x[:L] + [TREE_TOKENS[i] for i in path] + [3]
        assert static.tokens == dynamic.tokens == kept[:-1]
        assert np.abs(static.logits(kept, 2) - dynamic.logits(kept, 2)).max() < TOL
        assert np.abs(static.logits(kept) - full(kept)[-1]).max() < TOL


CHANGES = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), min_size=3, max_size=3)


@given(st.lists(st.tuples(CHANGES, st.integers(1, 4), st.integers(0, 3), st.booleans()),
                min_size=1, max_size=5), st.integers(0, 10**6))
@settings(max_examples=30, deadline=None)
def test_ragged_rows_and_trees_equal_the_dynamic_engine(steps, seed):
    """Rows of different lengths grow, roll back, leave, verify a tree each: row by row the same."""
    rng = np.random.default_rng(seed)
    (dynamic, static), xs = pair(rows=3), [[int(rng.integers(0, 50))] for _ in range(3)]
    for changes, n, leave, tree in steps:
        xs = [(x[:max(0, len(x) - cut)] + [int(t) for t in rng.integers(0, 50, grow)])[-24:] or [1]
              for x, (grow, cut) in zip(xs, changes)]
        if leave < len(xs) and len(xs) > 1:
            xs = xs[:leave] + xs[leave + 1:]
        if tree:
            trees = [(TREE_TOKENS[:b + 2], TREE_PARENTS[:b + 2]) for b in range(len(xs))]
            for a, b in zip(dynamic.tree(xs, trees), static.tree(xs, trees)):
                assert np.abs(a - b).max() < TOL
            paths = [[0] if b % 2 else [] for b in range(len(xs))]
            dynamic.accept(paths), static.accept(paths)
            xs = [x + [TREE_TOKENS[0]] * len(p) for x, p in zip(xs, paths)]
        n = min([n] + [len(x) for x in xs])
        assert np.abs(dynamic.logits(xs, n) - static.logits(xs, n)).max() < TOL
        assert static.tokens[:len(xs)] == dynamic.tokens[:len(xs)] == xs


def test_addresses_do_not_move():
    """Decode steps at every cache length: one buffer set per (T, n_kv) shape, each at one address;
    with buckets off, one shape for every decode step (n_kv = the whole cache); the KV cache never
    moves."""
    for buckets in (True, False):
        _, model = pair(buckets=buckets)
        step, cache = model.engine.static, model.cache.k.ctypes.data
        x = [int(t) for t in np.random.default_rng(3).integers(0, 50, HP["n_ctx"])]
        seen = {}
        for L in range(1, HP["n_ctx"] + 1):
            model.logits(x[:L])
            for shape, buf in step.buffers.items():
                for name in ("ids", "positions", "slots", "mask", "out"):
                    address = buf[name].ctypes.data
                    assert seen.setdefault((shape, name), address) == address
            assert model.cache.k.ctypes.data == cache
        shapes = {(T, n_kv) for T, n_kv, width in step.buffers}  # width: n_embd (no taps)
        assert {width for _, _, width in step.buffers} == {HP["n_embd"]}
        assert all(T == 1 for T, _ in shapes)
        assert shapes == ({(1, 16), (1, 32)} if buckets else {(1, model.engine.slots)})


def test_hidden_states_are_copies():
    """The output buffer is reused: what a call returned must not change at the next call."""
    _, model = pair()
    _, h = model.logits([1, 2, 3], hidden=True)
    before = h.copy()
    model.logits([1, 2, 3, 4], hidden=True)
    assert (h == before).all()


def test_the_length_mask_is_needed(monkeypatch):
    """A broken static step that lets every token see every attended slot (no length mask)."""
    dynamic, static = pair()
    inputs = StaticStep.inputs

    def unmasked(self, rows):
        T, n_kv, out = inputs(self, rows)
        out["mask"][...] = True
        return T, n_kv, out

    monkeypatch.setattr(StaticStep, "inputs", unmasked)
    x = [3, 1, 4, 1, 5]
    assert np.abs(static.logits(x) - dynamic.logits(x)).max() > 1e-3


def test_the_methods_pass_through_the_static_step(monkeypatch):
    """With the static step on (every method's rows on it: tests/gpt2/fast/test_ops.py), a method's
    target calls run through it, except the self-drafting rows': their engine (gpt2/self_draft.py)
    runs the target's layers on a cache of its own and has no static form."""
    from gpt2.load import load_model
    from picospec.methods import TABLE
    from picospec_app.load import load_needs
    from picospec_app.run import run_method

    target, encoder = load_model("tiny-target", static=True)
    x = encoder.encode("import os\n\n\ndef list_files(path):\n    return [")
    steps, run = [], StaticStep.__call__
    monkeypatch.setattr(StaticStep, "__call__", lambda self, *a: steps.append(1) or run(self, *a))
    for name in ("speculative", "layer_skip"):
        steps.clear()
        needs = load_needs(TABLE[name], {}, target, "tiny-target", encoder)
        run_method(TABLE[name], x, needs, 8, 0, {"temperature": 0})
        assert bool(steps) == (name != "layer_skip"), name


def gpu():  # -> cupy, or skip saying why
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: no CUDA graph to record")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - any CUDA failure means no GPU to test on
        pytest.skip(f"no usable GPU ({e})")
    return cupy


@pytest.mark.parametrize("K", [0, 3])
def test_cuda_graphs_replay_the_dynamic_step(K):
    """On a GPU: each pass shape is recorded as a CUDA graph at its second call and replayed after,
    or, where CuPy refuses to record the pass (it captures no cuBLAS call), every pass runs eagerly
    with the refusal kept; decode steps and (K+1)-token verifications at every length equal the
    NumPy engine's either way."""
    gpu()
    dynamic, graphed = GPT2(HP, PARAMS), GPT2(HP, PARAMS, device="gpu", static=True)
    step = graphed.engine.static
    assert step.graphs
    x = [int(t) for t in np.random.default_rng(K).integers(0, 50, HP["n_ctx"])]
    for L in range(1, HP["n_ctx"] + 1 - K):
        want = dynamic.logits(x[:L + K], K + 1)
        np.testing.assert_allclose(graphed.logits(x[:L + K], K + 1), want, atol=TOL)
        np.testing.assert_allclose(graphed.logits(x[:L]), dynamic.logits(x[:L]), atol=TOL)
    buffers = step.buffers.values()
    if step.graphs:
        assert step.refused is None and any(b["graph"] is not None for b in buffers)
        assert all(b["graph"] is not None for b in buffers if b["calls"] >= 2)
    else:
        assert step.refused and all(b["graph"] is None for b in buffers)


class FakeCuda:
    """CuPy's stream, memory pool and graph calls that replay() makes, logged in order: the
    recording bookkeeping checked without a GPU."""

    def __init__(self):
        self.log, self.allocator, self.capturing = [], "default", False
        fake = self

        class Stream:
            def __init__(self, non_blocking=False):
                self.non_blocking = non_blocking

            def __enter__(self):
                fake.log.append(("enter", self))

            def __exit__(self, *exc):
                fake.log.append(("exit", self))

            def begin_capture(self):
                fake.log.append(("begin", fake.allocator))
                fake.capturing = True

            def end_capture(self):
                fake.log.append("end")
                fake.capturing = False
                return SimpleNamespace(launch=lambda stream: fake.log.append(("launch", stream)))

            def synchronize(self):
                fake.log.append(("sync", self))

        class MemoryPool:
            malloc = "graph pool"

        Stream.null = Stream()
        self.cuda = SimpleNamespace(
            Stream=Stream, MemoryPool=MemoryPool, get_current_stream=lambda: Stream.null,
            set_allocator=lambda malloc: setattr(fake, "allocator", malloc))
        self.get_default_memory_pool = lambda: SimpleNamespace(malloc="default")


def test_a_graph_is_recorded_at_the_second_call_once_then_replayed():
    cupy, buf = FakeCuda(), {"graph": None, "calls": 0}
    run = lambda: cupy.log.append("run")  # noqa: E731 - the pass
    replay(buf, run, cupy)
    assert cupy.log == ["run"] and buf["graph"] is None  # the first call runs eagerly
    cupy.log.clear()
    replay(buf, run, cupy)
    stream, null = buf["stream"], cupy.cuda.Stream.null
    # recorded on a stream of its own (not the default one), into a pool of its own, then the
    # allocator put back; then replayed on that stream
    assert stream is not null and stream.non_blocking
    assert cupy.log == [("sync", null), ("enter", stream), ("begin", "graph pool"), "run", "end",
                        ("exit", stream), ("sync", null), ("launch", stream), ("sync", stream)]
    assert cupy.allocator == "default" and buf["graph"] is not None
    graph = buf["graph"]
    for calls in (3, 4):  # replayed, never recorded again nor run eagerly
        cupy.log.clear()
        replay(buf, run, cupy)
        assert cupy.log == [("sync", null), ("launch", stream), ("sync", stream)]
        assert buf["graph"] is graph and buf["calls"] == calls


REFUSAL = "calling cuBLAS API during stream capture is currently unsupported"  # CuPy 14's words


def test_a_recording_cupy_refuses_keeps_no_graph_and_runs_the_pass_eagerly():
    """CuPy captures no cuBLAS call: the engine's products raised NotImplementedError inside the
    capture and the step crashed. The recording is ended, the allocator put back, no graph kept,
    and the pass, which did not run while it was recorded, runs eagerly; replay says why."""
    cupy, buf = FakeCuda(), {"graph": None, "calls": 1}

    def run():
        cupy.log.append("run")
        if cupy.capturing:
            raise NotImplementedError(REFUSAL)

    assert replay(buf, run, cupy) == REFUSAL
    null, stream = cupy.cuda.Stream.null, cupy.log[1][1]
    assert stream is not null
    assert cupy.log == [("sync", null), ("enter", stream), ("begin", "graph pool"), "run", "end",
                        ("exit", stream), "run"]
    assert cupy.allocator == "default" and buf["graph"] is None and "stream" not in buf


class Settable(np.ndarray):  # host memory written as CuPy's arrays are: a.set(host)
    def set(self, a):
        self[...] = a


def test_after_a_refusal_every_pass_runs_eagerly_and_no_recording_is_tried_again(monkeypatch):
    """The step keeps CuPy's refusal and runs this pass and every later one eagerly, equal to the
    dynamic engine, without trying to record a graph again."""
    from gpt2.fast import static

    tries = []
    monkeypatch.setattr(static, "replay", lambda buf, run, xp: tries.append(1) or run() or REFUSAL)
    dynamic, on = pair()
    step = on.engine.static
    step.graphs = True
    step.xp = SimpleNamespace(zeros=lambda *a, **k: np.zeros(*a, **k).view(Settable))  # not NumPy
    x = [int(t) for t in np.random.default_rng(3).integers(0, 50, 24)]
    for L in range(1, 20):
        np.testing.assert_allclose(on.logits(x[:L + 3], 4), dynamic.logits(x[:L + 3], 4), atol=TOL)
        np.testing.assert_allclose(on.logits(x[:L]), dynamic.logits(x[:L]), atol=TOL)
    assert tries == [1] and not step.graphs and step.refused == REFUSAL
