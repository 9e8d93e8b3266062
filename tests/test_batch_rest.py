"""Batched REST (picospec/rest.py batch_rest_decoding: every row's retrieved trie scored in one batched tree call):
each row keeps the target's exact law, and taking the first retrieved path unverified is rejected by the same check
on the same engines; each row equals rest_decoding on its prompt alone, greedy and, with its own generator,
sampled."""
import numpy as np
import pytest

import batchrows
import picospec.rest as rest
from batchrows import COPIES, N, check_laws, check_records, check_rejected
from checker import SAMPLES
from gpt2.engine import BatchGPT2
from gpt2.engine import GPT2
from micro import random_gpt2
from picospec.autoregressive import autoregressive_sampling
from picospec.rest import Datastore, batch_rest_decoding, rest_decoding
from test_rest import unverified


def store_of(model, n_texts=10, length=12):  # the model's own likely text, with branches
    return Datastore.build(sum((autoregressive_sampling([0, 1], model, length, np.random.default_rng(seed))
                                for seed in range(n_texts)), []), max_suffix=4)


def sampled_rows(n, **options):  # -> per prompt, n sampled continuations, COPIES rows of each per batch
    def method(target):
        store = store_of(target)
        return lambda xs, batch, rng, stats: batch_rest_decoding(xs, batch, N, rng, store, 8, 3, 6, stats=stats,
                                                                 **options)

    def branched(stats):  # the tries branched: some step scored more nodes than the deepest path holds
        assert any(s["nodes"] > s["drafted"] for s in stats)

    return batchrows.sampled_rows(method, n, check=branched)


def test_batched_rows_keep_the_exact_law():
    """15,000 runs per prompt, three prompts of different lengths (and tries) in every batch, at temperature 0.7 with
    top-k 2 (temperature 1 is checked by the rows-equal-alone test below and by tests/test_rest.py's law test)."""
    options = dict(temperature=0.7, top_k=2)
    samples, target = sampled_rows(SAMPLES // 2, **options)
    check_laws(samples, target, **options)


def test_unverified_paths_are_rejected(monkeypatch):
    """Broken variant: the first retrieved path taken as it is, on the same batched engines."""
    monkeypatch.setattr(rest, "verify_tree", unverified)
    samples, target = sampled_rows(3 * COPIES)
    check_rejected(samples, target)


@pytest.mark.parametrize("options", [{"temperature": 0}, {"temperature": 1.0}, {"temperature": 0.7, "top_k": 5}])
def test_batched_rows_equal_each_row_alone(options):
    """A random engine whose datastore holds its own greedy text (partly corrupted) and noise: each row of one
    batch, with its own generator, is token for token what rest_decoding gives its prompt alone."""
    hp, params = random_gpt2(n_vocab=50, n_ctx=64, seed=3)
    target = GPT2(hp, params)
    prompts = [[7, 3, 11, 3, 7, 20], [1, 2], [9, 40, 9, 1], [5]]
    text = sum((autoregressive_sampling(x, target, 30, np.random.default_rng(0), temperature=0) for x in prompts), [])
    noise = np.random.default_rng(1).integers(0, 50, 200).tolist()
    store = Datastore.build([(t + 1) % 50 if i % 9 == 8 else t for i, t in enumerate(text)] + noise)
    stats = []
    out = batch_rest_decoding(prompts, BatchGPT2(target, len(prompts)), 24, np.random.default_rng(5), store,
                              stats=stats, generators={b: np.random.default_rng(b) for b in range(4)}, **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        assert out[b] == rest_decoding(prompt, target, 24, np.random.default_rng(b), store, **options)
    check_records(stats)
