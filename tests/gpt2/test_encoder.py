"""The BPE tokenizer against tiktoken's GPT-2 encoding, built offline from the real vocabulary files
(a test fixture in tests/fixtures/gpt2-tokenizer); broken tokenizer files give errors that name
them."""
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gpt2.encoder import EOT, Encoder, apply_merges, bytes_to_unicode, load_encoder

GPT2_FILES = Path(__file__).resolve().parents[1] / "fixtures" / "gpt2-tokenizer"
TEXTS = ["Hello world!", "  multiple   spaces\n\n\ttabs and trailing   ",
         "emoji 😀 naïve café 日本語 ελληνικά",
         "def f(x):\n    return x**2  # square\n", "before<|endoftext|>after", "",
         "I'll say it's 're 've 'd 'm",
         "\u00a0\u2003x\r\n", "1234567890 3.14159 0xFF", "<|endoftext|><|endoftext|>", "a" * 300,
         "\U0001F600" * 5]


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
    return tiktoken.Encoding("gpt2-offline", pat_str=pattern, mergeable_ranks=ranks,
                             special_tokens={EOT: vocab[EOT]})


@pytest.mark.parametrize("text", TEXTS)
def test_same_ids_as_tiktoken(gpt2_encoder, tiktoken_gpt2, text):
    ids = gpt2_encoder.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert gpt2_encoder.decode(ids) == text


def test_known_ids(gpt2_encoder):
    assert gpt2_encoder.encode("Hello world") == [15496, 995]  # GPT-2's well-known ids
    assert gpt2_encoder.eot == 50256 and gpt2_encoder.n_vocab == 50257


@given(st.text())
def test_round_trip(gpt2_encoder, text):
    assert gpt2_encoder.decode(gpt2_encoder.encode(text)) == text


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


def test_fixture_is_the_real_gpt2_vocabulary():
    readme = (GPT2_FILES / "README.md").read_text()
    hashes = dict(re.findall(r"^\| (\S+) \| [\d,]+ \| ([0-9a-f]{64}) \|$", readme, flags=re.M))
    assert set(hashes) == {"encoder.json", "vocab.bpe"}
    for name, digest in hashes.items():
        assert hashlib.sha256((GPT2_FILES / name).read_bytes()).hexdigest() == digest, name


BYTES = {c: b for b, c in bytes_to_unicode().items()}  # the 256 byte tokens, ids 0..255


def tiny_tokenizer(folder, vocab_name="vocab.json", merges_name="merges.txt", vocab=None,
                   merges="#version: 0.2\na b\nab c\n"):
    """The hand-made vocabulary above as files: the 256 bytes, "ab", "abc" and <|endoftext|>."""
    if vocab is None:
        vocab = {**BYTES, "ab": 256, "abc": 257, EOT: 258}
    (folder / vocab_name).write_text(vocab if isinstance(vocab, str) else json.dumps(vocab),
                                     encoding="utf-8")
    (folder / merges_name).write_bytes(merges if isinstance(merges, bytes)
                                       else merges.encode("utf-8"))
    return folder


@pytest.mark.parametrize("vocab_name, merges_name",
                         [("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")])
def test_tiny_tokenizer_files_load(tmp_path, vocab_name, merges_name):
    enc = load_encoder(tiny_tokenizer(tmp_path, vocab_name, merges_name))
    assert enc.encode("abcab") == [257, 256] and enc.n_vocab == 259


@pytest.mark.parametrize("vocab_name, merges_name",
                         [("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")])
@pytest.mark.parametrize("broken, vocab, merges, message", [
    ("vocab", '{"a": 1,', None, "not valid JSON"),  # cut short, as by an interrupted copy
    ("vocab", "[1, 2]", None, "not a vocabulary"),
    ("vocab", json.dumps({**BYTES, "ab": "256"}), None, "not a vocabulary"),
    ("vocab", json.dumps({"a": 0, "b": 1}), None, "254 of the 256 byte tokens are missing"),
    ("merges", None, "a b\nab\n", "line 2 'ab' is not a merge"),
    ("merges", None, "a b\nab d\n", "line 2 'ab d' is not a merge"),
    ("merges", None, b"a b\n\xff\xfe\n", "not UTF-8"),
])
def test_corrupt_tokenizer_files_are_named(tmp_path, vocab_name, merges_name, broken, vocab, merges,
                                           message):
    kwargs = {k: v for k, v in (("vocab", vocab), ("merges", merges)) if v is not None}
    tiny_tokenizer(tmp_path, vocab_name, merges_name, **kwargs)
    path = tmp_path / (vocab_name if broken == "vocab" else merges_name)
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        load_encoder(tmp_path)
    assert str(e.value).startswith(f"{path}: ") and "replace it with a good copy" in str(e.value)
