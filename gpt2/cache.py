"""A preallocated KV cache, a row per sequence: keys and values [n_layer, B, n_head, n_ctx, d].
A pass writes after the n tokens all rows hold, or at `slots` [B, n_seq]. Speculative decoding
moves the end:

- rollback(m) forgets the last m tokens (rejected drafts);
- keep(indices) compacts a row to the tokens at indices (an accepted path through a tree).
"""
from gpt2.backend import xp_of


class KVCache:
    def __init__(self, n_layer, n_head, n_ctx, d, xp, dtype="float32", rows=1):
        # keys and values: [n_layer, B, n_head, n_ctx, d] each
        self.k = xp.zeros((n_layer, rows, n_head, n_ctx, d), dtype=dtype)
        self.v = xp.zeros((n_layer, rows, n_head, n_ctx, d), dtype=dtype)
        # tokens every row holds; the forward advances it after a pass that writes after them
        self.n = 0
        # [B, n_seq] where each row writes instead (then it attends to slots 0 .. n_kv - 1)
        self.slots = None
        self.n_kv = 0
        self.rows = None  # which rows the B sequences of a pass at `slots` use (None: the first B)

    @property
    def n_ctx(self):  # slots per row: the window, and room for a tree where an engine adds it
        return self.k.shape[3]

    def advance(self, n_seq):
        """After a pass of n_seq tokens written after the n held: they are held too."""
        if self.slots is None:
            self.n += n_seq

    def at(self, slots, n_kv, rows=None):
        """Next passes write row b at slots[b] [n_seq] (None: after the n held)."""
        self.slots, self.n_kv, self.rows = slots, n_kv, rows

    def update(self, layer, k, v):  # [B, n_head, n_seq, d] x 2 -> [B, n_head, n_kv, d] x 2
        """Write the new keys and values; return all those they attend to."""
        B = k.shape[0]
        if self.slots is None:
            end = self.n + k.shape[2]
            if end > self.n_ctx:
                raise ValueError(f"the KV cache has {self.n_ctx} slots per row; {end} tokens do "
                                 f"not fit")
            self.k[layer, :B, :, self.n:end] = k
            self.v[layer, :B, :, self.n:end] = v
            return self.k[layer, :B, :, :end], self.v[layer, :B, :, :end]
        rows = xp_of(self.k).arange(B) if self.rows is None else self.rows  # [B]
        # each row at its own slots: [B, n_seq, ...]
        self.k[layer, rows[:, None], :, self.slots] = k.swapaxes(1, 2)
        self.v[layer, rows[:, None], :, self.slots] = v.swapaxes(1, 2)
        if self.rows is None:
            return self.k[layer, :B, :, :self.n_kv], self.v[layer, :B, :, :self.n_kv]
        return self.k[layer, self.rows, :, :self.n_kv], self.v[layer, self.rows, :, :self.n_kv]

    def rollback(self, m):
        """Forget the last m tokens."""
        if not 0 <= m <= self.n:
            raise ValueError(f"cannot roll back {m} tokens from a cache holding {self.n}")
        self.n -= m

    def keep(self, indices, row=0):
        """Keep a row's tokens at `indices` (increasing), moved to its front: prefix 3, nodes in
        slots 3..6, path nodes 0 and 2 -> keep([0, 1, 2, 3, 5])."""
        idx = list(indices)
        if (any(b <= a for a, b in zip(idx, idx[1:]))
                or (idx and not 0 <= idx[0] <= idx[-1] < self.n_ctx)):
            raise ValueError(f"keep() needs increasing slots below {self.n_ctx}; got {idx}")
        s = 0  # slots 0..s-1 stay where they are (the prefix before a tree): move only what follows
        while s < len(idx) and idx[s] == s:
            s += 1
        moved = idx[s:]
        k, v = self.k[:, row], self.v[:, row]  # [n_layer, n_head, n_ctx, d]
        # fancy indexing copies first, so overlapping moves are safe
        k[:, :, s:len(idx)] = k[:, :, moved]
        v[:, :, s:len(idx)] = v[:, :, moved]
        self.n = len(idx)

    def move(self, order, m):
        """Row b takes the first m slots of row order[b] (order: a permutation of the rows)."""
        moved = [b for b in range(len(order)) if order[b] != b]
        src = [order[b] for b in moved]
        # fancy indexing copies first: safe when rows swap
        self.k[:, moved, :, :m] = self.k[:, src, :, :m]
        self.v[:, moved, :, :m] = self.v[:, src, :, :m]
