"""Random GPT-2 weights of any shape, for tests (normal(0, 0.1) so every layer matters), and random
heads on them: Medusa and Blockwise heads (gpt2/heads.py), an EAGLE head (gpt2/eagle.py)."""
import numpy as np

from gpt2.eagle import init_eagle
from gpt2.engine import GPT2, tree_map
from gpt2.heads import heads_logits, init_heads
from gpt2.weights import flatten


def random_gpt2(n_vocab=50, n_ctx=32, n_embd=16, n_head=2, n_layer=2, seed=0, scale=0.1):
    rng = np.random.default_rng(seed)

    def r(*shape, loc=0.0):
        return (loc + scale * rng.standard_normal(shape)).astype(np.float32)

    C = n_embd
    blocks = [{"ln_1": {"g": r(C, loc=1), "b": r(C)},
               "attn": {"c_attn": {"w": r(C, 3 * C), "b": r(3 * C)},
                        "c_proj": {"w": r(C, C), "b": r(C)}},
               "ln_2": {"g": r(C, loc=1), "b": r(C)},
               "mlp": {"c_fc": {"w": r(C, 4 * C), "b": r(4 * C)},
                       "c_proj": {"w": r(4 * C, C), "b": r(C)}}}
              for _ in range(n_layer)]
    params = {"wte": r(n_vocab, C), "wpe": r(n_ctx, C), "blocks": blocks,
              "ln_f": {"g": r(C, loc=1), "b": r(C)}}
    hparams = dict(n_vocab=n_vocab, n_ctx=n_ctx, n_embd=n_embd, n_head=n_head, n_layer=n_layer)
    return hparams, params


def random_head(C=8, n_head=2, seed=0, scale=0.3, dtype=np.float32):
    rng = np.random.default_rng(seed)
    params, config = init_eagle(C, n_head, rng)
    return tree_map(lambda a: (a + rng.standard_normal(a.shape) * scale).astype(dtype),
                    params), config


def random_heads(model, k, tied, seed):
    """p_2..p_k: gpt2.heads with random weights (Blockwise's ReLU block tied to wte, or Medusa's
    untied SiLU)."""
    rng = np.random.default_rng(seed)
    wte = model.params["wte"]  # [V, C]
    heads, config = init_heads(k - 1, wte, tied=tied, act="relu" if tied else "silu",
                               from_lm_head=False, rng=rng)
    for head in heads:
        head["res"]["w"] = rng.standard_normal(head["res"]["w"].shape, dtype=np.float32)
        head["res"]["b"] = rng.standard_normal(head["res"]["b"].shape, dtype=np.float32)
    return lambda h: heads_logits(h, heads, wte, config)  # [n, C] -> [k - 1, n, V]


def model_and_heads(n_vocab=12, n_heads=3, seed=0, scale=0.5):
    hparams, params = random_gpt2(n_vocab=n_vocab, n_ctx=64, n_embd=16, n_head=2, n_layer=2,
                                  seed=seed, scale=scale)
    heads, config = init_heads(n_heads, params["wte"])
    rng = np.random.default_rng(seed)
    for v in flatten(heads).values():
        v[...] = rng.standard_normal(v.shape).astype(np.float32) * 0.3
    engine = GPT2(hparams, params, threads=1)
    return engine, lambda h, n=None: heads_logits(h, heads[:n], params["wte"], config)


def as_dtype(tree, dtype):
    if isinstance(tree, dict):
        return {k: as_dtype(v, dtype) for k, v in tree.items()}
    if isinstance(tree, list):
        return [as_dtype(v, dtype) for v in tree]
    return np.asarray(tree, dtype=dtype)
