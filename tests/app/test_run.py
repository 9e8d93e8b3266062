"""The comparison protocol of main.py and the notebooks (picospec_app/run.py): autoregressive
decoding and the method timed in turns, medians of the rounds, and the cost model's prediction from
the measured call costs. Every clock here is a stub, so the figures are known exactly; no test times
anything."""
import itertools
import json
import re

import numpy as np
import pytest

from picospec_app import command, run
from picospec.theory import GPU_VERIFY_COST, cost_model_speedup



def stub_runs(log, name, seconds):
    """A zero-argument run that logs its name and takes the next of `seconds` (a stub clock)."""
    times = iter(seconds)
    return lambda: log.append(name) or {"seconds": next(times)}


def turns(rounds):  # A B, B A, A B, ...: the one run second gains from the first's warm caches
    return [name for i in range(rounds) for name in ("AB" if i % 2 == 0 else "BA")]


def test_rounds_run_in_turns_the_order_turned_each_round():
    log = []
    runs = [stub_runs(log, "A", [1.0] * 4), stub_runs(log, "B", [0.5] * 4)]
    a, b = run.interleaved(runs, rounds=4)
    assert log == ["A", "B", "B", "A"] * 2 and len(a) == len(b) == 4
    assert [r["seconds"] for r in a] == [1.0] * 4 and [r["seconds"] for r in b] == [0.5] * 4


@pytest.mark.parametrize("each, rounds", [(0.125, 4), (1.0, 3), (1e-4, 50)])
def test_default_rounds_fill_about_a_second_and_at_least_three(each, rounds):
    """Rounds of two runs of `each` seconds until 1 s of measurement, at least 3, at most 50."""
    log = []
    out = run.interleaved([stub_runs(log, "A", [each] * 99), stub_runs(log, "B", [each] * 99)])
    assert len(out[0]) == rounds and log == turns(rounds)


def test_speedup_is_the_median_of_the_rounds_ratios():
    base = [{"seconds": s} for s in (1.0, 1.2, 0.9, 5.0)]  # one slow round: the median stays
    runs = [{"seconds": s} for s in (0.5, 0.5, 0.6, 0.5)]
    assert run.speedup_of(base, runs) == {"median": pytest.approx(2.2), "range": [1.5, 10.0],
                                              "rounds": 4}


def test_costs_and_prediction_follow_the_formula():
    """E = tokens per target call, c and c_d over autoregressive decoding's one-token call, the
    rest r of a step (0.3 ms of 12 steps' time outside the calls) and r_0 of an autoregressive
    token (0.1 ms a token), medians over the rounds."""
    base = [{"target_s": 0.040 * f, "target_calls": 40, "seconds": 0.044 * f}  # 1 ms a call
            for f in (1.0, 1.1, 0.9)]
    runs = [{"tokens_per_call": 40 / 12, "target_s": 12 * 0.0025 * f, "target_calls": 12,
             "draft_s": 48 * 0.0002 * f, "draft_calls": 48, "draft2_s": 0.0, "draft2_calls": 0,
             "seconds": (12 * 0.0025 + 48 * 0.0002 + 12 * 0.0003) * f} for f in (1.0, 1.2, 0.8)]
    costs = run.call_costs(base, runs)
    assert costs["E"] == pytest.approx(40 / 12) and costs["c"] == pytest.approx(2.5)
    assert costs["drafts"] == {"draft": {"per_target_call": 4.0, "c_d": pytest.approx(0.2)}}
    assert (costs["rest"], costs["rest_base"]) == (pytest.approx(0.3), pytest.approx(0.1))
    assert costs["predicted"] == pytest.approx((40 / 12) * 1.1 / (2.5 + 4 * 0.2 + 0.3))
    assert costs["predicted_gpu"] == pytest.approx((40 / 12) * 1.1 /
                                                   (GPU_VERIFY_COST + 4 * 0.2 + 0.3))
    assert cost_model_speedup(2.36, 2.2, [(4, 0.19)]) == pytest.approx(0.797, abs=5e-4)  # docstring
    # every second counted: the prediction is the speedup these runs measure
    assert costs["predicted"] == pytest.approx(0.044 / (12 * 0.0025 + 48 * 0.0002 + 12 * 0.0003))


@pytest.mark.parametrize("E, E_full, c, draft_cost, rest, limit", [
    (10 / 3, 10 / 3, 2.5, 0.2, 0.4, "verification"),  # 3.7 calls a step: 1.5 verify, 0.8 draft
    (10 / 3, 10 / 3, 1.1, 0.5, 0.23, "drafting"),  # 0.1 verify, 2.0 draft, 0.23 rest
    (10 / 3, 10 / 3, 1.1, 0.05, 2.03, "the rest of the step"),  # 0.1 verify, 0.2 draft, 2.03 rest
    (1.05, 5.0, 0.95, 0.1, 0.75, "acceptance"),  # 2.1 calls a step; all accepted: 5 / 2.1 = 2.4x
    (3.0, 5.0, 2.5, 0.2, 0.03, "verification"),  # 3.3 a step: c = 1 gives 1.64x, all accepted 1.5x
])
def test_the_limit_is_what_gains_most_when_removed(E, E_full, c, draft_cost, rest, limit):
    costs = {"E": E, "E_full": E_full, "c": c, "predicted_gpu": 1.5, "rest": rest,
             "rest_base": 0.1, "drafts": {"draft": {"per_target_call": 4.0, "c_d": draft_cost}}}
    line = run.limit_line(costs)
    assert line.startswith(f"limit here: {limit} (")
    step = c + 4 * draft_cost + rest
    if limit == "acceptance":
        assert f"the cost model gives {E_full * 1.1 / step:.2f}x then" in line
    # the GPU's c is offered only where it is below this run's
    assert ("as on a GPU" in line) == (c > GPU_VERIFY_COST)


def test_a_limit_line_never_offers_a_worse_c():
    """A run whose verification costs less than a GPU's (c = 0.95, weight panels) is not told what
    c = GPU_VERIFY_COST would give."""
    costs = {"E": 1.05, "E_full": 1.95, "c": 0.95, "predicted_gpu": 0.74, "rest": 0.1,
             "rest_base": 0.0, "drafts": {"draft": {"per_target_call": 1.0, "c_d": 0.1}}}
    line = run.limit_line(costs)
    assert "GPU" not in line and "0.74" not in line


# The command (main.py's) end to end, its run_method replaced by the real run with stub times:
# autoregressive decoding takes 1 ms a target call, the method's target call C_TARGET ms, a draft
# call C_DRAFT ms, and each round's total time comes from the lists below, so the printed figures
# are known.
C_TARGET, C_DRAFT = 2.5, 0.2
ROUND_BASE = [0.040, 0.048, 0.036, 0.200]
ROUND_METHOD = [0.020, 0.030, 0.024, 0.020]  # median of ratios 1.8, ratio of medians 2.0


@pytest.fixture
def main_with_stub_clock(monkeypatch):
    real, cache, log = run.run_method, {}, []
    # each run first once unclocked (its time left out), then in the rounds
    clocks = {"autoregressive": itertools.chain([1.0], itertools.cycle(ROUND_BASE)),
              "speculative": itertools.chain([1.0], itertools.cycle(ROUND_METHOD))}

    def stub(method, x, loaded, N, seed, sampling=None, **options):
        log.append(method)
        if method not in cache:
            cache[method] = real(method, x, loaded, N, seed, sampling, **options)
        done = cache[method]
        per_call = 1e-3 if method == "autoregressive" else C_TARGET * 1e-3
        return {**done, "seconds": next(clocks[method]),
                "target_s": done["target_calls"] * per_call,
                "draft_s": done["draft_calls"] * C_DRAFT * 1e-3}

    monkeypatch.setattr(run, "run_method", stub)
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    return command.main, log


def test_main_prints_the_median_and_the_prediction_of_its_costs(main_with_stub_clock, capsys):
    main, log = main_with_stub_clock
    main(["--method", "speculative", "--K", "4", "--n_tokens", "24", "--runs", "4", "--json"])
    out = json.loads(capsys.readouterr().out)
    # one unclocked run of each, then the rounds in turns, the order turned each round
    assert log == ["autoregressive", "speculative"] + [
        {"A": "autoregressive", "B": "speculative"}[name] for name in turns(4)]
    ratios = [b / m for b, m in zip(ROUND_BASE, ROUND_METHOD)]
    assert out["speedup"] == pytest.approx(np.median(ratios))
    assert out["speedup_range"] == [min(ratios), max(ratios)]
    method = out["runs"][1]
    E, k = 24 / method["target_calls"], method["draft_calls"] / method["target_calls"]
    costs = out["cost_model"]
    assert (costs["E"], costs["c"]) == (pytest.approx(E), pytest.approx(C_TARGET))
    assert costs["drafts"]["draft"]["c_d"] == pytest.approx(C_DRAFT)
    t, d = method["target_calls"], method["draft_calls"]  # the rest: each round's time outside
    rest_0 = np.median([max(s - 24e-3, 0) / 24 for s in ROUND_BASE]) / 1e-3  # the calls
    rest = np.median([max(s - t * C_TARGET * 1e-3 - d * C_DRAFT * 1e-3, 0) / t
                      for s in ROUND_METHOD]) / 1e-3
    assert costs["predicted"] == pytest.approx(E * (1 + rest_0) / (C_TARGET + k * C_DRAFT + rest))
    assert method["time_s"] == pytest.approx(np.median(ROUND_METHOD))  # the median run's time

    log.clear()
    main(["--method", "speculative", "--K", "4", "--n_tokens", "24", "--runs", "4"])
    text = capsys.readouterr().out
    assert (f"speedup {np.median(ratios):.2f}x over autoregressive (median of 4 interleaved "
            f"rounds' ratios, range {min(ratios):.2f}-{max(ratios):.2f}x)") in text
    line = next(line for line in text.splitlines() if line.startswith("why: "))
    assert re.search(rf"c = {C_TARGET:.2f} one-token calls, a draft call c_d = {C_DRAFT:.3f} "
                     rf"\({k:.2f} per target", line), line
    predicted = E * (1 + rest_0) / (C_TARGET + k * C_DRAFT + rest)
    assert line.endswith(f"= {predicted:.2f}x from this run's own costs, "
                         f"{np.median(ratios):.2f}x measured")
    gpu = E * (1 + rest_0) / (GPU_VERIFY_COST + k * C_DRAFT + rest)
    assert (f"limit here: verification (a target call of this method costs c = {C_TARGET:.2f} "
            f"one-token calls); with c = {GPU_VERIFY_COST} (verification nearly free, as on a GPU) "
            f"the cost model gives {gpu:.2f}x") in text
    blas = r"^BLAS: \w+, \w+ kernels.* on .*, \d+ CPUs?; 1 thread .*; small-matrix path (on|off) \("
    assert re.search(blas, text, re.M), text


@pytest.mark.parametrize("method, K", [("medusa", None), ("blockwise", 3)])
def test_medusa_and_blockwise_heads_are_timed_as_the_drafter(method, K):
    """Their heads' calls are the draft's (calls, seconds), not the rest of a step, which the
    "why" line calls sampling, acceptance and Python."""
    from gpt2.load import load_model
    from picospec_app.load import load_heads

    target, _ = load_model("tiny-target", offline=True)
    heads = load_heads("tiny-target", method, None, target, offline=True)
    calls, real = [], heads["fn"]
    heads["fn"] = lambda *args, **kw: calls.append(1) or real(*args, **kw)
    ticks = itertools.count()  # each reading of the clock one second on
    options = {"K": K} if K else {}
    done = run.run_method(method, [1, 2, 3], {"target": target, "heads": heads}, 12, 0,
                          {"temperature": 0.0}, clock=lambda: float(next(ticks)), **options)
    assert calls and done["draft_calls"] == len(calls) and done["draft_s"] == len(calls)


def test_the_rest_of_a_cascade_step_leaves_out_both_drafters_time():
    """Cascade, by hand: 12 target calls of 2.5 ms, 48 calls of the first drafter of 0.2 ms and
    24 of the second of 0.1 ms, 0.3 ms a step besides: the rest r is 0.3 one-token calls (1 ms),
    not 0.5 with the second drafter's 2.4 ms counted in it, and the second drafter is costed on
    its own (2 calls a target call of c_d = 0.1)."""
    base = [{"target_s": 0.040, "target_calls": 40, "seconds": 0.040}]  # 1 ms a call, r_0 = 0
    runs = [{"tokens_per_call": 40 / 12, "target_s": 12 * 0.0025, "target_calls": 12,
             "draft_s": 48 * 0.0002, "draft_calls": 48, "draft2_s": 24 * 0.0001,
             "draft2_calls": 24,
             "seconds": 12 * 0.0025 + 48 * 0.0002 + 24 * 0.0001 + 12 * 0.0003}]
    costs = run.call_costs(base, runs)
    assert costs["rest"] == pytest.approx(0.3) and costs["rest_base"] == 0.0
    assert costs["drafts"]["draft2"] == {"per_target_call": 2.0, "c_d": pytest.approx(0.1)}
    assert costs["predicted"] == pytest.approx((40 / 12) / (2.5 + 4 * 0.2 + 2 * 0.1 + 0.3))


def test_a_median_run_takes_the_median_of_every_models_time():
    """Three repeats of a cascade run: the median run's seconds and its target's, first and second
    drafters' times are each the median of the three, the second drafter's too (not the first
    repeat's); its output and counts are the first repeat's."""
    runs = [{"output": [1, 2, k], "target_calls": 4, "seconds": s, "target_s": t, "draft_s": d,
             "draft2_s": d2}
            for k, s, t, d, d2 in ((3, 1.0, 0.5, 0.3, 0.10), (4, 3.0, 0.7, 0.1, 0.30),
                                   (5, 2.0, 0.6, 0.2, 0.20))]
    middle = run.median_run(runs)
    assert middle == {"output": [1, 2, 3], "target_calls": 4, "seconds": 2.0, "target_s": 0.6,
                      "draft_s": 0.2, "draft2_s": 0.2}
