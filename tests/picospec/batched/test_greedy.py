"""Batched greedy draft-and-verify (picospec/batched/greedy.py batch_greedy_decoding: every row's
drafts from one batched draft call per position, every row's chain scored in one batched target
call), row by row against greedy_decoding, on the built-in pair, with every schedule and the
confidence stop: each row's tokens AND its steps (the tokens each target call added) equal
greedy_decoding's on that prompt alone. Greedy text is the target's whatever K is, so the steps are
what show a row's own K; tests.suite.mutants plants one K shared by all rows and a confidence stop
that ends every row's drafting, and this test catches both.
"""
import numpy as np
import pytest

from gpt2.engine import BatchGPT2
from picospec.batched.greedy import batch_greedy_decoding
from picospec.greedy import greedy_decoding

from tests.support.batchrows import built_in, check_records, model

N = 30


@pytest.fixture(scope="module")
def pair():
    target, xs = built_in()
    return target, model("tiny-draft")[0], xs


@pytest.mark.parametrize("options", [{}, {"schedule": "heuristic"}, {"confidence": 0.4},
                                     {"schedule": "heuristic", "confidence": 0.6}])
def test_batched_greedy_rows_equal_each_row_alone(pair, options):
    target, draft, xs = pair
    stats, drafted = [], []
    out = batch_greedy_decoding(xs, BatchGPT2(draft, len(xs)), BatchGPT2(target, len(xs)), N, 3,
                                stats=stats, **options)
    for b, x in enumerate(xs):
        target.reset(), draft.reset()
        steps = []
        assert out[b] == greedy_decoding(x, draft, target, N, 3, stats=steps, **options)
        assert [s["tokens"][b] for s in stats if s["accepted"][b] >= 0] == [s["tokens"]
                                                                            for s in steps]
        done = np.cumsum([0] + [len(s["tokens"]) for s in steps])
        # steps with room for a draft
        drafted += [s["drafted"] for s, d in zip(steps, done) if d < N - 1]
    # drafts accepted, rows ragged, some finished first; a record: kept nodes, then one token
    check_records(stats)
    # the stop fired (no draft at all: only it does that)
    assert (0 in drafted) == ("confidence" in options)


def test_batched_greedy_refuses_what_the_single_form_refuses(pair):
    target, draft, xs = pair
    with pytest.raises(ValueError, match="unknown schedule"):
        batch_greedy_decoding(xs, BatchGPT2(draft, len(xs)), BatchGPT2(target, len(xs)), 4, 3,
                              schedule="fast")
    with pytest.raises(ValueError, match="empty"):
        batch_greedy_decoding([xs[0], []], BatchGPT2(draft, 2), BatchGPT2(target, 2), 4, 3)


