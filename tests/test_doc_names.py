"""The docs name only code that exists: every `file.py: name` on a docs page or in the README is a
function, class or module-level name of that file (a bare file name is looked up in picospec/,
picospec/batched/ and gpt2/), so a rename cannot leave a page pointing at nothing."""
import re
from pathlib import Path

from tests.support.tracked import project_files

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"`([\w/]+\.py): ([\w.]+)`")
FOLDERS = ("picospec", "picospec/batched", "gpt2")


def defines(path, name):
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return re.search(rf"^\s*(?:def|class) {name}\b|^{name}\b", text, re.MULTILINE) is not None


def missing_names(text, root=ROOT):
    """The `file.py: name` references in `text` whose file defines no such name."""
    out = []
    for file, dotted in REFERENCE.findall(text):
        name = dotted.split(".")[-1]  # Class.method: the method
        paths = [root / file] if "/" in file else [root / d / file for d in FOLDERS]
        if not any(defines(p, name) for p in paths):
            out.append(f"{file}: {dotted}")
    return out


def pages():
    return [p for p in project_files(ROOT, "*.md") if p.parts[len(ROOT.parts)] in ("docs",)
            or p == ROOT / "README.md"]


def test_every_page_names_only_existing_code():
    found = {str(p.relative_to(ROOT)): missing_names(p.read_text(encoding="utf-8"))
             for p in pages()}
    assert {page: names for page, names in found.items() if names} == {}
    # the pages do name code this way: the check has something to read
    assert sum(len(REFERENCE.findall(p.read_text(encoding="utf-8"))) for p in pages()) >= 50


def test_a_stale_name_is_caught():
    assert missing_names("`eagle3.py: draft_logits` and `eagle3.py: draft_law`") == [
        "eagle3.py: draft_logits"]
    assert missing_names("`rest.py: Datastore.find` `gpt2/eagle3.py: Eagle3Head`") == [
        "rest.py: Datastore.find"]
    assert missing_names("`nowhere.py: call`") == ["nowhere.py: call"]
