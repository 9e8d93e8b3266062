"""The skip-set search of Draft & Verify (Zhang et al. 2023, arXiv:2309.08168): how often the draft
of each skip set agrees with the target's greedy token. Sublayer s = 2l is layer l's attention,
2l + 1 its MLP (gpt2/self_draft.py). A row is a position j of x [B, T]: the draft reads x[j] on the
target's cache of x[:j] and agrees when its argmax is x[j + 1]. Shapes: m scored rows per sequence,
d = n_embd / n_head, L layers.
"""
import numpy as np

from gpt2.backend import to_numpy, xp_of
from gpt2.model import attention, causal_mask, layer_norm, linear
from gpt2.self_draft import lm_head, sublayer

# the most layers skip_set_search takes: 2^14 = 16384 sets (4x tiny-target's); its arrays and the
# scoring grow 4x a layer (8 layers: 65536 sets, 100 MB of arrays at 16 prompts x 32 positions)
MAX_LAYERS = 7


def too_many_layers(n_layer):
    """Why skip_set_search cannot score every skip set of an n_layer model, or None."""
    if n_layer <= MAX_LAYERS:
        return None
    return (f"{n_layer} layers have 2^{2 * n_layer} = {2 ** (2 * n_layer):,} skip sets, too many "
            f"to score each (at most {MAX_LAYERS} layers: {2 ** (2 * MAX_LAYERS):,} sets)")


def full_forward(params, hparams, x):
    """x [B, T] without a cache -> residuals [2L + 1, B, T, n_embd] (before each sublayer, then the
    last), keys and values [L, B, n_head, T, d]."""
    xp, H = xp_of(params["wte"]), hparams["n_head"]
    B, T = x.shape
    h = params["wte"][x] + params["wpe"][xp.arange(T)]  # [B, T, n_embd]
    residuals, keys, values = [h], [], []
    mask = causal_mask(T, 0, xp)  # [T, T]
    for s in range(2 * hparams["n_layer"]):
        block = params["blocks"][s // 2]
        if s % 2 == 0:
            qkv = linear(layer_norm(h, **block["ln_1"]), **block["attn"]["c_attn"])  # [B, T, 3C]
            _, k, v = split_heads(qkv, H)
            keys.append(k)  # [B, n_head, T, d]
            values.append(v)
        h = sublayer(h, s, block, H, mask)  # [B, T, n_embd]
        residuals.append(h)
    return xp.stack(residuals), xp.stack(keys), xp.stack(values)


def split_heads(qkv, n_head):  # [B, m, 3 n_embd] -> q, k, v [B, n_head, m, d]
    B, m, three_c = qkv.shape
    # [3, B, n_head, m, d]
    qkv = qkv.reshape(B, m, 3, n_head, three_c // (3 * n_head)).transpose(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]


def draft_sublayer(h, s, block, n_head, keys, values, pos):
    """Sublayer s of the draft for rows h [B, m, n_embd] at positions pos [m]: attention reads the
    target's keys/values [B, n_head, T, d] before each row and its own at the row."""
    xp = xp_of(h)
    if s % 2:
        return sublayer(h, s, block, n_head)
    a = block["attn"]
    # [B, n_head, m, d] each
    q, k, v = split_heads(linear(layer_norm(h, **block["ln_1"]), **a["c_attn"]), n_head)
    T, m = keys.shape[2], len(pos)
    # [m, T + m]
    mask = xp.concatenate([xp.arange(T) < xp.asarray(pos)[:, None], xp.eye(m, dtype=bool)], -1)
    # [B, n_head, m, d]
    out = attention(q, xp.concatenate([keys, k], 2), xp.concatenate([values, v], 2), mask)
    B, H, m, d = out.shape
    return h + linear(out.transpose(0, 2, 1, 3).reshape(B, m, H * d), **a["c_proj"])


def skip_set_search(params, hparams, x, start):
    """Every skip set's draft on rows start..T-2 of x [B, T], depth first (sets share their first
    sublayers) -> agree [2^(2L), B, m] (index bit s: sublayer s skipped), top probability alike."""
    xp, L, H = xp_of(params["wte"]), hparams["n_layer"], hparams["n_head"]
    if (problem := too_many_layers(L)) is not None:
        raise ValueError(problem)
    residuals, keys, values = full_forward(params, hparams, x)
    pos = np.arange(start, x.shape[1] - 1)  # [m] positions read by the draft
    truth = xp.asarray(x[:, start + 1:])  # [B, m] the target's next tokens
    agree = xp.zeros((2 ** (2 * L),) + truth.shape, dtype=bool)
    confidence = xp.zeros((2 ** (2 * L),) + truth.shape, dtype=xp.float16)

    # h [B, m, n_embd]: the rows after sublayers 0..s-1 of the sets whose bits so far are mask
    def visit(h, s, mask):
        if s == 2 * L:
            logits = lm_head(h, params)  # [B, m, n_vocab]
            agree[mask] = logits.argmax(-1) == truth
            top = logits.max(-1, keepdims=True)
            confidence[mask] = 1 / xp.exp(logits - top).sum(-1)  # the top token's probability
            return
        visit(h, s + 1, mask | (1 << s))  # skip sublayer s
        visit(draft_sublayer(h, s, params["blocks"][s // 2], H, keys[s // 2], values[s // 2], pos),
              s + 1, mask)

    visit(residuals[0][:, pos], 0, 0)  # [B, m, n_embd]
    return to_numpy(agree), to_numpy(confidence)


def draft_logits(params, hparams, x, start, skip, adapter=None):
    """One skip set's draft logits [B, m, n_vocab] at skip_set_search's rows."""
    H = hparams["n_head"]
    residuals, keys, values = full_forward(params, hparams, x)
    pos = np.arange(start, x.shape[1] - 1)  # [m]
    h = residuals[0][:, pos]  # [B, m, n_embd]
    for s in range(2 * hparams["n_layer"]):
        if s not in skip:
            h = draft_sublayer(h, s, params["blocks"][s // 2], H, keys[s // 2], values[s // 2], pos)
    return lm_head(h, params, adapter)
