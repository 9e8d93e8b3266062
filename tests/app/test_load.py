"""The REST datastore's build (picospec_app/load.py) on a disk that fills up: one line naming the
file and what to do, and nothing left behind, not even the cache folders the build made."""
import errno
import os

import pytest

from gpt2.encoder import load_encoder
from gpt2.load import ASSETS
from picospec_app.load import rest_datastore


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """A build over one small file (not the standard library) whose save finds no room."""
    source = tmp_path / "source.py"
    source.write_text("def f(x):\n    return x\n" * 20)
    monkeypatch.setattr("gpt2.train.corpus.stdlib_files", lambda: [])
    monkeypatch.setattr("gpt2.train.corpus.split_files", lambda files: {"train": [source]})

    def no_room(self, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("picospec.rest.Datastore.save", no_room)
    return load_encoder(ASSETS / "tiny-target")


def test_a_full_disk_in_the_cache_names_the_file_and_leaves_no_folder(full_disk, monkeypatch,
                                                                      tmp_path):
    monkeypatch.setenv("PICOSPEC_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError) as refused:
        rest_datastore(None, "tiny-target", full_disk, progress=False)
    path = tmp_path / "cache" / "rest" / "tiny-target-stdlib-train.npz"
    assert str(refused.value) == (f"cannot write the REST datastore {path} ("
                                  f"{os.strerror(errno.ENOSPC)}): make room there, or set "
                                  f"PICOSPEC_CACHE to a folder with room")
    assert not (tmp_path / "cache").exists()


def test_a_full_disk_under_datastore_says_to_write_it_elsewhere(full_disk, tmp_path):
    path = tmp_path / "store.npz"
    with pytest.raises(ValueError) as refused:
        rest_datastore(path, "tiny-target", full_disk, progress=False)
    assert str(refused.value).startswith(f"cannot write the REST datastore {path} (")
    assert str(refused.value).endswith("or give --datastore a file in another folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.py"]


def test_a_write_refused_for_another_reason_is_not_told_to_make_room(full_disk, monkeypatch,
                                                                      tmp_path):
    def refused(self, path):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr("picospec.rest.Datastore.save", refused)
    with pytest.raises(ValueError) as e:
        rest_datastore(tmp_path / "store.npz", "tiny-target", full_disk, progress=False)
    assert str(e.value).endswith(f"({os.strerror(errno.EACCES)}): give --datastore a file in "
                                 f"another folder")
