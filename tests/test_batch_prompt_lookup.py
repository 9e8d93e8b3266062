"""Batched prompt lookup (picospec/prompt_lookup.py batch_prompt_lookup_decoding: every row's draft chain scored in
one batched tree call): each row keeps the target's exact law, and accepting every match is rejected by the same
check on the same engines; each row equals the single-sequence method on its prompt alone, greedy and, with its own
generator, sampled."""
import numpy as np
import pytest

import picospec.prompt_lookup as pl
from checker import SAMPLES, check_law, exact_law
from gpt2.batch_engine import BatchGPT2
from gpt2.engine import GPT2
from micro import random_gpt2
from picospec.prompt_lookup import batch_prompt_lookup_decoding, prompt_lookup_decoding

V, N, COPIES = 3, 5, 500
HP, PARAMS = random_gpt2(n_vocab=V, n_ctx=16, n_embd=8, n_head=2, n_layer=2, seed=7, scale=0.6)
PROMPTS = [[0, 1, 2, 0, 1], [2, 2], [1, 0, 1, 0]]  # each repeats itself, so drafts are found (of different lengths)


def sampled_rows(n, **options):  # -> per prompt, n sampled continuations, COPIES rows of each per batch
    target = GPT2(HP, PARAMS)
    batch = BatchGPT2(target, len(PROMPTS) * COPIES, tree_slots=8)
    rng, samples, stats = np.random.default_rng(0), [[] for _ in PROMPTS], []
    for _ in range(n // COPIES):
        batch.reset()
        out = batch_prompt_lookup_decoding(PROMPTS * COPIES, batch, N, rng, 2, 3, stats=stats, **options)
        for i, row in enumerate(out):
            samples[i % len(PROMPTS)].append(tuple(row[len(PROMPTS[i % len(PROMPTS)]):]))
    assert sum(a for s in stats for a in s["accepted"] if a > 0) > 0  # drafts were accepted
    return samples, target


@pytest.mark.parametrize("options", [{}, dict(temperature=0.6, top_k=2)])
def test_batched_rows_keep_the_exact_law(options):
    """15,000 runs per prompt, three prompts of different lengths (and drafts) in every batch."""
    samples, target = sampled_rows(SAMPLES // 2, **options)
    for prompt, rows in zip(PROMPTS, samples):
        check_law(rows, exact_law(target, prompt, N, **options))


def test_accepting_every_match_is_rejected(monkeypatch):
    """Broken variant: keep every proposed token (copying without verification), on the same batched engines."""
    from picospec.sampling import sample

    monkeypatch.setattr(pl, "verify_chain", lambda d, P, Q, rng: (len(d), sample(Q[len(d)], rng), "bonus"))
    samples, target = sampled_rows(3 * COPIES)  # 1,500 runs of the first prompt: G = 7,127, p < 1e-300
    with pytest.raises(AssertionError, match="differs from the target"):
        check_law(samples[0], exact_law(target, PROMPTS[0], N))


@pytest.mark.parametrize("options", [{"temperature": 0}, {"temperature": 1.0}, {"temperature": 0.7, "top_p": 0.9}])
def test_batched_rows_equal_each_row_alone(options):
    """The built-in target on code prompts: each row of one batch, with its own generator, is token for token what
    prompt_lookup_decoding gives its prompt alone with that generator; drafts of different lengths, rows finishing at
    different steps."""
    from gpt2.load import load_model

    target, encoder = load_model("tiny-target")
    prompts = [encoder.encode(p) for p in ("def f(self, x):\n    return self.x + x\n\ndef g(self, x):\n",
                                           "import os\nimport sys\nimport", "a = 1\nb = 2\n", "x")]
    stats = []
    out = batch_prompt_lookup_decoding(prompts, BatchGPT2(target, len(prompts)), 32, np.random.default_rng(5),
                                       stats=stats, generators={b: np.random.default_rng(b) for b in range(4)},
                                       **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        assert out[b] == prompt_lookup_decoding(prompt, target, 32, np.random.default_rng(b), **options)
    assert any(len({a for a in s["accepted"] if a >= 0}) > 1 for s in stats)  # the rows went ragged
    assert any(-1 in s["accepted"] for s in stats)  # and some finished before others
    for s in stats:  # a row's record: the drafts it kept, then one token; a finished row: nothing
        assert all(a == len(t) - 1 if a >= 0 else t == [] for a, t in zip(s["accepted"], s["tokens"]))
