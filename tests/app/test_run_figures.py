"""Every figure the command reports, worked by hand on small scripted runs and compared: a run's
seconds, calls and time per model (picospec_app/run.py, on a stub clock that the models advance by
their cost), the speedup and the cost model's inputs, acceptance (accepted over drafted tokens, for
trees too), the batched tree loop's step record (its nodes: the widest
tree), and main.py's --json and text, for one prompt (times, speedup and costs on a clock that ticks
once a read; a tree method's acceptance) and for --batch (per-row tokens per target call over the
calls the row took part in, the speedup of batched autoregressive time over the method's).
"""
import io
import json
import types
from contextlib import redirect_stdout

import numpy as np
import pytest

from picospec.batched.loop import batch_tree_decoding, batched
from picospec.theory import GPU_VERIFY_COST
from picospec_app import command, run
from tests.support.scripted import Clock, Costly
from tests.support.toy import Toy

V, N, K = 3, 10, 3
Q = np.tile([0.0, 0.5, 0.5], (V, V, 1))  # the target never says 0
TARGET = Toy(Q)
AGREES = Toy(Q)  # a draft equal to the target: every draft accepted
DISAGREES = Toy(np.tile([1.0, 0.0, 0.0], (V, V, 1)))  # a draft that always says 0: all rejected
PROMPT = [1, 2]


def scripted(method, draft=None, first=0.8, more=0.4, d=0.2, **options):
    clock = Clock()
    loaded = {"target": Costly(TARGET, clock, first, more)}
    if draft is not None:
        loaded["draft"] = Costly(draft, clock, d)
    return run.run_method(method, PROMPT, loaded, N, 0, {"temperature": 1.0}, clock=clock,
                          **options)


def test_a_run_all_accepted_by_hand():
    """N = 10, K = 3, every draft accepted: steps of k = 3, 3, 1 drafts (never past N) -> 4 + 4 + 2
    tokens in 3 target calls (over 4, 4, 2 positions: 2.0 + 2.0 + 1.2 s) and 7 draft calls (1.4 s);
    autoregressive decoding: 10 calls of 0.8 s."""
    base, r = scripted("autoregressive"), scripted("speculative", AGREES, K=K)
    assert base["target_calls"] == 10 and base["target_s"] == base["seconds"] == pytest.approx(8)
    assert (r["target_calls"], r["draft_calls"]) == (3, 7)
    assert r["target_s"] == pytest.approx(5.2) and r["draft_s"] == pytest.approx(1.4)
    assert r["seconds"] == pytest.approx(6.6) and r["tokens_per_call"] == pytest.approx(10 / 3)
    assert [s["drafted"] for s in r["stats"]] == [3, 3, 1]
    assert run.summary(r["stats"])["acceptance"] == 1.0
    assert run.speedup_of([base], [r])["median"] == pytest.approx(8 / 6.6)
    costs = run.call_costs([base], [r])
    c, k = 5.2 / 3 / 0.8, 7 / 3  # a target call over one-token calls; draft calls per target call
    assert costs["E"] == pytest.approx(10 / 3) and costs["c"] == pytest.approx(c)
    assert costs["drafts"]["draft"] == {"per_target_call": pytest.approx(k),
                                        "c_d": pytest.approx(0.2 / 0.8)}
    assert costs["predicted"] == pytest.approx((10 / 3) / (c + k * 0.25))
    # nothing but the models takes time on this clock: the rest of the step and of an
    # autoregressive token are 0, the prediction is the measured 8 / 6.6, and verification
    # (c - 1 = 1.17) costs more than drafting (k c_d = 0.58)
    assert (costs["rest"], costs["rest_base"]) == (pytest.approx(0, abs=1e-12),) * 2
    assert run.drafting(costs) == pytest.approx(k * 0.25)
    assert costs["predicted"] == pytest.approx(8 / 6.6)
    assert run.limit_line(costs).startswith("limit here: verification (")
    # every draft accepted: 1 + the mean drafted a step (the target's own token counted)
    assert costs["E_full"] == pytest.approx(1 + 7 / 3)


@pytest.mark.parametrize("drafted, E_full", [([4, 4, 4], 5.0), ([4, 4, 4, 2], 4.5), ([0], 1.0)])
def test_every_draft_accepted_counts_the_targets_own_token(drafted, E_full):
    """K = 4 and every draft accepted: 5 tokens a target call, so the limit line says 5.00 and the
    cost model's 5 / (c + d) (3.00x at c = 1, d = 2/3), not 4.00 and 2.40x."""
    stats = [{"drafted": k, "nodes": k, "accepted": k} for k in drafted]
    assert run.every_draft_accepted(stats, 2.0) == pytest.approx(E_full)
    if drafted == [4, 4, 4]:
        costs = {"E": 2.0, "E_full": run.every_draft_accepted(stats, 2.0), "c": 1.0,
                 "predicted_gpu": 1.0, "rest": 0.0, "rest_base": 0.0,
                 "drafts": {"draft": {"per_target_call": 4, "c_d": 1 / 6}}}
        line = run.limit_line(costs)
        assert line == ("limit here: acceptance (2.00 tokens per target call, 5.00 had every draft "
                        "been accepted: the cost model gives 3.00x then)")


def test_every_draft_accepted_over_the_steps_target_calls():
    """Steps drafting 3 and 3 tokens in 2 and 1 target calls (blockwise's first step predicts,
    then verifies): had every draft been accepted, 4 + 4 tokens in 3 calls, not 1 + 3 = 4 a step."""
    stats = [{"drafted": 3, "calls": 2}, {"drafted": 3, "calls": 1}]
    assert run.every_draft_accepted(stats, 2.0) == pytest.approx(8 / 3)


def test_blockwise_every_draft_accepted_counts_its_first_steps_two_calls(offline):
    """Blockwise on the built-in target: its first step makes two target calls, so tokens per
    target call had every draft been accepted is each step's drafts plus one over the calls the
    Timed target counted, and never below the E measured."""
    from gpt2.load import load_model
    from picospec.methods import TABLE, defaults
    from picospec_app.load import load_needs

    target, encoder = load_model("tiny-target")
    method = TABLE["blockwise"]
    loaded = load_needs(method, defaults(method), target, "tiny-target", encoder, None, "cpu", True)
    r = run.run_method(method, encoder.encode("def add(a, b):"), loaded, 12, 0, {"temperature": 0})
    assert len(r["stats"]) < r["target_calls"]  # a step of two calls
    E_full = sum(s["drafted"] + 1 for s in r["stats"]) / r["target_calls"]
    costs = run.call_costs([r], [r])
    assert costs["E_full"] == pytest.approx(E_full) and costs["E"] <= costs["E_full"]


class Accepting(Costly):
    """A tree method's target: its accept (cache compaction) takes `accept_s` on the clock."""

    def __init__(self, model, clock, first, accept_s):
        super().__init__(model, clock, first)
        self.accept_s = accept_s

    def accept(self, path):
        self.clock.now += self.accept_s


def test_a_tree_targets_accept_counts_in_its_seconds():
    """Timed.accept: the compaction's seconds are the target's (so c and the prediction include
    them), and it is no call of its own."""
    clock = Clock()
    timed = run.Timed(Accepting(TARGET, clock, 0.8, 0.3), clock)
    timed(PROMPT)
    timed.accept([0])
    timed.accept([0, 1])
    assert timed.calls == 1 and timed.seconds == pytest.approx(0.8 + 2 * 0.3)


def test_a_run_all_rejected_by_hand():
    """Every draft rejected: one token a step, k = min(3, tokens left - 1) = 3 (7 steps), 2, 1, 0
    -> 10 target calls over 4 (x 7), 3, 2, 1 positions and 24 draft calls; acceptance 0 of 24."""
    r = scripted("speculative", DISAGREES, K=K)
    assert (r["target_calls"], r["draft_calls"], r["tokens_per_call"]) == (10, 24, 1.0)
    assert r["target_s"] == pytest.approx(7 * 2.0 + 1.6 + 1.2 + 0.8)
    assert r["seconds"] == pytest.approx(r["target_s"] + 24 * 0.2)
    assert run.summary(r["stats"]) == {"drafted": 24, "nodes": 24, "accepted": 0,
                                       "acceptance": 0.0, "accepted_per_node": 0.0}


def test_acceptance_is_accepted_over_drafted_also_for_trees():
    """Two tree steps: depths 2 and 3 drafted, 5 and 7 nodes scored, 1 and 3 accepted: acceptance
    4 / 5, beside it 4 / 12 accepted per node; no drafts: None."""
    stats = [{"drafted": 2, "nodes": 5, "accepted": 1}, {"drafted": 3, "nodes": 7, "accepted": 3}]
    assert run.summary(stats) == {"drafted": 5, "nodes": 12, "accepted": 4, "acceptance": 0.8,
                                  "accepted_per_node": pytest.approx(1 / 3)}
    assert run.summary([{"drafted": 0, "nodes": 0, "accepted": 0}])["acceptance"] is None


def test_batched_tree_record_nodes_is_the_widest_tree():
    """The batched tree loop on scripted trees, N = 5: row 0 proposes 1 node and accepts it (2
    tokens a step), row 1 proposes 3 siblings, row 2 a chain of 2, both rejected (1 token a step);
    no tree where a row has no room. Row 0 finishes after step 3 (2 + 2 + 1 tokens), rows 1 and 2
    after step 5. A step's record: drafted = the deepest tree, nodes = the widest (the batched
    call's width), not their sum nor one row's."""
    trees = {0: ([1], [-1]), 1: ([1, 2, 0], [-1, -1, -1]), 2: ([1, 2], [-1, 0])}

    def propose(b, x, room):
        return trees[b] if room else ([], [])

    def verify(b, tokens, parents, probs, rng):
        return ([0] if tokens and b == 0 else []), 0

    stats = []
    xs = batch_tree_decoding([[1], [1], [1]], batched(TARGET), 5, np.random.default_rng(0),
                             propose, verify, stats=stats)
    assert xs == [[1, 1, 0, 1, 0, 0], [1] + [0] * 5, [1] + [0] * 5]
    assert [s["accepted"] for s in stats] == [[1, 0, 0]] * 2 + [[0, 0, 0]] + [[-1, 0, 0]] * 2
    assert [s["nodes"] for s in stats] == [3, 3, 3, 3, 0]
    assert [s["drafted"] for s in stats] == [2, 2, 2, 2, 0]


def json_of(argv):
    out = io.StringIO()
    with redirect_stdout(out):
        command.main(argv)
    return out.getvalue()


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")


def test_single_json_acceptance_and_tokens_per_call_of_a_tree_method(offline):
    """main.py --json with SpecInfer on the built-in pair: acceptance = the drafts kept (the
    "draft" origins it prints) over the tokens drafted (the depths of an identical run's trees),
    not over the nodes; tokens per target call = new tokens over target calls."""
    args = ["--method", "specinfer", "--n_tokens", "16", "--runs", "1", "--temperature", "0"]
    out = json.loads(json_of(args + ["--json"]))
    mine = out["runs"][1]
    from picospec_app.load import load_needs
    from gpt2.load import load_model
    from picospec.methods import TABLE, defaults

    target, encoder = load_model("tiny-target")
    method = TABLE["specinfer"]
    loaded = load_needs(method, defaults(method), target, "tiny-target", encoder, "tiny-draft",
                        "cpu", True)
    again = run.run_method(method, encoder.encode(out["prompts"][0]), loaded, 16, out["seed"],
                           {"temperature": 0})
    drafted = sum(s["drafted"] for s in again["stats"])
    nodes = sum(s["nodes"] for s in again["stats"])
    kept = mine["origins"][0].count("draft")
    assert drafted != nodes and mine["output_ids"][0] == again["output"][-16:]
    assert mine["acceptance_rate"] == pytest.approx(kept / drafted)
    assert mine["accepted_per_node"] == pytest.approx(kept / nodes)
    assert mine["target_calls"] == again["target_calls"]
    assert mine["tokens_per_target_call"] == pytest.approx(16 / again["target_calls"])
    assert out["runs"][0]["tokens_per_target_call"] == 1.0  # autoregressive: one a call

    text = json_of(args)
    assert ("16 target calls (1.00 tokens per target call)") in text
    assert (f"{again['target_calls']} target calls ({16 / again['target_calls']:.2f} tokens per "
            f"target call), {mine['draft_calls']} draft calls, acceptance "
            f"{kept / drafted:.0%}") in text


class Ticks:
    """A stub clock that moves one tick (1 ms) each time it is read: a timed call lasts one tick,
    and a run of c model calls (none of them accept()) lasts 2 c + 1 ticks."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1e-3
        return self.now


def test_single_json_times_and_speedup_by_hand(offline, monkeypatch):
    """main.py --json, speculative on the built-in pair, every run on the tick clock: autoregressive
    decoding of N = 16 lasts 33 ticks, the method's t target and d draft calls 2 (t + d) + 1; so the
    speedup, tokens per second, E, c = c_d = 1, the rests and the predictions follow by hand."""
    import functools

    monkeypatch.setattr(run, "run_method", functools.partial(run.run_method, clock=Ticks()))
    out = json.loads(json_of(["--method", "speculative", "--K", "3", "--n_tokens", "16", "--runs",
                              "2", "--temperature", "0", "--json"]))
    base, mine = out["runs"]
    t, d = mine["target_calls"], mine["draft_calls"]
    seconds = (2 * (t + d) + 1) * 1e-3
    assert base["time_s"] == pytest.approx(33e-3) and mine["time_s"] == pytest.approx(seconds)
    assert base["times_s"] == [pytest.approx(33e-3)] * 2 and mine["rounds"] == 2
    assert mine["tokens_per_s"] == pytest.approx(16 / seconds)
    assert out["speedup"] == pytest.approx(33e-3 / seconds)
    assert out["speedup_range"] == [pytest.approx(33e-3 / seconds)] * 2 and out["rounds"] == 2
    costs, E, k = out["cost_model"], 16 / t, d / t
    assert (costs["E"], costs["c"]) == (pytest.approx(E), pytest.approx(1))
    assert costs["drafts"]["draft"] == {"per_target_call": pytest.approx(k),
                                        "c_d": pytest.approx(1)}
    # the ticks between the calls: 17 of autoregressive decoding's 33 over its 16 calls (r_0), and
    # t + d + 1 of the method's over its t target calls (r), so the prediction is the measurement
    rest_0, rest = 17 / 16, (t + d + 1) / t
    assert (costs["rest_base"], costs["rest"]) == (pytest.approx(rest_0), pytest.approx(rest))
    assert costs["predicted"] == pytest.approx(E * (1 + rest_0) / (1 + k + rest))
    assert costs["predicted"] == pytest.approx(out["speedup"])
    assert costs["predicted_gpu"] == pytest.approx(E * (1 + rest_0) / (GPU_VERIFY_COST + k + rest))
    assert out["same_output"] == [True] and out["groups"] == [1]


@pytest.fixture
def batch_clock(monkeypatch, offline):
    """main.py's --batch on a stub clock: each group's run reads it twice (one group: 512 MB hold
    every row); batched autoregressive decoding takes 3 s, the method 1 s."""
    from picospec_app import run

    ticks = iter([0.0, 3.0, 10.0, 11.0])
    monkeypatch.setattr(run, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))


LINES = ["def add(a, b):", "import os", "class Node:"]


def batch_by_hand():
    """The same batched run as main.py's (batched speculative sampling, K = 4, greedy) -> the rows'
    new tokens, each row's steps (those it took part in: accepted >= 0), the steps, the encoder."""
    from gpt2.engine import BatchGPT2
    from gpt2.load import load_model
    from picospec.batched.speculative import batch_speculative_sampling

    target, encoder = load_model("tiny-target")
    draft = load_model("tiny-draft")[0]
    xs, stats = [encoder.encode(line) for line in LINES], []
    rows = batch_speculative_sampling(xs, BatchGPT2(draft, 3), BatchGPT2(target, 3), 12, 4,
                                      np.random.default_rng(0), stats=stats, temperature=0)
    took_part = [sum(1 for s in stats if s["accepted"][b] >= 0) for b in range(3)]
    return [r[len(x):] for r, x in zip(rows, xs)], took_part, stats, encoder


def run_batch(tmp_path, *more):
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(LINES) + "\n")
    return json_of(["--method", "speculative", "--n_tokens", "12", "--temperature", "0",
                    "--batch", str(path), "--batch_memory", "512", *more])


def test_batch_json_figures_by_hand(batch_clock, tmp_path):
    """--batch --json with batched speculative sampling on the built-in pair at temperature 0: the
    rows finish at different steps; a row's tokens per target call is N over the steps it took part
    in (in the batched record of an identical run), the target calls every step, the speedup 3 s /
    1 s."""
    out = json.loads(run_batch(tmp_path, "--json"))
    new, took_part, stats, encoder = batch_by_hand()
    assert len(set(took_part)) > 1  # the rows finished at different steps
    base, mine = out["runs"]
    assert mine["texts"] == [encoder.decode(ids) for ids in new]
    assert mine["tokens_per_target_call_by_row"] == [pytest.approx(12 / n) for n in took_part]
    assert mine["target_calls"] == len(stats) and base["target_calls"] == 12
    assert (mine["time_s"], base["time_s"], out["speedup"]) == (1.0, 3.0, 3.0)
    assert out["same_output"] == [True] * 3 and out["groups"] == [3]
    assert out["cost_model"] is None and mine["acceptance_rate"] is None
    assert mine["accepted_per_node"] is None and mine["origins"] is None  # no step records kept


def test_batch_text_figures_by_hand(batch_clock, tmp_path):
    """The same figures as main.py --batch prints them; under each row's rule, its prompt and the
    text decoded after it, then a blank line."""
    text = run_batch(tmp_path)
    new, took_part, stats, encoder = batch_by_hand()
    lines = text.splitlines()
    for row, n in enumerate(took_part, 1):
        assert f"── row {row} (line {row} of " in text
        assert f"): {12 / n:.2f} tokens per target call ─" in text
        at = next(i for i, line in enumerate(lines) if line.startswith(f"── row {row} "))
        shown = LINES[row - 1] + encoder.decode(new[row - 1])
        assert text.split(lines[at] + "\n", 1)[1].startswith(shown + "\n\n"), text
    assert (f"speculative: 3 prompts x 12 tokens in 1.000 s, {len(stats)} batched target "
            f"calls") in text
    assert "autoregressive, batched the same way: 3.000 s, 12 batched target calls" in text
    assert "speedup 3.00x over batched autoregressive; 3/3 texts identical" in text
