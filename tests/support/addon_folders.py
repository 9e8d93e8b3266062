"""Copies of the shipped add-on folders and models as a user's mistakes make them."""
import json
import shutil


def without_kind(src, dst, name="heads.json"):
    """A copy of an add-on folder as its trainer wrote it before configs declared their kind."""
    shutil.copytree(src, dst)
    config = json.loads((dst / name).read_text())
    config.pop("kind")
    (dst / name).write_text(json.dumps(config))


def swapped_vocab(src, dst):
    """A copy of a model whose vocab.json maps two ids to each other's strings: the same size,
    another tokenizer."""
    shutil.copytree(src, dst)
    vocab = json.loads((dst / "vocab.json").read_text(encoding="utf-8"))
    by_id = {i: s for s, i in vocab.items()}
    vocab[by_id[300]], vocab[by_id[301]] = 301, 300
    (dst / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
