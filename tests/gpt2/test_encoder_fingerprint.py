"""One tokenizer: its fingerprint is the vocabulary and merges (not the files), the n-gram file
carries the tokenizer it was counted with, and check_tokenizers names both folders."""
import json
import shutil

import numpy as np
import pytest

from gpt2.load import ASSETS

from tests.support.addon_folders import swapped_vocab

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A model of another tokenizer: tiny-draft with two ids swapped."""
    root = tmp_path_factory.mktemp("tokenizers")
    swapped_vocab(ASSETS / "tiny-draft", root / "other-tokenizer")
    return root


def test_tokenizer_fingerprint_is_the_vocabulary_and_merges_not_the_files(folder, tmp_path):
    from gpt2.encoder import load_encoder

    target = load_encoder(TARGET).fingerprint
    assert load_encoder(ASSETS / "tiny-draft").fingerprint == target  # one tokenizer, two folders
    assert load_encoder(folder / "other-tokenizer").fingerprint != target  # two ids swapped
    # the same tokenizer in OpenAI's file names, another key order and spacing: the same fingerprint
    vocab = json.loads((TARGET / "vocab.json").read_text(encoding="utf-8"))
    reordered = json.dumps(dict(reversed(vocab.items())), indent=2)
    (tmp_path / "encoder.json").write_text(reordered, encoding="utf-8")
    shutil.copy(TARGET / "merges.txt", tmp_path / "vocab.bpe")
    assert load_encoder(tmp_path).fingerprint == target
    merges = (TARGET / "merges.txt").read_text(encoding="utf-8").split("\n")
    body = [line for line in merges if line.strip() and not line.startswith("#")]
    swapped = "\n".join(body[1:2] + body[:1] + body[2:])  # two merges' ranks swapped
    (tmp_path / "vocab.bpe").write_text(swapped, encoding="utf-8")
    assert load_encoder(tmp_path).fingerprint != target


def test_the_ngram_file_carries_the_tokenizer_it_was_counted_with(tmp_path):
    from gpt2.encoder import load_encoder
    from gpt2.load import load_model
    from gpt2.ngram import NGram
    from gpt2.train.ngram import main as build

    fingerprint = load_encoder(TARGET).fingerprint
    assert NGram.load(ASSETS / "ngram.safetensors").tokenizer == fingerprint  # in the shipped file
    assert load_model("ngram")[0].tokenizer == fingerprint
    data = tmp_path / "data"
    data.mkdir()
    np.arange(200, dtype=np.uint16).tofile(data / "train.bin")
    (data / "meta.json").write_text(json.dumps({"n_vocab": 300, "tokenizer": "ab" * 32}))
    build(data, tmp_path / "n.safetensors", order=2, min_count=1)
    assert NGram.load(tmp_path / "n.safetensors").tokenizer == "ab" * 32
    (data / "meta.json").write_text(json.dumps({"n_vocab": 300}))  # data made before the record
    build(data, tmp_path / "old.safetensors", order=2, min_count=1)
    assert NGram.load(tmp_path / "old.safetensors").tokenizer is None


def test_check_tokenizers_names_both_folders_and_passes_one_tokenizer(folder):
    from gpt2.load import check_tokenizers, load_model

    target, draft = load_model("tiny-target")[0], load_model("tiny-draft")[0]
    check_tokenizers(draft, target, "tiny-draft", "tiny-target")
    check_tokenizers(load_model("ngram")[0], target, "ngram", "tiny-target")
    other = load_model(str(folder / "other-tokenizer"))[0]
    with pytest.raises(ValueError, match=r"other-tokenizer.*tiny-target.*different tokenizers"):
        check_tokenizers(other, target, str(folder / "other-tokenizer"), "tiny-target")
