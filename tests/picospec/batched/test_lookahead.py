"""Batched lookahead decoding (picospec/lookahead.py batch_lookahead_decoding: every row's window
and pooled guesses scored in one batched tree call), row by row against lookahead_decoding
(tests/support/batchrows.py): each row of one batch, with its own generator, is token for token what
the single form gives its prompt alone, so it has the law that tests/picospec/test_lookahead.py
checks. On a micro GPT-2 of three tokens (48 rows, windows and pools of their own, guesses accepted
and rejected, at temperature 1), where keeping the first pooled guess unverified in the batched run
is caught, and on a random engine of 50 tokens, greedy and sampled (at 1, and at 0.7 with top-k 5
and top-p 0.8)."""
import numpy as np
import pytest

import picospec.batched.lookahead as la
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from picospec.batched.lookahead import batch_lookahead_decoding
from picospec.lookahead import lookahead_decoding

from tests.support.batchrows import (HP, N, PARAMS, ROWS, check_paths, check_records,
                                     check_rows_alone, generators, micro)
from tests.support.broken_verifiers import first_guess_unverified
from tests.support.micro import random_gpt2


def micro_rows(monkeypatch, broken=None, **options):
    """Batched lookahead on ROWS (a broken verify_tree planted in the batched run only), each row
    against the single form alone -> the batch's step records."""
    target, stats = micro(), []
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(la, "verify_tree", broken)
        out = batch_lookahead_decoding(ROWS, BatchGPT2(target, len(ROWS), tree_slots=16), N,
                                       np.random.default_rng(99), 2, 3, 3, stats=stats,
                                       generators=generators(len(ROWS)), **options)

    def alone(b, steps):
        target.reset()
        return lookahead_decoding(ROWS[b], target, N, np.random.default_rng(b), 2, 3, 3,
                                  stats=steps, **options)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_p=0.8)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    check_records(micro_rows(monkeypatch, **options))


def test_unverified_guesses_are_caught(monkeypatch):
    """Broken variant: the first pooled guess kept whole without verification, in the batched
    run."""
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, first_guess_unverified)


@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}])
def test_batched_rows_equal_each_row_alone(options):
    """A random engine with peaked laws (scale 1), whose text falls into cycles so that the pool's
    n-grams come true when sampling too: each row of one batch, with its own generator, is token for
    token what lookahead_decoding gives its prompt alone."""
    hp, params = random_gpt2(n_vocab=50, n_ctx=64, seed=3, scale=1.0)
    target = GPT2(hp, params)
    prompts = [[7, 3, 11, 3, 7, 20], [1, 2], [9, 40, 9, 1], [5]]
    stats = []
    out = batch_lookahead_decoding(prompts, BatchGPT2(target, len(prompts)), 30,
                                   np.random.default_rng(5), 3, 3, 3,
                                   stats=stats,
                                   generators={b: np.random.default_rng(b) for b in range(4)},
                                   **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        assert out[b] == lookahead_decoding(prompt, target, 30, np.random.default_rng(b), 3, 3, 3,
                                            **options)
    check_records(stats)


def test_bad_options_are_refused_for_every_row():
    target = BatchGPT2(GPT2(HP, PARAMS), 2)
    with pytest.raises(ValueError, match="window"):
        batch_lookahead_decoding([[0, 1], [2]], target, 3, np.random.default_rng(0), window=0)
    with pytest.raises(ValueError, match="empty"):
        batch_lookahead_decoding([[0, 1], []], target, 3, np.random.default_rng(0))
