"""Every notebook runs top to bottom (CI installs nbclient, nbformat and ipykernel) in quick mode:
PICOSPEC_QUICK=1 makes each one run every cell on fewer prompts, tokens and repeats. The committed
outputs come from the full mode (`python notebooks/src/notebook_io.py`), with no execution times."""
import json
import sys
from pathlib import Path

import pytest

from tests.support.tracked import project_files

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
    """Every cell runs; the notebook's engines take main.py's settings and policy; inside an
    engine's call the BLAS has the engine's count, and after the notebook the process has the count
    it started with. One notebook runs on the BLAS's own default and the cores idle when it loads;
    the others on one thread, their own NumPy work (OPENBLAS_NUM_THREADS=1) and their engines'
    calls (PICOSPEC_THREADS=1), so that two test workers' kernels do not oversubscribe 2 cores."""
    import subprocess

    pytest.importorskip("nbclient")
    from notebook_io import execute

    measured = path.name == "speculative_sampling.ipynb"
    if not measured:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
        monkeypatch.setenv("PICOSPEC_THREADS", "1")
    nb = execute(path, quick=True, timeout=600, then=[THREADS])
    seen = json.loads(nb.cells[-1].outputs[0]["text"])
    fresh = subprocess.run([sys.executable, "-c", DEFAULT], capture_output=True, text=True,
                           cwd=FOLDER.parent, check=True)
    assert seen["inside"] == seen["policy"] and seen["blas"] == int(fresh.stdout), seen
    blas = [line for line in printed(nb).splitlines() if line.startswith("BLAS: ")]
    assert blas, f"{path.name}: no BLAS line printed"
    for line in blas:  # measured as main.py measures, or the count the setting asked for
        assert "not measured" not in line if measured else "; 1 thread (requested); " in line, line
    assert_verdicts_follow_figures(nb, path.name)


def read(path):
    """The notebook at path, nbformat imported here rather than at collection (each test worker
    collects every module; nbformat and nbclient take seconds to import)."""
    return pytest.importorskip("nbformat").read(path, as_version=4)


def printed(nb):  # what a notebook's code cells printed
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def verdict_lines(nb):
    """Every printed line of a notebook that carries a sentence computed from its figures."""
    return [line for line in printed(nb).splitlines() if "verdict:" in line]


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
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{path.name}: a cell was not run"
    assert not [c for c in nb.cells if "execution" in c.metadata], f"{path.name}: timestamps"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"], path.name


MAKERS = project_files(FOLDER.parent, "make_*.py", "notebooks/src", recursive=False)


@pytest.mark.parametrize("maker", MAKERS, ids=[p.name for p in MAKERS])
def test_each_notebook_is_what_its_maker_writes(maker, monkeypatch):
    """The cells' sources of the committed notebook are the ones its maker writes."""
    import runpy

    pytest.importorskip("nbformat")
    import notebook_io

    written = {}
    monkeypatch.setattr(notebook_io, "save", lambda nb, path: written.update({Path(path).name: nb}))
    runpy.run_path(str(maker))
    (name, nb), = written.items()
    committed = read(FOLDER / name)
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
    assert_verdicts_follow_figures(read(path), path.name)


def test_a_verdict_that_contradicts_its_figures_is_rejected():
    """The check recomputes the words from the numbers: each sentence on either side of the
    boundary passes, and the same figures with the other words fail."""
    from verdicts import check, gains, versus

    assert "is above" in versus(1.30, 1.10) and "is below" in versus(0.80, 1.00)
    assert "agrees with" in versus(1.02, 1.00) and "no gain" in gains(1.00)
    assert "a gain" in gains(1.01) and check(gains(1.004)) and check(versus(1.0549, 1.0))
    for line in (versus(1.30, 1.10), versus(0.80, 1.00), versus(1.02, 1.0), gains(0.92),
                 gains(1.15)):
        assert check("copy-heavy REST " + line)
    broken = [versus(1.30, 1.10).replace("is above", "is below"),
              versus(1.02, 1.00).replace("agrees with", "is above"),
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


def test_every_verdict_on_a_line_is_checked():
    """A line carrying two verdicts ("measured ... agrees with ...; the costs' ... is ...") was
    judged by its first alone: a wrong second one passed. Each is checked now."""
    from verdicts import check, gains, versus

    assert check(f"{versus(1.30, 1.10)}; {gains(0.92)}")
    assert not check(f"{versus(1.30, 1.10)}; {gains(0.92).replace('no gain', 'a gain')}")
    assert not check(f"{versus(1.30, 1.10).replace('is above', 'agrees with')}; {gains(0.92)}")
    with pytest.raises(ValueError):
        check(f"{versus(1.30, 1.10)}; verdict: the figures look fine")


def test_a_band_verdict_that_contradicts_its_figures_is_rejected():
    """Measured tokens per call against the band of alpha +- 2 standard errors: inside (its ends
    included), above or below, and the same figures with the other words fail."""
    from verdicts import band, check

    assert "is inside" in band(2.40, 1.95, 2.45) and "is inside" in band(2.45, 1.95, 2.45)
    assert "is above" in band(2.50, 1.95, 2.45) and "is below" in band(1.90, 1.95, 2.45)
    assert "is inside" in band(1.954, 1.95, 2.45)  # as printed: 1.95, at the band's end
    for line in (band(2.40, 1.95, 2.45), band(2.50, 1.95, 2.45), band(1.90, 1.95, 2.45)):
        assert check("K=2: predicted 2.15, measured 2.40; " + line)
    broken = [band(2.40, 1.95, 2.45).replace("is inside", "is above"),
              band(2.50, 1.95, 2.45).replace("is above", "is inside"),
              band(1.90, 1.95, 2.45).replace("is below", "is inside")]
    assert not any(check(line) for line in broken)


def test_the_iid_fit_carries_no_verdict():
    """alpha is fitted to K = 1's tokens per call, so at K = 1 the i.i.d. prediction equals the
    measurement by construction: a verdict there could never say anything but "matches". The
    K = 1 line gives the fit; each other K prints both verdicts."""
    nb = read(FOLDER / "speculative_sampling.ipynb")
    last = next(c for c in reversed(nb.cells) if c.cell_type == "code")
    lines = "".join(o.get("text", "") for o in last.outputs).splitlines()
    fit = [line for line in lines if line.startswith("K=1:")]
    rest = [line for line in lines if line.startswith("K=") and not line.startswith("K=1:")]
    assert len(fit) == 1 and "verdict:" not in fit[0], fit
    assert rest and all(line.count("verdict:") == 2 for line in rest), rest


def test_c_is_a_target_call_in_every_notebook():
    """c is the cost of a target call (picospec/theory.py): in the notebooks' text c(...) takes a
    number of tokens in one call (M, K + 1, a count), never another quantity (the token trees
    notebook once named Sequoia's dynamic program c(n, d))."""
    import re

    for path in NOTEBOOKS:
        for cell in read(path).cells:
            if cell.cell_type == "markdown":
                for m in re.finditer(r"(?<![\w.])c\(([^)]*)\)", cell.source):
                    assert re.fullmatch(r"M|K \+ 1|k|\d+", m[1]), (path.name, m[0])


def test_a_cost_model_without_drafting_is_stated_only_where_nothing_drafts():
    """A notebook whose text gives the cost model as E (1 + r_0) / (c + r) says its rows have no
    drafter: every row it prints must show drafting 0.00 (Medusa's heads, timed as the drafter,
    once sat under that text)."""
    import re

    for path in NOTEBOOKS:
        nb = read(path)
        text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
        if not re.search(r"/ \(c \+ r\)", " ".join(text.split())):
            continue
        out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs)
        drafting = re.findall(r"drafting ([\d.]+), rest", out)
        assert drafting and set(drafting) == {"0.00"}, (path.name, drafting)
