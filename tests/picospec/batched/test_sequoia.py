"""Batched Sequoia (picospec/batched/sequoia.py batch_sequoia_decoding): every row's tree grown by
the draft one level per batched tree call, every row's tree verified in one batched target call.
Each row is held to the single form on its prompt alone with its own generator
(tests/support/batched_trees.py), so it has the law that tests/picospec/test_sequoia.py checks:

- on micro GPT-2s of three tokens, 48 rows, branching trees, nodes accepted and rejected, at 0.7
  with top-k 2; judging the without-replacement siblings by the i.i.d. rule, planted in the batched
  run, is caught;
- on the built-in pair: at temperature 0, 1 and 0.7 with top-k 5 and top-p 0.8; the rows go ragged
  and finish at different steps.
"""
import pytest

from picospec.verify import verify_iid

from tests.support.batchrows import built_in, model
from tests.support.batched_trees import built_in_rows, micro_rows


def test_micro_rows_equal_each_row_alone(monkeypatch):
    micro_rows(monkeypatch, "sequoia", temperature=0.7, top_k=2)


def judged_as_iid(tokens, parents, Q, P, rng):  # drawn without replacement, judged as i.i.d.
    return verify_iid(tokens, parents, Q, P, rng)


def test_broken_rule_is_caught(monkeypatch):
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, "sequoia", ("verify_without_replacement", judged_as_iid))


@pytest.fixture(scope="module")
def pair():
    target, xs = built_in()
    return target, model("tiny-draft")[0], model("ngram")[0], xs


@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}])
def test_batched_rows_equal_each_row_alone(pair, options, monkeypatch):
    built_in_rows(pair, "sequoia", False, options, monkeypatch)
