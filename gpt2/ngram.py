"""A count-based n-gram draft model with Witten-Bell interpolation (Witten & Bell 1991; Chen &
Goodman 1998, sec. 2.5).

The survey seed lists n-gram models among the cheapest drafts. This one follows the model contract,
model(x, n=1) -> probs [n, n_vocab], with a real normalised distribution over the whole vocabulary
(speculative sampling needs the draft's probabilities to be the ones it samples from).

    P(w | h) = (c(h, w) + u(h) P(w | h')) / (c(h) + u(h))

h is the context of the last k-1 tokens, h' the context one token shorter, c counts, and u(h) the
number of distinct tokens seen after h. The recursion ends in the unigram law with add-one
smoothing, so every token has probability > 0. An unseen context has c(h) = u(h) = 0 and falls back
to P(w | h') unchanged.

Example (by hand): tokens [0, 1, 0, 1, 0, 2], V = 3, order 2. Unigram counts 3, 2, 1 -> add-one (4,
3, 2) / 9. After context 0: c(0, 1) = 2, c(0, 2) = 1, c(0) = 3, u(0) = 2 -> P(1 | 0) = (2 + 2 * 3/9)
/ (3 + 2) = 0.5333.

Storage, per order: sorted context keys (the context read as a base-V number), CSR offsets, the next
tokens and counts of each context. Contexts of the highest order that were seen once are pruned
(`min_count`) to keep the file small.
"""
from pathlib import Path

import numpy as np

from gpt2.cli import Option


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

    @classmethod
    def build(cls, tokens, n_vocab, order=4, min_count=2):
        tokens = np.asarray(tokens, dtype=np.int64)
        counts = np.bincount(tokens, minlength=n_vocab) + 1
        unigram = (counts / counts.sum()).astype(np.float32)
        tables = []
        for k in range(1, order):  # context length k
            key = np.zeros(len(tokens) - k, dtype=np.int64)
            for j in range(k):
                key = key * n_vocab + tokens[j:len(tokens) - k + j]
            # sorted by (context, next)
            pairs, c = np.unique(key * n_vocab + tokens[k:], return_counts=True)
            if k == order - 1 and min_count > 1:
                pairs, c = pairs[c >= min_count], c[c >= min_count]
            ctx = pairs // n_vocab
            keys, starts = np.unique(ctx, return_index=True)
            tables.append({"keys": keys, "offsets": np.append(starts, len(ctx)).astype(np.int64),
                           "next": (pairs % n_vocab).astype(np.uint16),
                           "counts": c.astype(np.uint32)})
        return cls(unigram, tables, n_vocab)

    def distribution(self, context):  # -> [V] float32: P(. | the last order-1 tokens of context)
        p = self.unigram.astype(np.float64)
        for k, table in enumerate(self.tables, start=1):
            if len(context) < k:
                break
            key = 0
            for t in context[-k:]:
                key = key * self.n_vocab + int(t)
            i = int(np.searchsorted(table["keys"], key))
            if i == len(table["keys"]) or table["keys"][i] != key:
                continue  # unseen context: keep the shorter context's law
            lo, hi = table["offsets"][i], table["offsets"][i + 1]
            c = table["counts"][lo:hi].astype(np.float64)
            total, distinct = c.sum(), hi - lo
            p = p * (distinct / (total + distinct))
            p[table["next"][lo:hi]] += c / (total + distinct)
        return p.astype(np.float32)

    def __call__(self, x, n=1):  # -> probs [n, V]
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


def main(data, out, order=4, min_count=2):
    """Build from DATA/train.bin (uint16 ids, see gpt2.corpus) and save to OUT (safetensors).

    Example: python -m gpt2.ngram --data data --out gpt2/assets/ngram.safetensors --order 3
    """
    from gpt2.train import check_ids, read_n_vocab

    data = Path(data)
    # an integer from 1 to 65536, else one line naming the file
    n_vocab = read_n_vocab(data / "meta.json")
    n_tokens = (data / "train.bin").stat().st_size // 2
    # a context and its next token are one int64 key, read as a base-n_vocab number
    if n_vocab ** order >= 2 ** 63:
        raise ValueError(f"--order {order} is too high for {n_vocab} tokens: the n-gram keys would "
                         f"overflow int64; use --order {int(63 / np.log2(n_vocab) - 1e-9)} or less")
    if n_tokens < order:
        raise ValueError(f"--data {data}: train.bin holds {n_tokens} tokens, fewer than --order "
                         f"{order}")
    tokens = np.fromfile(data / "train.bin", dtype=np.uint16)
    # meta.json must cover the ids: the table is [n_vocab]
    check_ids(tokens, n_vocab, f"--data {data}: train.bin")
    model = NGram.build(tokens, n_vocab, order, min_count)
    model.tokenizer = read_tokenizer(data / "meta.json")  # checked against a target's tokenizer
    model.save(out)  # written to a temporary name, then renamed
    print(f"order {order}: {sum(len(t['next']) for t in model.tables)} n-grams, "
          f"{Path(out).stat().st_size / 1e6:.1f} MB")


def read_tokenizer(path):
    """The tokenizer fingerprint gpt2.corpus recorded in meta.json, or None (data made before)."""
    import json

    try:
        value = json.loads(Path(path).read_text(encoding="utf-8")).get("tokenizer")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def has_data(folder):  # -> None, or which of the files this command reads is missing
    missing = [name for name in ("train.bin", "meta.json") if not (Path(folder) / name).is_file()]
    if missing:
        return f"has no {' or '.join(missing)}: make them with python -m gpt2.corpus --out {folder}"


OPTIONS = [
    Option("data", "dir", None, "folder with train.bin and meta.json (from python -m gpt2.corpus)",
           check=has_data, required=True),
    Option("out", "out", None, "the n-gram file to write (safetensors)", required=True),
    Option("order", int, 4, "n: the longest n-gram counted (context of n - 1 tokens)", low=1,
           high=8),
    Option("min_count", int, 2, "drop n-grams of the highest order seen fewer times than this",
           low=1),
]

if __name__ == "__main__":
    from gpt2.cli import command

    command(main, OPTIONS)
