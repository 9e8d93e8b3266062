"""picospec/exercises/draft_law.py: its toy heads are what the statement promises (no mass
outside d2t, targets with mass outside it), the law alone rejects a wrong draft law (the verifier
is then not lossless; the call checks only name the mistake sooner), and the call checks by
hand."""
import numpy as np
import pytest

from picospec.check.battery import check_case
from picospec.eagle3 import draft_law as reference
from picospec.exercises import draft_law as exercise
from picospec.exercises import grading

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # wrong laws divide by zero
SAMPLES = 1_000  # sequences per case, as in test_exercises.py
CASES = [case for _, case in exercise.BATTERY.cases]


def test_the_statements_example():
    z, d2t, V = exercise.PROBE
    assert np.allclose(reference(z, d2t, V), [0.75, 0, 0.25, 0])
    assert exercise.rules(z, d2t, V, reference(z, d2t, V)) is None


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_head_drafts_inside_its_vocabulary_for_a_target_outside_it(case):
    T, D = case.laws()  # [V, V, V] each
    outside = np.setdiff1d(np.arange(case.V), case.d2t)
    assert 1 <= len(case.d2t) < case.V and (D[..., outside] == 0).all()
    assert np.allclose(D.sum(-1), 1) and np.allclose(T.sum(-1), 1)
    assert (T[..., outside] > 0).any()


def test_the_battery_holds_every_kind_of_input_the_statement_names():
    assert min(c.V for c in CASES) == 3 and max(c.V for c in CASES) == 8
    assert any(list(c.d2t) != sorted(c.d2t) for c in CASES)
    assert any(c.shift >= 1000 for c in CASES) and any(c.dtype == "float32" for c in CASES)
    assert {c.calls for c in CASES} == {"row", "rows", "batch"}
    D = next(c for c in CASES if c.ties).laws()[1]  # [V, V, V]
    tied = [(row > 0).sum() > len(set(row[row > 0])) for row in D.reshape(-1, D.shape[-1])]
    assert sum(tied) >= 5  # rows with two draft tokens of equal probability


@pytest.mark.parametrize("wrong", ["softmax_over_all_tokens", "placed_by_inverse", "ids_from_one",
                                   "log_probabilities", "over_n", "sorted_ids", "greedy_one_hot"])
def test_the_law_alone_rejects_a_wrong_draft_law(wrong):
    """No call checked (limit=0): the verifier judging the head's drafts with a wrong law, mass
    outside the vocabulary included, is no longer lossless, and the G-test says so."""
    i, case = exercise.BATTERY.cases[1]
    sampler = case.sampler(getattr(exercise, wrong), limit=0)
    result = check_case(sampler, "chain", case, SAMPLES, (0, i))
    assert result.verdict == "FAIL" and result.p_value < 1e-10, result


def test_what_the_law_cannot_see_a_call_check_names():
    """1e-12 outside the vocabulary changes no law the G-test can see; the call check rejects
    it. The head's own law passes both."""
    i, case = exercise.BATTERY.cases[1]
    for fn in (reference, exercise.epsilon_everywhere):
        assert check_case(case.sampler(fn, limit=0), "chain", case, SAMPLES,
                          (0, i)).verdict == "pass"
    verdict = exercise.grade(exercise.epsilon_everywhere, samples=SAMPLES)
    assert "token 1 is not in d2t, yet it got 1e-12" in verdict.evidence


@pytest.mark.parametrize("out, rule", [
    ([0.75, 0, 0.25, 0], None),
    ([0.75, 0, 0.25], "shape (3,), expected (4,)"),
    (np.array([0.75, 0, 0.25, 0], np.float32), "dtype float32, expected float64"),
    ([np.nan, 0, 0.25, 0], "not finite (nan or inf)"),
    ([1.0, 0, 0.25, -0.25], "negative entries"),
    ([0.5, 0.25, 0.25, 0], "token 1 is not in d2t, yet it got 0.25"),
    ([0.75, 0, 0.2, 0], "a row sums to 0.95, not 1 to 1e-9")])
def test_the_call_checks_by_hand(out, rule):
    z, d2t, V = exercise.PROBE
    found = exercise.rules(z, d2t, V, np.asarray(out))
    assert found is None if rule is None else rule in found


def test_no_verdict_when_a_broken_sampler_passes_the_battery(monkeypatch):
    monkeypatch.setattr(grading, "controls", lambda *a: [("resample_from_target", None)])
    verdict = exercise.grade(reference, samples=SAMPLES)
    assert not verdict.passed and verdict.failed == "no verdict"


def test_the_checkers_broken_samplers_are_caught_on_the_battery():
    caught = grading.controls("chain", SAMPLES, 0, exercise.BATTERY)
    assert [name for name, _ in caught] == ["resample_from_target", "bonus_from_draft"]
    assert all(case is not None for _, case in caught), caught
