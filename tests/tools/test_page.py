"""A results page's commit row (tools/page.py commit): it says "with uncommitted changes" after an
edit anywhere in the code the page reports on (the algorithms, the model, the app, its door, the
benchmarks, main.py), and only then: files git does not track, and prose, leave it clean."""
import shutil

import pytest

from tools.page import commit
from tests.support.tracked import new_checkout

CODE_FILES = ["main.py", "bench/harness.py", "gpt2/model.py", "picospec/verify.py",
              "picospec_app/run.py", "picospec_cli/__init__.py"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def tree(tmp_path):
    """A small git tree with a file in each place the pages report on, and a README."""
    for path in CODE_FILES + ["README.md"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    return new_checkout(tmp_path)


def test_a_clean_tree_is_its_commit(tree):
    assert commit(tree) != "" and " " not in commit(tree)


@pytest.mark.parametrize("path", CODE_FILES)
def test_an_edit_in_the_code_marks_the_page(tree, path):
    (tree / path).write_text("x = 2\n")
    assert commit(tree).endswith(" with uncommitted changes")


@pytest.mark.parametrize("path", ["scratch.py", "picospec/new_idea.py", "build/lib/gpt2/model.py",
                                  ".venv/lib/site.py"])
def test_untracked_files_leave_it_clean(tree, path):
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text("y = 1\n")
    assert " " not in commit(tree)


def test_prose_leaves_it_clean(tree):
    (tree / "README.md").write_text("more words\n")
    assert " " not in commit(tree)
