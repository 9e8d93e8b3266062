"""bench.engine's layouts: each one a GPU engine can be built with (the CPU's forced panels crashed
bench.engine --device gpu before any figure), and the curves on each device among its layouts;
the breakdown's rest is the timed call's own time outside its operations."""
import pytest

from bench.engine import CURVES, GPU_LAYOUTS, LAYOUTS
from gpt2.fast import Choices, operations


@pytest.mark.parametrize("name", GPU_LAYOUTS)
def test_every_gpu_layout_is_one_a_gpu_engine_runs(name):
    kind, report = operations(Choices(device="gpu", **GPU_LAYOUTS[name]), 124_000_000)
    assert not kind.startswith("panel") and not report["on"]


def test_the_cpu_layouts_would_not_run_on_a_gpu():
    """The check above is the one that refused the layouts the GPU run used to take."""
    refused = []
    for name, kw in LAYOUTS.items():
        try:
            operations(Choices(device="gpu", **kw), 124_000_000)
        except ValueError:
            refused.append(name)
    assert refused == ["small products through panels", "rows one by one through panels"]


@pytest.mark.parametrize("device, layouts", [("cpu", LAYOUTS), ("gpu", GPU_LAYOUTS)])
def test_each_device_draws_its_curves_from_its_own_layouts(device, layouts):
    assert CURVES[device][0] == "default" and set(CURVES[device]) <= set(layouts)
    assert "static step" in layouts  # the first table's static column reads it


def test_the_rest_of_a_call_is_its_own_time_outside_the_operations(tiny_target, monkeypatch):
    """Measured within each timed call, the rest never goes below 0, however the untimed call's
    clock reads (here as 0 s: the noise of a loaded machine, at its worst)."""
    import bench.engine as engine

    monkeypatch.setattr(engine, "timed", lambda f, sync: (f(), 0.0, 0.0)[1:])
    model, encoder = tiny_target
    x = encoder.encode("The rest of a call is its own time.")
    for M, d in engine.breakdown(model, x, 4, [1, 3], repeats=3).items():
        assert d["call"] == 0.0 and d["rest"] > 0 and d["clocks"] > 0, (M, d)
        assert d["rest"] < d["clocks"]  # within the timed call: the parts and the rest
