"""The model contract on a KV cache, and the richer interface tree methods need.

    model(x: list[int], n: int = 1) -> probs [n, n_vocab]   (float32, host NumPy)

Row i is the next-token distribution after the prefix x[: len(x) - n + i + 1]. Each call reuses the cache: it rolls
back to the longest common prefix of `x` with the tokens already cached and runs only the rest (always at least
the last n tokens, whose outputs are asked for). An algorithm never sees the cache; it sees a function.

Tree methods (Medusa, SpecInfer, EAGLE, REST, lookahead) also call
    model.tree(x, tokens, parents) -> logits [1 + m, n_vocab]
which scores the prefix x and m tree nodes in one forward pass: node i holds `tokens[i]`, hangs below node
`parents[i]` (-1: below the last token of x), sits at position len(x) + depth(i), and sees the prefix, its ancestors
and itself. Row 0 is the distribution after x, row 1 + i the one after node i's path. `model.accept(path)` then
compacts the cache to x followed by the nodes of `path`.

Shapes: n_seq (tokens run in one pass), m (tree nodes), n_embd, n_vocab.
"""
import numpy as np

from gpt2.backend import engine_policy, get_xp, panel_policy, threads_for, to_numpy, tree_map
from gpt2.cache import KVCache
from gpt2.model import gpt2_hidden, softmax
from gpt2.panels import matmul, panels as gpt2_panels, with_panels


def common_prefix_length(a, b):
    """Example: common_prefix_length([1, 2, 3, 4], [1, 2, 5]) -> 2."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # one extends the other (the usual call): a list comparison runs in C
        return n
    i = n - 16 if n > 16 and a[:n - 16] == b[:n - 16] else 0  # else they usually part within the last few tokens
    while a[i] == b[i]:
        i += 1
    return i


def tree_mask(parents, xp):  # -> [m, m] bool: node i sees node j when j is i or one of its ancestors
    m = len(parents)
    mask = np.eye(m, dtype=bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]
    return xp.asarray(mask)


def tree_depths(parents):  # depth of each node, 1 for the children of the prefix's last token
    depths = []
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"tree node {i} has parent {parent}: a parent must come before its child (or be -1)")
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return depths


TREE_SLOTS = 256  # cache slots beyond n_ctx for tree nodes


class GPT2:
    """A GPT-2 (hparams + params tree) behind the model contract, on NumPy or CuPy arrays."""

    def __init__(self, hparams, params, device="cpu", pad_rows=None, head_copy=None, panels=None, panel_width=None):
        self.hparams, self.device, self.xp = hparams, device, get_xp(device)
        engine_policy(self.n_params, device)  # main.py's BLAS thread policy (gpt2/backend.py)
        self.params = tree_map(lambda a: self.xp.asarray(a, dtype="float32"), params)
        # the LM head is tied to wte [n_vocab, n_embd]; OpenBLAS multiplies by a contiguous [n_embd, n_vocab] copy
        # 1.3-1.6x faster than by the transposed view wte.T (bench/engine.py), for one more copy of wte in memory
        head_copy = device == "cpu" if head_copy is None else head_copy
        wte = self.params["wte"]
        self.head = self.xp.ascontiguousarray(wte.T) if head_copy else wte.T  # [n_embd, n_vocab]
        # on CPUs where OpenBLAS multiplies a few rows by small panels without packing them (gpt2/panels.py), the
        # forward's weights (and the head) also come as column panels: forward_params has them, params does not
        self.panels = device == "cpu" and (panel_policy(self.n_params)["on"] if panels is None else panels)
        self.forward_params = with_panels(self.params, panel_width) if self.panels else self.params
        self.head_panels = gpt2_panels(self.head, panel_width) if self.panels else None  # [n_panels, n_embd, width]
        # without panels, OpenBLAS multiplies 4 rows as fast as 2 or 3 and 8 as fast as 5..7 (bench/engine.py), so on
        # the CPU the rows of a forward are padded up to a multiple of pad_rows with dummy rows that see only themselves
        self.pad_rows = (4 if device == "cpu" and not self.panels else 1) if pad_rows is None else pad_rows
        d = hparams["n_embd"] // hparams["n_head"]
        # the cache holds the context window plus TREE_SLOTS: a tree's nodes sit in the cache side by side (at
        # positions that only go as deep as the tree), so near the end of the window they need slots beyond it
        self.cache = KVCache(hparams["n_layer"], hparams["n_head"], hparams["n_ctx"] + TREE_SLOTS, d, self.xp)
        self.tokens = []  # the tokens whose keys/values the cache holds, in order (a tree's nodes are not listed)
        self.calls = 0  # forward passes run: the cost measure of speculative decoding
        self.tokens_run = 0  # tokens pushed through those passes

    @property
    def n_vocab(self):
        return self.hparams["n_vocab"]

    @property
    def n_params(self):  # weight matrices (biases and norms left out): what the BLAS thread policy sizes its choice by
        h = self.hparams
        return h["n_vocab"] * h["n_embd"] + h["n_ctx"] * h["n_embd"] + h["n_layer"] * 12 * h["n_embd"] ** 2

    @property
    def n_ctx(self):
        return self.hparams["n_ctx"]

    def __call__(self, x, n=1):  # -> probs [n, n_vocab]
        return self.logits(x, n, probs=True)

    def logits(self, x, n=1, hidden=False, probs=False):
        """Logits (or probs) [n, n_vocab] after the last n prefixes of x; with hidden=True also their hidden states."""
        self._check(x, n, extra=0)
        h = self._forward(x, n, tokens=[], parents=[])  # [n, n_embd]
        return self._outputs(h, hidden, probs)

    def tree(self, x, tokens, parents, hidden=False, probs=False):
        """Score the prefix x and a token tree in one pass -> [1 + m, n_vocab] (see the module docstring)."""
        if len(tokens) != len(parents):
            raise ValueError(f"tree: {len(tokens)} tokens but {len(parents)} parents")
        self._check(x, 1, extra=max(tree_depths(parents), default=0))
        if len(x) + len(tokens) > self.n_ctx + TREE_SLOTS:
            raise ValueError(f"a tree of {len(tokens)} nodes after {len(x)} tokens needs more than the cache's "
                             f"{self.n_ctx + TREE_SLOTS} slots: use a smaller tree")
        h = self._forward(x, 1, tokens, parents)  # [1 + m, n_embd]
        self._tree = list(tokens)
        return self._outputs(h, hidden, probs)

    def accept(self, path):
        """After tree(): keep x followed by the nodes in `path` (increasing node indices) in the cache."""
        n = len(self.tokens)
        self.cache.keep(list(range(n)) + [n + i for i in path])
        self.tokens = self.tokens + [self._tree[i] for i in path]

    def reset(self):
        self.cache.n, self.tokens = 0, []

    def _check(self, x, n, extra):
        if len(x) == 0:
            raise ValueError("the prompt is empty: give at least one token")
        if not 1 <= n <= len(x):
            raise ValueError(f"n must be between 1 and len(x) = {len(x)}; got {n}")
        if len(x) + extra > self.n_ctx:
            raise ValueError(f"{len(x) + extra} tokens do not fit the model's context window of {self.n_ctx}")

    def _forward(self, x, n, tokens, parents):  # -> hidden states [n + m, n_embd]
        xp = self.xp
        # Step 1: reuse the cached prefix that x shares, but always run its last n tokens
        p = min(common_prefix_length(self.tokens, x), len(x) - n)
        self.cache.rollback(self.cache.n - p)
        s, m = len(x) - p, len(tokens)  # linear tokens to run, tree nodes to run
        pad = -(s + m) % self.pad_rows if s + m > 1 else 0  # round the rows up to a multiple of pad_rows
        pad = pad if p + s + m + pad <= self.n_ctx + TREE_SLOTS else 0
        # Step 2: positions and mask for [x[p:], tree nodes, padding] against [cache, x[p:], tree nodes, padding]
        if m + pad == 0:  # a plain causal pass: gpt2_hidden's default positions and mask (none for one token)
            positions = mask = None
        else:
            positions = xp.asarray(list(range(p, len(x))) + [len(x) - 1 + d for d in tree_depths(parents)] + [0] * pad)
            mask = xp.zeros((s + m + pad, p + s + m + pad), dtype=bool)  # [n_seq, n_kv]
            mask[:s + m, :p + s] = xp.tril(xp.ones((s + m, p + s), dtype=bool), k=p)  # causal over the linear part
            mask[s:s + m, p + s:p + s + m] = tree_mask(parents, xp)  # tree nodes see their ancestors and themselves
            mask[s + m:, p + s + m:] = xp.eye(pad, dtype=bool)  # padding rows see only themselves
        # Step 3: one forward pass; the cache now holds x followed by the tree nodes
        with threads_for(s + m + pad, xp):  # many rows: the BLAS policy's wide count (gpt2/backend.py)
            h = gpt2_hidden(xp.asarray(list(x[p:]) + list(tokens) + [0] * pad), **self.forward_params,
                            n_head=self.hparams["n_head"], positions=positions, mask=mask, cache=self.cache)
        self.cache.rollback(pad)
        h = h[:s + m]  # [s + m, n_embd]
        self.tokens = list(x)
        self.calls += 1
        self.tokens_run += s + m
        return h[s - n:]  # the last n linear rows, then the tree rows

    def _outputs(self, h, hidden, probs):
        with threads_for(h.shape[0], self.xp):
            logits = matmul(h, self.head, self.head_panels)  # [n, n_embd] @ [n_embd, n_vocab] -> [n, n_vocab]
        out = to_numpy(softmax(logits) if probs else logits)
        return (out, to_numpy(h)) if hidden else out
