"""Random GPT-2 weights of any shape, for tests (normal(0, 0.1) so every layer matters)."""
import numpy as np


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
