"""Batched REST (picospec/batched/rest.py batch_rest_decoding: every row's retrieved trie scored in
one batched tree call), row by row against rest_decoding (tests/support/batchrows.py): each row of
one batch, with its own generator, is token for token what the single form gives its prompt alone,
so it has the law that tests/picospec/test_rest.py checks. On a micro GPT-2 of three tokens whose
datastore holds its own sampled text (48 rows, branching tries, drafts accepted and rejected, at
temperature 1 and at 0.7 with top-k 2), where taking the first retrieved path unverified in the
batched run is caught, and on a random engine of 50 tokens at temperature 0, 1 and 0.7 with top-k 5
and top-p 0.8."""
import functools

import numpy as np
import pytest

import picospec.batched.rest as batched_rest
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from picospec.autoregressive import autoregressive_sampling
from picospec.batched.rest import batch_rest_decoding
from picospec.rest import Datastore, rest_decoding

from tests.support.batchrows import (N, ROWS, check_paths, check_records, check_rows_alone,
                                     generators, micro)
from tests.support.broken_verifiers import unverified
from tests.support.micro import random_gpt2


@functools.cache
def micro_store(n_texts=10, length=12):  # the micro target's own likely text, with branches
    texts = [autoregressive_sampling([0, 1], micro(), length, np.random.default_rng(seed))
             for seed in range(n_texts)]
    return Datastore.build(sum(texts, []), max_suffix=4)


def micro_rows(monkeypatch, broken=None, **options):
    """Batched REST on ROWS (a broken verify_tree planted in the batched run only), each row against
    the single form alone -> the batch's step records."""
    target, store, stats = micro(), micro_store(), []
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(batched_rest, "verify_tree", broken)
        out = batch_rest_decoding(ROWS, BatchGPT2(target, len(ROWS), tree_slots=8), N,
                                  np.random.default_rng(99), store, 8, 3, 6, stats=stats,
                                  generators=generators(len(ROWS)), **options)

    def alone(b, steps):
        target.reset()
        return rest_decoding(ROWS[b], target, N, np.random.default_rng(b), store, 8, 3, 6,
                             stats=steps, **options)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@pytest.mark.parametrize("options", [{}, dict(temperature=0.7, top_k=2)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    stats = micro_rows(monkeypatch, **options)
    check_records(stats)
    assert any(s["nodes"] > s["drafted"] for s in stats)  # the tries branched


def test_unverified_paths_are_caught(monkeypatch):
    """Broken variant: the first retrieved path taken as it is, in the batched run."""
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, unverified)


@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.8}])
def test_batched_rows_equal_each_row_alone(options):
    """A random engine whose datastore holds its own greedy text (partly corrupted) and noise: each
    row of one batch, with its own generator, is token for token what rest_decoding gives its prompt
    alone."""
    hp, params = random_gpt2(n_vocab=50, n_ctx=64, seed=3)
    target = GPT2(hp, params)
    prompts = [[7, 3, 11, 3, 7, 20], [1, 2], [9, 40, 9, 1], [5]]
    text = sum((autoregressive_sampling(x, target, 30, np.random.default_rng(0), temperature=0)
                for x in prompts), [])
    noise = np.random.default_rng(1).integers(0, 50, 200).tolist()
    store = Datastore.build([(t + 1) % 50 if i % 9 == 8 else t for i, t in enumerate(text)] + noise)
    stats = []
    out = batch_rest_decoding(prompts, BatchGPT2(target, len(prompts)), 24,
                              np.random.default_rng(5), store,
                              stats=stats,
                              generators={b: np.random.default_rng(b) for b in range(4)}, **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        assert out[b] == rest_decoding(prompt, target, 24, np.random.default_rng(b), store,
                                       **options)
    check_records(stats)
