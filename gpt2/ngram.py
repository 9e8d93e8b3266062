"""A count-based n-gram draft with Witten-Bell interpolation (Witten & Bell 1991; Chen & Goodman
1998, sec. 2.5): model(x, n=1) -> probs [n, V], a law over the whole vocabulary.

    P(w | h) = (c(h, w) + u(h) P(w | h')) / (c(h) + u(h))

h: the last k-1 tokens, h' one shorter, c counts, u(h) distinct tokens seen after h; the recursion
ends in add-one unigrams. Example: tokens [0, 1, 0, 1, 0, 2], V = 3, order 2: unigrams
(4, 3, 2) / 9; P(1 | 0) = (2 + 2 * 3/9) / (3 + 2) = 0.5333. Counting: gpt2/train/ngram.py.
"""
import numpy as np


class NGram:
    def __init__(self, unigram, tables, n_vocab, tokenizer=None):
        self.unigram = unigram  # [V] float32, add-one smoothed
        # one dict per context length 1 .. order-1: keys, offsets, next, counts
        self.tables = tables
        self.n_vocab = n_vocab
        self.n_ctx = 10**9  # no context window
        self.tokenizer = tokenizer  # fingerprint of the tokenizer it was counted with, if known

    @property
    def order(self):
        return len(self.tables) + 1

    def distribution(self, context):  # -> [V] float32: P(. | the last order-1 tokens of context)
        p = self.unigram.astype(np.float64)  # [V]: P(w), then P(w | h) for ever longer h
        for k, table in enumerate(self.tables, start=1):
            if len(context) < k:
                break
            key = 0  # h, the last k tokens, as a base-V number
            for t in context[-k:]:
                key = key * self.n_vocab + int(t)
            i = int(np.searchsorted(table["keys"], key))
            if i == len(table["keys"]) or table["keys"][i] != key:
                continue  # unseen context: keep the shorter context's law
            lo, hi = table["offsets"][i], table["offsets"][i + 1]
            c = table["counts"][lo:hi].astype(np.float64)  # [u(h)]: c(h, w) of each w seen after h
            total, distinct = c.sum(), hi - lo  # c(h), u(h)
            p = p * (distinct / (total + distinct))  # [V]: u(h) P(w | h') / (c(h) + u(h))
            p[table["next"][lo:hi]] += c / (total + distinct)  # + c(h, w) / (c(h) + u(h))
        return p.astype(np.float32)

    def __call__(self, x, n=1):  # -> probs [n, V], row i after x[:len(x) - n + i + 1]
        return np.stack([self.distribution(x[:len(x) - n + i + 1]) for i in range(n)])

    def save(self, path):
        from gpt2.weights import write_safetensors

        tensors = {"unigram": self.unigram}
        for k, table in enumerate(self.tables, start=1):
            tensors.update({f"{k}.{name}": a for name, a in table.items()})
        meta = {"n_vocab": self.n_vocab, "order": self.order}
        if self.tokenizer:  # what its ids mean (gpt2/encoder.py's fingerprint)
            meta["tokenizer"] = self.tokenizer
        write_safetensors(path, tensors, metadata=meta)

    @classmethod
    def load(cls, path):
        from gpt2.weights import read_header, read_safetensors

        header, _, _ = read_header(path)
        meta = header.get("__metadata__", {})
        tensors = read_safetensors(path)
        tables = [{name: tensors[f"{k}.{name}"] for name in ("keys", "offsets", "next", "counts")}
                  for k in range(1, int(meta["order"]))]
        return cls(tensors["unigram"], tables, int(meta["n_vocab"]), meta.get("tokenizer"))
