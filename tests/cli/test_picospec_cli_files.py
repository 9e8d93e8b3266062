"""The door's file functions (picospec_cli.replace_file, cannot_make): a file replaced whole or not
at all, with the permissions a new file gets; the nearest part of a folder to be made that exists,
and why nothing can be made there."""
import errno
import os
import tempfile

import pytest

import picospec_cli

from picospec_cli import cannot_make, cannot_write_in, out_folder, replace_file


@pytest.fixture
def umask_022():
    before = os.umask(0o022)
    yield
    os.umask(before)


def test_a_replaced_file_has_the_usual_permissions_and_nothing_beside_it(tmp_path, umask_022):
    path = tmp_path / "out.txt"
    path.write_text("old")
    replace_file(path, [b"new ", b"text"])
    assert path.read_bytes() == b"new text" and os.listdir(tmp_path) == ["out.txt"]
    assert path.stat().st_mode & 0o777 == 0o644  # 0o666 less the umask, as open() makes it


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")

    def write(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_file(path, write)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_cannot_make_names_the_nearest_part_that_exists(tmp_path):
    assert cannot_make(tmp_path / "a" / "b") is None  # tmp_path exists and takes files
    (tmp_path / "f").write_text("")
    assert cannot_make(tmp_path / "f" / "b") == (tmp_path / "f", "a file")
    assert cannot_make(str(tmp_path / "f" / "b")) == (tmp_path / "f", "a file")  # text too


def test_why_a_folder_takes_no_file_is_the_system_s_reason_alone(tmp_path):
    assert cannot_write_in(tmp_path) is None and os.listdir(tmp_path) == []  # the trial file goes
    assert cannot_write_in(tmp_path / "missing") == os.strerror(errno.ENOENT)  # no number, no path


def test_a_folder_that_is_there_but_holds_no_new_file_is_said_so(tmp_path, monkeypatch):
    """/proc: making a file in it fails with ENOENT, "No such file or directory", which is not
    true of the folder."""
    def enoent(**kwargs):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    monkeypatch.setattr(tempfile, "mkstemp", enoent)
    assert cannot_write_in(tmp_path) == "it takes no new files"


def test_the_trial_file_is_hidden_and_named_after_its_maker(tmp_path, monkeypatch):
    """The file that tries whether a folder takes files is one a user who lists the folder at
    that moment can tell: hidden, and named picospec's write check."""
    removed, remove = [], os.remove
    monkeypatch.setattr(os, "remove", lambda path: removed.append(path) or remove(path))
    assert cannot_write_in(tmp_path) is None and os.listdir(tmp_path) == []
    assert len(removed) == 1 and os.path.dirname(removed[0]) == str(tmp_path)
    assert os.path.basename(removed[0]).startswith(".picospec-write-check-")


def test_an_output_folder_exists_or_can_be_made_in_one_that_does(tmp_path):
    (tmp_path / "f").write_text("")
    assert out_folder(tmp_path) is None and out_folder(tmp_path / "new") is None
    assert out_folder(tmp_path / "f") == "is a file: give a folder"
    assert out_folder(tmp_path / "a" / "b") == (
        f"the folder {tmp_path / 'a'} does not exist; create it first")


def test_an_output_folder_that_takes_no_file_is_refused_before_the_work(tmp_path, monkeypatch):
    monkeypatch.setattr(picospec_cli, "cannot_write_in", lambda folder: "Permission denied")
    assert out_folder(tmp_path / "new") == (
        f"cannot write in {tmp_path} (Permission denied): give a folder you can write to")


def test_cannot_make_names_the_part_that_takes_no_file_and_why(tmp_path, monkeypatch):
    """A folder to make under one this process cannot write in: that one, and the system's
    reason (root writes anywhere, so the trial's answer stands in)."""
    monkeypatch.setattr(picospec_cli, "cannot_write_in", lambda folder: "Permission denied")
    assert cannot_make(tmp_path / "a" / "b") == (tmp_path, "Permission denied")


def test_the_temporary_file_is_beside_the_file_and_named_after_it(tmp_path):
    """While the data is written, the only new file is a hidden one in the same folder (so that
    the rename cannot cross file systems), named after the file and ending .tmp."""
    path, seen = tmp_path / "out.txt", []

    def write(f):
        seen.extend(os.listdir(tmp_path))
        f.write(b"new")

    replace_file(path, write)
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["out.txt"]
    assert len(seen) == 1 and seen[0].startswith(".out.txt.") and seen[0].endswith(".tmp")


def test_a_file_named_by_text_is_replaced_and_the_umask_kept(tmp_path, umask_022):
    """The umask is read by setting it: it is put back, or every later file would be 0666."""
    replace_file(str(tmp_path / "out.txt"), [b"new"])
    assert (tmp_path / "out.txt").read_bytes() == b"new"
    assert os.umask(0o022) == 0o022


def test_the_trial_file_is_closed(tmp_path, monkeypatch):
    made, mkstemp = [], tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp",
                        lambda **kw: made.append(mkstemp(**kw)) or made[-1])
    assert cannot_write_in(tmp_path) is None and len(made) == 1
    with pytest.raises(OSError):
        os.fstat(made[0][0])
