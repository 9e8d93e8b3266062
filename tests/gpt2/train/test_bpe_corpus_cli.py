"""python -m gpt2.train.bpe and python -m gpt2.train.corpus on inputs too small for what they make:
a corpus with no merge to learn, or a folder too small for three splits, is one line and writes
nothing; a corpus with fewer merges than --vocab_size asks for is said in one note."""
import pytest

from tests.support.clitools import ROOT, assert_refused, files_under, run_here

TOKENIZER = str(ROOT / "gpt2" / "assets" / "tiny-target")


@pytest.mark.parametrize("text, why", [
    ("", r"no text to learn merges from \(empty, or only white space\); give files of text"),
    ("  \n\n\t \n", r"no text to learn merges from .*"),
    ("a\nb\n", r"no pair of symbols to merge .*; give files of more text")])
def test_bpe_without_a_merge_to_learn_is_refused(tmp_path, text, why):
    (tmp_path / "t.txt").write_text(text)
    before = files_under(tmp_path)
    r = run_here(["-m", "gpt2.train.bpe", "--out", "tok", "--files", "t.txt"], tmp_path)
    assert r.returncode == 2
    assert_refused(r, rf"^error: --files t.txt: {why}$", tmp_path, before, max_seconds=3)


def test_bpe_with_fewer_merges_than_asked_says_so(tmp_path):
    (tmp_path / "t.txt").write_text("def f(x):\n    return x + 1\n" * 3)
    r = run_here(["-m", "gpt2.train.bpe", "--out", "tok", "--files", "t.txt"], tmp_path)
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: 16 merges learned, not the 3840 that --vocab_size 4096 asks for "
                     "(--files t.txt hold no more): the vocabulary has 273 tokens; give more text "
                     "for more"], r.stderr
    assert r.stdout.strip() == "273 tokens from 1 files -> tok"
    r = run_here(["-m", "gpt2.train.bpe", "--out", "tok2", "--files", "t.txt", "--vocab_size",
                  "270"], tmp_path)
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr


def test_bpe_into_a_models_folder_keeps_its_tokenizer_unless_told(tmp_path):
    """A folder holding model.safetensors and its tokenizer: a new vocabulary would change what
    the weights' ids mean. Refused before any work, the folder untouched; --overwrite replaces
    it."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(TOKENIZER, model)
    (tmp_path / "t.txt").write_text("def f(x):\n    return x + 1\n" * 3)
    before = files_under(tmp_path)
    r = run_here(["-m", "gpt2.train.bpe", "--out", "model", "--files", "t.txt"], tmp_path)
    assert r.returncode == 2
    assert_refused(r, r"^error: --out model holds a model \(model.safetensors\) and its tokenizer "
                      r"\(vocab.json, merges.txt\): .* or --overwrite to replace the tokenizer",
                   tmp_path, before, max_seconds=3)
    r = run_here(["-m", "gpt2.train.bpe", "--out", "model", "--files", "t.txt", "--overwrite"],
                 tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "273 tokens from 1 files -> model", r.stderr
    r = run_here(["-m", "gpt2.train.bpe", "--out", "tok", "--files", "t.txt"], tmp_path)
    assert r.returncode == 0, r.stderr  # a folder of its own: no model, nothing to ask


def test_corpus_of_too_few_files_for_three_splits_is_refused(tmp_path):
    (tmp_path / "lib").mkdir()
    for i in range(4):
        (tmp_path / "lib" / f"m{i}.py").write_text(f"x = {i}\n")
    before = files_under(tmp_path)
    r = run_here(["-m", "gpt2.train.corpus", "--tokenizer", TOKENIZER, "--out", "data", "--root",
                  "lib"], tmp_path)
    assert r.returncode == 2
    assert_refused(r, r"^error: --root lib has 4 .py files: 3 to train, 0 to val, 1 to heldout "
                      r"\(by a hash of the path, about 90, 5 and 5 in 100\), and each split needs "
                      r"at least one file \(val would be empty\): give a folder of more files$",
                   tmp_path, before, max_seconds=3)


def test_corpus_records_its_tokenizer(tmp_path):
    import json

    (tmp_path / "lib").mkdir()
    for i in range(60):  # the fewest m{i}.py that give each split a file
        (tmp_path / "lib" / f"m{i}.py").write_text(f"x = {i}\n")
    r = run_here(["-m", "gpt2.train.corpus", "--tokenizer", TOKENIZER, "--out", "data", "--root",
                  "lib"], tmp_path)
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    assert meta["tokenizer_folder"] == TOKENIZER and len(meta["tokenizer"]) == 64


@pytest.mark.parametrize("eot, why", [
    (None, r"has no <\|endoftext\|> token, which ends each file in the token files: give a "
           r"tokenizer with it \(python -m gpt2.train.bpe adds it\)$"),
    # past uint16, or past n_vocab: token files whose ids meta.json's n_vocab does not cover
    (70000, r": its 4097 tokens do not have the ids 0 to 4096, one each \(the largest is 70000\): "
            r"give a tokenizer made by python -m gpt2.train.bpe, or a model's own$"),
    (5000, r": its 4097 tokens do not have the ids 0 to 4096, one each \(the largest is 5000\)"),
    (7, r": its 4097 tokens do not have the ids 0 to 4096, one each \(the largest is 4095\)")])
def test_corpus_with_a_tokenizer_it_cannot_write_is_refused(tmp_path, eot, why):
    """<|endoftext|> (the tiny-target vocabulary's id 4096) missing, or at another id."""
    import json

    (tmp_path / "lib").mkdir()
    for i in range(60):
        (tmp_path / "lib" / f"m{i}.py").write_text(f"x = {i}\n")
    (tmp_path / "tok").mkdir()
    vocab = json.loads((ROOT / "gpt2" / "assets" / "tiny-target" / "vocab.json").read_text())
    del vocab["<|endoftext|>"]  # the last id: the others stay 0..n - 1
    if eot is not None:
        vocab["<|endoftext|>"] = eot
    (tmp_path / "tok" / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "tok" / "merges.txt").write_bytes((ROOT / "gpt2" / "assets" / "tiny-target"
                                                   / "merges.txt").read_bytes())
    before = files_under(tmp_path)
    r = run_here(["-m", "gpt2.train.corpus", "--tokenizer", "tok", "--out", "data", "--root",
                  "lib"], tmp_path)
    assert r.returncode == 2
    assert_refused(r, rf"^error: --tokenizer tok{' ' if eot is None else ''}{why}", tmp_path,
                   before, max_seconds=3)
