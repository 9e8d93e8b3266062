"""GPT-2's forward pass in NumPy, picoGPT style (Radford et al. 2019, "Language Models are
Unsupervised Multitask Learners"; the architecture is GPT's decoder with pre-layer-norm blocks).

The list of functions is the architecture: gelu, softmax, layer_norm, linear, ffn, attention, mha,
transformer_block, gpt2. Weights are the nested dicts of a checkpoint, unpacked with `**`. Every
forward of the project runs on these functions: the engine's rows (gpt2/engine.py), the self-draft
paths, the EAGLE head, batched decoding for training data, and the trainer (gpt2/train/backprop.py
pairs each with its backward).

Two additions to picoGPT, both needed by speculative decoding:
- `attention` takes an explicit boolean mask, so a token tree can be scored in one pass (each node
  sees the prefix and its ancestors), and `positions` are explicit (a node's position is prefix
  length + its depth);
- a KV `cache` (gpt2/cache.py) holds the keys and values of tokens already seen, so a call runs only
  new tokens.

Shapes: B rows (sequences run side by side), n_seq new tokens per row, n_kv = cached + new tokens
attended to, n_embd, n_head, d = n_embd // n_head, n_vocab. Everything stays float32: constants are
Python floats, which never promote a float32 array. The functions use array methods (`x.sum`,
`x.max`) rather than `np.mean`/`np.var`, whose Python wrappers cost 3-4x more, and skip the mask
where every query sees every key: for the built-in tiny models the Python cost of each call is about
half of a decoding step (bench/engine.py measures it). How fast they run is decided elsewhere
(gpt2/fast/): weights that multiply through column panels, CUDA kernels for gelu, softmax and
layer_norm on a GPU, the BLAS thread count.
"""
import math

from gpt2.backend import xp_of


# GPT-2's tanh approximation 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written as
def gelu(x):
    # x / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2 / (1 + exp(-2u))) because NumPy's exp
    # is ~2x faster than its tanh; -2u is capped at 80 so that exp stays finite (gelu(x) is then 0
    # to float32 precision anyway)
    xp = xp_of(x)
    minus_2u = x * (-2 * math.sqrt(2 / math.pi) * (1 + 0.044715 * x * x))
    return x / (1 + xp.exp(xp.minimum(minus_2u, 80.0)))


def softmax(x):
    exp_x = xp_of(x).exp(x - x.max(axis=-1, keepdims=True))
    return exp_x / exp_x.sum(axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):
    n = x.shape[-1]
    x = x - x.sum(axis=-1, keepdims=True) / n  # mean 0
    variance = (x * x).sum(axis=-1, keepdims=True) / n
    return x * (g / xp_of(x).sqrt(variance + eps)) + b  # variance 1, then scale and offset


def linear(x, w, b):  # [B, n_seq, n_in] -> [B, n_seq, n_out]
    # NumPy multiplies a stack of B matrices one at a time: make it one product over all B*n_seq
    # rows
    if len(x) > 1:
        return linear(x.reshape(1, -1, x.shape[-1]), w, b).reshape(*x.shape[:-1], -1)
    return x @ w + b  # [1, n_seq, n_in] @ [n_in, n_out] + [n_out]


def ffn(x, c_fc, c_proj):  # [B, n_seq, n_embd] -> [B, n_seq, n_embd]
    a = gelu(linear(x, **c_fc))  # [B, n_seq, n_embd] -> [B, n_seq, 4*n_embd]
    return linear(a, **c_proj)  # [B, n_seq, 4*n_embd] -> [B, n_seq, n_embd]


# [B, n_head, n_seq, d], [B, n_head, n_kv, d] x 2, [B, 1, n_seq, n_kv] bool
def attention(q, k, v, mask=None):
    scores = (q * (1 / math.sqrt(q.shape[-1]))) @ k.swapaxes(-1, -2)  # [B, n_head, n_seq, n_kv]
    if mask is not None:  # None: every query sees every key (one new token after the cache)
        # a query never sees what mask forbids (the future, branches)
        scores = xp_of(q).where(mask, scores, -math.inf)
    # [B, n_head, n_seq, n_kv] @ [B, n_head, n_kv, d] -> [B, n_head, n_seq, d]
    return softmax(scores) @ v


# [B, n_seq, n_embd] -> [B, n_seq, n_embd]
def mha(x, c_attn, c_proj, n_head, mask=None, cache=None, layer=0):
    B, n_seq, n_embd = x.shape
    x = linear(x, **c_attn)  # [B, n_seq, n_embd] -> [B, n_seq, 3*n_embd]
    # -> [3, B, n_head, n_seq, d]
    qkv = x.reshape(B, n_seq, 3, n_head, n_embd // n_head).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]  # 3 x [B, n_head, n_seq, d]
    if cache is not None:
        # store the new keys/values; get all of them: [B, n_head, n_kv, d] each
        k, v = cache.update(layer, k, v)
    out = attention(q, k, v, mask)  # [B, n_head, n_seq, d]
    out = out.transpose(0, 2, 1, 3).reshape(B, n_seq, n_embd)  # merge heads: [B, n_seq, n_embd]
    return linear(out, **c_proj)  # [B, n_seq, n_embd] -> [B, n_seq, n_embd]


# [B, n_seq, n_embd] -> same
def transformer_block(x, mlp, attn, ln_1, ln_2, n_head, mask=None, cache=None, layer=0):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head, mask=mask, cache=cache, layer=layer)
    x = x + ffn(layer_norm(x, **ln_2), **mlp)
    return x


# -> [n_seq, n_past + n_seq] bool: token i sees the past and tokens 0..i
def causal_mask(n_seq, n_past, xp):
    return xp.arange(n_past + n_seq) <= xp.arange(n_past, n_past + n_seq)[:, None]


def gpt2_hidden(inputs, wte, wpe, blocks, ln_f, n_head, positions=None, mask=None, cache=None):
    """Final hidden states [B, n_seq, n_embd] (after ln_f) of `inputs` [B, n_seq] token ids
    ([n_seq]: one sequence, -> [n_seq, n_embd]).

    Without a cache this is picoGPT's forward with a causal mask. With a cache whose rows hold
    n_past tokens, `inputs` are the next tokens; `positions` default to n_past, n_past+1, ... and
    `mask` [n_seq, n_past+n_seq] to causal (None for a single token, which sees everything); the
    cache grows by n_seq. A pass at slots of the cache's own (cache.at, rows of different lengths)
    gives its positions and mask.
    """
    xp = xp_of(wte)
    if inputs.ndim == 1:  # one sequence: one row
        return gpt2_hidden(inputs[None], wte, wpe, blocks, ln_f, n_head, positions, mask, cache)[0]
    n_seq = inputs.shape[1]
    n_past = 0 if cache is None else cache.n
    if positions is None:
        positions = xp.arange(n_past, n_past + n_seq)
    if mask is None and n_seq > 1:
        mask = causal_mask(n_seq, n_past, xp)
    x = wte[inputs] + wpe[positions]  # token + positional embeddings: [B, n_seq, n_embd]
    for layer, block in enumerate(blocks):
        # [B, n_seq, n_embd]
        x = transformer_block(x, **block, n_head=n_head, mask=mask, cache=cache, layer=layer)
    if cache is not None and cache.slots is None:
        cache.n += n_seq
    return layer_norm(x, **ln_f)  # [B, n_seq, n_embd]


# -> [B, n_seq, n_vocab]
def gpt2(inputs, wte, wpe, blocks, ln_f, n_head, positions=None, mask=None, cache=None):
    # [B, n_seq, n_embd]
    x = gpt2_hidden(inputs, wte, wpe, blocks, ln_f, n_head, positions, mask, cache)
    # the LM head is tied to the token embedding: [B, n_seq, n_embd] -> [B, n_seq, n_vocab]
    return x @ wte.T
