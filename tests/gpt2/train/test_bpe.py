"""BPE training on corpora small enough to check by hand, and the stdlib corpus split."""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpt2.train.bpe import train_bpe
from gpt2.train.corpus import main as corpus_main, split_files, split_of, stdlib_files, stdlib_root
from gpt2.encoder import EOT, Encoder, load_encoder, save_tokenizer


def test_merges_by_hand():
    # words: "abab" x2, "ab" x1 -> (a,b) = 5 -> then (ab,ab) = 2
    encoder, merges = train_bpe(["abab abab ab"], vocab_size=258)
    assert merges[0] == ("a", "b")
    # tie at 2: " ab" occurs twice too; the larger pair wins
    assert merges[1] in {("ab", "ab"), ("Ġ", "ab")}
    assert merges[1] == max(("ab", "ab"), ("Ġ", "ab"))
    assert encoder[EOT] == 258 == len(encoder) - 1
    assert all(encoder[chr(c)] == c for c in range(ord("!"), ord("~") + 1))


def test_trained_tokenizer_round_trips_and_saves(tmp_path):
    text = "def f(x):\n    return x + 1\n\nclass A:\n    pass\n" * 20
    encoder, merges = train_bpe([text], vocab_size=300)
    enc = Encoder(encoder, merges)
    assert len(enc.encode(text)) < len(text.encode()) / 2  # it compresses
    save_tokenizer(tmp_path, encoder, merges)
    back = load_encoder(tmp_path)
    assert back.encode(text) == enc.encode(text) and back.decode(enc.encode(text)) == text
    assert train_bpe([text], vocab_size=300) == (encoder, merges)  # deterministic


ENC = Encoder(*train_bpe(["hello world, héllo wörld 123"], vocab_size=280))


@settings(max_examples=200)
@given(st.text())
def test_round_trip_arbitrary_text(text):
    assert ENC.decode(ENC.encode(text)) == text


def test_corpus_split_is_deterministic_and_disjoint():
    files = stdlib_files()
    assert files and not any({"test", "tests", "idle_test", "site-packages"} & set(p.parts) for p in
                             (f.relative_to(stdlib_root()) for f in files))
    splits = split_files(files)
    assert sum(map(len, splits.values())) == len(files)
    assert len(splits["train"]) > 8 * len(splits["val"]) > 0 and splits["heldout"]
    assert split_of(Path("os.py")) == split_of(Path("os.py"))


def test_corpus_cli(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    for i in range(60):  # the fewest m{i}.py that give each split a file
        (root / f"m{i}.py").write_text(f"x = {i}\n")
    (root / "tests").mkdir()
    (root / "tests" / "t.py").write_text("ignored")
    encoder, merges = train_bpe(["x = 1\n"], vocab_size=260)
    save_tokenizer(tmp_path / "tok", encoder, merges)
    corpus_main(tmp_path / "tok", tmp_path / "out", root=root)
    ids = np.concatenate([np.fromfile(tmp_path / "out" / f"{s}.bin", dtype=np.uint16)
                          for s in ("train", "val", "heldout")])
    assert (ids == encoder[EOT]).sum() == 60  # one <|endoftext|> after each file, tests/ excluded


@pytest.mark.slow
def test_heldout_prompts_longer_than_any_chunk_are_refused_not_searched_forever():
    """A held-out prompt is cut from 200 lines of one file: 100,000 tokens never fit, and the search
    stops with what to do (it looped forever); ordinary prompts are unchanged (the tries do not draw
    from the generator)."""
    from gpt2.train.corpus import heldout_prompts
    from gpt2.encoder import load_encoder

    encoder = load_encoder(Path(__file__).resolve().parents[3] / "gpt2" / "assets" / "tiny-target")
    assert [len(x) for x in heldout_prompts(encoder, 3, 64)] == [64, 64, 64]
    with pytest.raises(ValueError, match="found only 0 of 1 held-out prompts of 100000 tokens "
                                         ".*--prompt_tokens"):
        heldout_prompts(encoder, 1, 100000)
