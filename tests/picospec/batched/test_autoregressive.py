"""Batched autoregressive sampling (picospec/batched/autoregressive.py), the baseline of
`main.py --batch`: with its own generator each row equals autoregressive_sampling alone, at
temperature 0, 1 and 0.7 with top-k 5 and top-p 0.8 (so it has the single function's law, which
tests/picospec/test_autoregressive.py checks); tests.suite.mutants plants one generator for all
rows.
"""
import numpy as np
import pytest

from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from picospec.autoregressive import autoregressive_sampling
from picospec.batched.autoregressive import batch_autoregressive_sampling

from tests.support.micro import random_gpt2


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
