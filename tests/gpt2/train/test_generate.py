"""Batched decoding (gpt2/train/generate.py), the source of Medusa's self-distillation data: greedy
rows equal the engine's greedy decoding token for token; sampled rows follow the model's exact law
of whole sequences (and a wrong temperature is rejected by the same check)."""
import numpy as np
import pytest

from gpt2.engine import GPT2
from gpt2.train.generate import generate_batch

from picospec.check.exact_law import check_law, exact_law
from tests.support.micro import random_gpt2


def test_greedy_rows_equal_engine_greedy_decoding():
    hparams, params = random_gpt2(n_vocab=50, n_ctx=32, n_embd=16, n_head=2, n_layer=2, seed=3,
                                  scale=0.5)
    prompts = np.random.default_rng(0).integers(0, 50, (6, 5))
    rows = generate_batch(hparams, params, prompts, 12, np.random.default_rng(1), temperature=0)
    engine = GPT2(hparams, params)
    for prompt, row in zip(prompts, rows):
        x = [int(t) for t in prompt]
        for _ in range(12):
            x.append(int(engine(x)[-1].argmax()))
        assert x == row.tolist()


# Rows per check, sized by `python -m tests.suite.power --only generate`: rows sampled at
# temperature 1.5 are rejected against the law at each case's temperature with the power given (at
# ALPHA, the least over the cases, measured on 20,000 fresh draws of n rows).
ROWS = 290  # power 0.9994
WEIGHTS = dict(n_vocab=4, n_ctx=16, n_embd=16, n_head=2, n_layer=2, seed=5, scale=0.7)
X = [1, 3, 0]


def sampled_rows(n, temperature, seed=2):
    hparams, params = random_gpt2(**WEIGHTS)
    return generate_batch(hparams, params, np.tile(X, (n, 1)), 3, np.random.default_rng(seed),
                          temperature)[:, 3:]


def law_at(temperature):
    return exact_law(GPT2(*random_gpt2(**WEIGHTS)), X, 3, temperature=temperature)


@pytest.mark.parametrize("sample_temperature, ok", [(1.0, True), (0.7, True), (1.5, False)])
def test_sampled_rows_follow_the_exact_law(sample_temperature, ok):
    """Rows of one prompt, 3 new tokens over 4 tokens: G-test against the exact law at temperature 1
    or 0.7; rows sampled at 1.5 (a wrong temperature) are checked against the law at 1.0 and must be
    rejected."""
    law = law_at(sample_temperature if ok else 1.0)
    # the law is far from uniform, so a wrong temperature shows
    assert max(law.values()) > 2 / 4 ** 3
    rows = sampled_rows(ROWS, sample_temperature)
    if ok:
        check_law(rows, law)
    else:
        with pytest.raises(AssertionError, match="empirical law differs"):
            check_law(rows, law)


def test_too_long_is_a_clear_error():
    hparams, params = random_gpt2(n_ctx=8)
    with pytest.raises(ValueError, match="context window"):
        generate_batch(hparams, params, np.zeros((2, 5), dtype=int), 4, np.random.default_rng(0))
