"""Many sequences at once: batched decoding with a KV cache, for making training data (Medusa's self-distillation).

    generate_batch(hparams, params, prompts [B, T0], n_new, rng, temperature=1.0) -> ids [B, T0 + n_new]

All prompts have the same length, so the batch needs no padding: one forward pass of the B prompts, then one pass of
B new tokens per step. Speculative decoding never uses this (it decodes one sequence, in gpt2/engine.py); it exists
because one sequence at a time leaves a CPU's matrix units idle (one row is a matrix-vector product), while B rows
make every `linear` a real matrix product: for the tiny target on 2 cores, 64 rows give about 1,400 new tokens/s
against 290 one sequence at a time through the engine (measured side by side).
temperature 0 is greedy decoding (the same tokens as the engine's greedy decoding, up to float rounding ties).
With params on CuPy arrays (gpt2.backend.to_device) the forwards run on the GPU; each step's logits come to the host,
where the next tokens are drawn with the same `rng` as on the CPU.

Shapes: B batch, T tokens in this pass, n_kv tokens cached + new, C n_embd, H n_head, D = C // H, V n_vocab.
"""
import math

import numpy as np

from gpt2.backend import to_numpy, xp_of
from gpt2.model import ffn, layer_norm, linear, softmax


def mha_batch(x, c_attn, c_proj, n_head, k_cache, v_cache, n_past):  # [B, T, C] -> [B, T, C]
    B, T, C = x.shape
    xp = xp_of(x)
    qkv = linear(x, **c_attn).reshape(B, T, 3, n_head, C // n_head).transpose(2, 0, 3, 1, 4)  # [3, B, H, T, D]
    k_cache[:, :, n_past:n_past + T], v_cache[:, :, n_past:n_past + T] = qkv[1], qkv[2]  # store: [B, H, T, D]
    k, v = k_cache[:, :, :n_past + T], v_cache[:, :, :n_past + T]  # [B, H, n_kv, D]
    scores = qkv[0] @ k.transpose(0, 1, 3, 2) / math.sqrt(C // n_head)  # [B, H, T, n_kv]
    causal = xp.tril(xp.ones((T, n_past + T), dtype=bool), k=n_past)  # [T, n_kv]
    out = softmax(xp.where(causal, scores, -math.inf)) @ v  # [B, H, T, D]
    return linear(out.transpose(0, 2, 1, 3).reshape(B, T, C), **c_proj)  # [B, T, C]


def generate_batch(hparams, params, prompts, n_new, rng, temperature=1.0):
    """Continue each row of `prompts` [B, T0] by n_new tokens, sampled at `temperature` (0: greedy)."""
    prompts = np.asarray(prompts, dtype=np.int64)
    B, T0 = prompts.shape
    H, L = hparams["n_head"], len(params["blocks"])
    if T0 + n_new > hparams["n_ctx"]:
        raise ValueError(f"{T0} prompt + {n_new} new tokens do not fit the context window of {hparams['n_ctx']}")
    D, xp = hparams["n_embd"] // H, xp_of(params["wte"])
    k_cache = xp.zeros((L, B, H, T0 + n_new, D), dtype=np.float32)  # [L, B, H, n_ctx, D]
    v_cache = xp.zeros_like(k_cache)
    ids = np.empty((B, T0 + n_new), dtype=np.int64)  # [B, T0 + n_new] on the host
    ids[:, :T0] = prompts
    x, n_past = xp.asarray(prompts), 0
    for step in range(n_new):
        h = params["wte"][x] + params["wpe"][n_past:n_past + x.shape[1]]  # [B, T, C]
        for layer, block in enumerate(params["blocks"]):
            h = h + mha_batch(layer_norm(h, **block["ln_1"]), **block["attn"], n_head=H, k_cache=k_cache[layer],
                              v_cache=v_cache[layer], n_past=n_past)
            h = h + ffn(layer_norm(h, **block["ln_2"]), **block["mlp"])
        n_past += x.shape[1]
        logits = to_numpy(layer_norm(h[:, -1], **params["ln_f"]) @ params["wte"].T)  # [B, V] on the host
        if temperature == 0:
            nxt = logits.argmax(-1)  # [B]
        else:
            p = softmax(logits.astype(np.float64) / temperature)  # [B, V]
            nxt = (p.cumsum(-1) < rng.random((B, 1)) * p.sum(-1, keepdims=True)).sum(-1)  # inverse-CDF draw per row
            nxt = np.minimum(nxt, p.shape[-1] - 1)
        ids[:, T0 + step] = nxt
        x = xp.asarray(ids[:, T0 + step:T0 + step + 1])  # [B, 1]
    return ids
