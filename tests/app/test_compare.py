"""The comparisons of the benchmarks and the notebooks (picospec_app/compare.py), by hand on
scripted models whose calls advance a stub clock by their cost: c is the method's target call and
c_d a draft call, each over a one-token target call, as in picospec/theory.py; per-position
acceptance and the mean accepted at full depth."""
from types import SimpleNamespace

import numpy as np
import pytest

from picospec_app import compare
from tests.support.scripted import Clock, Costly
from tests.support.toy import Toy

V, N = 3, 10
TARGET = Toy(np.tile([0.0, 0.5, 0.5], (V, V, 1)))
DRAFT = Toy(np.tile([0.2, 0.4, 0.4], (V, V, 1)))


def test_c_is_the_target_call_and_c_d_the_draft_call():
    """A one-token target call costs 1, each more position 0.5, a draft call 0.2: c_d is 0.2, c
    the method's mean target call (K + 1 = 4 positions: 2.5, fewer near the end), c_d2 0."""
    clock = Clock()
    loaded = {"target": Costly(TARGET, clock, 1.0, 0.5), "draft": Costly(DRAFT, clock, 0.2)}
    r = compare.compare("speculative", [[1, 2]], loaded, N, [0], {"temperature": 1.0}, K=3,
                        clock=clock)
    assert r["c_d"] == pytest.approx(0.2) and r["c_d2"] == 0
    assert 1.0 < r["c"] <= 2.5
    stats = r["stats"]
    positions = [1 + s["drafted"] for s in stats]  # each target call's positions
    assert r["c"] == pytest.approx(np.mean([1.0 + 0.5 * (n - 1) for n in positions]))


def test_costs_are_over_a_one_token_call_that_is_not_one_second():
    """A one-token target call of 2 s, each more position 1 s, a draft call 0.4 s: c_d 0.2 and c
    the mean target call over 2 s (a ratio, whatever the clock's unit)."""
    clock = Clock()
    loaded = {"target": Costly(TARGET, clock, 2.0, 1.0), "draft": Costly(DRAFT, clock, 0.4)}
    r = compare.compare("speculative", [[1, 2]], loaded, N, [0], {"temperature": 1.0}, K=3,
                        clock=clock)
    positions = [1 + s["drafted"] for s in r["stats"]]
    assert r["c_d"] == pytest.approx(0.2) and r["c_d2"] == 0
    assert r["c"] == pytest.approx(np.mean([2.0 + (n - 1) for n in positions]) / 2.0)
    stats = r["stats"]
    accepted = sum(s["accepted"] for s in stats)
    assert accepted > 0 and r["acceptance"] == pytest.approx(
        accepted / sum(s["drafted"] for s in stats))


def test_c_d2_is_the_second_drafters_call():
    """Cascade's second drafter at 0.2 s a call, over a one-token target call of 2 s: 0.1."""
    clock = Clock()
    loaded = {"target": Costly(TARGET, clock, 2.0, 1.0), "draft": Costly(DRAFT, clock, 0.4),
              "draft2": Costly(DRAFT, clock, 0.2)}
    r = compare.compare("cascade", [[1, 2]], loaded, N, [0], {"temperature": 1.0}, clock=clock)
    assert r["c_d"] == pytest.approx(0.2) and r["c_d2"] == pytest.approx(0.1)


def test_a_method_of_no_draft_model_costs_no_draft_calls():
    """Prompt lookup drafts from the prompt: c_d 0 (no call, not 0 / 0), no per-position
    acceptance without a K given."""
    clock = Clock()
    r = compare.compare("prompt_lookup", [[1, 2, 1, 2, 1, 2]], {"target": Costly(
        TARGET, clock, 2.0, 0.5)}, N, [0], {"temperature": 0.0}, clock=clock)
    assert r["c_d"] == 0 and r["c_d2"] == 0 and r["per_position"] == []


def test_per_position_acceptance_by_hand():
    """Full steps of K = 3 accepting 0, 2, 3, 1 (a step of 2 drafts left out): position 1 reached 4
    times, passed 3; position 2: 2 of 3; position 3: 1 of 2."""
    stats = [{"drafted": 3, "accepted": a} for a in (0, 2, 3, 1)] + [{"drafted": 2, "accepted": 2}]
    assert compare.per_position_acceptance(stats, 3) == [3 / 4, 2 / 3, 1 / 2]
    assert compare.mean_accepted(stats, 3) == 1.5


def test_milliseconds_per_token_and_per_loop_by_hand():
    """Autoregressive decoding makes N one-token calls of 2 s: 2000 ms a token. The method's run:
    each step one target call of 2 s + 1 s per draft and a 0.4 s draft call per draft; over N
    tokens, and over its steps."""
    clock = Clock()
    loaded = {"target": Costly(TARGET, clock, 2.0, 1.0), "draft": Costly(DRAFT, clock, 0.4)}
    r = compare.compare("speculative", [[1, 2]], loaded, N, [0], {"temperature": 1.0}, K=3,
                        clock=clock)
    seconds = sum(2.0 + 1.0 * s["drafted"] + 0.4 * s["drafted"] for s in r["stats"])
    assert r["ms_per_token_base"] == pytest.approx(2000.0)
    assert r["ms_per_token"] == pytest.approx(1e3 * seconds / N)
    assert r["ms_per_loop"] == pytest.approx(1e3 * seconds / len(r["stats"]))


def test_explain_by_hand():
    """Each figure with two decimals; a GPU's c offered only where it is below this run's c."""
    r = {"tokens_per_call": 2.1234, "E_full": 3.4321, "c": 1.5678, "drafting": 0.4321,
         "rest": 0.0876, "rest_base": 0.0543, "speedup": 1.2345, "predicted": 1.3456,
         "predicted_gpu": 1.7891}
    # without each limit (picospec_app/run.py's limit): every draft accepted E_full (1 + rest_base)
    # / (c + drafting + rest) = 1.733, verification at one call's cost 1.473, no drafting 1.352,
    # no rest 1.119: acceptance holds it down most
    line = ("E 2.12, c 1.57, drafting 0.43, rest 0.09 (autoregressive 0.05): measured 1.23x, "
            "cost model 1.35x, with c = 1.2 1.79x; limit: acceptance (without it 1.73x)")
    assert compare.explain(r) == line
    r["c"] = 1.2  # a GPU's c, not below: not offered
    assert compare.explain(r).startswith("E 2.12, c 1.20, drafting 0.43, rest 0.09 "
                                         "(autoregressive 0.05): measured 1.23x, cost model 1.35x;")


def test_copy_prompts_repeat_the_start_after_a_blank_line():
    encoder = SimpleNamespace(encode=lambda text: {"\n\n": [0]}[text])
    x = list(range(1, 21))
    assert compare.copy_prompts(encoder, [x, [5, 6]]) == [x + [0] + x[:12], [5, 6, 0, 5, 6]]
    assert compare.copy_prompts(encoder, [x], 3) == [x + [0, 1, 2, 3]]


def test_measure_alpha_by_hand():
    """The target always continues b with b + 1 (mod 3), which the draft gives 0.1, 0.3 or 0.9
    after b = 0, 1, 2: sum_v min(p, q) is the draft's probability of the target's token. After
    [1, 2] the target writes 0, 1, 2, 0 (after 2, 0, 1, 2: 0.55 on average); after [0] it writes
    1, 2, 0, 1 (after 0, 1, 2, 0: 0.35); alpha is their mean."""
    target, draft = np.zeros((V, V, V)), np.zeros((V, V, V))
    for b, p in enumerate((0.1, 0.3, 0.9)):
        target[:, b, (b + 1) % V] = 1.0
        draft[:, b] = (1 - p) / 2
        draft[:, b, (b + 1) % V] = p
    alpha = compare.measure_alpha(Toy(draft), Toy(target), [[1, 2], [0]], 4,
                                  {"temperature": 1.0})
    assert alpha == pytest.approx((0.55 + 0.35) / 2)
