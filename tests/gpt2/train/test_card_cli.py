"""python -m gpt2.train.card keeps what the user had: an --out that holds another kind of file
(the token files it reads, a note) is refused before any work, byte for byte as it was, unless
--overwrite; a model card there is written anew."""
import numpy as np
import pytest

from tests.support.clitools import assert_refused, file_bytes, run_here


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data").mkdir()
    for name in ("val", "heldout"):  # ids of the built-in models' 4097-token vocabulary
        (np.arange(600, dtype=np.uint16) * 6).tofile(tmp_path / "data" / f"{name}.bin")
    (tmp_path / "notes.md").write_text("mine\n")
    return tmp_path


@pytest.mark.parametrize("out", ["data/val.bin", "notes.md"])
def test_an_out_of_another_kind_is_kept(data, out):
    before = file_bytes(data)
    r = run_here(["-m", "gpt2.train.card", "--data", "data", "--out", out, "--n_windows", "1"],
                 data)
    assert r.returncode == 2
    assert_refused(r, rf"^error: --out {out} already holds a file that is not a model card: give "
                      rf"another file name, or --overwrite to replace it$", max_seconds=3)
    assert file_bytes(data) == before


def test_overwrite_replaces_another_file_and_a_card_is_written_anew(data):
    for extra in (["--overwrite"], []):  # the second finds a card in notes.md
        r = run_here(["-m", "gpt2.train.card", "--data", "data", "--out", "notes.md",
                      "--n_windows", "1", *extra], data)
        assert r.returncode == 0, r.stderr[-800:]
        assert (data / "notes.md").read_text().startswith("# Built-in models: model card\n")
