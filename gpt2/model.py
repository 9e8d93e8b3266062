"""GPT-2's forward in NumPy, picoGPT style (Radford et al. 2019, "Language Models are Unsupervised
Multitask Learners"): the function list is the architecture, weights are nested dicts unpacked with
`**`. Added for speculative decoding: explicit mask and positions (a tree in one pass), a KV cache,
and `ops`, the operations as a value (REFERENCE here, others in gpt2/fast/). Shapes: B rows, n_seq
new tokens, n_kv = cached + new, n_embd, n_head, d = n_embd // n_head, n_vocab; float32.
"""
import math
from typing import Callable, NamedTuple

from gpt2.backend import xp_of


class Ops(NamedTuple):
    """The forward's operations, a value an engine chooses once (gpt2/fast/)."""
    matmul: Callable
    gelu: Callable
    softmax: Callable
    layer_norm: Callable


def matmul(x, w):  # [..., n_in] @ [n_in, n_out] -> [..., n_out]
    return x @ w


def gelu(x):  # GPT-2's tanh approximation: [...] -> [...]
    return 0.5 * x * (1 + xp_of(x).tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def softmax(x):  # [..., n] -> [..., n], each row summing to 1
    exp_x = xp_of(x).exp(x - x.max(axis=-1, keepdims=True))  # [..., n]
    return exp_x / exp_x.sum(axis=-1, keepdims=True)  # [..., n] / [..., 1]


def layer_norm(x, g, b, eps: float = 1e-5):  # [..., n_embd] -> [..., n_embd]
    mean = x.mean(axis=-1, keepdims=True)  # [..., 1]
    variance = x.var(axis=-1, keepdims=True)  # [..., 1]
    x = (x - mean) / xp_of(x).sqrt(variance + eps)  # [..., n_embd]: mean 0, variance 1
    return g * x + b  # [..., n_embd]: scaled by g, offset by b


REFERENCE = Ops(matmul, gelu, softmax, layer_norm)


def linear(x, w, b, ops=REFERENCE):  # [B, n_seq, n_in] -> [B, n_seq, n_out]
    return ops.matmul(x, w) + b


def ffn(x, c_fc, c_proj, ops=REFERENCE):  # [B, n_seq, n_embd] -> [B, n_seq, n_embd]
    a = ops.gelu(linear(x, **c_fc, ops=ops))  # [B, n_seq, n_embd] -> [B, n_seq, 4*n_embd]
    return linear(a, **c_proj, ops=ops)  # [B, n_seq, 4*n_embd] -> [B, n_seq, n_embd]


# [B, n_head, n_seq, d], [B, n_head, n_kv, d] x 2, [B, 1, n_seq, n_kv] bool -> [B, n_head, n_seq, d]
def attention(q, k, v, mask=None, ops=REFERENCE):
    scores = (q / math.sqrt(q.shape[-1])) @ k.swapaxes(-1, -2)  # [B, n_head, n_seq, n_kv]
    if mask is not None:  # None: every query sees every key (one new token after the cache)
        scores = xp_of(q).where(mask, scores, -math.inf)  # [B, n_head, n_seq, n_kv]: future hidden
    return ops.softmax(scores) @ v  # [B, n_head, n_seq, n_kv] @ [B, n_head, n_kv, d]


# [B, n_seq, n_embd] -> [B, n_seq, n_embd]
def mha(x, c_attn, c_proj, n_head, mask=None, cache=None, layer=0, ops=REFERENCE):
    B, n_seq, n_embd = x.shape
    x = linear(x, **c_attn, ops=ops)  # [B, n_seq, n_embd] -> [B, n_seq, 3*n_embd]
    # [B, n_seq, 3*n_embd] -> [3, B, n_head, n_seq, d]
    qkv = x.reshape(B, n_seq, 3, n_head, n_embd // n_head).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]  # 3 x [B, n_head, n_seq, d]
    if cache is not None:  # store the new keys/values, get all of them: [B, n_head, n_kv, d] each
        k, v = cache.update(layer, k, v)
    out = attention(q, k, v, mask, ops)  # [B, n_head, n_seq, d]
    out = out.transpose(0, 2, 1, 3).reshape(B, n_seq, n_embd)  # merge heads: [B, n_seq, n_embd]
    return linear(out, **c_proj, ops=ops)  # [B, n_seq, n_embd] -> [B, n_seq, n_embd]


# the two residual sublayers of a block: [B, n_seq, n_embd] -> [B, n_seq, n_embd]
def attention_sublayer(x, attn, ln_1, n_head, mask=None, cache=None, layer=0, ops=REFERENCE):
    return x + mha(ops.layer_norm(x, **ln_1), **attn, n_head=n_head, mask=mask, cache=cache,
                   layer=layer, ops=ops)


def mlp_sublayer(x, mlp, ln_2, ops=REFERENCE):
    return x + ffn(ops.layer_norm(x, **ln_2), **mlp, ops=ops)


# [B, n_seq, n_embd] -> [B, n_seq, n_embd]
def transformer_block(x, mlp, attn, ln_1, ln_2, n_head, mask=None, cache=None, layer=0,
                      ops=REFERENCE):
    x = attention_sublayer(x, attn, ln_1, n_head, mask, cache, layer, ops)
    return mlp_sublayer(x, mlp, ln_2, ops)


def causal_mask(n_seq, n_past, xp):  # -> [n_seq, n_past + n_seq] bool: token i sees 0..n_past + i
    return xp.arange(n_past + n_seq) <= xp.arange(n_past, n_past + n_seq)[:, None]


def gpt2_hidden(inputs, wte, wpe, blocks, ln_f, n_head, positions=None, mask=None, cache=None,
                ops=REFERENCE, taps=()):
    """Ids [B, n_seq] -> hidden states after ln_f [B, n_seq, n_embd] ([n_seq] -> [n_seq, n_embd]);
    positions and mask default to follow the cache's n_past tokens. taps: block indices whose
    outputs (the residual stream) follow, concatenated -> [B, n_seq, (1 + len(taps)) n_embd]."""
    xp = xp_of(wte)
    if inputs.ndim == 1:  # one sequence: one row
        return gpt2_hidden(inputs[None], wte, wpe, blocks, ln_f, n_head, positions, mask, cache,
                           ops, taps)[0]
    n_seq = inputs.shape[1]
    n_past = 0 if cache is None else cache.n
    if positions is None:
        positions = xp.arange(n_past, n_past + n_seq)  # [n_seq]
    if mask is None and n_seq > 1:
        mask = causal_mask(n_seq, n_past, xp)  # [n_seq, n_past + n_seq]
    x = wte[inputs] + wpe[positions]  # token + positional embeddings: [B, n_seq, n_embd]
    tapped = []
    for layer, block in enumerate(blocks):  # [B, n_seq, n_embd] -> [B, n_seq, n_embd]
        x = transformer_block(x, **block, n_head=n_head, mask=mask, cache=cache, layer=layer,
                              ops=ops)
        tapped += [x] * taps.count(layer)
    if cache is not None:
        cache.advance(n_seq)
    if taps:  # the last hidden state, then k tapped outputs: [B, n_seq, n_embd + k * n_embd]
        return xp.concatenate([ops.layer_norm(x, **ln_f)] + tapped, -1)
    return ops.layer_norm(x, **ln_f)  # [B, n_seq, n_embd]


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head, positions=None, mask=None, cache=None,
         ops=REFERENCE):  # -> logits [B, n_seq, n_vocab]
    x = gpt2_hidden(inputs, wte, wpe, blocks, ln_f, n_head, positions, mask, cache, ops)
    return ops.matmul(x, wte.T)  # the head tied to wte: [B, n_seq, n_embd] -> [B, n_seq, n_vocab]
