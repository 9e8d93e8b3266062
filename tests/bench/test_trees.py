"""bench/trees.py: a heads folder of another kind is one line naming the option, before any
work, and --build writes no Medusa tree into it."""
import re
import shutil

import pytest

from gpt2.load import ASSETS

from tests.support.clitools import assert_refused, files_under, run_here


@pytest.mark.parametrize("args, pattern", [
    (["--blockwise", "medusa"],
     r"^error: --blockwise medusa holds Medusa heads, not Blockwise heads: give a folder of "
     r"Blockwise heads, or this one to --medusa$"),
    (["--medusa", "blockwise", "--greedy_only"],
     r"^error: --medusa blockwise holds Blockwise heads, not Medusa heads: .* to --blockwise$"),
    (["--medusa", "early_exit"], r"^error: --medusa early_exit holds an exit adapter, not Medusa"),
    (["--build", "blockwise"],
     r"^error: --build blockwise holds Blockwise heads, not Medusa heads: give a folder of "
     r"Medusa heads$"),
], ids=["blockwise-given-medusa", "medusa-given-blockwise", "medusa-given-exit", "build"])
def test_heads_of_another_kind_are_refused_before_any_work(tmp_path, args, pattern):
    for kind in ("medusa", "blockwise", "early_exit"):
        shutil.copytree(ASSETS / "tiny-target" / kind, tmp_path / kind)
    before = files_under(tmp_path)
    r = run_here(["-m", "bench.trees", *args, "--child"], tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    # no model loaded, no row measured, no medusa_choices.json written
    assert_refused(r, pattern, tmp_path, before, max_seconds=3)
    assert not r.stdout.strip(), f"worked before the refusal: {r.stdout[-300:]}"


def test_build_runs_once_and_says_what_it_wrote(tmp_path):
    """--build measures nothing: it runs in this process alone (no kernel family's header, no
    second write), and says which file it wrote and what tree, not a raw tuple."""
    shutil.copytree(ASSETS / "tiny-target" / "medusa", tmp_path / "medusa")
    r = run_here(["-m", "bench.trees", "--build", "medusa", "--budgets", "5"], tmp_path)
    assert r.returncode == 0, r.stderr[-500:]
    assert re.fullmatch(r"wrote medusa/medusa_choices\.json: a sparse tree of 5 nodes, "
                        r"[0-9.]+ tokens a step expected\n", r.stdout), r.stdout
