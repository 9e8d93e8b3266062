"""A preallocated KV cache: the keys and values of every token the model has already seen.

Shapes: n_layer, n_head, n_ctx (capacity), d = n_embd // n_head, n_seq (new tokens), n (tokens held).

Buffers are allocated once at full context length, so appending never copies what is already there.
Speculative decoding moves the end back and forth:
- `rollback(m)` forgets the last m tokens (rejected drafts);
- `keep(indices)` compacts the cache to the tokens at `indices` (an accepted path through a token tree).

Example: the cache holds a prefix of 3 tokens and a tree of 4 nodes (slots 3..6); the accepted path is nodes
0 and 2 -> keep([0, 1, 2, 3, 5]) leaves 5 tokens, the path's keys/values now in slots 3 and 4.
"""


class KVCache:
    def __init__(self, n_layer, n_head, n_ctx, d, xp, dtype="float32"):
        self.k = xp.zeros((n_layer, n_head, n_ctx, d), dtype=dtype)  # [n_layer, n_head, n_ctx, d]
        self.v = xp.zeros((n_layer, n_head, n_ctx, d), dtype=dtype)  # [n_layer, n_head, n_ctx, d]
        self.n = 0  # tokens held; the model advances it after a forward pass

    @property
    def n_ctx(self):
        return self.k.shape[2]

    def update(self, layer, k, v):  # [n_head, n_seq, d] x 2 -> [n_head, n + n_seq, d] x 2
        """Write the new tokens' keys and values after the n held ones; return all of them for attention."""
        end = self.n + k.shape[1]
        if end > self.n_ctx:
            raise ValueError(f"the KV cache holds at most {self.n_ctx} tokens (the context window); got {end}")
        self.k[layer, :, self.n:end] = k
        self.v[layer, :, self.n:end] = v
        return self.k[layer, :, :end], self.v[layer, :, :end]

    def rollback(self, m):
        """Forget the last m tokens."""
        if not 0 <= m <= self.n:
            raise ValueError(f"cannot roll back {m} tokens from a cache holding {self.n}")
        self.n -= m

    def keep(self, indices):
        """Keep only the tokens at `indices` (increasing slot numbers), moved to the front in that order."""
        idx = list(indices)
        if any(b <= a for a, b in zip(idx, idx[1:])) or (idx and not 0 <= idx[0] <= idx[-1] < self.n):
            raise ValueError(f"keep() needs increasing slots below {self.n}; got {idx}")
        s = 0  # slots 0..s-1 stay where they are (the prefix before a tree): move only what follows
        while s < len(idx) and idx[s] == s:
            s += 1
        moved = idx[s:]
        self.k[:, :, s:len(idx)] = self.k[:, :, moved]  # fancy indexing copies first, so overlapping moves are safe
        self.v[:, :, s:len(idx)] = self.v[:, :, moved]
        self.n = len(idx)
