"""Batched self-drafting (layer_skip, early_exit): gpt2/self_draft.py's BatchSelfDraft and
picospec/self_draft.py's batch_self_speculative_decoding.

- The engine: any run of batched draft and target calls (rows growing, cut back, asking for n rows,
  leaving) gives, row by row, the logits of that row's own SelfDraft after the same calls, for skip
  sets and early exits, with and without the shipped exit adapter; a target that reuses the draft's
  keys/values is caught.
- The micro rows: on a micro GPT-2 of three tokens, skipping a sublayer or exiting early, with the
  adaptive stop, at temperature 1 and at 0.6 with top-k 2, each of 48 rows is
  self_speculative_decoding's on its prompt alone (tests/support/batchrows.py: so it has the law
  tests/picospec/test_self_draft.py checks); drafts verified against the draft's unwarped law in the
  batched run are caught.
- The rows: on the built-in tiny-target and its shipped self_draft.json, each row of one batch is
  what self_speculative_decoding gives its prompt alone with its own generator, in tokens and in
  step records, at temperature 0, 1 and 0.7 with top-k 5 and top-p 0.8.
- The front door: main.py --batch on both rows prints the autoregressive texts at temperature 0.
"""
import json

import numpy as np
import pytest

import picospec.batched.self_draft as sd
from gpt2.fast import Choices, build
from gpt2.load import ASSETS
from gpt2.self_draft import (BatchSelfDraft, SelfDraft, batch_side, exit_skip, load_self_draft,
                             parse_skip, sublayer)
from picospec.sampling import sample, warp
from picospec.batched.self_draft import batch_self_speculative_decoding
from picospec.self_draft import self_speculative_decoding

from tests.support.batchrows import (HP, N, PARAMS, ROWS, TEXTS, built_in, check_paths,
                                     check_records, check_rows_alone, generators)
from tests.support.clitools import run_here
from tests.support.methods import ADAPTIVE
from tests.support.micro import as_dtype


@pytest.fixture(scope="module")
def tiny():
    return built_in()[0]


def engines(tiny, path, dtype):
    """-> a SelfDraft on tiny-target for `path` ("a3,m4": a skip set; "E2": exit after layer 2,
    plain LM head; "shipped exit": the shipped exit layer and adapter), its weights in dtype."""
    params = as_dtype(tiny.params, dtype)
    plan = build(params, tiny.n_params, Choices(threads=1))  # as tiny's: one BLAS thread
    if path == "shipped exit":
        shipped = load_self_draft(tiny.hparams, tiny.params, ASSETS / "tiny-target", "early_exit")
        return SelfDraft(tiny.hparams, params, shipped.skip, shipped.adapter, plan=plan)
    skip = exit_skip(int(path[1:]), 6) if path.startswith("E") else parse_skip(path, 6)
    return SelfDraft(tiny.hparams, params, skip, plan=plan)


def run_calls(batch, singles, seed, steps=14):
    """Random batched calls, each row changed by its own amount, and the same calls on each row's
    own engine -> the largest difference of logits between a batched row and its own engine's."""
    rng, worst = np.random.default_rng(seed), 0.0
    xs = [[int(t) for t in rng.integers(0, 4096, rng.integers(1, 12))] for _ in singles]
    for step in range(steps):
        side = "target" if step == 0 or rng.random() < 0.4 else "draft"
        xs = [x[:max(1, len(x) - int(rng.choice([0, 0, 0, 1, 3])))]
              + [int(t) for t in rng.integers(0, 4096, 1 + int(
            rng.integers(0, 3 if side == "target" else 2)))] for x in xs]
        # a finished row leaves the batch; the others move up
        if len(xs) > 1 and rng.random() < 0.15:
            gone = int(rng.integers(0, len(xs)))
            xs, singles = xs[:gone] + xs[gone + 1:], singles[:gone] + singles[gone + 1:]
        n = int(rng.integers(1, min(4, min(len(x) for x in xs)) + 1)) if side == "target" else 1
        out = getattr(batch, side).logits(xs, n)  # [B, n, V]
        assert out.shape == (len(xs), n, batch.hparams["n_vocab"])
        for b, (x, single) in enumerate(zip(xs, singles)):
            worst = max(worst, np.abs(out[b] - getattr(single, side).logits(x, n)).max())
    return worst


@pytest.mark.parametrize("path", ["a3,m4", "a5", "m0,a2", "E2", "shipped exit"])
@pytest.mark.parametrize("seed", [0, 1])
def test_batched_logits_equal_each_row_on_its_own_engine(tiny, path, seed):
    """float64 weights show the two equal up to the order of sums (the rows run together, then one
    by one)."""
    engine = engines(tiny, path, "float64")
    singles = [SelfDraft(engine.hparams, engine.params, engine.skip, engine.adapter,
                         plan=engine.plan)
               for _ in range(4)]
    assert run_calls(BatchSelfDraft(engine, 4), singles, seed) < 1e-5


def test_float32_rows_agree_as_closely_as_the_engine_does_with_itself(tiny):
    """In float32 the logits differ by the order of sums only, as in
    tests/gpt2/test_self_draft.py (1e-4)."""
    engine = engines(tiny, "shipped exit", "float32")
    singles = [SelfDraft(engine.hparams, engine.params, engine.skip, engine.adapter,
                         plan=engine.plan)
               for _ in range(3)]
    assert run_calls(BatchSelfDraft(engine, 3), singles, 2) < 1e-4


class VerifiesOnTheDraftsCache(BatchSelfDraft):
    """Bug: the target reuses every key/value the row's cache holds, also those the draft wrote
    above the cut."""

    def _verify(self, xs, n=1):
        self.verified = [len(t) for t in self.tokens]
        return super()._verify(xs, n)


def test_a_target_that_reuses_the_drafts_keys_and_values_is_caught(tiny):
    engine = engines(tiny, "a3,m4", "float64")
    singles = [SelfDraft(engine.hparams, engine.params, engine.skip, plan=engine.plan)
               for _ in range(4)]
    assert run_calls(VerifiesOnTheDraftsCache(engine, 4), singles, 0) > 1e-3


class ReusesOffByOne(BatchSelfDraft):
    """Bug: each row's reused residuals at the cut are shifted by one position."""

    def _verify(self, xs, n=1):
        self.h_cut = [np.roll(h, 1, axis=0) for h in self.h_cut]
        return super()._verify(xs, n)


def test_a_wrong_reuse_of_the_residuals_at_the_cut_is_caught(tiny):
    engine = engines(tiny, "a3,m4", "float64")
    singles = [SelfDraft(engine.hparams, engine.params, engine.skip, plan=engine.plan)
               for _ in range(4)]
    assert run_calls(ReusesOffByOne(engine, 4), singles, 0) > 1e-3


@pytest.mark.parametrize("path, cut", [("a3,m4", 6), ("E2", 4), ("m5", 11)])
def test_verification_runs_only_unread_tokens_below_the_cut(tiny, monkeypatch, path, cut):
    """After the draft read t and d1 in every row, verifying [.., t, d1, d2] runs d2 alone through
    the sublayers below the cut and the three tokens through the rest, one batched pass each; the
    logits are each row's own engine's."""
    import gpt2.self_draft as self_draft

    engine = engines(tiny, path, "float64")
    batch = BatchSelfDraft(engine, 3)
    xs = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]
    # (side, x +, n)
    calls = [("target", [], 1), ("draft", [1], 1), ("draft", [1, 2], 1), ("target", [1, 2, 3], 3)]
    for side, more, n in calls[:3]:
        getattr(batch, side).logits([x + more for x in xs], n)
    seen = []  # (sublayer, padded rows it ran)
    monkeypatch.setattr(self_draft, "sublayer", lambda x, s, *args, **kwargs: (
        seen.append((s, x.shape[0] * x.shape[1])), sublayer(x, s, *args, **kwargs))[1])
    out = batch.target.logits([x + calls[3][1] for x in xs], 3)  # [3, 3, V]
    assert [s for s, _ in seen] == list(range(12))
    assert {rows for s, rows in seen if s < cut} == {3} and {rows for s,
                                                             rows in seen if s >= cut} == {9}
    for b, x in enumerate(xs):
        single = SelfDraft(engine.hparams, engine.params, engine.skip, plan=engine.plan)
        for side, more, n in calls:
            alone = getattr(single, side).logits(x + more, n)
        assert np.abs(out[b] - alone).max() < 1e-5


def test_both_sides_of_one_self_draft_get_one_batched_engine(tiny):
    engine = engines(tiny, "a5", "float32")
    target, draft = batch_side(engine.target, 3), batch_side(engine.draft, 3)
    assert target.engine is draft.engine is engine.batch and target is engine.batch.target
    assert draft is engine.batch.draft and batch_side(engine.target, 2).engine.rows == 2


# ---- the micro rows, on a micro GPT-2 of three tokens ----

def micro_rows(monkeypatch, skip, broken=None, **options):
    """Batched self-drafting on ROWS with the adaptive stop (a broken draw planted in the batched
    run only), each row against self_speculative_decoding alone -> the batch's step records."""
    engine, stats = SelfDraft(HP, PARAMS, parse_skip(skip, 2)), []
    batch = BatchSelfDraft(engine, len(ROWS))
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(sd, "draw", broken)
        out = batch_self_speculative_decoding(ROWS, batch.draft, batch.target, N, 3,
                                              np.random.default_rng(99), stats=stats,
                                              generators=generators(len(ROWS)), **ADAPTIVE,
                                              **options)

    def alone(b, steps):
        engine.reset()
        return self_speculative_decoding(ROWS[b], engine.draft, engine.target, N, 3,
                                         np.random.default_rng(b), stats=steps, **ADAPTIVE,
                                         **options)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@pytest.mark.parametrize("skip, options", [("a1", {}), ("a1,m1", dict(temperature=0.6, top_k=2))],
                         ids=["skip-a1-T1", "exit1-T0.6-top_k2"])
def test_micro_rows_equal_each_row_alone(monkeypatch, skip, options):
    check_records(micro_rows(monkeypatch, skip, **options))  # accepted, ragged, some finished first


def unwarped_draw(p_raw, rng, **sampling_options):
    """Bug: verify against the draft's unwarped law (the one its confidence reads), not the warped
    law it sampled."""
    token = sample(warp(p_raw, **sampling_options), rng)
    return token, p_raw, float(p_raw[token])


def test_verifying_against_the_unwarped_draft_law_is_caught(monkeypatch):
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, "a1", unwarped_draw, temperature=0.4)


# ---- the rows, on the built-in target and its shipped self_draft.json ----

def alone(engine, xs, settings, options):
    """-> per prompt, (self_speculative_decoding's output alone with generator b, its step
    records)."""
    out = []
    for b, x in enumerate(xs):
        engine.reset()
        stats = []
        out.append((self_speculative_decoding(x, engine.draft, engine.target, 24, settings["K"],
                                              np.random.default_rng(b), stats=stats,
                                              **settings["loop"], **options),
                    stats))
    return out


SETTINGS = {"shipped": {},
            "K4-adaptive": {"K": 4, "loop": dict(threshold=0.6, adaptive=True, alpha=0.9)}}


@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}],
                         ids=["T0", "T1", "T0.7-top_k5-top_p0.8"])
@pytest.mark.parametrize("settings", list(SETTINGS), ids=list(SETTINGS))
@pytest.mark.parametrize("kind", ["layer_skip", "early_exit"])
def test_batched_rows_equal_each_row_alone(tiny, kind, settings, options):
    """Tokens, and per step: each row's accepted count and new tokens (-1 and none once it has
    finished); the step's drafted is the most drafts of the rows still running. "shipped": the K and
    threshold of self_draft.json (fixed threshold); "K4-adaptive": Draft & Verify's adaptive
    threshold, so rows stop drafting at their own counts."""
    _, xs = built_in()
    engine = load_self_draft(tiny.hparams, tiny.params, ASSETS / "tiny-target", kind)
    settings = {"K": engine.settings["K"], "loop": {"threshold": engine.settings["threshold"]},
                **SETTINGS[settings]}
    stats, batch = [], BatchSelfDraft(engine, len(xs))
    out = batch_self_speculative_decoding(xs, batch.draft, batch.target, 24, settings["K"],
                                          np.random.default_rng(9),
                                          stats=stats,
                                          generators={b: np.random.default_rng(b)
                                                      for b in range(len(xs))},
                                          **settings["loop"], **options)
    rows = alone(engine, xs, settings, options)
    assert len(stats) == max(len(s) for _, s in rows)
    for b, (x, single) in enumerate(rows):
        records = [(s["accepted"][b], s["tokens"][b]) for s in stats]
        assert out[b] == x and records == [(r["accepted"], r["tokens"])
                                           for r in single] + [(-1, [])] * (
            len(stats) - len(single)), TEXTS[b]
    drafted = [[single[k]["drafted"] for _, single in rows if k < len(single)]
               for k in range(len(stats))]
    assert [s["drafted"] for s in stats] == [max(d) for d in drafted]
    # drafts accepted, rows ragged, some finished first; a record: kept drafts, then one token
    check_records(stats)
    if settings["K"] > 1:  # rows stopped drafting at their own counts in the same step
        assert any(len(set(d)) > 1 for d in drafted)


# ---- the front door ----

@pytest.mark.parametrize("K", [["--K", "3"], []], ids=["K3", "searched-K"])
@pytest.mark.parametrize("method", ["layer_skip", "early_exit"])
def test_main_batch_prints_the_autoregressive_texts_at_temperature_zero(tmp_path, method, K):
    (tmp_path / "prompts.txt").write_text("\n".join(t.replace("\n", " ") for t in TEXTS) + "\n")
    r = run_here(["main.py", "--batch", "prompts.txt", "--method", method, *K, "--n_tokens", "16",
                 "--temperature", "0", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["same_output"] == [True] * len(TEXTS)
