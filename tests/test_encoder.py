"""The BPE tokenizer against tiktoken's GPT-2 encoding, built offline from the real vocabulary files."""
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gpt2.encoder import EOT, Encoder, apply_merges, bytes_to_unicode, load_encoder

GPT2_FILES = Path(__file__).resolve().parents[2] / "shared" / "gpt2-tokenizer"
needs_files = pytest.mark.skipif(not GPT2_FILES.exists(), reason="../shared/gpt2-tokenizer is absent")
TEXTS = ["Hello world!", "  multiple   spaces\n\n\ttabs and trailing   ", "emoji 😀 naïve café 日本語 ελληνικά",
         "def f(x):\n    return x**2  # square\n", "before<|endoftext|>after", "", "I'll say it's 're 've 'd 'm",
         "\u00a0\u2003x\r\n", "1234567890 3.14159 0xFF", "<|endoftext|><|endoftext|>", "a" * 300, "\U0001F600" * 5]


@pytest.fixture(scope="module")
def gpt2_encoder():
    return load_encoder(GPT2_FILES)


@pytest.fixture(scope="module")
def tiktoken_gpt2():
    tiktoken = pytest.importorskip("tiktoken")
    byte_decoder = {c: b for b, c in bytes_to_unicode().items()}
    vocab = json.loads((GPT2_FILES / "encoder.json").read_text())
    ranks = {bytes(byte_decoder[c] for c in tok): i for tok, i in vocab.items() if tok != EOT}
    pattern = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    return tiktoken.Encoding("gpt2-offline", pat_str=pattern, mergeable_ranks=ranks, special_tokens={EOT: vocab[EOT]})


@needs_files
@pytest.mark.parametrize("text", TEXTS)
def test_same_ids_as_tiktoken(gpt2_encoder, tiktoken_gpt2, text):
    ids = gpt2_encoder.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert gpt2_encoder.decode(ids) == text


@needs_files
def test_known_ids(gpt2_encoder):
    assert gpt2_encoder.encode("Hello world") == [15496, 995]  # GPT-2's well-known ids
    assert gpt2_encoder.eot == 50256 and gpt2_encoder.n_vocab == 50257


@needs_files
@given(st.text())
def test_round_trip(gpt2_encoder, text):
    assert gpt2_encoder.decode(gpt2_encoder.encode(text)) == text


@needs_files
def test_both_file_conventions(tmp_path, gpt2_encoder):
    shutil.copy(GPT2_FILES / "encoder.json", tmp_path / "vocab.json")
    shutil.copy(GPT2_FILES / "vocab.bpe", tmp_path / "merges.txt")
    assert load_encoder(tmp_path).encode(TEXTS[3]) == gpt2_encoder.encode(TEXTS[3])


def test_missing_files_error(tmp_path):
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(ValueError, match="no tokenizer found"):
        load_encoder(tmp_path)


def test_merges_by_hand():
    ranks = {("a", "b"): 0, ("ab", "c"): 1}
    assert apply_merges("abcab", ranks) == ["abc", "ab"]
    assert apply_merges("cba", ranks) == ["c", "b", "a"]
    assert bytes_to_unicode()[32] == "Ġ" and bytes_to_unicode()[33] == "!"


def test_tiny_vocabulary_by_hand():
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    vocab.update({"ab": 256, "abc": 257, EOT: 258})
    enc = Encoder(vocab, [("a", "b"), ("ab", "c")])
    assert enc.encode("abcab") == [257, 256]
    assert enc.encode("ab<|endoftext|>") == [256, 258]
    assert enc.decode([257, 258, 256]) == "abc<|endoftext|>ab"
