"""python -m gpt2.train.ngram keeps what the user had: an --out that holds another kind of file
(the token files it reads, a note) is refused before any work, byte for byte as it was, unless
--overwrite; an n-gram table there is rebuilt in place. A train.bin of an odd number of bytes is
not uint16 token ids: one line, not a table counted from a misread file."""
import json

import numpy as np
import pytest

from tests.support.clitools import assert_refused, file_bytes, files_under, run_here


def make_data(folder):
    (folder / "data").mkdir()
    np.tile(np.arange(20, dtype=np.uint16), 50).tofile(folder / "data" / "train.bin")
    (folder / "data" / "meta.json").write_text(json.dumps({"n_vocab": 20}))


@pytest.mark.parametrize("out", ["data/train.bin", "data/meta.json", "notes.txt"])
def test_an_out_of_another_kind_is_kept_unless_overwrite(tmp_path, out):
    make_data(tmp_path)
    (tmp_path / "notes.txt").write_text("mine\n")
    before = file_bytes(tmp_path)
    r = run_here(["-m", "gpt2.train.ngram", "--data", "data", "--out", out, "--order", "3"],
                 tmp_path)
    assert r.returncode == 2
    assert_refused(r, rf"^error: --out {out} already holds a file that is not an n-gram table: "
                      rf"give another file name, or --overwrite to replace it$", max_seconds=3)
    assert file_bytes(tmp_path) == before
    r = run_here(["-m", "gpt2.train.ngram", "--data", "data", "--out", out, "--order", "3",
                  "--overwrite"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / out).read_bytes() != before[out]


def test_an_ngram_table_is_rebuilt_in_place(tmp_path):
    make_data(tmp_path)
    for order in ("3", "2"):
        r = run_here(["-m", "gpt2.train.ngram", "--data", "data", "--out", "ng.safetensors",
                      "--order", order], tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"order {order}:"), r.stdout


def test_a_train_bin_of_odd_size_is_refused(tmp_path):
    make_data(tmp_path)
    with open(tmp_path / "data" / "train.bin", "ab") as f:
        f.write(b"\0")
    before = files_under(tmp_path)
    r = run_here(["-m", "gpt2.train.ngram", "--data", "data", "--out", "ng.safetensors"], tmp_path)
    assert r.returncode == 2
    assert_refused(r, r"^error: --data data: train.bin, 2001 bytes, is not a file of uint16 token "
                      r"ids \(from `python -m gpt2.train.corpus`\)$", tmp_path, before,
                   max_seconds=3)
