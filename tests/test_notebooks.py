"""Every notebook runs top to bottom (CI installs nbclient, nbformat and ipykernel) in quick mode:
PICOSPEC_QUICK=1 makes each one run every cell on fewer prompts, tokens and repeats. The committed
outputs come from the full mode (`python notebooks/src/notebook_io.py`), with no execution times."""
import json
import sys
from pathlib import Path

import pytest

from tests.support.tracked import project_files

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = project_files(FOLDER.parent, "*.ipynb", "notebooks", recursive=False)
sys.path.insert(0, str(FOLDER / "src"))

# run after the notebook's own cells, in its kernel: the BLAS count the process has (building and
# running engines must leave it as the library set it) and the count inside an engine's call
THREADS = """import json as _json
from gpt2.fast.policy import blas_threads as _blas_threads
from gpt2.load import load_model as _load
_m = _load("tiny-target")[0]
with _m.plan.threads.scope(1):
    _inside = _blas_threads()
print(_json.dumps({"blas": _blas_threads(), "inside": _inside, "policy": _m.plan.threads.n}))"""
# the BLAS's own count in a fresh process
DEFAULT = ("import numpy; from gpt2.fast.policy import blas_threads; print(blas_threads())")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_with_the_thread_policy(path, monkeypatch):
    """Every cell runs; inside an engine's call the BLAS has the engine's count, and after the
    notebook the process has the count it started with. One notebook runs on the BLAS's own default;
    the others on one thread (OPENBLAS_NUM_THREADS=1, for their own NumPy work outside the engines),
    so that two test workers' kernels do not oversubscribe 2 cores (as conftest.py does)."""
    import subprocess

    from notebook_io import execute

    if path.name != "speculative_sampling.ipynb":
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    nb = execute(path, quick=True, timeout=600, then=[THREADS])
    seen = json.loads(nb.cells[-1].outputs[0]["text"])
    fresh = subprocess.run([sys.executable, "-c", DEFAULT], capture_output=True, text=True,
                           cwd=FOLDER.parent, check=True)
    assert seen["inside"] == seen["policy"] and seen["blas"] == int(fresh.stdout), seen
    assert_verdicts_follow_figures(nb, path.name)


def verdict_lines(nb):
    """Every printed line of a notebook that carries a sentence computed from its figures."""
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    return [line for line in text.splitlines() if "verdict:" in line]


# the notebooks whose prose turns on measured figures print their verdicts beside them
VERDICTS = {"model_free_drafting.ipynb", "self_drafting.ipynb", "speculative_sampling.ipynb",
            "token_trees.ipynb", "medusa.ipynb", "eagle.ipynb"}


def assert_verdicts_follow_figures(nb, name):
    from verdicts import check

    lines = verdict_lines(nb)
    assert lines or name not in VERDICTS, f"{name}: no verdict printed"
    assert all(check(line) for line in lines), [line for line in lines if not check(line)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_notebooks_are_executed_and_normalised(path):
    """Outputs from a run of every code cell, and no execution timestamps (a rerun changes only what
    the cells print)."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{path.name}: a cell was not run"
    assert not [c for c in nb.cells if "execution" in c.metadata], f"{path.name}: timestamps"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"], path.name


MAKERS = project_files(FOLDER.parent, "make_*.py", "notebooks/src", recursive=False)


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_verdicts_follow_their_figures(path):
    """Each printed verdict says what the figures printed in it imply."""
    assert_verdicts_follow_figures(nbformat.read(path, as_version=4), path.name)


def test_a_verdict_that_contradicts_its_figures_is_rejected():
    """The check recomputes the words from the numbers: each sentence on either side of the
    boundary passes, and the same figures with the other words fail."""
    from verdicts import check, gains, versus

    assert "beats" in versus(1.30, 1.10) and "falls short of" in versus(0.80, 1.00)
    assert "matches" in versus(1.02, 1.00) and "no gain" in gains(1.00)
    assert "a gain" in gains(1.01) and check(gains(1.004)) and check(versus(1.0549, 1.0))
    for line in (versus(1.30, 1.10), versus(0.80, 1.00), versus(1.02, 1.0), gains(0.92),
                 gains(1.15)):
        assert check("copy-heavy REST " + line)
    broken = [versus(1.30, 1.10).replace("beats", "falls short of"),
              versus(1.02, 1.00).replace("matches", "beats"),
              gains(0.92).replace("no gain", "a gain"), gains(1.15).replace("a gain", "no gain")]
    assert not any(check(line) for line in broken)
    with pytest.raises(ValueError):
        check("E 1.33, c 1.63: measured 0.80x")


def test_an_iid_verdict_that_contradicts_its_figures_is_rejected():
    """Measured tokens per call against the i.i.d. prediction: the words follow the two printed
    figures (within 5%: "matches"), and the same figures with the other words fail."""
    from verdicts import check, iid

    assert "is above" in iid(2.40, 2.15) and "is below" in iid(2.00, 2.20)
    assert "matches" in iid(1.68, 1.68) and check(iid(1.0549, 1.0)) and check(iid(1.004, 1.0))
    for line in (iid(2.40, 2.15), iid(2.00, 2.20), iid(1.68, 1.68)):
        assert check("K=2: predicted 2.15, measured 2.40; " + line)
    broken = [iid(2.40, 2.15).replace("is above", "is below"),
              iid(2.00, 2.20).replace("is below", "matches"),
              iid(1.68, 1.68).replace("matches", "is above")]
    assert not any(check(line) for line in broken)
