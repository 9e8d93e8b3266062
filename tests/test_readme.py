"""The README and docs/ stay true: every `python main.py ...` command of the README runs (with few
tokens), and every generated table equals what its source produces (python -m tools.readme --check).
"""
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.clitools import run_here

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BUILT_IN = {"tiny-target", "tiny-draft", "ngram"}


def readme_commands(text):
    """Every `python main.py ...` of a text: in backticks, or in a code block (after $ or &&)."""
    found = re.findall(r"(?:^|`|&& |\$ )(python main\.py[^`\n]*)", text, flags=re.M)
    return list(dict.fromkeys(c.strip() for c in found))


COMMANDS = readme_commands(README)


def test_the_readme_has_its_commands():
    assert "python main.py --method speculative --K 4" in COMMANDS
    assert len(COMMANDS) >= 15  # the demo, the table of uses, one line per method


def test_the_extractor_finds_commands_in_backticks_code_and_chains():
    text = ("run `python main.py --K 2` or\n```\n$ python main.py --json\npip install x && "
            "python main.py --draft ngram\n```\nnot `python -m bench.x` nor python main.pyc")
    assert readme_commands(text) == ["python main.py --K 2", "python main.py --json",
                                     "python main.py --draft ngram"]


@pytest.fixture(scope="module")
def datastore(tmp_path_factory):
    """A small REST datastore (a few lines of Python), so that no test builds the big one."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from gpt2.encoder import load_encoder
    from picospec.rest import Datastore

    text = "def read_lines(path):\n    with open(path) as f:\n        return f.read()\n" * 3
    ids = load_encoder(ROOT / "gpt2" / "assets" / "tiny-target").encode(text)
    path = tmp_path_factory.mktemp("rest") / "store.npz"
    Datastore.build(np.array(ids, dtype=np.uint16)).save(path)
    return str(path)


def models_named(args):
    flags = ("--target", "--draft", "--draft2")
    return {args[i + 1] for i, a in enumerate(args[:-1]) if a in flags}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_readme_command_runs(command, tmp_path, datastore):
    """Each command with 4 new tokens, offline. Files it names (--batch, --prompt_file) are made
    first; a command that names a model to download stops there with one line naming what is
    missing."""
    args = shlex.split(command)[2:]
    for i, a in enumerate(args[:-1]):
        if a in ("--batch", "--prompt_file"):
            (tmp_path / args[i + 1]).write_text("def read_lines(path):\nimport os\n")
    if "rest" in args and "--datastore" not in args:
        args += ["--datastore", datastore]
    r = run_here(["main.py", *args, "--n_tokens", "4", "--runs", "1"], tmp_path)
    if models_named(args) - BUILT_IN:
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "offline" in r.stderr.lower(), r.stderr
        return
    assert r.returncode == 0, f"{command}: {r.stderr[-800:]}"
    assert "Traceback" not in r.stderr


def test_generated_tables_are_up_to_date():
    r = run_here(["-m", "tools.readme", "--check"], ROOT)
    assert r.returncode == 0, r.stderr
    assert "up to date" in r.stdout


def copy_of_the_pages(tmp_path):
    shutil.copyfile(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path


@pytest.mark.parametrize("path, old, new, stale", [
    ("README.md", "| `speculative`, T = 1 |", "| `speculative`, T = 1 | 9 |",
     "README.md (results)"),
    ("docs/methods.md", "| `--K` | int | `4` |", "| `--K` | int | `5` |",
     "docs/methods.md (methods)"),
    ("README.md", "--method rest`", "--method rest --fast`", "README.md (methods)"),
    ("docs/results/panels.md", "| speculative | ", "| speculative | 9", "README.md (results)"),
    ("docs/results/panels.md", "| greedy | ", "| greedy | 9", "docs/performance.md (methods)"),
    ("docs/results/demo.md", "\nspeedup ", "\nspeedup 9", "README.md (demo)"),
    ("docs/results/engine.md", "| 124M | default", "| 124M | old default",
     "docs/performance.md (curve)"),
    ("docs/performance.md", "| `eagle2` | ", "| `eagle2` | 9", "docs/performance.md (methods)"),
])
def test_check_fails_on_a_stale_table(tmp_path, path, old, new, stale):
    sys.path.insert(0, str(ROOT))
    from tools.readme import main

    root = copy_of_the_pages(tmp_path)
    main(check=True, root=root)  # the copy is up to date
    text = (root / path).read_text(encoding="utf-8")
    assert old in text
    (root / path).write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(stale)):
        main(check=True, root=root)
    main(root=root)  # regenerating puts the source's table back
    main(check=True, root=root)


FAMILY_PAGES = ["demo", "panels", "engine", "ops", "harness", "trees", "eagle", "token_trees",
                "self_draft", "batch", "peers"]  # what methods cost: a section per kernel family


@pytest.mark.parametrize("name", FAMILY_PAGES)
def test_each_cpu_page_names_its_commit_and_each_family(name):
    """A CPU page's header names the commit it measured; it has a section per OpenBLAS kernel
    family, Haswell's and SkylakeX's first (older ones where its command asks), each recording the
    family asked for, the kernels its process really loaded and the load it started at."""
    text = (ROOT / "docs" / "results" / f"{name}.md").read_text(encoding="utf-8")
    assert re.search(r"^\| commit \| [0-9a-f]{7,}", text, flags=re.M), "no commit in the header"
    sections = dict(zip(*[iter(re.split(r"^## (\w+) kernels$", text, flags=re.M)[1:])] * 2))
    assert list(sections)[:2] == ["Haswell", "SkylakeX"]
    assert len(sections) == 2 or "--families" in text.split("\n## ", 1)[0]
    for family, section in sections.items():
        assert "| BLAS | openblas" in section and f"OPENBLAS_CORETYPE={family}," in section
        if family in ("Haswell", "SkylakeX"):  # the kernels a CPU with AVX-512 loads as asked
            assert f"kernel family {family}," in section
        assert re.search(r"^\| load \| \d+\.\d\d at the start", section, flags=re.M)


def checkpoint_size(folder):
    """Every number a checkpoint holds: the shapes in model.safetensors' header (its first 8 bytes
    give the header's length)."""
    import json
    import math

    with open(folder / "model.safetensors", "rb") as f:
        tensors = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return sum(math.prod(t["shape"]) for name, t in tensors.items() if name != "__metadata__")


def stated_sizes(text):
    """The README's "a 5.85M-parameter target and a 0.95M draft" -> ("5.85", "0.95")."""
    found = re.search(r"a ([\d.]+)M-parameter target and a ([\d.]+)M draft", text)
    return found.groups() if found else None


def test_the_readme_sizes_the_built_in_pair_as_its_checkpoints_do():
    """The sizes the README states are those of the shipped checkpoints (to 10k parameters), not
    the weight matrices alone that the BLAS line counts for its thread policy."""
    sizes = tuple(f"{checkpoint_size(ROOT / 'gpt2' / 'assets' / name) / 1e6:.2f}"
                  for name in ("tiny-target", "tiny-draft"))
    assert stated_sizes(README) == sizes
    target = f"{sizes[0]}M-parameter"
    assert stated_sizes(README.replace(target, "5.83M-parameter")) != sizes  # a drifted figure
