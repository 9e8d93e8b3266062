"""GPT-2's backward, llm.c style: X_forward (gpt2/model.py's function, keeping a cache) paired with
X_backward(dout, cache) -> the gradients of its inputs and params; a backward recomputes what its
rule reads. Float32 throughout. Shapes: B batch, T tokens, C n_embd, H n_head, D = C // H,
V n_vocab, F = 4 C.
"""
import math

from gpt2.backend import xp_of
from gpt2.model import attention, causal_mask, gelu, gpt2_hidden, layer_norm, linear, softmax

GELU_C = math.sqrt(2 / math.pi)


def embedding_forward(ids, wte, wpe):  # [B, T] -> [B, T, C]
    T = ids.shape[1]
    return wte[ids] + wpe[:T], (ids, wte.shape, wpe.shape)


def embedding_backward(dout, cache):  # [B, T, C] -> dwte [V, C], dwpe [n_ctx, C]
    ids, wte_shape, wpe_shape = cache
    xp = xp_of(dout)
    dwte = xp.zeros(wte_shape, dtype=dout.dtype)
    # dwte [V, C]
    xp.add.at(dwte, ids.reshape(-1), dout.reshape(-1, dout.shape[-1]))  # repeated ids accumulate
    dwpe = xp.zeros(wpe_shape, dtype=dout.dtype)  # [n_ctx, C]
    dwpe[: dout.shape[1]] = dout.sum(0)
    return dwte, dwpe


def layernorm_forward(x, g, b, eps=1e-5):  # [..., C] -> [..., C]
    return layer_norm(x, g, b, eps), (x, g, eps)


def layernorm_backward(dout, cache):
    x, g, eps = cache
    C = x.shape[-1]
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / xp_of(x).sqrt(x.var(-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd  # the normalised x
    dg = (dout * xhat).reshape(-1, C).sum(0)  # [C]
    db = dout.reshape(-1, C).sum(0)  # [C]
    dxhat = dout * g
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(-1, keepdims=True))  # [B, T, C]
    return dx, dg, db


def linear_forward(x, w, b):  # [B, T, I] @ [I, O] + [O] -> [B, T, O]
    return linear(x, w, b), x


def linear_backward(dout, x, w):
    n_in, n_out = w.shape
    x2, d2 = x.reshape(-1, n_in), dout.reshape(-1, n_out)  # [B T, I], [B T, O]
    return (d2 @ w.T).reshape(x.shape), x2.T @ d2, d2.sum(0)  # dx [B, T, I], dw [I, O], db [O]


def gelu_forward(x):
    return gelu(x), x


def gelu_backward(dout, x):  # gelu(x) = 0.5 x (1 + t), t = tanh(GELU_C (x + 0.044715 x^3))
    t = xp_of(x).tanh(GELU_C * (x + 0.044715 * x * x * x))  # x * x * x: x**3 goes through pow
    dt = (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x)
    return dout * (0.5 * (1 + t) + 0.5 * x * dt)


# [B, T, 3C] -> [B, T, C]: causal, or after past keys and values (k, v) [B, H, P, D] each under
# mask [T, P + T]
def attention_forward(qkv, n_head, past=None, mask=None):
    B, T, C3 = qkv.shape
    C, xp = C3 // 3, xp_of(qkv)
    q, k, v = qkv.reshape(B, T, 3, n_head, C // n_head).transpose(2, 0, 3, 1, 4)  # 3 x [B, H, T, D]
    if past is not None:  # [B, H, P + T, D] each
        k, v = xp.concatenate([past[0], k], 2), xp.concatenate([past[1], v], 2)
    mask = causal_mask(T, 0, xp) if mask is None else mask  # [T, P + T]
    y = attention(q, k, v, mask).transpose(0, 2, 1, 3).reshape(B, T, C)  # [B, T, C]
    return y, (q, k, v, mask)


def attention_backward(dy, cache):  # [B, T, C] -> dqkv [B, T, 3C]
    return attention_backward_past(dy, cache)[0]


# dy [B, T, C], dkv: more gradient of this pass's k, v [B, H, T, D] each (from later uses) ->
# dqkv [B, T, 3C], the gradient of the past keys and values [B, H, P, D] each (None without)
def attention_backward_past(dy, cache, dkv=None):
    q, k, v, mask = cache
    B, H, T, D = q.shape
    P, xp = k.shape[2] - T, xp_of(dy)
    # [B, H, T, T]
    att = softmax(xp.where(mask, (q * (1 / math.sqrt(D))) @ k.transpose(0, 1, 3, 2), -math.inf))
    dy = dy.reshape(B, T, H, D).transpose(0, 2, 1, 3)  # [B, H, T, D]
    datt = dy @ v.transpose(0, 1, 3, 2)  # [B, H, T, T]
    dv = att.transpose(0, 1, 3, 2) @ dy  # [B, H, T, D]
    # softmax backward; masked -> 0
    dscores = att * (datt - (datt * att).sum(-1, keepdims=True)) / math.sqrt(D)
    dq = dscores @ k  # [B, H, T, D]
    dk = dscores.transpose(0, 1, 3, 2) @ q  # [B, H, P + T, D]
    if dkv is not None:
        dk[:, :, P:] += dkv[0]
        dv[:, :, P:] += dkv[1]
    dqkv = xp.stack([dq, dk[:, :, P:], dv[:, :, P:]])  # [3, B, H, T, D]
    dpast = (dk[:, :, :P], dv[:, :, :P]) if P else None
    return dqkv.transpose(1, 3, 0, 2, 4).reshape(B, T, 3 * H * D), dpast


# [B, T, C] -> [B, T, C]; past, mask: attention_forward's
def block_forward(x, p, n_head, past=None, mask=None):
    h1, c_ln1 = layernorm_forward(x, **p["ln_1"])
    qkv, c_qkv = linear_forward(h1, **p["attn"]["c_attn"])
    y, c_att = attention_forward(qkv, n_head, past, mask)
    a, c_proj = linear_forward(y, **p["attn"]["c_proj"])
    x2 = x + a
    h2, c_ln2 = layernorm_forward(x2, **p["ln_2"])
    f, c_fc = linear_forward(h2, **p["mlp"]["c_fc"])
    g, c_gelu = gelu_forward(f)
    m, c_mproj = linear_forward(g, **p["mlp"]["c_proj"])
    return x2 + m, (c_ln1, c_qkv, c_att, c_proj, c_ln2, c_fc, c_gelu, c_mproj)


def block_backward(dout, cache, p):
    return block_backward_past(dout, cache, p)[:2]


def block_backward_past(dout, cache, p, dkv=None):
    """-> dx, grads, the past's dk, dv (attention_backward_past)."""
    c_ln1, c_qkv, c_att, c_proj, c_ln2, c_fc, c_gelu, c_mproj = cache
    grads = {"attn": {}, "mlp": {}}
    dg, dw, db = linear_backward(dout, c_mproj, p["mlp"]["c_proj"]["w"])
    grads["mlp"]["c_proj"] = {"w": dw, "b": db}
    df = gelu_backward(dg, c_gelu)
    dh2, dw, db = linear_backward(df, c_fc, p["mlp"]["c_fc"]["w"])
    grads["mlp"]["c_fc"] = {"w": dw, "b": db}
    dx2, dgn, dbn = layernorm_backward(dh2, c_ln2)
    grads["ln_2"] = {"g": dgn, "b": dbn}
    dx2 = dx2 + dout
    dy, dw, db = linear_backward(dx2, c_proj, p["attn"]["c_proj"]["w"])
    grads["attn"]["c_proj"] = {"w": dw, "b": db}
    dqkv, dpast = attention_backward_past(dy, c_att, dkv)
    dh1, dw, db = linear_backward(dqkv, c_qkv, p["attn"]["c_attn"]["w"])
    grads["attn"]["c_attn"] = {"w": dw, "b": db}
    dx, dgn, dbn = layernorm_backward(dh1, c_ln1)
    grads["ln_1"] = {"g": dgn, "b": dbn}
    return dx + dx2, grads, dpast


def cross_entropy_forward(logits, targets):  # [B, T, V], [B, T] -> mean loss
    xp = xp_of(logits)
    z = logits - logits.max(-1, keepdims=True)
    logp = z - xp.log(xp.exp(z).sum(-1, keepdims=True))  # [B, T, V]
    B, T = targets.shape
    nll = -xp.take_along_axis(logp, targets[..., None], -1)[..., 0]  # [B, T]
    return nll.mean(), (logp, targets)


def cross_entropy_backward(cache):
    logp, targets = cache
    xp = xp_of(logp)
    B, T = targets.shape
    dlogits = xp.exp(logp)  # [B, T, V]
    picked = xp.take_along_axis(dlogits, targets[..., None], -1)  # [B, T, 1]
    xp.put_along_axis(dlogits, targets[..., None], picked - 1, -1)  # minus one-hot targets
    return dlogits / (B * T)


# [B, T] -> final hidden states h [B, T, C] (after ln_f), cache
def gpt2_hidden_forward(params, hparams, ids):
    x, c_emb = embedding_forward(ids, params["wte"], params["wpe"])
    caches = []
    for p in params["blocks"]:
        x, c = block_forward(x, p, hparams["n_head"])
        caches.append(c)
    h, c_lnf = layernorm_forward(x, **params["ln_f"])
    return h, (c_emb, caches, c_lnf)


# dh [B, T, C] -> grads of every param (wte: embedding use only)
def gpt2_hidden_backward(dh, cache, params):
    c_emb, caches, c_lnf = cache
    dx, dg, db = layernorm_backward(dh, c_lnf)
    grads = {"ln_f": {"g": dg, "b": db}, "blocks": [None] * len(params["blocks"])}
    for i in reversed(range(len(params["blocks"]))):
        dx, grads["blocks"][i] = block_backward(dx, caches[i], params["blocks"][i])
    grads["wte"], grads["wpe"] = embedding_backward(dx, c_emb)
    return grads


def lm_head_forward_backward(h, wte, targets):  # tied LM head: loss, dh [B, T, C], dwte [V, C]
    logits = h @ wte.T  # [B, T, V]
    loss, c_ce = cross_entropy_forward(logits, targets)
    dlogits = cross_entropy_backward(c_ce)
    C = h.shape[-1]
    # dh [B, T, C], dwte [V, C]
    return loss, dlogits @ wte, dlogits.reshape(-1, dlogits.shape[-1]).T @ h.reshape(-1, C)


def gpt2_forward_backward(params, hparams, ids, targets):
    """Mean cross-entropy of next-token prediction and its gradient, in the params tree's layout."""
    h, cache = gpt2_hidden_forward(params, hparams, ids)
    loss, dh, dwte_head = lm_head_forward_backward(h, params["wte"], targets)
    grads = gpt2_hidden_backward(dh, cache, params)
    grads["wte"] = grads["wte"] + dwte_head
    return loss, grads


def gpt2_loss(params, hparams, ids, targets):
    """Mean cross-entropy only (evaluation: gpt2/model.py's forward, no caches kept)."""
    h = gpt2_hidden(ids, **params, n_head=hparams["n_head"])  # [B, T, C]
    loss, _ = cross_entropy_forward(h @ params["wte"].T, targets)
    return loss
