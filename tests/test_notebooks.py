"""Every notebook runs top to bottom (CI installs nbclient, nbformat and ipykernel) in quick mode:
PICOSPEC_QUICK=1 makes each one run every cell on fewer prompts, tokens and repeats. The committed
outputs come from the full mode (`python notebooks/src/notebook_io.py`), with no execution times."""
import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))
sys.path.insert(0, str(FOLDER / "src"))

# run after the notebook's own cells, in its kernel: the BLAS count in force there, and the policy's
# for the largest engine the notebook built (None where no engine applied a policy)
THREADS = """import json as _json
from gpt2.backend import APPLIED as _A, blas_threads as _blas_threads, choose_threads as _choose
print(_json.dumps({"blas": _blas_threads(), "applied": _A.get("threads"),
                   "policy": _choose(_A["n_params"])[0] if "n_params" in _A else None}))"""


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_with_the_thread_policy(path):
    from notebook_io import execute

    nb = execute(path, quick=True, timeout=600, then=[THREADS])
    seen = json.loads(nb.cells[-1].outputs[0]["text"])
    assert seen["policy"] is not None and seen["blas"] == seen["applied"] == seen["policy"], seen


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_notebooks_are_executed_and_normalised(path):
    """Outputs from a run of every code cell, and no execution timestamps (a rerun changes only what
    the cells print)."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{path.name}: a cell was not run"
    assert not [c for c in nb.cells if "execution" in c.metadata], f"{path.name}: timestamps"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"], path.name


MAKERS = sorted((FOLDER / "src").glob("make_*.py"))


@pytest.mark.parametrize("maker", MAKERS, ids=[p.name for p in MAKERS])
def test_each_notebook_is_what_its_maker_writes(maker, monkeypatch):
    """The cells' sources of the committed notebook are the ones its maker writes."""
    import runpy

    import notebook_io

    written = {}
    monkeypatch.setattr(notebook_io, "save", lambda nb, path: written.update({Path(path).name: nb}))
    runpy.run_path(str(maker))
    (name, nb), = written.items()
    committed = nbformat.read(FOLDER / name, as_version=4)
    sources = [(c.cell_type, c.source) for c in nb.cells]
    assert [(c.cell_type, c.source) for c in committed.cells] == sources


def test_every_notebook_has_a_maker():
    made = set()
    for maker in MAKERS:
        made.update(part for part in maker.read_text().split('"') if part.endswith(".ipynb"))
    assert {p.name for p in NOTEBOOKS} <= made
