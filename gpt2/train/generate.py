"""Batched decoding with a KV cache, for training data (self-distillation): B prompts of one
length T0, one pass of the prompts, then one pass of B new tokens per step.

    generate_batch(hparams, params, prompts [B, T0], n_new, rng, temperature=1.0) -> [B, T0 + n_new]

temperature 0 is greedy. On CuPy params the logits come to the host, where `rng` draws as on the
CPU. Shapes: B batch, T tokens in this pass, C n_embd, H n_head, D = C // H, V n_vocab.
"""
import numpy as np

from gpt2.backend import to_numpy, xp_of
from gpt2.cache import KVCache
from gpt2.model import gpt2_hidden, softmax


def generate_batch(hparams, params, prompts, n_new, rng, temperature=1.0):
    """Continue each row of prompts [B, T0] by n_new tokens at `temperature` (0: greedy)
    -> [B, T0 + n_new]."""
    prompts = np.asarray(prompts, dtype=np.int64)  # [B, T0]
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
        ids[:, T0 + step] = nxt  # [B]
        x = xp.asarray(ids[:, T0 + step:T0 + step + 1])  # [B, 1]
    return ids
