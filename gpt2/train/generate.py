"""Many sequences at once: batched decoding with a KV cache, for making training data (Medusa's
self-distillation).

    generate_batch(hparams, params, prompts [B, T0], n_new, rng, temperature=1.0) -> ids [B, T0 +
    n_new]

All prompts have the same length, so the batch needs no padding: one forward pass of the B prompts,
then one pass of B new tokens per step. Speculative decoding never uses this (it decodes one
sequence, in gpt2/engine.py); it exists because one sequence at a time leaves a CPU's matrix units
idle (one row is a matrix-vector product), while B rows make every `linear` a real matrix product:
for the tiny target on 2 cores, 64 rows give about 1,400 new tokens/s against 290 one sequence at a
time through the engine (measured side by side). temperature 0 is greedy decoding (the same tokens
as the engine's greedy decoding, up to float rounding ties). With params on CuPy arrays
(gpt2.backend.to_device) the forwards run on the GPU; each step's logits come to the host, where the
next tokens are drawn with the same `rng` as on the CPU.

The forward is gpt2/model.py's, on a cache whose B rows all hold the same number of tokens.
Shapes: B batch, T tokens in this pass, C n_embd, H n_head, D = C // H, V n_vocab.
"""
import numpy as np

from gpt2.backend import to_numpy, xp_of
from gpt2.cache import KVCache
from gpt2.model import gpt2_hidden, softmax


def generate_batch(hparams, params, prompts, n_new, rng, temperature=1.0):
    """Continue each row of `prompts` [B, T0] by n_new tokens, sampled at `temperature` (0:
    greedy)."""
    prompts = np.asarray(prompts, dtype=np.int64)
    B, T0 = prompts.shape
    H, L = hparams["n_head"], len(params["blocks"])
    if T0 + n_new > hparams["n_ctx"]:
        raise ValueError(f"{T0} prompt + {n_new} new tokens do not fit the context window of "
                         f"{hparams['n_ctx']}")
    xp = xp_of(params["wte"])
    # [L, B, H, T0 + n_new, D]
    cache = KVCache(L, H, T0 + n_new, hparams["n_embd"] // H, xp, rows=B)
    ids = np.empty((B, T0 + n_new), dtype=np.int64)  # [B, T0 + n_new] on the host
    ids[:, :T0] = prompts
    x = xp.asarray(prompts)
    for step in range(n_new):
        # every row after the same prefix: [B, T, C]
        h = gpt2_hidden(x, **params, n_head=H, cache=cache)
        logits = to_numpy(h[:, -1] @ params["wte"].T)  # [B, V] on the host
        if temperature == 0:
            nxt = logits.argmax(-1)  # [B]
        else:
            p = softmax(logits.astype(np.float64) / temperature)  # [B, V]
            # inverse-CDF draw per row
            nxt = (p.cumsum(-1) < rng.random((B, 1)) * p.sum(-1, keepdims=True)).sum(-1)
            nxt = np.minimum(nxt, p.shape[-1] - 1)
        ids[:, T0 + step] = nxt
        x = xp.asarray(ids[:, T0 + step:T0 + step + 1])  # [B, 1]
    return ids
