"""A results page's commit row (tools/page.py commit): it says "with uncommitted changes" after an
edit anywhere in the code the page reports on (the algorithms, the model, the app, its door, the
benchmarks, main.py), and only then: files git does not track, and prose, leave it clean.

The results pages stay runnable and say how they were made: each names, in its protocol header,
the commit, date, CPU, BLAS, threads, load and versions of its run, and a command that still takes
every option the page gives it (a page whose option was renamed or removed can no longer be
regenerated as it says)."""
import re
import shlex
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools.page import commit, versions
from tests.support.clitools import run_here
from tests.support.tracked import new_checkout, project_files

CODE_FILES = ["main.py", "bench/harness.py", "gpt2/model.py", "picospec/verify.py",
              "picospec_app/run.py", "picospec_cli/__init__.py"]

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
ROOT = Path(__file__).resolve().parents[2]
PAGES = project_files(ROOT, "*.md", "docs/results")
FIELDS = ("command", "commit", "date", "CPU", "BLAS", "threads", "load", "versions")


@pytest.fixture
def tree(tmp_path):
    """A small git tree with a file in each place the pages report on, and a README."""
    for path in CODE_FILES + ["README.md"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    return new_checkout(tmp_path)


@needs_git
def test_a_clean_tree_is_its_commit(tree):
    assert commit(tree) != "" and " " not in commit(tree)


@needs_git
@pytest.mark.parametrize("path", CODE_FILES)
def test_an_edit_in_the_code_marks_the_page(tree, path):
    (tree / path).write_text("x = 2\n")
    assert commit(tree).endswith(" with uncommitted changes")


@needs_git
@pytest.mark.parametrize("path", ["scratch.py", "picospec/new_idea.py", "build/lib/gpt2/model.py",
                                  ".venv/lib/site.py"])
def test_untracked_files_leave_it_clean(tree, path):
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text("y = 1\n")
    assert " " not in commit(tree)


@needs_git
def test_prose_leaves_it_clean(tree):
    (tree / "README.md").write_text("more words\n")
    assert " " not in commit(tree)


def fake_cupy(properties):
    runtime = SimpleNamespace(getDeviceProperties=properties, runtimeGetVersion=lambda: 13020)
    return SimpleNamespace(__version__="14.2.0", cuda=SimpleNamespace(runtime=runtime))


def test_the_versions_row_names_the_gpu_a_run_used(monkeypatch):
    """A GPU page's versions row named CuPy but not the GPU it ran on: it names the CUDA runtime
    and the device where the run imported CuPy, says where CuPy found none, and adds nothing to a
    run that never imported it."""
    for name in ("cupy", "torch", "transformers"):  # other tests may have imported them
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert "GPU" not in versions() and "CUDA" not in versions()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(lambda i: {"name": b"NVIDIA H200"}))
    assert versions().endswith(", cupy 14.2.0, CUDA runtime 13020; GPU: NVIDIA H200")
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(__version__="2.13.0"))
    assert versions().endswith(", cupy 14.2.0, CUDA runtime 13020, torch 2.13.0; GPU: NVIDIA H200")

    def no_device(i):
        raise RuntimeError("cudaErrorNoDevice")

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(no_device))
    assert versions().endswith(", cupy 14.2.0, torch 2.13.0; no GPU (RuntimeError)")


def header(text):
    """A page's first protocol table -> {field: value}."""
    block = text.split("| protocol | |", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r"^\| (\w[\w ]*) \| (.*) \|$", block, flags=re.M))


def command(text):
    """The page's command -> its arguments after `python`: ["-m", MODULE, options...]."""
    found = re.match(r"`python (-m [\w.]+[^`]*)`", header(text).get("command", ""))
    return shlex.split(found.group(1)) if found else []


def options_missing(args, help_text):
    """The --options of args that a command's --help does not list."""
    listed = set(re.findall(r"--[\w-]+", help_text))
    return [a.split("=")[0] for a in args if a.startswith("--") and a.split("=")[0] not in listed]


def test_every_page_is_checked():
    assert len(PAGES) >= 10 and all(p.name != "README.md" for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_page_records_its_protocol(page):
    fields = header(page.read_text(encoding="utf-8"))
    assert [f for f in FIELDS if not fields.get(f, "").strip()] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_page_command_still_takes_its_options(page, tmp_path):
    args = command(page.read_text(encoding="utf-8"))
    assert args[:1] == ["-m"], f"{page.name} names no `python -m MODULE` command"
    shown = run_here([*args[:2], "--help"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert options_missing(args[2:], shown.stdout) == []


def test_a_stale_page_is_caught(tmp_path):
    """A page whose command gives an option its module no longer has, and a page without its
    load row, are both caught by the checks above."""
    text = (ROOT / "docs" / "results" / "ops.md").read_text(encoding="utf-8")
    stale = text.replace("`python -m bench.ops ", "`python -m bench.ops --shape tiny ", 1)
    args = command(stale)
    shown = run_here([*args[:2], "--help"], tmp_path)
    assert options_missing(args[2:], shown.stdout) == ["--shape"]
    assert options_missing(command(text)[2:], shown.stdout) == []
    no_load = re.sub(r"^\| load \| .*\n", "", text, count=1, flags=re.M)
    assert "load" in header(text) and "load" not in header(no_load)


def test_the_measured_command_is_the_one_typed_less_the_page_and_the_families(monkeypatch):
    """What a benchmark prints as its command reproduces what it measured: every option typed
    (not a hand-kept list that drops some), less where the page goes (--out, a family's own
    page) and how the families run (--families, --quiet, --child)."""
    from tools.page import measured_command

    monkeypatch.setattr(sys.modules["__main__"], "__spec__", SimpleNamespace(name="bench.x"))
    monkeypatch.setattr(sys, "argv", ["x", "--prompt_tokens", "8", "--K", "3", "--quiet=0.5",
                                      "--families", "Haswell", "--child", "--out", "p.md.tmp",
                                      "--prompt", "a b"])
    assert measured_command() == "python -m bench.x --prompt_tokens 8 --K 3 --prompt 'a b'"


def test_a_benchmark_prints_the_options_it_was_given(tmp_path):
    r = run_here(["-m", "bench.engine", "--sizes", "tiny", "--max_M", "2", "--repeats", "1",
                  "--n_cache", "16", "--child"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert ("`python -m bench.engine --sizes tiny --max_M 2 --repeats 1 --n_cache 16`"
            in r.stdout), r.stdout
