"""Batched SpecInfer and Sequoia (picospec/batched/specinfer.py batch_specinfer_decoding,
picospec/batched/sequoia.py batch_sequoia_decoding): every row's tree grown by the draft one level
per batched tree call, every row's tree verified in one batched target call. Each row is held to the
single form on its prompt alone with its own generator (tests/helpers/batchrows.py), so it has the
law that tests/picospec/test_specinfer.py and tests/picospec/test_sequoia.py check:

- on micro GPT-2s of three tokens (the draft's tree calls go through BatchGPT2.tree too), 48 rows,
  branching trees, nodes accepted and rejected: SpecInfer at temperature 1, Sequoia at 0.7 with
  top-k 2. Broken rules planted in the batched run are caught: SpecInfer taking its first drawn path
  unverified, Sequoia judging its without-replacement siblings by the i.i.d. rule;
- on the built-in pair: at temperature 0, 1 and 0.7 with top-k 5 and top-p 0.8, SpecInfer also with
  two drafts merged (tiny-draft and the n-gram, whose batched form scores trees node by node); the
  rows go ragged and finish at different steps.
"""
import numpy as np
import pytest

import picospec.sequoia as sequoia
import picospec.specinfer as specinfer
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from picospec.batched.loop import batched
from picospec.batched.sequoia import batch_sequoia_decoding
from picospec.batched.specinfer import batch_specinfer_decoding
from picospec.sequoia import sequoia_decoding
from picospec.specinfer import specinfer_decoding
from picospec.verify import verify_iid

from tests.helpers.batchrows import (N, ROWS, built_in, check_paths, check_records,
                                     check_rows_alone, generators, micro, model)
from tests.helpers.broken_verifiers import unverified
from tests.helpers.micro import random_gpt2

DRAFT_HP, DRAFT_PARAMS = random_gpt2(n_vocab=3, n_ctx=16, n_embd=8, n_head=2, n_layer=1, seed=11,
                                     scale=0.6)
BUSHY = (.4, .3, .2)  # Sequoia's tree of 4 nodes at depth 2 branches: [[0], [1], [2], [0, 0]]
METHODS = {"specinfer": (specinfer_decoding, batch_specinfer_decoding, {"expansion": (3, 2)}),
           "sequoia": (sequoia_decoding, batch_sequoia_decoding,
                       {"nodes": 4, "depth": 2, "acceptance": BUSHY})}


def micro_rows(monkeypatch, name, broken=None, **options):
    """The batched form of `name` on ROWS (broken: (rule, function) planted in the batched run
    only), each row against the single form alone."""
    single, batch, kwargs = METHODS[name]
    target, draft, stats = micro(), GPT2(DRAFT_HP, DRAFT_PARAMS), []
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr({"specinfer": specinfer, "sequoia": sequoia}[name], *broken)
        out = batch(ROWS, BatchGPT2(draft, len(ROWS), tree_slots=12),
                    BatchGPT2(target, len(ROWS), tree_slots=12), N, np.random.default_rng(99),
                    stats=stats, generators=generators(len(ROWS)), **kwargs, **options)

    def alone(b, steps):
        target.reset(), draft.reset()
        return single(ROWS[b], draft, target, N, np.random.default_rng(b), stats=steps, **kwargs,
                      **options)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    check_records(stats)
    assert any(s["nodes"] > s["drafted"] for s in stats)  # the trees branched


@pytest.mark.parametrize("name, options", [("specinfer", {}),
                                           ("sequoia", {"temperature": 0.7, "top_k": 2})])
def test_micro_rows_equal_each_row_alone(monkeypatch, name, options):
    micro_rows(monkeypatch, name, **options)


def first_path_unverified(tokens, parents, Q, P, rng, draws):
    return unverified(tokens, parents, Q, rng)


def judged_as_iid(tokens, parents, Q, P, rng):  # drawn without replacement, judged as i.i.d.
    return verify_iid(tokens, parents, Q, P, rng)


@pytest.mark.parametrize("name, broken", [
    ("specinfer", ("verify_iid", first_path_unverified)),
    ("sequoia", ("verify_without_replacement", judged_as_iid))])
def test_broken_rules_are_caught(monkeypatch, name, broken):
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, name, broken)


@pytest.fixture(scope="module")
def pair():
    target, xs = built_in()
    return target, model("tiny-draft")[0], model("ngram")[0], xs


@pytest.mark.parametrize("name, merge",
                         [("specinfer", False), ("specinfer", True), ("sequoia", False)])
@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}])
def test_batched_rows_equal_each_row_alone(pair, name, merge, options, monkeypatch):
    """Token for token, but for a draw within MARGIN of a CDF boundary (tests/helpers/batchrows.py:
    1 row in 20 on the built-in pair split so, at 6e-7)."""
    target, draft, ngram, xs = pair
    single = {"specinfer": specinfer_decoding, "sequoia": sequoia_decoding}[name]
    batch = {"specinfer": batch_specinfer_decoding, "sequoia": batch_sequoia_decoding}[name]
    kwargs = {"expansion": (1, 2, 1)} if name == "specinfer" else {"nodes": 5, "depth": 3,
                                                                   "acceptance": BUSHY}
    drafts = [BatchGPT2(draft, len(xs)), batched(ngram)] if merge else BatchGPT2(draft, len(xs))
    stats = []
    out = batch(xs, drafts, BatchGPT2(target, len(xs)), 24, np.random.default_rng(9), stats=stats,
                generators={b: np.random.default_rng(b) for b in range(len(xs))}, **kwargs,
                **options)

    def alone(b, steps):
        target.reset(), draft.reset()
        drafts = [draft, ngram] if merge else draft
        return single(xs[b], drafts, target, 24, np.random.default_rng(b), stats=steps, **kwargs,
                      **options)

    check_rows_alone(out, alone, monkeypatch)
    check_records(stats)
