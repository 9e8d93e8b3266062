"""main.py as a user runs it: the built-in pair offline, JSON for scripts, and one-line errors for
bad input."""
import json
import re
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.clitools import run_cli, run_here

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    """main.py ARGS in this process (tests/support/clitools.py), one timed round: the tests read
    tokens, not times."""
    with tempfile.TemporaryDirectory() as folder:
        return run_here(["main.py", *args, "--runs", "1"], folder)


@pytest.mark.parametrize("method", ["speculative", "greedy", "prompt_lookup"])
def test_json_output_and_temperature_zero_equality(method):
    r = run("--method", method, *(["--K", "3"] if method != "prompt_lookup" else []), "--n_tokens",
            "24", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [run["method"] for run in out["runs"]] == ["autoregressive", method]
    assert out["same_output"] == [True]  # temperature 0: lossless means identical
    for run_ in out["runs"]:
        assert len(run_["output_ids"][0]) == 24 and run_["target_calls"] >= 1
        assert {"tokens_per_target_call", "acceptance_rate", "time_s", "texts"} <= set(run_)
    assert out["runs"][1]["tokens_per_target_call"] >= 1


@pytest.fixture(scope="module")
def datastore(tmp_path_factory):
    """A small REST datastore (the built-in tokenizer on a few lines of Python) so no test builds
    the big one."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from gpt2.encoder import load_encoder
    from picospec.rest import Datastore

    text = ("def read_lines(path):\n    with open(path) as f:\n        return "
            "f.read().splitlines()\n" * 3)
    ids = load_encoder(ROOT / "gpt2" / "assets" / "tiny-target").encode(text)
    path = tmp_path_factory.mktemp("rest") / "store.npz"
    Datastore.build(np.array(ids, dtype=np.uint16)).save(path)
    return str(path)


@pytest.mark.parametrize("method, extra", [
    ("medusa", []), ("medusa", ["--tree", "chain"]),
    ("medusa", ["--tree", "[[0],[0,0],[1]]", "--posterior", "typical"]),
    ("blockwise", ["--K", "4"]), ("blockwise", ["--K", "2", "--no-merged"]), ("rest", []),
    ("lookahead", []),
])
def test_tree_methods_equal_autoregressive_at_temperature_zero(method, extra, datastore):
    extra = extra + (["--datastore", datastore] if method == "rest" else [])
    r = run("--method", method, "--n_tokens", "24", "--json", *extra)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["same_output"] == [True]
    assert len(out["runs"][1]["output_ids"][0]) == 24 and len(out["runs"][1]["origins"][0]) == 24


def test_lossless_medusa_samples():
    r = run("--method", "medusa", "--posterior", "lossless", "--temperature", "0.8", "--n_tokens",
            "16", "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["runs"][1]["output_ids"][0]) == 16


@pytest.mark.parametrize("topk, noted", [("5", True), ("4", False)])
def test_a_topk_past_the_heads_own_tree_is_noted_once_they_load(topk, noted):
    """The built-in Medusa heads' tree reads ranks 0..3: --topk 5 runs as --topk 4, and says so
    (the tree is read as the heads load, after the other notes)."""
    r = run("--method", "medusa", "--topk", topk, "--n_tokens", "4", "--json")
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("note: --topk")]
    assert said == ([f"note: --topk {topk} offers more candidates than the heads' own tree (--tree "
                     f"sparse) reads: its paths use ranks 0..3, so the run is the one at --topk 4"]
                    if noted else []), r.stderr


@pytest.mark.parametrize("top_k, noted", [("4097", True), ("4096", False)])
def test_a_top_k_past_the_vocabulary_is_noted_once_the_target_loads(top_k, noted):
    """The tiny target's 4,097 tokens: --top_k 4097 or more keeps them all."""
    r = run("--temperature", "1", "--top_k", top_k, "--n_tokens", "4", "--json")
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("note: --top_k")]
    assert said == ([f"note: --top_k {top_k} keeps every token of the target's 4,097: it has no "
                     f"effect"] if noted else []), r.stderr


def test_ngram_draft_and_sampling():
    r = run("--draft", "ngram", "--temperature", "0.8", "--top_p", "0.95", "--n_tokens", "16",
            "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["runs"][1]["output_ids"][0]) == 16


def test_plain_output():
    r = run("--method", "speculative", "--n_tokens", "12")
    assert r.returncode == 0, r.stderr
    assert "speedup" in r.stdout and "tokens per target call" in r.stdout


def test_batch_file(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("def add(a, b):\\n\nimport os\n")
    r = run("--batch", str(prompts), "--n_tokens", "10", "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["runs"][-1]["texts"]) == 2


def test_batch_file_with_a_byte_order_mark(tmp_path):
    """A file saved by Windows Notepad starts with U+FEFF: it is no part of prompt 1."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_bytes("def add(a, b):\nimport os\n".encode("utf-8-sig"))
    r = run("--batch", str(prompts), "--n_tokens", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"] == ["def add(a, b):", "import os"]


def test_batch_from_standard_input(tmp_path):
    """--batch /dev/stdin (or a process substitution): a pipe is a file to read, once."""
    from tests.support.clitools import run_cli

    r = run_cli(["main.py", "--batch", "/dev/stdin", "--n_tokens", "2", "--json"], tmp_path,
                stdin="def add(a, b):\nimport os\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"] == ["def add(a, b):", "import os"]


def test_batch_plain_output(tmp_path):
    """--batch prints every row's text, then both runs (the method and batched autoregressive
    decoding), the speedup and how many texts are identical (all of them at temperature 0)."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("def add(a, b):\nimport os\nclass A:\n")
    r = run("--batch", str(prompts), "--method", "speculative", "--n_tokens", "10", "--temperature",
            "0")
    assert r.returncode == 0, r.stderr
    assert (r.stdout.count("tokens per target call") == 3
            and "autoregressive, batched the same way" in r.stdout)
    assert re.search(r"speedup \d+\.\d\dx over batched autoregressive; 3/3 texts identical",
                     r.stdout), r.stdout


# Bad command lines (every one a single clear line, before any model loads) are in
# tests/cli/test_picospec_cli.py.


INTERRUPT_AT_NUMPY = """
import runpy, sys


class Interrupt:  # Ctrl-C at the moment NumPy starts to load
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            raise KeyboardInterrupt


sys.meta_path.insert(0, Interrupt())
sys.argv = [sys.argv[1], "--n_tokens", "2"]
if sys.argv[0] == "picospec":  # the installed command, as pip writes its script
    from picospec_app import cli
    sys.exit(cli())
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("how", [str(ROOT / "main.py"), "picospec"])
def test_ctrl_c_while_the_libraries_load_is_no_traceback(how, tmp_path):
    """Ctrl-C before the first model loads, while NumPy and the engine are imported (a second or
    more on a cold start): exit 130 and one word, as Ctrl-C later in the run."""
    r = run_cli(["-c", INTERRUPT_AT_NUMPY, how], tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (130, "\ninterrupted\n", ""), r.stderr
