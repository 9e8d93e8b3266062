"""Batched lookahead decoding (picospec/lookahead.py batch_lookahead_decoding: every row's window and pooled guesses
scored in one batched tree call): each row keeps the target's exact law, and keeping the first pooled guess
unverified is rejected by the same check on the same engines; each row equals lookahead_decoding on its prompt
alone, greedy and, with its own generator, sampled."""
import numpy as np
import pytest

import batchrows
import picospec.lookahead as la
from batchrows import COPIES, HP, N, PARAMS, check_laws, check_records, check_rejected
from checker import SAMPLES
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from micro import random_gpt2
from picospec.lookahead import batch_lookahead_decoding, lookahead_decoding
from test_lookahead import unverified


def sampled_rows(n, **options):  # -> per prompt, n sampled continuations, COPIES rows of each per batch
    return batchrows.sampled_rows(lambda target: lambda xs, batch, rng, stats: batch_lookahead_decoding(
        xs, batch, N, rng, 2, 3, 3, stats=stats, **options), n, tree_slots=16)


def test_batched_rows_keep_the_exact_law():
    """15,000 runs per prompt, three prompts of different lengths (so windows and pools) in every batch, T = 1."""
    samples, target = sampled_rows(SAMPLES // 2)
    check_laws(samples, target)


def test_unverified_guesses_are_rejected(monkeypatch):
    """Broken variant: the first pooled guess kept whole without verification, on the same batched engines."""
    monkeypatch.setattr(la, "verify_tree", unverified)
    samples, target = sampled_rows(3 * COPIES)
    check_rejected(samples, target)


@pytest.mark.parametrize("options", [{"temperature": 0}, {"temperature": 1.0}, {"temperature": 0.7, "top_k": 5}])
def test_batched_rows_equal_each_row_alone(options):
    """A random engine with peaked laws (scale 1), whose text falls into cycles so that the pool's n-grams come true
    when sampling too: each row of one batch, with its own generator, is token for token what lookahead_decoding
    gives its prompt alone."""
    hp, params = random_gpt2(n_vocab=50, n_ctx=64, seed=3, scale=1.0)
    target = GPT2(hp, params)
    prompts = [[7, 3, 11, 3, 7, 20], [1, 2], [9, 40, 9, 1], [5]]
    stats = []
    out = batch_lookahead_decoding(prompts, BatchGPT2(target, len(prompts)), 30, np.random.default_rng(5), 3, 3, 3,
                                   stats=stats, generators={b: np.random.default_rng(b) for b in range(4)}, **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        assert out[b] == lookahead_decoding(prompt, target, 30, np.random.default_rng(b), 3, 3, 3, **options)
    check_records(stats)


def test_bad_options_are_refused_for_every_row():
    target = BatchGPT2(GPT2(HP, PARAMS), 2)
    with pytest.raises(ValueError, match="window"):
        batch_lookahead_decoding([[0, 1], [2]], target, 3, np.random.default_rng(0), window=0)
    with pytest.raises(ValueError, match="empty"):
        batch_lookahead_decoding([[0, 1], []], target, 3, np.random.default_rng(0))
