"""B sequences of different lengths in one forward pass: the batched model contract on one KV cache per row.

    model(xs: list[list[int]], n: int = 1) -> probs [B, n, n_vocab]   (float32, host NumPy)

Row b is what the single-sequence engine (gpt2/engine.py) returns for xs[b] alone: the distributions after the last n
prefixes of xs[b]. Sequences may have any lengths, and speculative decoding leaves them ragged (each row accepts its
own number of drafts), so every row has its own cache length, positions and rollback:

- each sequence takes its cached row (rows keep their order; when rows have left the batch, the later ones move
  up), rolls back to the prefix it shares with that row and runs only the rest, always at least its last n tokens;
- the rows' new tokens are padded to the longest, T, and run together: every `linear` is ONE matrix product over
  B*T rows, which is where the speed comes from (one row is a matrix-vector product that leaves the CPU's arithmetic
  idle while the weights stream in; B rows reuse each weight B times);
- a padded query sees nothing it should not: query t of row b, at position p_b + t, sees cache slots 0 .. p_b + t
  of its own row, which hold that row's prefix and its new tokens up to t. Padding keys land after the row's end
  (or in the spare slot n_ctx), where only padding queries see them, and the next call overwrites them.

Example: xs = [[5, 6, 7], [8]] with an empty cache: T = 3, row 1 runs [8, 0, 0] at positions 0, 1, 2; its padding
keys sit in slots 1 and 2, beyond its length 1, and its output is read at t = 0.

Trees, one per row, in the same pass (batched Medusa):

    model.tree(xs, trees, hidden=False, probs=False) -> [logits [1 + m_b, V] for each row b]  (and hidden states)
    model.accept(paths)

trees[b] = (tokens, parents) is row b's token tree, as gpt2/engine.py's tree() takes it (node i hangs below
parents[i], -1 being the last token of xs[b]). Row b's list equals GPT2.tree(xs[b], *trees[b]): row 0 the law after
xs[b], row 1 + i the law after node i's path. The nodes sit in the slots right after xs[b] (len(xs[b]) + i), at
positions len(xs[b]) - 1 + depth(i); a node's query sees the row's prefix, its ancestors and itself. accept(paths)
then moves each row's accepted nodes up behind its prefix, as GPT2.accept does; rows may accept different numbers of
nodes (or none). Trees differ in size between rows: smaller ones are padded like short rows.

Shapes: B rows, T new tokens per row (padded), n_kv cached + new slots attended to, C n_embd, H n_head, D = C // H,
L n_layer, S slots per row (n_ctx + TREE_SLOTS + 1), V n_vocab, m_b nodes in row b's tree.
"""
import numpy as np

from gpt2.backend import threads_for, to_numpy, xp_of
from gpt2.engine import TREE_SLOTS, common_prefix_length, tree_depths, tree_mask
from gpt2.model import attention, ffn, layer_norm, linear, softmax
from gpt2.panels import matmul

KEEP = 16  # a row that parts from a sequence only in its last KEEP tokens holds that sequence (drafts are fewer)


def mha_rows(x, c_attn, c_proj, n_head, k_cache, v_cache, slots, mask, rows=None):  # [B*T, C] -> [B*T, C]
    """rows: which rows of the caches [R, H, S, D] the B sequences use (None: the first B)."""
    B, T = slots.shape
    C = x.shape[-1]
    qkv = linear(x, **c_attn).reshape(B, T, 3, n_head, C // n_head)  # one GEMM: [B*T, C] -> [B, T, 3, H, D]
    at = xp_of(x).arange(B) if rows is None else rows  # [B]
    k_cache[at[:, None], :, slots] = qkv[:, :, 1]  # write each row's new keys at its own slots: [B, T, H, D]
    v_cache[at[:, None], :, slots] = qkv[:, :, 2]
    n_kv = mask.shape[-1]
    q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # [B, H, T, D]
    k, v = (k_cache[:B, :, :n_kv], v_cache[:B, :, :n_kv]) if rows is None else (k_cache[rows, :, :n_kv],
                                                                                  v_cache[rows, :, :n_kv])
    out = attention(q, k, v, mask)  # [B, H, T, D] (mask [B, 1, T, n_kv])
    return linear(out.transpose(0, 2, 1, 3).reshape(B * T, C), **c_proj)  # merge heads, one GEMM: [B*T, C]


def padded_rows(params, xs, p, trees, n_slots):
    """The rows of a batched forward: each sequence's new tokens xs[b][p_b:] and then its tree's nodes, padded to T.
    -> embeddings [B*T, C], cache slots [B, T], mask [B, 1, T, n_kv], new tokens s [B] and nodes m [B] per row.

    Token t of row b goes to slot p_b + t; a node's position is len(x_b) - 1 + its depth; padding sits past the row's
    end (its slots clipped to the spare slot n_slots - 1). trees[b] = (tokens, parents), ([], []) for none.
    """
    xp = xp_of(params["wte"])
    ids, positions, slots, mask, s, m = row_layout(xs, p, trees, n_slots, xp)
    n_ctx = params["wpe"].shape[0]
    x = params["wte"][xp.asarray(ids)] + params["wpe"][xp.asarray(np.minimum(positions, n_ctx - 1))]  # [B, T, C]
    return x.reshape(len(xs) * ids.shape[1], -1), slots, mask, s, m


def row_layout(xs, p, trees, n_slots, xp):
    """Where padded_rows' rows go, without embedding them -> token ids [B, T] and positions [B, T] (host), cache
    slots [B, T] and mask [B, 1, T, n_kv] (on xp), new tokens s [B] and nodes m [B] per row. For passes whose inputs
    are residuals already (gpt2/batch_self_draft.py's verification above the draft's cut)."""
    s = np.array([len(x) for x in xs]) - p  # [B]
    m = np.array([len(tokens) for tokens, _ in trees])  # [B]
    B, T = len(xs), int((s + m).max())
    ids = np.zeros((B, T), dtype=np.int64)  # [B, T]
    at = p[:, None] + np.arange(T)  # [B, T]: slot of each new token (of padding: past the row's end)
    positions = at.copy()  # [B, T]
    mask = np.arange(int((p + s + m).max())) <= at[:, :, None]  # [B, T, n_kv]: causal over the slots
    for b, (x, (tokens, parents)) in enumerate(zip(xs, trees)):
        ids[b, :s[b] + m[b]] = x[p[b]:] + tokens
        if m[b]:  # a node sees the prefix, its ancestors and itself: not the slots of the nodes before it
            nodes = slice(s[b], s[b] + m[b])
            positions[b, nodes] = len(x) - 1 + np.array(tree_depths(parents))
            mask[b, nodes, len(x):len(x) + m[b]] = tree_mask(parents, np)
    return ids, positions, xp.asarray(np.minimum(at, n_slots - 1)), xp.asarray(mask)[:, None], s, m


def row_bytes(hparams, tree_slots, tokens, itemsize=4):
    """An upper bound on the bytes one row takes in a batched engine of these hparams: its KV
    cache (2 x L x S x C numbers) and the activations of its largest pass of `tokens` tokens (the
    residual stream, q/k/v, the MLP's 4C, attention scores over S slots per head, and logits,
    softmax and a warped copy of [V] each). Example: tiny-target (L 6, C 256, H 4, n_ctx 256,
    V 4097), tree_slots 256, 64 tokens: 6.3 MB of cache + 4.7 MB of activations."""
    L, C, H, V = hparams["n_layer"], hparams["n_embd"], hparams["n_head"], hparams["n_vocab"]
    S = hparams["n_ctx"] + tree_slots + 1
    T = min(tokens, S)
    return itemsize * (2 * L * S * C + T * (16 * C + H * S + 3 * V))


class RowCaches:
    """One KV cache per row, [L, rows, H, S, D], the tokens each row holds, and _match(xs), which gives each sequence
    of a call its row and the prefix it can reuse there. BatchGPT2 and gpt2/batch_self_draft.py stand on it."""

    def __init__(self, hparams, rows, xp, tree_slots, dtype="float32"):
        self.hparams, self.rows, self.xp = hparams, rows, xp
        L, H, D = hparams["n_layer"], hparams["n_head"], hparams["n_embd"] // hparams["n_head"]
        # the slots: the window, tree_slots for the nodes of a tree near its end, and one spare slot where padding whose
        # slot would fall past them writes
        self.slots = hparams["n_ctx"] + tree_slots + 1
        self.k = xp.zeros((L, rows, H, self.slots, D), dtype=dtype)  # [L, B, H, S, D]
        self.v = xp.zeros((L, rows, H, self.slots, D), dtype=dtype)
        self.tokens = [[] for _ in range(rows)]  # what each cache row holds (a tree's nodes are not listed)
        self.active = rows  # sequences in the last call
        self.calls = 0  # batched forward passes
        self.tokens_run = 0  # real (not padding) tokens pushed through them

    def reset(self):
        self.tokens, self.active = [[] for _ in range(self.rows)], self.rows

    def _match(self, xs):  # -> cached prefix length of each sequence, after moving rows so that sequence b is row b
        # Rows keep their order and only leave the batch (picospec/batched/ drops finished rows), so a sequence's row is
        # one of the next gone + 1 rows (gone: rows that left since the last call): the first that parts from it only
        # in its last KEEP tokens, else the one sharing the longest prefix. Any choice is correct; this one reuses most.
        gone, r, order, prefix = max(0, self.active - len(xs)), 0, [], []
        for x in xs:
            candidates = []  # (row, prefix it shares with x)
            for row in range(r, r + gone + 1):
                c = common_prefix_length(self.tokens[row], x)
                candidates.append((row, c))
                if len(self.tokens[row]) - c <= KEEP:  # the row parts from x only in its last KEEP tokens: it holds x
                    break
            row, c = candidates[-1] if len(self.tokens[row]) - c <= KEEP else max(candidates, key=lambda rc: rc[1])
            gone, r = gone - (row - r), row + 1
            order.append(row)
            prefix.append(c)
        if order != list(range(len(xs))):  # a sequence left the batch (or the order changed): move rows up
            used = set(order)
            self._move(order + [r for r in range(self.rows) if r not in used])
        self.active = len(xs)
        return prefix

    def _move(self, order):  # row b takes what row order[b] held (order: a permutation of the rows)
        moved = [b for b in range(self.rows) if order[b] != b]
        src = [order[b] for b in moved]
        m = max(len(t) for t in self.tokens) + 1
        self.k[:, moved, :, :m] = self.k[:, src, :, :m]  # fancy indexing copies first: safe when rows swap
        self.v[:, moved, :, :m] = self.v[:, src, :, :m]
        self.tokens = [self.tokens[r] for r in order]

    def _ran(self, xs, new):  # after a forward pass that ran `new` real tokens, the caches' rows hold xs
        self.tokens[:len(xs)] = xs
        self.calls += 1
        self.tokens_run += new


class BatchGPT2(RowCaches):
    """`rows` sequences at once on the weights of a GPT2 engine (shared, not copied), each with its own KV cache."""

    def __init__(self, model, rows, tree_slots=TREE_SLOTS):
        super().__init__(model.hparams, rows, model.xp, tree_slots)
        self.model = model
        self._trees = None  # the token lists of the last tree() call, for accept()

    n_vocab = property(lambda self: self.model.n_vocab)
    n_ctx = property(lambda self: self.model.n_ctx)
    n_params = property(lambda self: self.model.n_params)

    def __call__(self, xs, n=1):  # -> probs [B, n, V]
        return self.logits(xs, n, probs=True)

    def logits(self, xs, n=1, hidden=False, probs=False):
        """Logits (or probs) [B, n, V] after the last n prefixes of each xs[b]; with hidden=True also [B, n, C]."""
        if not 1 <= len(xs) <= self.rows:
            raise ValueError(f"this batched engine holds {self.rows} rows; got {len(xs)} sequences")
        for x in xs:
            self.model._check(x, n, extra=0)
        h = self._forward([list(x) for x in xs], n, [([], [])] * len(xs))  # [B * n, C]
        with threads_for(h.shape[0], self.xp):  # one GEMM: [B, n, V]
            logits = matmul(h, self.model.head, self.model.head_panels).reshape(len(xs), n, -1)
        out = to_numpy(softmax(logits) if probs else logits)
        return (out, to_numpy(h).reshape(len(xs), n, -1)) if hidden else out

    def tree(self, xs, trees, hidden=False, probs=False):
        """Score each prefix xs[b] and its tree trees[b] = (tokens, parents) in one pass -> a list of B arrays
        [1 + m_b, V] (with hidden=True also a list of [1 + m_b, C]); see the module docstring."""
        if not 1 <= len(xs) <= self.rows or len(trees) != len(xs):
            raise ValueError(f"this batched engine holds {self.rows} rows and tree() takes one tree per sequence; got "
                             f"{len(xs)} sequences and {len(trees)} trees")
        for x, (tokens, parents) in zip(xs, trees):
            if len(tokens) != len(parents):
                raise ValueError(f"tree: {len(tokens)} tokens but {len(parents)} parents")
            self.model._check(x, 1, extra=max(tree_depths(parents), default=0))
            if len(x) + len(tokens) > self.slots - 1:
                raise ValueError(f"a tree of {len(tokens)} nodes after {len(x)} tokens needs more than the cache's "
                                 f"{self.slots - 1} slots: use a smaller tree")
        trees = [(list(tokens), list(parents)) for tokens, parents in trees]
        h = self._forward([list(x) for x in xs], 1, trees)  # [sum of (1 + m_b), C]
        with threads_for(h.shape[0], self.xp):  # every row's nodes: [sum of (1 + m_b), V]
            logits = matmul(h, self.model.head, self.model.head_panels)
        logits = to_numpy(softmax(logits) if probs else logits)
        ends = np.cumsum([1 + len(tokens) for tokens, _ in trees])[:-1]
        self._trees = [tokens for tokens, _ in trees]
        out = np.split(logits, ends)
        return (out, np.split(to_numpy(h), ends)) if hidden else out

    def accept(self, paths):
        """After tree(): row b keeps xs[b] followed by the nodes paths[b] (increasing node indices) in its cache."""
        if self._trees is None or len(paths) != len(self._trees):
            raise ValueError("accept() takes one path per row of the tree() call just before it")
        for b, (path, tokens) in enumerate(zip(paths, self._trees)):
            n = len(self.tokens[b])
            for cache in (self.k[:, b], self.v[:, b]):  # [L, H, S, D]: the path moves up behind the prefix
                cache[:, :, n:n + len(path)] = cache[:, :, [n + i for i in path]]  # fancy indexing copies first
            self.tokens[b] = self.tokens[b] + [tokens[i] for i in path]
        self._trees = None

    def _forward(self, xs, n, trees):  # -> hidden states [sum over rows of (n + m_b), C]
        """Each row's last n tokens, then its tree's m_b nodes (none for a plain call), row after row."""
        xp, params = self.xp, self.model.forward_params
        # Step 1: each sequence's reusable prefix p_b (always running its last n tokens)
        p = np.minimum(self._match(xs), [len(x) - n for x in xs])  # [B]
        # Step 2: new tokens and nodes padded to T, with each row's positions, cache slots and mask
        x, slots, mask, s, m = padded_rows(params, xs, p, trees, self.slots)  # [B*T, C]
        B, T = len(xs), len(x) // len(xs)
        # Step 3: one forward pass over all rows; every linear is one GEMM over B*T rows
        with threads_for(B * T, xp):  # many rows: the BLAS policy's wide count (gpt2/backend.py)
            for layer, block in enumerate(params["blocks"]):
                x = x + mha_rows(layer_norm(x, **block["ln_1"]), **block["attn"], n_head=self.model.hparams["n_head"],
                                 k_cache=self.k[layer, :B], v_cache=self.v[layer, :B], slots=slots, mask=mask)
                x = x + ffn(layer_norm(x, **block["ln_2"]), **block["mlp"])  # [B*T, C]
        # Step 4: the rows asked for: each row's last n real tokens, then its nodes
        read = np.concatenate([b * T + np.arange(s[b] - n, s[b] + m[b]) for b in range(B)])  # [sum of (n + m_b)]
        h = layer_norm(x[xp.asarray(read)], **params["ln_f"])  # [sum of (n + m_b), C]
        self._ran(xs, int((s + m).sum()))
        return h
