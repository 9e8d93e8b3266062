"""The repository speaks of the software, not of how it was made.

No tracked file (code, docs, notebooks' cell sources, scripts) names work sessions, stops, leases,
lent machines, issue numbers, helpers or agents, a development machine's temporary paths, "this
checkout", or dates and commits as history. History lives in git. A results page's protocol header
(docs/results/) names its commit and date: those two rows are the only dates and commits allowed.
Notebook outputs and metadata are written by executing the notebooks and are not scanned here.
"""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RULES = {
    "a work session": r"(?<!test )(?<!pytest )(?<!scope=\")(?<!scope=')\bsessions?\b",
    "a stop of the work": r"\b(?:this|that|each|every|earlier|later|previous|last|next) stops?\b"
                          r"|\bstop \d+\b|\bstop's\b",
    "a lease or a lent machine": r"\bleas(?:e|es|ed)\b|\blent\b",
    "an issue number": r"(?<![/\w])issues? #?\d+|\bwork (?:items?|steps?)\b",
    "a helper or an agent": r"\b(?:helpers?|agents?|subagents?)\b",
    "a temporary path of a development machine": r"(?<![\w.~])/(?:tmp|work|root|home)/",
    "this checkout": r"\b(?:this|an? older?|the old|our) checkout(?:'s)?\b",
    "a date as history": r"\b20\d\d-[01]\d-[0-3]\d\b",
    "a commit as history":
        r"\b(?:commit|checkout|show|archive|at|before|since|of) [0-9a-f]{7,40}\b",
}
PATTERNS = {name: re.compile(rule, re.IGNORECASE) for name, rule in RULES.items()}
NOT_TEXT = (".safetensors", ".bpe", ".png", ".npz", ".bin")
THIRD_PARTY = ("tests/fixtures/",)  # data files copied from elsewhere, with their own licence
VOCABULARIES = ("vocab.json", "merges.txt", "encoder.json")
SELF = "tests/test_process_words.py"  # names the words it looks for
PROTOCOL_ROW = re.compile(r"^\| (?:commit|date) \|")  # a results page's header rows


def scanned(paths):
    """The files whose words are the repository's own: no binaries, vocabularies, copied data."""
    return [p for p in paths if not p.endswith(NOT_TEXT) and not p.startswith(THIRD_PARTY)
            and Path(p).name not in VOCABULARIES and Path(p).name != "LICENSE" and p != SELF]


def lines_of(root, path):
    """(where, line) pairs of a file; a notebook's are its cells' sources."""
    text = (root / path).read_text(encoding="utf-8")
    if path.endswith(".ipynb"):
        for i, cell in enumerate(json.loads(text)["cells"]):
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            for j, line in enumerate(source.splitlines(), 1):
                yield f"cell {i} line {j}", line
        return
    for j, line in enumerate(text.splitlines(), 1):
        yield f"line {j}", line


def offences(root, paths):
    """[(path, where, rule, line)] for every line that speaks of the work, not the software."""
    found = []
    for path in scanned(paths):
        header = path.startswith("docs/results/")
        for where, line in lines_of(root, path):
            if header and PROTOCOL_ROW.match(line):
                continue
            for name, pattern in PATTERNS.items():
                if pattern.search(line):
                    found.append((path, where, name, line.strip()[:120]))
    return found


def tracked(root):
    return subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.splitlines()


@pytest.fixture(scope="module")
def files():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git tree: the tracked files are unknown (run the suite from a clone)")
    return tracked(ROOT)


def test_no_tracked_file_speaks_of_how_it_was_made(files):
    found = offences(ROOT, files)
    assert not found, "words about the work, not the software:\n" + "\n".join(
        f"{path}:{where}: {name}: {line}" for path, where, name, line in found)


PLANTED = [
    ("README.md", "Measured in this session on the lent H100."),
    ("picospec/verify.py", "# fixed in issue 18 part 2"),
    ("bench/harness.py", "# run from /tmp/old first"),
    ("docs/architecture.md", "The engine of this checkout pads rows to 8."),
    ("docs/methods.md", "Retrained (2026-11-25): the pair of commit 236433b."),
    ("tests/picospec/test_tree.py", "# a helper wrote this at stop 23"),
    ("notebooks/medusa.ipynb", "the previous stop's figures"),
]


@pytest.mark.parametrize("path, phrase", PLANTED)
def test_a_planted_phrase_is_caught_in_a_copy(tmp_path, files, path, phrase):
    """The file as tracked is clean; with the phrase planted in a copy, that line of it is found."""
    assert path in scanned(files)
    target = tmp_path / path
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / path, target)
    assert offences(tmp_path, [path]) == []  # the copy is clean before the phrase goes in
    if path.endswith(".ipynb"):
        book = json.loads(target.read_text(encoding="utf-8"))
        book["cells"].append({"cell_type": "markdown", "metadata": {}, "source": [phrase]})
        target.write_text(json.dumps(book), encoding="utf-8")
    else:
        with target.open("a", encoding="utf-8") as f:
            f.write("\n" + phrase + "\n")
    found = offences(tmp_path, [path])
    assert found and all(p == path for p, *_ in found), found


def test_words_about_the_software_pass():
    """The same words in their ordinary senses are not offences: a pytest session scope, a stop
    token, the checkout a user cloned, a paper's year, a hex constant."""
    fine = ['@pytest.fixture(scope="session")', "the draft stops at the first rejection",
            "run from your checkout", "Chen et al. 2023, arXiv:2302.01318", "mask = 0xffffffff",
            "a results header, 2026"]
    assert [line for line in fine for p in PATTERNS.values() if p.search(line)] == []
