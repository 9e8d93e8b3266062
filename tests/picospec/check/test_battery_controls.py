"""run_controls (picospec/check/battery.py) and the graders' controls: a negative control counts as
caught only where a law case FAILs it; one that raises shows no power, and the run gives no
verdict rather than one it cannot back."""
from picospec.check import battery
from picospec.check.controls import resample_from_target
from picospec.verify import verify_chain


def raises_on_every_call(drafts, P, Q, rng):
    """A control broken by a bug of its own: no law is ever sampled through it."""
    raise IndexError("index 0 is out of bounds for axis 0 with size 0")


def test_a_control_that_raises_is_not_caught(monkeypatch):
    monkeypatch.setitem(battery.CONTROLS, "chain", [raises_on_every_call, resample_from_target])
    caught = dict(battery.run_controls("chain", 300, 0, [1, 2]))
    assert caught["raises_on_every_call"] is None, caught
    assert caught["resample_from_target"] is not None, caught
    report = battery.check_sampler(verify_chain, "chain", 300, 0, [1, 2])
    assert report.verdict == "no verdict" and report.cases == [], report


def test_the_graders_controls_on_a_battery_of_their_own_count_only_a_fail(monkeypatch):
    from picospec.exercises import grading
    from picospec.exercises.draft_law import BATTERY

    monkeypatch.setitem(grading.CONTROLS, "chain", [raises_on_every_call, resample_from_target])
    # 299 sequences: a size no other test grades with, so the cached answer is this test's own
    caught = dict(grading.controls("chain", 299, 0, BATTERY))
    assert caught["raises_on_every_call"] is None and caught["resample_from_target"], caught
