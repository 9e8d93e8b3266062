"""The self-drafting engine (gpt2/self_draft.py; layer_skip: Draft & Verify, early_exit:
LayerSkip): its verification reuses the draft's cache and still equals a full forward (a broken
reuse is caught); the batched skip-set search (gpt2/train/skip_search.py) computes what the engine
drafts; the shipped skip set decodes at the tokens per target call its search predicted, and bad
choices or damaged files are named.
"""
import json

import numpy as np
import pytest

from gpt2.fast import Choices, build
from gpt2.load import ASSETS
from gpt2.model import gpt2
from gpt2.self_draft import (Model, SelfDraft, exit_skip, load_self_draft, parse_skip, read_config,
                             sublayer_name)
from gpt2.train.skip_search import draft_logits, skip_set_search
from picospec.autoregressive import autoregressive_sampling
from picospec.self_draft import self_speculative_decoding
from picospec.theory import greedy_walk

from tests.support.micro import as_dtype

# ---- the engine: one cache, reuse below the cut ----

@pytest.fixture
def tiny(tiny_target):  # the tiny-target of the test session (tests/conftest.py)
    return tiny_target


def full_logits(model, x, n):
    return gpt2(np.asarray(x), **model.params, n_head=model.hparams["n_head"])[-n:]


def draft_then_verify(engine, x, drafts):
    """The engine as the loop drives it: the target has read x but its last token (the token it just
    gave), the draft reads that token and each draft but the last, the target scores them all."""
    engine.target(x[:-1])
    for i in range(len(drafts)):
        engine.draft(x + drafts[:i])
    return engine.target.logits(x + drafts, len(drafts) + 1)


@pytest.mark.parametrize("dtype, atol", [("float64", 1e-9), ("float32", 1e-4)])
@pytest.mark.parametrize("skip",
                         ["", "a3,m4", "a0", "m0,a5",
                          ",".join(sublayer_name(s) for s in exit_skip(2, 6)),
                                  ",".join(sublayer_name(s) for s in exit_skip(4, 6))])
def test_verification_reusing_the_draft_equals_a_full_forward(tiny, skip, dtype, atol):
    """float64 shows the reuse exact (1e-9, far inside 1e-5); float32 differs from a full forward
    only by the order of its sums (rows run one by one, then together)."""
    model, encoder = tiny
    params = as_dtype(model.params, dtype)

    def reference(tokens, n):
        return gpt2(np.asarray(tokens), **params, n_head=model.hparams["n_head"])[-n:]

    x = encoder.encode("def read_lines(path):\n    with open(path) as f:\n")
    drafts = [11, 22, 33, 44]
    engine = SelfDraft(model.hparams, params, parse_skip(skip, 6),
                       plan=build(params, model.n_params, Choices(threads=1)))  # one BLAS thread
    np.testing.assert_allclose(draft_then_verify(engine, x, drafts), reference(x + drafts, 5),
                               atol=atol, rtol=0)
    # a second step after a rejection: the cache rolls back and still matches
    got = draft_then_verify(engine, x + drafts[:2] + [55], [66, 77])
    np.testing.assert_allclose(got, reference(x + drafts[:2] + [55, 66, 77], 3), atol=atol, rtol=0)


class ReusesOffByOne(SelfDraft):
    """Bug: the reused residuals are shifted by one position."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rows, verify = self.rows, self.rows._verify

        def shifted(xs, n=1):
            rows.h_cut = [np.roll(h, 1, axis=0) for h in rows.h_cut]
            return verify(xs, n)

        self.target = Model(self, shifted, one=True)


@pytest.mark.parametrize("broken", [ReusesOffByOne])
def test_a_wrong_reuse_is_caught(tiny, broken):
    model, encoder = tiny
    x, drafts = encoder.encode("def read_lines(path):\n    with open(path) as f:\n"), [11, 22, 33,
                                                                                       44]
    engine = broken(model.hparams, model.params, exit_skip(2, 6))
    assert np.abs(draft_then_verify(engine, x, drafts)
                  - full_logits(model, x + drafts, 5)).max() > 1e-2


@pytest.mark.parametrize("kind", ["layer_skip", "early_exit"])
def test_the_self_draft_runs_as_the_target_engine(tiny, kind):
    """Loaded as main.py loads it (picospec_app.load.load_self_draft), a self-draft runs on the
    target engine's plan (its ops, head copy and panels, shared, not copied) and gives the logits
    of the reference operations and the plain tied head wte.T, on both sides; a SelfDraft built
    without one builds its own, with a contiguous head copy."""
    from picospec_app.load import load_self_draft as load_as_main

    model, _ = tiny
    loaded = load_as_main(kind, {}, model, "tiny-target")
    engine = loaded["target"].engine
    assert engine.plan is model.plan
    reference = build(model.params, model.n_params, Choices(ops="reference", head_copy=False))
    plain = SelfDraft(model.hparams, model.params, engine.skip, engine.adapter, plan=reference)
    x = list(range(40, 60))
    for side in ("target", "draft", "target"):
        for n in (1, 2, 5):
            got, want = getattr(engine, side).logits(x, n), getattr(plain, side).logits(x, n)
            assert np.abs(got - want).max() < 1e-4
        x = x + [7]
    own = SelfDraft(model.hparams, model.params, engine.skip)
    head = own.plan.head
    assert head.flags.c_contiguous and np.array_equal(head, model.params["wte"].T)


def test_the_draft_is_the_skipped_path_on_the_target_cache(tiny):
    """What the engine drafts equals the batched rows the search scores
    (gpt2.train.skip_search.draft_logits)."""
    model, encoder = tiny
    x = np.array([encoder.encode("import os\n\n\ndef list_files(path):\n    return [name for name "
                                 "in os.")[:20]])
    skip = parse_skip("a1,m2,a4", 6)
    # rows: the draft reads tokens 14..18
    batched = draft_logits(model.params, model.hparams, x, 14, skip)[0]
    engine = SelfDraft(model.hparams, model.params, skip, plan=model.plan)
    for j in range(14, 19):
        engine.target(list(x[0, :j]))
        np.testing.assert_allclose(engine.draft.logits(list(x[0, :j + 1]))[0], batched[j - 14],
                                   atol=1e-4)


def test_search_of_every_set_equals_one_set_at_a_time(tiny_draft):
    """Depth-first sharing gives each set's own agreement (the 2-layer tiny-draft: 16 sets)."""
    model, encoder = tiny_draft
    texts = ("import os\nimport sys\n\n\ndef main(argv):\n",
             "class Point:\n    def __init__(self, x, y):\n")
    x = np.array([autoregressive_sampling(encoder.encode(t)[:12], model, 8,
                                          np.random.default_rng(0), temperature=0)
                  for t in texts])
    agree, confidence = skip_set_search(model.params, model.hparams, x, 12)
    # skipping nothing: the target agrees with itself
    assert agree.shape == (16, 2, 7) and agree[0].all()
    for mask in range(16):
        skip = [s for s in range(4) if mask >> s & 1]
        logits = draft_logits(model.params, model.hparams, x, 12, skip)
        np.testing.assert_array_equal(agree[mask], logits.argmax(-1) == x[:, 13:])
        top = np.exp(logits - logits.max(-1, keepdims=True))
        np.testing.assert_allclose(confidence[mask], 1 / top.sum(-1), rtol=2e-3)  # float16


# ---- what ships with tiny-target ----

def test_shipped_skip_set_decodes_as_its_search_predicted(tiny):
    """The exhaustive search's best set, decoded greedily on the search's own prompts with its K,
    gives the tokens per target call it predicted (within 5%) and the target's text."""
    model, _ = tiny
    record = read_config(ASSETS / "tiny-target")["layer_skip"]
    seqs, start = record["search"]["sequences"], record["search"]["start"]
    engine = SelfDraft(model.hparams, model.params, parse_skip(record["skip"], 6), plan=model.plan)
    tokens, calls = 0, 0
    for seq in seqs:
        engine.reset()
        stats = []
        out = self_speculative_decoding(seq[:start], engine.draft, engine.target, len(seq) - start,
                                        record["K"],
                                        np.random.default_rng(0), threshold=record["threshold"],
                                        temperature=0, stats=stats)
        assert out == seq
        tokens, calls = tokens + len(seq) - start, calls + len(stats)
    assert tokens / calls == pytest.approx(record["predicted"]["tokens_per_call"], rel=0.05)


def test_shipped_prediction_is_the_walk_of_the_shipped_agreement(tiny):
    """A second way: the prediction is greedy_walk over the set's agreement, recomputed here in one
    batched pass."""
    model, _ = tiny
    record = read_config(ASSETS / "tiny-target")["layer_skip"]
    x, start = np.array(record["search"]["sequences"]), record["search"]["start"]
    logits = draft_logits(model.params, model.hparams, x, start, parse_skip(record["skip"], 6))
    agree = logits.argmax(-1) == x[:, start + 1:]
    # the draft's top probability
    confidence = 1 / np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)
    assert agree.mean() == pytest.approx(record["predicted"]["agreement"], abs=1e-9)
    walks = [greedy_walk(a, record["K"], q, record["threshold"]) for a, q in zip(agree, confidence)]
    assert x[:,
             start:].size / sum(1 + len(w)
                                for w
                                in walks) == pytest.approx(record["predicted"]["tokens_per_call"])


def test_shipped_configuration_loads(tiny):
    model, _ = tiny
    config = json.loads((ASSETS / "tiny-target" / "self_draft.json").read_text())
    assert all(len(config["layer_skip"]["search"][key]["speedup"]) == 4096
               for key in ("cpu", "memory_bound"))
    engine = load_self_draft(model.hparams, model.params, ASSETS / "tiny-target", "early_exit")
    assert engine.skip == exit_skip(config["early_exit"]["exit_layer"], 6)
    assert (engine.adapter is not None) == config["early_exit"]["adapter"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="layer_skip", skip="a9"), "layer 0..5"),
    (dict(kind="layer_skip", skip="x1"), "a<layer>"),
    (dict(kind="early_exit", exit_layer=6), "exit after 1..5"),
    (dict(kind="early_exit", exit_layer=5), "trained for exit layer")])
def test_bad_choices_say_what_to_do(tiny, kwargs, message):
    model, _ = tiny
    with pytest.raises(ValueError, match=message):
        load_self_draft(model.hparams, model.params, ASSETS / "tiny-target", **kwargs)


def test_early_exit_on_a_one_layer_model_says_why_not(tmp_path):
    from tests.support.micro import random_gpt2

    hparams, params = random_gpt2(n_vocab=50, n_layer=1)
    with pytest.raises(ValueError, match="only 1 layer: use a target of 2 or more layers"):
        load_self_draft(hparams, params, tmp_path, "early_exit", exit_layer=1)


def test_a_model_without_a_search_says_how_to_make_one(tiny, tmp_path):
    model, _ = tiny
    with pytest.raises(ValueError, match="gpt2.train.self_draft --task search"):
        load_self_draft(model.hparams, model.params, tmp_path, "layer_skip")


@pytest.mark.parametrize("kind, key, value, message", [
    ("layer_skip", "K", "4", "K must be a whole number from 1 to 64"),
    ("layer_skip", "K", 0, "from 1 to 64"),
    ("layer_skip", "K", 4.0, "whole number"),
    ("layer_skip", "threshold", "x", "a number from 0 to 1"),
    ("layer_skip", "skip", 3, "a string such as 'a3,m4'"),
    ("early_exit", "exit_layer", True, "whole number >= 1"),
    ("early_exit", None, [], "'early_exit' is not a JSON object")])
def test_a_damaged_self_draft_json_is_named(tiny, tmp_path, kind, key, value, message):
    """Wrong types or ranges in self_draft.json: one ValueError naming the file, the entry and how
    to rebuild it (before: a TypeError deep in the loop, or a K = 0 refusal that did not say where
    the 0 came from)."""
    model, _ = tiny
    config = json.loads((ASSETS / "tiny-target" / "self_draft.json").read_text())
    if key is None:
        config[kind] = value
    else:
        config[kind][key] = value
    (tmp_path / "self_draft.json").write_text(json.dumps(config))
    with pytest.raises(ValueError,
                       match=f"{tmp_path / 'self_draft.json'}: .*{message}.*gpt2.train.self_draft "
                             f"--task search"):
        load_self_draft(model.hparams, model.params, tmp_path, kind)
