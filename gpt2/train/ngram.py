"""Count the n-grams of a token file into gpt2/ngram.py's NGram draft (Witten-Bell).

    python -m gpt2.train.ngram --data data --out gpt2/assets/ngram.safetensors --order 3
"""
from pathlib import Path

import numpy as np

from picospec_cli import Option
from gpt2.ngram import NGram


def count_ngrams(tokens, n_vocab, order=4, min_count=2):
    """tokens [n] -> their NGram: the add-one unigram law and, per context length k = 1..order-1,
    sorted context keys, CSR offsets, next tokens and counts.
    Example: [0, 1, 0, 1, 0, 2], order=2, min_count=1 -> after 0 come 1 (twice) and 2."""
    tokens = np.asarray(tokens, dtype=np.int64)  # [n]
    counts = np.bincount(tokens, minlength=n_vocab) + 1  # [V]
    unigram = (counts / counts.sum()).astype(np.float32)
    tables = []
    for k in range(1, order):  # context length k
        key = np.zeros(len(tokens) - k, dtype=np.int64)  # [n - k]
        for j in range(k):
            key = key * n_vocab + tokens[j:len(tokens) - k + j]
        # sorted by (context, next)
        pairs, c = np.unique(key * n_vocab + tokens[k:], return_counts=True)  # [n_pairs] each
        if k == order - 1 and min_count > 1:
            pairs, c = pairs[c >= min_count], c[c >= min_count]
        ctx = pairs // n_vocab
        keys, starts = np.unique(ctx, return_index=True)  # [n_contexts] each
        tables.append({"keys": keys, "offsets": np.append(starts, len(ctx)).astype(np.int64),
                       "next": (pairs % n_vocab).astype(np.uint16), "counts": c.astype(np.uint32)})
    return NGram(unigram, tables, n_vocab)


def is_ngram(path):  # -> whether path holds an n-gram table this command wrote
    from gpt2.weights import read_header

    try:
        meta = read_header(path)[0].get("__metadata__", {})
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "order" in meta and "n_vocab" in meta


def main(data, out, order=4, min_count=2, overwrite=False):
    """Count DATA/train.bin's n-grams (uint16 ids, gpt2.train.corpus) into OUT (safetensors); an
    OUT that holds another kind of file (a typo for data/train.bin) is kept unless --overwrite."""
    from gpt2.train.corpus import meta_string
    from gpt2.train.gpt2 import check_ids, read_n_vocab

    data = Path(data)
    if Path(out).exists() and not overwrite and not is_ngram(out):
        raise ValueError(f"--out {out} already holds a file that is not an n-gram table: give "
                         f"another file name, or --overwrite to replace it")
    # an integer from 1 to 65536, else one line naming the file
    n_vocab = read_n_vocab(data / "meta.json")
    size = (data / "train.bin").stat().st_size
    if size % 2:
        raise ValueError(f"--data {data}: train.bin, {size} bytes, is not a file of uint16 token "
                         f"ids (from `python -m gpt2.train.corpus`)")
    n_tokens = size // 2
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
    model = count_ngrams(tokens, n_vocab, order, min_count)
    model.tokenizer = meta_string(data / "meta.json")  # checked against a target's tokenizer
    model.save(out)  # written to a temporary name, then renamed
    print(f"order {order}: {sum(len(t['next']) for t in model.tables)} n-grams, "
          f"{Path(out).stat().st_size / 1e6:.1f} MB")


def has_data(folder):  # -> None, or which of the files this command reads is missing
    missing = [name for name in ("train.bin", "meta.json") if not (Path(folder) / name).is_file()]
    if missing:
        return (f"has no {' or '.join(missing)}: make them with python -m gpt2.train.corpus --out "
                f"{folder}")


OPTIONS = [
    Option("data", "dir", None,
           "folder with train.bin and meta.json (from python -m gpt2.train.corpus)", check=has_data,
           required=True),
    Option("out", "out", None, "the n-gram file to write (safetensors)", required=True),
    Option("order", int, 4, "n: the longest n-gram counted (context of n - 1 tokens)", low=1,
           high=8),
    Option("min_count", int, 2, "drop n-grams of the highest order seen fewer times than this",
           low=1),
    Option("overwrite", bool, False,
           "replace an --out that holds a file other than an n-gram table"),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
