"""The batched baselines of `main.py --batch`, row by row against the single-sequence functions:

- batched greedy draft-and-verify (picospec/greedy.py batch_greedy_decoding: every row's drafts from
  one batched draft call per position, every row's chain scored in one batched target call), on the
  built-in pair, with every schedule and the confidence stop: each row's tokens AND its steps (the
  tokens each target call added) equal greedy_decoding's on that prompt alone. Greedy text is the
  target's whatever K is, so the steps are what show a row's own K; bench.mutants plants one K
  shared by all rows and a confidence stop that ends every row's drafting, and this test catches
  both.
- batched autoregressive sampling (picospec/autoregressive.py): with its own generator each row
  equals autoregressive_sampling alone, at temperature 0, 1 and 0.7 with top-k 5 and top-p 0.8 (so
  it has the single function's law, which tests/picospec/test_speculative.py checks); bench.mutants
  plants one generator for all rows.
"""
import numpy as np
import pytest

from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from picospec.autoregressive import autoregressive_sampling
from picospec.batched.autoregressive import batch_autoregressive_sampling
from picospec.batched.greedy import batch_greedy_decoding
from picospec.greedy import greedy_decoding

from tests.helpers.batchrows import built_in, check_records, model
from tests.helpers.micro import random_gpt2

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


@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}])
def test_batched_autoregressive_rows_equal_each_row_alone(options):
    hp, params = random_gpt2(n_vocab=50, n_ctx=64, seed=3, scale=0.5)
    target = GPT2(hp, params)
    prompts = [[7, 3, 11, 3, 7, 20], [1, 2], [9, 40, 9, 1], [5]]
    stats = []
    out = batch_autoregressive_sampling(prompts, BatchGPT2(target, len(prompts)), 20,
                                        np.random.default_rng(5),
                                        stats=stats,
                                        generators={b: np.random.default_rng(b) for b in range(4)},
                                        **options)
    for b, x in enumerate(prompts):
        target.reset()
        assert out[b] == autoregressive_sampling(x, target, 20, np.random.default_rng(b), **options)
    assert len(stats) == 20 and all(s["accepted"] == [0] * 4
                                    and [len(t) for t in s["tokens"]] == [1] * 4
                                    for s in stats)
    if options["temperature"]:
        # the rows drew differently
        assert len({tuple(o[len(x):]) for o, x in zip(out, prompts)}) == 4
