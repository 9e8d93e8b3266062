"""EAGLE's draft head for B sequences at once: gpt2/eagle.py's EagleHead, batched the way gpt2/batch_engine.py batches
the model (one cache per row, ragged rows padded into one pass). The draft contract of picospec/eagle.py's batched
form:

    head(bs, xs, Fs, trees) -> [logits [1 + m, V] for each row called]
"""
import numpy as np

from gpt2.backend import threads_for
from gpt2.batch_engine import mha_rows
from gpt2.eagle import next_wave
from gpt2.engine import common_prefix_length
from gpt2.model import ffn, layer_norm, linear


class BatchEagleHead:
    """`rows` EAGLE draft heads at once (gpt2/eagle.py's EagleHead, its weights shared), each row with its own cache:

        head(bs, xs, Fs, trees) -> [logits [1 + m, V] for each row]

    bs: the rows called (any subset, by index: a row keeps its cache whether or not it is called); xs[i], Fs[i] and
    trees[i] = (tokens, parents) are what EagleHead(x, F, tokens, parents) takes, and row i of the answer is what it
    gives. Every call runs, for all rows in one padded pass per wave, what changed since that row's last call: first
    each row's new context pairs (after the longest common prefix with the context it holds), then the new tree nodes
    a level (wave) at a time, a node fed its parent's guessed feature. The head has no position embedding, so a row's
    items only need their cache slots (context pairs, then tree nodes in node order) and masks (causal over the
    context; a node sees the context, its ancestors and itself). Shapes: B rows in a pass, T items per row (padded),
    C n_embd, H heads, D = C // H, S slots per row, V n_vocab.
    """

    @staticmethod
    def row_bytes(head, tokens):
        """An upper bound on the bytes one row takes: its cache (2 x S x C numbers) and the
        activations of a pass of `tokens` items (features, the block's 16 C, attention over S
        slots per head, logits [V])."""
        C, H, V, S = head.wte.shape[1], head.n_head, head.wte.shape[0], head.cache.n_ctx + 1
        return 4 * (2 * S * C + min(tokens, S) * (16 * C + H * S + 3 * V))

    def __init__(self, head, rows):
        self.head, self.rows = head, rows
        C, H = head.wte.shape[1], head.n_head
        self.slots = head.cache.n_ctx + 1  # the head's capacity, and a spare slot where far padding writes
        self.k = np.zeros((rows, H, self.slots, C // H), dtype=np.float32)  # [R, H, S, D]
        self.v = np.zeros((rows, H, self.slots, C // H), dtype=np.float32)
        self.calls = 0  # padded passes of the head
        self.reset()

    n_vocab = property(lambda self: self.head.n_vocab)
    accuracy = property(lambda self: getattr(self.head, "accuracy", None))

    def reset(self):
        self.context = [[] for _ in range(self.rows)]  # the tokens x each row's context pairs come from
        self.tree = [[] for _ in range(self.rows)]  # the (token, parent) nodes held after the context
        self.g = [[] for _ in range(self.rows)]  # their guessed features [C], in node order
        self.logits = [[] for _ in range(self.rows)]  # their laws [V]
        self.g0, self.logits0 = [None] * self.rows, [None] * self.rows  # the last context pair's

    def _pass(self, items, last_only=False):
        """items: {row: (f [n, C], tokens [n], first slot, mask [n, n_kv])} -> {row: (g [n, C], logits [n or 1, V])},
        the laws from ONE product with the LM head over every row's items (or its last item only)."""
        bs = list(items)
        T, n_kv = max(len(items[b][1]) for b in bs), max(items[b][3].shape[1] for b in bs)
        C = self.head.wte.shape[1]
        f, tokens = np.zeros((len(bs), T, C), np.float32), np.zeros((len(bs), T), np.int64)  # [B, T, C], [B, T]
        at = np.zeros((len(bs), T), np.int64)  # [B, T] the slot of each item (padding: past the row's end)
        mask = np.zeros((len(bs), T, n_kv), bool)  # [B, T, n_kv]
        for i, b in enumerate(bs):
            fb, tb, start, mb = items[b]
            f[i, :len(tb)], tokens[i, :len(tb)] = fb, tb
            at[i] = np.minimum(start + np.arange(T), self.slots - 1)
            mask[i, :len(tb), :mb.shape[1]] = mb
            mask[i, len(tb):, 0] = True  # padding queries see one slot (their outputs are never read)
        params = self.head.params
        x = np.concatenate([self.head.wte[tokens], f], -1).reshape(len(bs) * T, 2 * C)  # [B*T, 2C]
        block = params["block"]
        with threads_for(len(bs) * T):  # many rows: the BLAS policy's wide count (gpt2/backend.py)
            x = linear(x, **params["fc"])  # [B*T, C]
            x = x + mha_rows(layer_norm(x, **block["ln_1"]), **block["attn"], n_head=self.head.n_head,
                             k_cache=self.k, v_cache=self.v, slots=at, mask=mask[:, None], rows=np.array(bs))
            x = x + ffn(layer_norm(x, **block["ln_2"]), **block["mlp"])  # [B*T, C]
        self.calls += 1
        g = x.reshape(len(bs), T, C)
        g = [g[i, :len(items[b][1])] for i, b in enumerate(bs)]  # per row [n, C]
        h = np.concatenate([h[-1:] if last_only else h for h in g])  # [sum of n (or B), C]
        with threads_for(len(h)):
            logits = h @ self.head.lm_head  # [sum of n (or B), V]
        ends = np.cumsum([1 if last_only else len(h) for h in g])[:-1]
        return {b: (h, z) for b, h, z in zip(bs, g, np.split(logits, ends))}

    def __call__(self, bs, xs, Fs, trees):
        if not (len(bs) == len(xs) == len(Fs) == len(trees)) or any(not 0 <= b < self.rows for b in bs):
            raise ValueError(f"this batched head holds {self.rows} rows; call it with one row index, x, F and tree "
                             f"each")
        # Step 1: each row's context pairs after its common prefix (pair j is valid while x[:j + 2] is unchanged)
        items = {}
        for b, x, F in zip(bs, xs, Fs):
            L = len(x)
            if L < 2 or len(F) != L - 1:
                raise ValueError(f"the EAGLE head needs x of at least 2 tokens and one feature per token but the "
                                 f"last; got {L} tokens and {len(F)} features")
            if list(x) != self.context[b]:
                keep = min(max(common_prefix_length(self.context[b], x) - 1, 0), L - 2)  # always rerun the last pair
                n = L - 1 - keep
                f = np.stack([np.asarray(F[j], np.float32) for j in range(keep, L - 1)])  # [n, C]
                items[b] = (f, np.asarray(x[keep + 1:L]), keep, np.tril(np.ones((n, keep + n), bool), k=keep))
                self.context[b], self.tree[b], self.g[b], self.logits[b] = list(x), [], [], []
        if items:
            for b, (g, logits) in self._pass(items, last_only=True).items():
                self.g0[b], self.logits0[b] = g[-1], logits[-1]  # [C], [V]
        # Step 2: each row's tree nodes after the part equal to its last call's, a wave of new nodes per pass
        nodes = {b: [(int(t), int(p)) for t, p in zip(*tree)] for b, tree in zip(bs, trees)}
        for b in bs:
            same = common_prefix_length(self.tree[b], nodes[b])
            self.tree[b], self.g[b], self.logits[b] = self.tree[b][:same], self.g[b][:same], self.logits[b][:same]
        while True:
            items, waves = {}, {}
            for b in bs:
                start, n_context = len(self.tree[b]), len(self.context[b]) - 1
                if start == len(nodes[b]):
                    continue
                wave, mask = next_wave(nodes[b], start, n_context)  # [w], [w, n_kv]
                f = np.stack([self.g0[b] if nodes[b][i][1] < 0 else self.g[b][nodes[b][i][1]] for i in wave])
                items[b] = (f, np.asarray([nodes[b][i][0] for i in wave]), n_context + start, mask)
                waves[b] = wave
            if not items:
                break
            for b, (g, logits) in self._pass(items).items():
                self.tree[b] += [nodes[b][i] for i in waves[b]]
                self.g[b] += list(g)
                self.logits[b] += list(logits)
        return [np.stack([self.logits0[b]] + self.logits[b][:len(nodes[b])]) for b in bs]  # [1 + m, V] each
