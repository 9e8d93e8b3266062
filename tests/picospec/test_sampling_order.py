"""The sampling filters in the ecosystem's order: top-k, then top-p on what top-k kept, by hand and
against transformers' warpers; the old order is the broken variant."""

import numpy as np
import pytest

from gpt2.load import ASSETS

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


def old_order_warp(probs, top_k, top_p):
    """The broken variant: top-p cut against the mass before top-k (what warp did before)."""
    order = np.argsort(-probs, kind="stable")
    ranked = probs[order]
    keep = np.arange(len(probs)) < top_k
    keep &= np.cumsum(ranked) - ranked < top_p * ranked.sum()
    keep[0] = True
    out = np.zeros_like(probs)
    out[order[keep]] = ranked[keep]
    return out / out.sum()


def transformers_law(probs, temperature, top_k, top_p):
    """transformers' own warpers in generate()'s order, on log-probabilities -> the sampling law."""
    import torch
    from transformers.generation.logits_process import (TemperatureLogitsWarper,
                                                         TopKLogitsWarper, TopPLogitsWarper)

    scores = torch.log(torch.tensor(probs, dtype=torch.float64))[None]
    ids = torch.zeros((1, 1), dtype=torch.long)
    warpers = [TemperatureLogitsWarper(temperature)] if temperature != 1 else []
    warpers += [TopKLogitsWarper(top_k)] if top_k is not None else []
    warpers += [TopPLogitsWarper(top_p)] if top_p is not None else []
    for w in warpers:
        scores = w(ids, scores)
    return torch.softmax(scores, -1)[0].numpy()


def test_warp_top_k_then_top_p_by_hand():
    """[.5, .3, .2], top_k 2: [.625, .375, 0]; then top_p .6: .625 alone reaches it -> [1, 0, 0]
    (the old order cut against .5 + .3 of the whole law, keeping two); top_p .7 keeps both."""
    from picospec.sampling import warp

    p = np.array([0.5, 0.3, 0.2])
    np.testing.assert_allclose(warp(p, top_k=2, top_p=0.6), [1, 0, 0])
    np.testing.assert_allclose(old_order_warp(p, 2, 0.6), [0.625, 0.375, 0])  # rejected above
    np.testing.assert_allclose(warp(p, top_k=2, top_p=0.7), [0.625, 0.375, 0])


def test_warp_equals_transformers_warpers_on_random_laws():
    """Random laws (V 3 to 50, some with tiny masses) and settings: the same kept tokens and the
    same law as TopKLogitsWarper then TopPLogitsWarper; the old order (top-p before renormalising)
    differs on many of them."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from picospec.sampling import warp

    rng = np.random.default_rng(0)
    old_differs = 0
    for _ in range(300):
        V = int(rng.integers(3, 50))
        probs = rng.dirichlet(np.full(V, rng.choice([0.1, 0.5, 2.0])))
        probs = np.maximum(probs, 1e-12) / np.maximum(probs, 1e-12).sum()
        temperature = float(rng.choice([1.0, 0.7, 1.5]))
        top_k = int(rng.integers(1, V + 2)) if rng.random() < 0.8 else None
        top_p = float(rng.uniform(0.05, 1.0)) if rng.random() < 0.8 else None
        ours = warp(probs, temperature, top_k, top_p)
        theirs = transformers_law(probs, temperature, top_k, top_p)
        np.testing.assert_array_equal(ours > 0, theirs > 0)
        np.testing.assert_allclose(ours, theirs, atol=1e-9, rtol=1e-7)
        if top_k is not None and top_p is not None and temperature == 1.0:
            old = old_order_warp(probs, top_k, top_p)
            old_differs += not np.array_equal(old > 0, theirs > 0)
    assert old_differs >= 5  # the broken variant is caught by the same comparison
