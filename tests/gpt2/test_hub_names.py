"""Repo ids with a whole .. part are refused before any cache or network, by each of the two
checks alone."""

import pytest

from gpt2.load import ASSETS

FAST = 3.0  # seconds: a mistake in the options is refused before any model loads
TARGET = ASSETS / "tiny-target"


@pytest.mark.parametrize("name", ["a/..", "../b", "../..", "a/../b", "./..", "../a/b", "..",
                                  "a/b/.."])
def test_repo_ids_with_a_whole_dotdot_part_are_refused(name, tmp_path, monkeypatch):
    """As repo ids they are all refused; as model names, those that are no local path (".." and
    "../b" are: the user's folders) never reach the cache or the network."""
    from gpt2.hub import REPO_PART, check_repo_id, is_local, resolve

    monkeypatch.chdir(tmp_path)
    assert REPO_PART.fullmatch("..") is None and REPO_PART.fullmatch(".") is None
    with pytest.raises(ValueError, match="unknown model"):
        check_repo_id(name)
    if not is_local(name):
        with pytest.raises(ValueError, match="unknown model"):  # before any download could start
            resolve(name, offline=False, cache=tmp_path / "cache", endpoint="http://127.0.0.1:9")
    assert not (tmp_path / "cache").exists()


def test_each_of_the_two_dotdot_checks_refuses_alone(monkeypatch):
    """The part pattern and the `..` test each refuse "a/.." by themselves: weakening one leaves
    the other."""
    import re

    import gpt2.hub as hub

    monkeypatch.setattr(hub, "REPO_PART", re.compile(r"[A-Za-z0-9_.-]+"))  # lets ".." through
    for name in ("a/..", "../b"):
        with pytest.raises(ValueError, match="no \\.\\. or --"):
            hub.check_repo_id(name)
    monkeypatch.undo()
    assert hub.REPO_PART.fullmatch("..") is None  # and the real pattern refuses the part itself
