"""The model contract on a KV cache, for B >= 1 sequences at once, with the calls tree methods need:

    model(x, n=1) -> probs [n, V]                        GPT2: one sequence (host NumPy, float32)
    batch(xs, n=1) -> probs [B, n, V]                    BatchGPT2: B sequences of any lengths
    model.tree(x, tokens, parents) -> logits [1 + m, V]  batched: tree(xs, trees), B arrays
    model.accept(path)                                   the cache keeps x, then path's nodes

Row i is the law after x[:len(x) - n + i + 1]; a call reuses the cached prefix it shares with x (an
algorithm sees a function, never the cache). Tree node i holds tokens[i] below parents[i] (-1: x's
last token) at position len(x) - 1 + depth, sees the prefix, its ancestors and itself; row 1 + i
is the law after its path. Shapes: B rows, T tokens per row, m nodes, C n_embd, H n_head, V n_vocab,
S slots per row.
"""
import numpy as np

from gpt2.backend import aligned, get_xp, to_numpy, tree_map
from gpt2.cache import KVCache
from gpt2.fast import Choices, build
from gpt2.fast.static import StaticStep
from gpt2.model import causal_mask, gpt2_hidden

TREE_SLOTS = 256  # cache slots beyond n_ctx for tree nodes
NO_TREE = [([], [])]  # one row's tree in a plain call: no nodes
KEEP = 16  # a row parting from a sequence only in its last KEEP tokens holds it (drafts are fewer)


def common_prefix_length(a, b):
    """Example: common_prefix_length([1, 2, 3, 4], [1, 2, 5]) -> 2."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # one extends the other (the usual call): a list comparison runs in C
        return n
    # else they usually part within the last few tokens
    i = n - 16 if n > 16 and a[:n - 16] == b[:n - 16] else 0
    while a[i] == b[i]:
        i += 1
    return i


# -> [m, m] bool: node i sees node j when j is i or one of its ancestors
def tree_mask(parents, xp):
    m = len(parents)
    mask = np.eye(m, dtype=bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]
    return xp.asarray(mask)  # [m, m]


def tree_depths(parents):  # depth of each node, 1 for the children of the prefix's last token
    depths = []
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"tree node {i} has parent {parent}: a parent must come before its "
                             f"child (or be -1)")
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return depths


def check(x, n, extra, n_ctx):
    if len(x) == 0:
        raise ValueError("the prompt is empty: give at least one token")
    if not 1 <= n <= len(x):
        raise ValueError(f"n must be between 1 and len(x) = {len(x)}; got {n}")
    if len(x) + extra > n_ctx:
        raise ValueError(f"{len(x) + extra} tokens do not fit the model's context window of "
                         f"{n_ctx}")


def row_layout(xs, p, trees, n_slots, n_ctx, xp, pad_rows=1):
    """Row b runs xs[b][p_b:] then trees[b]'s nodes, padded to T -> {ids [B, T], positions [B, T]
    or [T], slots [B, T] or None, mask [B, 1, T, n_kv] or None, n_kv, s [B], m [B], p0}."""
    s = [len(x) - pb for x, pb in zip(xs, p)]
    m = [len(tokens) for tokens, _ in trees]
    B, p0 = len(xs), p[0]
    if not any(m) and min(p) == max(p) and min(s) == max(s) and (s[0] == 1 or pad_rows == 1):
        T = s[0]  # the plain causal pass: every row runs T tokens after p0: ids [B, T]
        return {"ids": xp.asarray([x[p0:] for x in xs]), "positions": xp.arange(p0, p0 + T),
                "slots": None, "mask": causal_mask(T, p0, xp) if T > 1 else None,
                "n_kv": p0 + T, "s": s, "m": m, "p0": p0}
    T = max(sb + mb for sb, mb in zip(s, m))
    pad = -T % pad_rows if T > 1 else 0
    pad = pad if p0 + T + pad <= n_slots - 1 else 0
    T += pad
    n_kv = max(pb + sb + mb for pb, sb, mb in zip(p, s, m)) + pad
    same = min(p) == max(p) and p0 + T <= n_slots
    out = {"slots": None, "n_kv": n_kv, "s": s, "m": m, "p0": p0}
    ids = np.zeros((B, T), dtype=np.int64)  # [B, T]
    for b, (x, (tokens, _)) in enumerate(zip(xs, trees)):
        ids[b, :s[b] + m[b]] = x[p[b]:] + tokens
    out["ids"] = xp.asarray(ids)
    # [B, T]: slot of each new token (of padding: past the row's end)
    at = np.asarray(p)[:, None] + np.arange(T)
    positions = at.copy()  # [B, T]
    mask = np.arange(n_kv) <= at[:, :, None]  # [B, T, n_kv]: causal over the slots
    for b, (x, (_, parents)) in enumerate(zip(xs, trees)):
        # a node sees the prefix, its ancestors and itself: not the slots of the nodes before it
        if m[b]:
            nodes = slice(s[b], s[b] + m[b])
            positions[b, nodes] = len(x) - 1 + np.array(tree_depths(parents))  # [m_b]
            mask[b, nodes, len(x):len(x) + m[b]] = tree_mask(parents, np)  # [m_b, m_b]
    # positions [B, T], mask [B, 1, T, n_kv], slots [B, T]
    out.update(positions=xp.asarray(np.minimum(positions, n_ctx - 1)),
               mask=xp.asarray(mask)[:, None],
               slots=None if same else xp.asarray(np.minimum(at, n_slots - 1)))
    return out


def row_bytes(hparams, tree_slots, tokens, itemsize=4):
    """Upper bound on one row's bytes: its KV cache and a pass of `tokens` tokens."""
    L, C, H, V = hparams["n_layer"], hparams["n_embd"], hparams["n_head"], hparams["n_vocab"]
    S = hparams["n_ctx"] + tree_slots + 1
    T = min(tokens, S)
    return itemsize * (2 * L * S * C + T * (16 * C + H * S + 3 * V))


def n_params(h):  # weight matrices (biases and norms left out): what the policies size by
    C = h["n_embd"]
    return h["n_vocab"] * C + h["n_ctx"] * C + 12 * h["n_layer"] * C**2


class RowCaches:
    """A KV cache row per sequence and the tokens it holds; _match(xs) gives each its row."""

    def __init__(self, hparams, rows, xp, tree_slots, plan, dtype="float32"):
        self.hparams, self.rows, self.xp, self.plan = hparams, rows, xp, plan
        L, H, D = hparams["n_layer"], hparams["n_head"], hparams["n_embd"] // hparams["n_head"]
        # the slots: the window, tree_slots for the nodes of a tree near its end, and one spare slot
        # where padding whose slot would fall past them writes
        self.slots = hparams["n_ctx"] + tree_slots + 1
        self.cache = KVCache(L, H, self.slots, D, xp, dtype, rows=rows)  # [L, B, H, S, D]
        # what each cache row holds (a tree's nodes are not listed)
        self.tokens = [[] for _ in range(rows)]
        self.active = rows  # sequences in the last call
        self.calls = 0  # forward passes
        self.tokens_run = 0  # real (not padding) tokens pushed through them

    def reset(self):
        self.tokens, self.active = [[] for _ in range(self.rows)], self.rows

    # -> cached prefix length of each sequence, after moving rows so that sequence b is row b
    def _match(self, xs):
        # Rows keep their order and only leave the batch (picospec/batched/ drops finished rows), so
        # a sequence's row is one of the next gone + 1 rows (gone: rows that left since the last
        # call): the first that parts from it only in its last KEEP tokens, else the one sharing the
        # longest prefix. Any choice is correct; this one reuses most.
        if self.rows == 1:
            return [common_prefix_length(self.tokens[0], xs[0])]
        gone, r, order, prefix = max(0, self.active - len(xs)), 0, [], []
        for x in xs:
            candidates = []  # (row, prefix it shares with x)
            for row in range(r, r + gone + 1):
                c = common_prefix_length(self.tokens[row], x)
                candidates.append((row, c))
                # the row parts from x only in its last KEEP tokens: it holds x
                if len(self.tokens[row]) - c <= KEEP:
                    break
            row, c = (candidates[-1] if len(self.tokens[row]) - c <= KEEP
                      else max(candidates, key=lambda rc: rc[1]))
            gone, r = gone - (row - r), row + 1
            order.append(row)
            prefix.append(c)
        # a sequence left the batch (or the order changed): move rows up
        if order != list(range(len(xs))):
            used = set(order)
            self._move(order + [r for r in range(self.rows) if r not in used])
        self.active = len(xs)
        return prefix

    def _move(self, order):  # row b takes what row order[b] held (order: a permutation of the rows)
        self.cache.move(order, max(len(t) for t in self.tokens) + 1)
        self.tokens = [self.tokens[r] for r in order]

    # after a forward pass that ran `new` real tokens, the caches' rows hold xs
    def _ran(self, xs, new):
        self.tokens[:len(xs)] = xs
        self.calls += 1
        self.tokens_run += new

    # run() after pointing the cache at a row_layout's slots -> its result
    def _pass(self, rows, run):
        if rows["slots"] is None:  # every row writes after the same prefix: plain slices
            self.cache.n = rows["p0"]
        self.cache.at(rows["slots"], rows["n_kv"])
        B, T = rows["ids"].shape
        with self.plan.threads.scope(B * T):  # many rows: the wide count (gpt2/fast/policy.py)
            return run()


# hidden [B, T, C] -> [sum of (n + m_b), C]: each row's last n tokens, then its nodes
def read_rows(h, s, m, n, xp):
    if len(s) == 1:
        return h[0, s[0] - n:s[0] + m[0]]
    T = h.shape[1]  # read: [sum of (n + m_b)] indices into the [B * T, C] rows
    read = np.concatenate([b * T + np.arange(s[b] - n, s[b] + m[b]) for b in range(len(s))])
    return h.reshape(-1, h.shape[-1])[xp.asarray(read)]


class BatchGPT2(RowCaches):
    """`rows` sequences on a GPT2's weights (shared), a cache row each."""

    def __init__(self, model, rows, tree_slots=TREE_SLOTS, pad_rows=1):
        super().__init__(model.hparams, rows, model.xp, tree_slots, model.plan)
        self.model, self.pad_rows = model, pad_rows
        self.static = None  # or the static-shape step's buffers (gpt2/fast/static.py)
        if model.plan.static:  # on a GPU, each pass replayed as a CUDA graph
            self.static = StaticStep(rows, self.slots, self.n_ctx, self.hparams["n_embd"], self.xp,
                                     graphs=self.xp is not np)
        self._trees = None  # the token lists of the last tree() call, for accept()

    n_vocab = property(lambda self: self.model.n_vocab)
    n_ctx = property(lambda self: self.model.n_ctx)
    n_params = property(lambda self: self.model.n_params)

    def __call__(self, xs, n=1):  # -> probs [B, n, V]
        return self.logits(xs, n, probs=True)

    def logits(self, xs, n=1, hidden=False, probs=False):
        """Logits or probs [B, n, V] after each xs[b]'s last n prefixes; hidden: + [B, n, C] (a
        tuple of block indices: + those blocks' outputs [B, n, len(hidden) C], see taps_of)."""
        if not 1 <= len(xs) <= self.rows:
            raise ValueError(f"this batched engine holds {self.rows} rows; got {len(xs)} sequences")
        for x in xs:
            check(x, n, 0, self.n_ctx)
        taps = self.taps_of(hidden)
        h = self._forward([list(x) for x in xs], n, NO_TREE * len(xs), taps)  # [B * n, C + ...]
        logits = self._head(h, probs).reshape(len(xs), n, -1)  # [B, n, V]
        return (logits, self._hidden(h, taps).reshape(len(xs), n, -1)) if hidden else logits

    def tree(self, xs, trees, hidden=False, probs=False):
        """Each xs[b] and trees[b] = (tokens, parents) in one pass -> B arrays [1 + m_b, V] (and
        hidden [1 + m_b, C])."""
        if not 1 <= len(xs) <= self.rows or len(trees) != len(xs):
            raise ValueError(f"this batched engine holds {self.rows} rows and tree() takes one "
                             f"tree per sequence; got {len(xs)} sequences and {len(trees)} trees")
        for x, (tokens, parents) in zip(xs, trees):
            if len(tokens) != len(parents):
                raise ValueError(f"tree: {len(tokens)} tokens but {len(parents)} parents")
            check(x, 1, max(tree_depths(parents), default=0), self.n_ctx)
            if len(x) + len(tokens) > self.slots - 1:
                raise ValueError(f"a tree of {len(tokens)} nodes after {len(x)} tokens needs more "
                                 f"than the cache's {self.slots - 1} slots: use a smaller tree")
        trees = [(list(tokens), list(parents)) for tokens, parents in trees]
        taps = self.taps_of(hidden)
        h = self._forward([list(x) for x in xs], 1, trees, taps)  # [sum of (1 + m_b), C + ...]
        logits = self._head(h, probs)  # every row's nodes: [sum of (1 + m_b), V]
        ends = np.cumsum([1 + len(tokens) for tokens, _ in trees])[:-1]
        self._trees = [tokens for tokens, _ in trees]
        out = np.split(logits, ends)  # B arrays [1 + m_b, V]
        return (out, np.split(self._hidden(h, taps), ends)) if hidden else out

    def taps_of(self, hidden):
        """hidden=True -> () (the last hidden state); a tuple of block indices -> itself."""
        if hidden is True or hidden is False:
            return ()
        taps, L = tuple(hidden), self.hparams["n_layer"]
        if not taps or any(type(i) is not int or not 0 <= i < L for i in taps):
            raise ValueError(f"hidden= names blocks 0 to {L - 1} to read; got {hidden!r}")
        return taps

    def _hidden(self, h, taps):  # [r, (1 + k) C] -> the final hidden state, or the tapped blocks'
        C = self.hparams["n_embd"]
        return to_numpy(h[:, C:] if taps else h)

    def accept(self, paths):
        """After tree(): row b's cache keeps xs[b], then the nodes paths[b] (increasing)."""
        if self._trees is None or len(paths) != len(self._trees):
            raise ValueError("accept() takes one path per row of the tree() call just before it")
        for b, (path, tokens) in enumerate(zip(paths, self._trees)):
            n = len(self.tokens[b])  # the path moves up behind the prefix
            self.cache.keep(list(range(n)) + [n + i for i in path], row=b)
            self.tokens[b] = self.tokens[b] + [tokens[i] for i in path]
        self._trees = None

    # -> hidden states [sum of (n + m_b), C]: each row's last n tokens, then its tree's m_b nodes
    def _forward(self, xs, n, trees, taps=()):
        params, ops = self.model.params, self.plan.ops
        # Step 1: each sequence's reusable prefix p_b (always running its last n tokens)
        p = [min(c, len(x) - n) for c, x in zip(self._match(xs), xs)]  # [B]
        # Step 2: new tokens and nodes padded to T, with each row's positions, cache slots and mask
        xp = np if self.static else self.xp  # the static step copies a host layout into its buffers
        rows = row_layout(xs, p, trees, self.slots, self.n_ctx, xp, self.pad_rows)
        # Step 3: one forward pass over all rows; every linear is one product over B*T rows
        def hidden(ids, positions, mask):  # [B, T] -> hidden [B, T, C]
            return gpt2_hidden(ids, **params, n_head=self.hparams["n_head"], positions=positions,
                               mask=mask, cache=self.cache, ops=ops, taps=taps)

        if self.static:  # the same pass in fixed buffers (gpt2/fast/static.py)
            width = (1 + len(taps)) * self.hparams["n_embd"]
            h = self._pass(rows, lambda: self.static(rows, self.cache, hidden, width))
        else:
            h = self._pass(rows, lambda: hidden(rows["ids"], rows["positions"], rows["mask"]))
        s, m = rows["s"], rows["m"]
        # (a one-row cache: its tokens and nodes, the padding forgotten)
        self.cache.n = p[0] + s[0] + m[0]
        self._ran(xs, sum(s) + sum(m))
        # Step 4: the rows asked for: each row's last n real tokens, then its nodes
        h = read_rows(h, s, m, n, self.xp)  # [sum of (n + m_b), C]
        return h.copy() if self.static else h  # (the static step's buffer is reused)

    def _head(self, h, probs):  # hidden [r, C] -> logits or probs [r, V] on the host
        ops = self.plan.ops
        h = h[:, :self.hparams["n_embd"]]  # (taps follow the last hidden state)
        with self.plan.threads.scope(h.shape[0]):
            logits = ops.matmul(h, self.plan.head)  # [r, C] @ [C, V]
        return to_numpy(ops.softmax(logits) if probs else logits)


class GPT2:
    """A GPT-2 behind the model contract, a one-row BatchGPT2; .plan: how its passes run."""

    def __init__(self, hparams, params, device="cpu", ops=None, **choices):
        self.hparams, self.device, self.xp = hparams, device, get_xp(device)
        # float32 on the device; on the host each weight on a cache line's boundary
        self.params = tree_map(lambda a: aligned(self.xp.asarray(a, dtype="float32")), params)
        self.choices = Choices(device, ops, **choices)  # what was asked, for engines beside it
        self.plan = build(self.params, self.n_params, self.choices)
        self.engine = BatchGPT2(self, 1, pad_rows=self.plan.pad_rows)

    n_vocab = property(lambda self: self.hparams["n_vocab"])
    n_ctx = property(lambda self: self.hparams["n_ctx"])
    cache = property(lambda self: self.engine.cache)
    # what the cache holds (a tree's nodes are not listed)
    tokens = property(lambda self: self.engine.tokens[0])
    # forward passes run: the cost measure of speculative decoding
    calls = property(lambda self: self.engine.calls)
    tokens_run = property(lambda self: self.engine.tokens_run)  # tokens pushed through those passes

    n_params = property(lambda self: n_params(self.hparams))

    def __call__(self, x, n=1):  # -> probs [n, n_vocab]
        return self.logits(x, n, probs=True)

    def logits(self, x, n=1, hidden=False, probs=False):
        """Logits (or probs) [n, V] after the last n prefixes of x; hidden: + [n, C] (block indices:
        + those blocks' outputs [n, len(hidden) C])."""
        check(x, n, 0, self.n_ctx)
        taps = self.engine.taps_of(hidden)
        h = self.engine._forward([list(x)], n, NO_TREE, taps)  # [n, C + ...]
        logits = self.engine._head(h, probs)  # [n, V]
        return (logits, self.engine._hidden(h, taps)) if hidden else logits

    def tree(self, x, tokens, parents, hidden=False, probs=False):
        """Prefix x and a token tree in one pass -> logits [1 + m, V]; hidden: + [1 + m, C] (or
        the tapped blocks' outputs, as logits says)."""
        if len(tokens) != len(parents):
            raise ValueError(f"tree: {len(tokens)} tokens but {len(parents)} parents")
        out = self.engine.tree([x], [(tokens, parents)], hidden, probs)
        return (out[0][0], out[1][0]) if hidden else out[0]

    def accept(self, path):
        """After tree(): the cache keeps x, then the nodes in `path` (increasing)."""
        self.engine.accept([path])

    def reset(self):
        self.engine.reset()
        self.engine.cache.n = 0
