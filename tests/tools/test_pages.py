"""The results pages stay runnable and say how they were made: each names, in its protocol
header, the commit, date, CPU, BLAS, threads, load and versions of its run, and a command that
still takes every option the page gives it (a page whose option was renamed or removed can no
longer be regenerated as it says)."""
import re
import shlex
from pathlib import Path

import pytest

from tests.support.clitools import run_here

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "results").glob("*.md"))
FIELDS = ("command", "commit", "date", "CPU", "BLAS", "threads", "load", "versions")


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
    stale = text.replace("`python -m bench.ops --out", "`python -m bench.ops --shape tiny --out", 1)
    args = command(stale)
    shown = run_here([*args[:2], "--help"], tmp_path)
    assert options_missing(args[2:], shown.stdout) == ["--shape"]
    assert options_missing(command(text)[2:], shown.stdout) == []
    no_load = re.sub(r"^\| load \| .*\n", "", text, count=1, flags=re.M)
    assert "load" in header(text) and "load" not in header(no_load)
