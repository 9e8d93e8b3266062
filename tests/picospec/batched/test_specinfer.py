"""Batched SpecInfer (picospec/batched/specinfer.py batch_specinfer_decoding): every row's tree
grown by the draft one level per batched tree call, every row's tree verified in one batched target
call.
Each row is held to the single form on its prompt alone with its own generator
(tests/support/batched_trees.py), so it has the law that tests/picospec/test_specinfer.py checks:

- on micro GPT-2s of three tokens (the draft's tree calls go through BatchGPT2.tree too), 48 rows,
  branching trees, nodes accepted and rejected, at temperature 1; taking the first drawn path
  unverified, planted in the batched run, is caught;
- on the built-in pair: at temperature 0, 1 and 0.7 with top-k 5 and top-p 0.8, also with two
  drafts merged (tiny-draft and the n-gram, whose batched form scores trees node by node); the rows
  go ragged and finish at different steps.
"""
import pytest

from tests.support.batchrows import built_in, model
from tests.support.broken_verifiers import unverified
from tests.support.batched_trees import built_in_rows, micro_rows


def test_micro_rows_equal_each_row_alone(monkeypatch):
    micro_rows(monkeypatch, "specinfer")


def first_path_unverified(tokens, parents, Q, P, rng, draws):
    return unverified(tokens, parents, Q, rng)


def test_broken_rule_is_caught(monkeypatch):
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, "specinfer", ("verify_iid", first_path_unverified))


@pytest.fixture(scope="module")
def pair():
    target, xs = built_in()
    return target, model("tiny-draft")[0], model("ngram")[0], xs


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}])
def test_batched_rows_equal_each_row_alone(pair, merge, options, monkeypatch):
    built_in_rows(pair, "specinfer", merge, options, monkeypatch)
