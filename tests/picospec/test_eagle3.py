"""EAGLE-3 (picospec/eagle3.py): equal to greedy decoding at temperature 0 on a random GPT-2 with a
random EAGLE-3 head under each CPU operations value, every drafted token inside the draft
vocabulary; at temperature > 0 it follows the target's exact law on toy models whose draft
vocabulary leaves a token out, and the broken variant (verification over the draft vocabulary only)
is rejected by the same test; a head over every token drafts the token left out, and the law is the
same (one-hot verification, the module's proof); the vocabulary and the draft law."""
import sys

import numpy as np
import pytest

from picospec.autoregressive import autoregressive_sampling
from picospec.check.exact_law import check_law, exact_law
from picospec.eagle3 import draft_law, draft_vocabulary, eagle3_decoding

from tests.support.feature_toys import (ToyEagle3, ToyTarget, engine_and_eagle3_head,
                                       toy_eagle3_pair)


# ---- temperature 0 on a real (random) GPT-2 ----

@pytest.mark.parametrize("ops", ["reference", "cpu", "panels", "panel_rows"])
def test_temperature_zero_equals_greedy(ops):
    accepted = 0
    for seed in range(3):
        model, head = engine_and_eagle3_head(seed, ops=ops)
        x = [1, 2, 3, 4]
        expected = autoregressive_sampling(x, model, 25, np.random.default_rng(0), temperature=0)
        stats = []
        out = eagle3_decoding(x, model, head, 25, np.random.default_rng(0), depth=3,
                              tree_top_k=3, total_tokens=8, stats=stats, temperature=0)
        assert out == expected
        assert sum(len(s["tokens"]) for s in stats) == 25
        drafted = [t for s in stats for t, o in zip(s["tokens"], s["origins"]) if o == "draft"]
        assert set(drafted) <= set(head.d2t.tolist())
        accepted += len(drafted)
    assert accepted > 0  # some drafts were right: the accepted path's features were exercised


def test_a_smaller_draft_vocabulary_stays_exact():
    """--draft_vocab: the head drafts over its n most frequent tokens; the output is unchanged."""
    model, head = engine_and_eagle3_head(5, V_d=9)
    x = [3, 1, 4]
    expected = autoregressive_sampling(x, model, 20, np.random.default_rng(0), temperature=0)
    for n in (9, 4, 1):
        head.use_vocabulary(n)
        assert head(x, [np.zeros(48, np.float32)] * 2).shape == (1, n)
        head.reset()
        assert eagle3_decoding(x, model, head, 20, np.random.default_rng(0), depth=2,
                               tree_top_k=2, total_tokens=4, temperature=0) == expected
    with pytest.raises(ValueError, match="at most 9 tokens"):
        head.use_vocabulary(10)


# ---- the exact law on toy models ----

PROMPT, N = [0, 1], 4
TARGET, DRAFT = toy_eagle3_pair()  # the draft vocabulary {2, 0}: token 1 is never drafted
VERIFIER = TARGET  # what the runs verify against (the broken variant replaces it)
OPTIONS = dict(temperature=1.0)
WARPED = [OPTIONS, dict(temperature=0.7, top_k=2)]

# Sequences, sized by `python -m tests.suite.power --only eagle3`: the broken variant BROKEN
# (verification over the draft vocabulary only) is rejected with the power given (at ALPHA,
# measured on 20,000 fresh draws of n sequences, in both settings of WARPED).
FOLLOWS_N = 600


def runs(n=FOLLOWS_N, seed=0, **options):
    rng, target = np.random.default_rng(seed), sys.modules[__name__].VERIFIER
    return [tuple(eagle3_decoding(PROMPT, target, DRAFT, N, rng, depth=2, tree_top_k=2,
                                  total_tokens=4, **options)[len(PROMPT):])
            for _ in range(n)]


@pytest.mark.parametrize("options", WARPED, ids=["T1", "T0.7-top_k2"])
def test_follows_the_target_exactly(options):
    check_law(runs(**options), exact_law(TARGET, PROMPT, N, **options))


class VerifiedOverDraftVocabulary(ToyTarget):
    """Broken: the verifier's target law restricted to the draft vocabulary and renormalised."""

    def __init__(self, table, d2t):
        super().__init__(table)
        self.outside = np.setdiff1d(np.arange(table.shape[-1]), d2t)

    def logits(self, x, n=1, hidden=False):
        out = super().logits(x, n, hidden)
        (out[0] if hidden else out)[..., self.outside] = -np.inf
        return out

    def tree(self, x, tokens, parents, hidden=False, probs=False):
        out = super().tree(x, tokens, parents, hidden, probs)
        (out[0] if hidden else out)[..., self.outside] = 0 if probs else -np.inf
        return out


BROKEN = VerifiedOverDraftVocabulary(TARGET.table, DRAFT.d2t)


@pytest.mark.parametrize("options", WARPED, ids=["T1", "T0.7-top_k2"])
def test_verification_over_the_draft_vocabulary_is_rejected(monkeypatch, options):
    monkeypatch.setattr(sys.modules[__name__], "VERIFIER", BROKEN)
    with pytest.raises(AssertionError):
        check_law(runs(**options), exact_law(TARGET, PROMPT, N, **options))


def test_a_head_over_every_token_drafts_another_tree_and_keeps_the_law():
    """The same toy head over all three tokens (d2t [2, 0, 1]): token 1 is drafted now, and the
    output law is still the target's: the verifier reads only the candidates."""
    every = ToyEagle3(DRAFT.table, (2, 0, 1))
    stats, samples, rng = [], [], np.random.default_rng(1)
    for _ in range(FOLLOWS_N):
        samples.append(tuple(eagle3_decoding(PROMPT, TARGET, every, N, rng, depth=2,
                                             tree_top_k=2, total_tokens=4, stats=stats,
                                             **OPTIONS)[len(PROMPT):]))
    assert any(t == 1 for s in stats for t, o in zip(s["tokens"], s["origins"]) if o == "draft")
    check_law(samples, exact_law(TARGET, PROMPT, N, **OPTIONS))


# ---- the draft vocabulary ----

def test_draft_vocabulary_by_frequency_ties_to_the_lower_id():
    assert draft_vocabulary([5, 9, 5, 0], 2).tolist() == [1, 0]
    assert draft_vocabulary([1, 3, 3, 7, 0], 4).tolist() == [3, 1, 2, 0]
    with pytest.raises(ValueError, match="1 to 4 tokens"):
        draft_vocabulary([1, 2, 3, 4], 5)


def test_the_draft_law_has_no_mass_outside_and_keeps_the_heads_order():
    rng = np.random.default_rng(0)
    d2t = np.array([4, 0, 6, 2])
    z = rng.standard_normal((3, 4)).astype(np.float32) * 30  # large logits: no overflow
    p = draft_law(z, d2t, 7)  # [3, 7]
    assert p.dtype == np.float64 and np.allclose(p.sum(-1), 1)
    assert (p[:, [1, 3, 5]] == 0).all()
    e = np.exp(z.astype(np.float64) - z.max(-1, keepdims=True))
    assert np.allclose(p[:, d2t], e / e.sum(-1, keepdims=True))
