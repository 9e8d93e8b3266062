"""Batched prompt lookup (picospec/prompt_lookup.py batch_prompt_lookup_decoding: every row's draft chain scored in
one batched tree call): each row keeps the target's exact law, and accepting every match is rejected by the same
check on the same engines; each row equals the single-sequence method on its prompt alone, greedy and, with its own
generator, sampled."""
import numpy as np
import pytest

import batchrows
import picospec.prompt_lookup as pl
from batchrows import COPIES, N, check_laws, check_records, check_rejected
from checker import SAMPLES
from gpt2.engine import BatchGPT2
from picospec.prompt_lookup import batch_prompt_lookup_decoding, prompt_lookup_decoding


def sampled_rows(n, **options):  # -> per prompt, n sampled continuations, COPIES rows of each per batch
    return batchrows.sampled_rows(lambda target: lambda xs, batch, rng, stats: batch_prompt_lookup_decoding(
        xs, batch, N, rng, 2, 3, stats=stats, **options), n)


@pytest.mark.parametrize("options", [{}, dict(temperature=0.6, top_k=2)])
def test_batched_rows_keep_the_exact_law(options):
    """15,000 runs per prompt, three prompts of different lengths (and drafts) in every batch."""
    samples, target = sampled_rows(SAMPLES // 2, **options)
    check_laws(samples, target, **options)


def test_accepting_every_match_is_rejected(monkeypatch):
    """Broken variant: keep every proposed token (copying without verification), on the same batched engines."""
    from picospec.sampling import sample

    monkeypatch.setattr(pl, "verify_chain", lambda d, P, Q, rng: (len(d), sample(Q[len(d)], rng), "bonus"))
    samples, target = sampled_rows(3 * COPIES)  # 1,500 runs of the first prompt: G = 7,127, p < 1e-300
    check_rejected(samples, target)


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
    check_records(stats)
