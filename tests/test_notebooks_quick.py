"""The notebooks' quick mode: PICOSPEC_QUICK read as every flag, and notebook_io runs quick mode
without writing the committed notebook back."""
import sys

import pytest

from tests.support.clitools import ROOT
from tests.support.tracked import project_files



def test_notebooks_read_picospec_quick_as_every_flag(monkeypatch):
    """PICOSPEC_QUICK=true ran the notebooks in full (only "1" counted): each notebook's own QUICK
    line, run as it is committed, reads it as the other flags are read."""
    nbformat = pytest.importorskip("nbformat")  # here, not at collection: it takes a second
    for path in project_files(ROOT, "*.ipynb", "notebooks", recursive=False):
        lines = [line for cell in nbformat.read(path, as_version=4).cells
                 if cell.cell_type == "code" for line in cell.source.splitlines()]
        quick = next(line for line in lines if line.startswith("QUICK ="))
        setup = [line for line in lines if "import env_flag" in line]
        for value, expected in (("true", True), ("1", True), ("yes", True), ("0", False),
                                ("", False)):
            monkeypatch.setenv("PICOSPEC_QUICK", value)
            scope = {}
            exec("\n".join(["import os", *setup, quick]), scope)
            assert scope["QUICK"] is expected, (path.name, value)


def test_notebook_io_runs_quick_mode_as_asked_and_keeps_the_committed_notebook(tmp_path,
                                                                              monkeypatch, capsys):
    """PICOSPEC_QUICK=1 python notebooks/src/notebook_io.py NB ran in full and rewrote NB: now it
    runs quick mode and says it writes nothing back; without it, full mode writes NB."""
    sys.path.insert(0, str(ROOT / "notebooks" / "src"))
    pytest.importorskip("nbformat")  # notebook_io reads and writes with it
    import notebook_io

    runs, saved = [], []
    monkeypatch.setattr(notebook_io, "execute", lambda name, quick=False: runs.append(quick) or {})
    monkeypatch.setattr(notebook_io, "save", lambda nb, name: saved.append(name))
    notebook_io.main(["nb.ipynb"], environ={"PICOSPEC_QUICK": "true"})
    assert runs == [True] and saved == []
    assert "ran in quick mode and is not written back" in capsys.readouterr().out
    notebook_io.main(["nb.ipynb"], environ={})
    assert runs == [True, False] and saved == ["nb.ipynb"]
