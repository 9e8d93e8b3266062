"""Learners' answers: read from a FILE.py or a notebook's cells tagged "answer", and a notebook's
hand-out copy with those cells back to stubs."""
import itertools
import json
import re
import sys
from pathlib import Path

from picospec.exercises import EXERCISES
from picospec_cli import replace_file

TAG = "answer"  # the tag of a notebook's answer cells; metadata "exercise" names the exercise
_loaded = itertools.count()
DEFINES = re.compile(r"^def (\w+)\s*\(", re.M)


class Unreadable(ValueError):
    """The file itself, not the learner's code: "PATH: why", the why alone in .why (for a line
    that names the file already)."""
    def __init__(self, path, why):
        super().__init__(f"{path}: {why}")
        self.why = why


def notebook_cells(path):
    """A notebook's cells, or Unreadable naming what is wrong with the file."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise Unreadable(path, "not UTF-8 text, so not a notebook") from None
    except json.JSONDecodeError as e:  # e.msg: "Expecting value", "Unterminated string starting at"
        raise Unreadable(path, f"not a notebook (not JSON: {e.msg.removesuffix(' at')} at line "
                               f"{e.lineno}, column {e.colno})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise Unreadable(path, "not a notebook (no list of cells)")
    return nb, [c for c in nb["cells"] if isinstance(c, dict) and c.get("cell_type") == "code"]


def source_of(cell):
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def is_answer(cell):
    return TAG in cell.get("metadata", {}).get("tags", [])


def without_magics(text):
    """IPython's %magic and !shell lines blanked (the line numbers stay the cell's own)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in text.split("\n"))


def read_answers(path):
    """The namespace a .py file or a notebook's answer cells define, run as the learner wrote them
    (the learner's own errors propagate; Unreadable for the file)."""
    path = Path(path)
    namespace = {"__name__": f"answers_{next(_loaded)}", "__file__": str(path)}
    if path.suffix == ".ipynb":
        _, cells = notebook_cells(path)
        # each answer cell compiled on its own: a line number is its cell's
        units = [("import numpy as np", f"{path.name}, setup")] + [
            (without_magics(source_of(c)), f"{path} cell {i}") for i, c in enumerate(cells)
            if is_answer(c)]
        untagged = {n for c in cells if not is_answer(c) for n in DEFINES.findall(source_of(c))}
        namespace["__untagged__"] = sorted(untagged & set(EXERCISES))
    else:
        try:
            units = [(path.read_text(encoding="utf-8-sig"), str(path))]  # -sig: Notepad's BOM
        except UnicodeDecodeError:
            raise Unreadable(path, "not UTF-8 text: save it as UTF-8") from None
    sys.path.insert(0, str(path.resolve().parent))  # the file may import its neighbours
    try:
        for source, name in units:
            exec(compile(source, name, "exec"), namespace)
    finally:
        sys.path.remove(str(path.resolve().parent))
    return namespace


def handout(notebook, out):
    """Write `notebook` to `out`, answer cells back to stubs, no outputs -> the cells reset."""
    nb, cells = notebook_cells(notebook)
    answers = [c for c in cells if is_answer(c)]
    for cell in cells:
        cell["outputs"], cell["execution_count"] = [], None
    for cell in answers:
        stub = EXERCISES[cell["metadata"]["exercise"]].STUB
        cell["source"] = ("# your answer: replace the line raising NotImplementedError\n"
                          f"import numpy as np\n\n\n{stub}")
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if is_device(out):
        Path(out).write_text(text, encoding="utf-8")
    else:  # written whole beside it, then renamed: a failed write leaves the old file as it was
        replace_file(Path(out).resolve(), [text.encode("utf-8")])  # a link stays a link
    return len(answers)


def is_device(path):
    """A path to write in place, not to replace: a device or a pipe (/dev/full, /dev/stdout)."""
    real = Path(path).resolve()
    return (real.exists() and not real.is_file()
            or Path(path).absolute().parts[1:2] in (("dev",), ("proc",)))


def handout_problem(notebook):
    """Why `notebook` cannot be handed out, or None."""
    nb, cells = notebook_cells(notebook)
    answers = [c for c in cells if is_answer(c)]
    if not answers:
        return f"{notebook} has no answer cells (code cells tagged '{TAG}')"
    for i, cell in enumerate(answers, 1):
        name = cell.get("metadata", {}).get("exercise")
        if name is None:
            return (f"{notebook}: answer cell {i} names no exercise: add \"exercise\": NAME to its "
                    f"metadata (the exercises: {', '.join(EXERCISES)})")
        if name not in EXERCISES:
            return (f"{notebook}: answer cell {i} names the exercise {name!r}, which does not "
                    f"exist: choose one of {', '.join(EXERCISES)}")
    return None
