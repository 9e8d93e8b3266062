"""The project passes `ruff check` with the rules of pyproject.toml's [tool.ruff] (lines within 100
characters, pyflakes, bugbear), and the check fails on a line it must refuse."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff():
    """The ruff command: this interpreter's module, else one on PATH; skip if neither exists."""
    try:
        import ruff as module  # noqa: F401
        return [sys.executable, "-m", "ruff"]
    except ImportError:
        if shutil.which("ruff"):
            return ["ruff"]
    pytest.skip("ruff is not installed: pip install -r requirements-test.txt")


def check(*paths, cwd=ROOT):
    return subprocess.run(ruff() + ["check", "--no-cache", *map(str, paths)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_the_project_passes_ruff():
    r = check(".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_long_line_and_an_undefined_name_are_caught(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "bad.py").write_text("x = " + " + ".join(["1"] * 40) + "\nprint(y)\n")
    r = check("bad.py", cwd=tmp_path)
    assert r.returncode == 1 and "E501" in r.stdout and "F821" in r.stdout, r.stdout + r.stderr
