"""Logits parity with Hugging Face transformers' GPT2LMHeadModel on randomly initialised
checkpoints.

The reference is independent code (PyTorch), loaded through our own checkpoint reader from a folder
written by `save_pretrained`, so the test covers the safetensors reader, the key mapping and the
forward pass together. CI installs torch and transformers, so these always run there; elsewhere they
skip when either is missing.
"""
import numpy as np
import pytest

from gpt2.engine import GPT2
from gpt2.model import gpt2
from gpt2.weights import load_checkpoint

SHAPES = {
    "micro": dict(n_layer=1, n_embd=8, n_head=2, n_positions=16, vocab_size=11),
    "wide-heads": dict(n_layer=2, n_embd=64, n_head=8, n_positions=64, vocab_size=300),
    "deep": dict(n_layer=6, n_embd=32, n_head=4, n_positions=128, vocab_size=97),
    "124M": dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257),
}


def reference_checkpoint(tmp_path, shape, seed=0):
    """-> (transformers' GPT2LMHeadModel on a random checkpoint it saved in tmp_path, torch); torch
    and transformers imported here, not at collection (each test worker collects every module)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.GPT2Config(**SHAPES[shape], resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    hf = transformers.GPT2LMHeadModel(config).eval()
    # move layer-norm and bias parameters off their 1/0 init so every weight matters
    with torch.no_grad():
        for p in hf.parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn_like(p))
    hf.save_pretrained(tmp_path, safe_serialization=True)
    return hf, torch


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
def test_logits_match_transformers(tmp_path, shape):
    hf, torch = reference_checkpoint(tmp_path, shape)
    hparams, params = load_checkpoint(tmp_path)
    n = min(hparams["n_ctx"], 40)
    ids = np.random.default_rng(1).integers(0, hparams["n_vocab"], n)
    with torch.no_grad():
        ref = hf(torch.tensor(ids[None])).logits[0].numpy()
    ours = gpt2(ids, **params, n_head=hparams["n_head"])
    assert ours.dtype == np.float32
    assert np.abs(ours - ref).max() <= 1e-4
    # the engine, one token at a time through the KV cache, on one BLAS thread (the same logits on
    # any count; the policy's 2 for a 124M model only spin against the other test worker)
    cached = GPT2(hparams, params, threads=1)
    rows = np.concatenate([cached.logits(list(ids[: i + 1])) for i in range(n)])
    assert np.abs(rows - ref).max() <= 1e-4


def test_parity_check_can_fail(tmp_path):
    """A broken variant (one transposed attention weight) must exceed the tolerance."""
    hf, torch = reference_checkpoint(tmp_path, "wide-heads")
    hparams, params = load_checkpoint(tmp_path)
    w = params["blocks"][1]["attn"]["c_proj"]["w"]
    params["blocks"][1]["attn"]["c_proj"]["w"] = np.ascontiguousarray(w.T)
    ids = np.arange(20) % hparams["n_vocab"]
    with torch.no_grad():
        ref = hf(torch.tensor(ids[None])).logits[0].numpy()
    assert np.abs(gpt2(ids, **params, n_head=hparams["n_head"]) - ref).max() > 1e-4
