"""Batched prompt lookup (picospec/prompt_lookup.py batch_prompt_lookup_decoding: every row's draft
chain scored in one batched tree call), row by row against prompt_lookup_decoding
(tests/support/batchrows.py): each row of one batch, with its own generator, is token for token what
the single form gives its prompt alone, so it has the law that tests/picospec/test_prompt_lookup.py
checks. On a micro GPT-2 of three tokens (48 rows, drafts accepted and rejected, at temperature 1
and at 0.6 with top-k 2), where accepting every match in the batched run is caught, and on the
built-in target at temperature 0, 1 and 0.7 with top-k 5 and top-p 0.9."""
import numpy as np
import pytest

import picospec.prompt_lookup as pl
from gpt2.engine import BatchGPT2
from picospec.batched.prompt_lookup import batch_prompt_lookup_decoding
from picospec.prompt_lookup import prompt_lookup_decoding
from picospec.sampling import sample

from tests.support.batchrows import (N, ROWS, check_paths, check_records, check_rows_alone,
                                     generators, micro, model)


def micro_rows(monkeypatch, broken=None, **options):
    """Batched prompt lookup on ROWS (a broken verify_chain planted in the batched run only), each
    row against the single form alone -> the batch's step records."""
    target, stats = micro(), []
    with monkeypatch.context() as patch:
        if broken:
            patch.setattr(pl, "verify_chain", broken)
        out = batch_prompt_lookup_decoding(ROWS, BatchGPT2(target, len(ROWS)), N,
                                           np.random.default_rng(99), 2, 3, stats=stats,
                                           generators=generators(len(ROWS)), **options)

    def alone(b, steps):
        target.reset()
        return prompt_lookup_decoding(ROWS[b], target, N, np.random.default_rng(b), 2, 3,
                                      stats=steps, **options)

    check_paths(check_rows_alone(out, alone, monkeypatch))
    return stats


@pytest.mark.parametrize("options", [{}, dict(temperature=0.6, top_k=2)])
def test_micro_rows_equal_each_row_alone(monkeypatch, options):
    check_records(micro_rows(monkeypatch, **options))


def test_accepting_every_match_is_caught(monkeypatch):
    """Broken variant: keep every proposed token (copying without verification), in the batched
    run."""
    with pytest.raises(AssertionError, match="differs from its single run"):
        micro_rows(monkeypatch, lambda d, P, Q, rng: (len(d), sample(Q[len(d)], rng), "bonus"))


@pytest.mark.parametrize("options",
                         [{"temperature": 0}, {"temperature": 1.0},
                          {"temperature": 0.7, "top_k": 5, "top_p": 0.9}])
def test_batched_rows_equal_each_row_alone(options):
    """The built-in target on code prompts: each row of one batch, with its own generator, is token
    for token what prompt_lookup_decoding gives its prompt alone with that generator; drafts of
    different lengths, rows finishing at different steps."""
    target, encoder = model("tiny-target")
    prompts = [encoder.encode(p)
               for p in ("def f(self, x):\n    return self.x + x\n\ndef g(self, x):\n",
                                           "import os\nimport sys\nimport", "a = 1\nb = 2\n", "x")]
    stats = []
    out = batch_prompt_lookup_decoding(prompts, BatchGPT2(target, len(prompts)), 32,
                                       np.random.default_rng(5),
                                       stats=stats,
                                       generators={b: np.random.default_rng(b) for b in range(4)},
                                       **options)
    for b, prompt in enumerate(prompts):
        target.reset()
        assert out[b] == prompt_lookup_decoding(prompt, target, 32, np.random.default_rng(b),
                                                **options)
    check_records(stats)
