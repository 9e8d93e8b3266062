"""The project's own files, the one rule every check that reads the tree uses: in a git checkout,
the files git tracks that are on disk (a build/ from `pip install .`, a venv inside the checkout or
a user's scratch files are not the project); in a tree that is not a checkout (a check's own small
synthetic tree), every file in it.

    project_files(ROOT, "*.py", "picospec")                  # picospec/ and below
    project_files(ROOT, "*.py", "picospec", recursive=False)  # picospec/ itself
"""
import functools
import subprocess
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath


@functools.lru_cache
def tracked(root):
    """The tracked paths of the checkout whose top folder is `root` (str), or None."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root,
                             capture_output=True, text=True, timeout=30)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != Path(root).resolve():
            return None
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True,
                                text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return tuple(p for p in listed.stdout.split("\0") if p)


def git(folder, *args):
    """git ARGS in folder, as a test's own committer."""
    subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *args],
                   cwd=folder, check=True, capture_output=True, timeout=60)


def new_checkout(folder):
    """folder made a git checkout with everything in it committed."""
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "the files")
    return folder


def project_files(root, pattern="*", under="", recursive=True):
    """Sorted paths of the project's files below root/under whose names match `pattern`."""
    root, under = Path(root), PurePosixPath(under) if under else None
    listed = tracked(str(root))
    if listed is None:
        top = root / under if under else root
        found = top.rglob(pattern) if recursive else top.glob(pattern)
        return sorted(p for p in found if p.is_file() and ".git" not in p.relative_to(root).parts)
    out = []
    for rel in map(PurePosixPath, listed):
        inside = under is None or rel.parent == under or recursive and under in rel.parents
        if inside and fnmatch(rel.name, pattern) and (root / rel).is_file():
            out.append(root / rel)
    return sorted(out)
