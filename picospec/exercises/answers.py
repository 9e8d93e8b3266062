"""Learners' answers: read from a FILE.py or a notebook's cells tagged "answer", and a notebook's
hand-out copy with those cells back to stubs."""
import itertools
import json
import sys
from pathlib import Path

from picospec.exercises import EXERCISES

TAG = "answer"  # the tag of a notebook's answer cells; metadata "exercise" names the exercise
_loaded = itertools.count()


def load(path):
    """{exercise name: function} defined in a .py file or a notebook's answer cells, or a one-line
    str saying why it could not be read."""
    path = Path(path)
    namespace = {"__name__": f"answers_{next(_loaded)}", "__file__": str(path)}
    try:
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            # the answer cells alone, with the notebook's own `import numpy as np`
            source = "import numpy as np\n\n" + "\n\n".join(
                "".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and TAG in c.get("metadata", {}).get("tags", []))
        else:
            source = path.read_text(encoding="utf-8")
        sys.path.insert(0, str(path.resolve().parent))  # the file may import its neighbours
        try:
            # the learner's code, run as they wrote it
            exec(compile(source, str(path), "exec"), namespace)
        finally:
            sys.path.remove(str(path.resolve().parent))
    except (Exception, SystemExit) as e:  # the learner's file raised: say so, grade the others
        return f"{path.name}: reading it raised {type(e).__name__}: {' '.join(str(e).split())}"
    return {name: namespace[name] for name in EXERCISES if callable(namespace.get(name))}


def handout(notebook, out):
    """Write `notebook` to `out`, answer cells back to stubs, no outputs -> the cells reset."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        if TAG in cell.get("metadata", {}).get("tags", []):
            stub = EXERCISES[cell["metadata"]["exercise"]].STUB
            cell["source"] = ("# your answer: replace the line raising NotImplementedError\n"
                              f"import numpy as np\n\n\n{stub}")
    Path(out).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return sum(TAG in c.get("metadata", {}).get("tags", []) for c in nb["cells"])


def answer_cells(notebook):
    """The exercises a notebook's answer cells are for."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    return [c["metadata"].get("exercise") for c in nb["cells"]
            if TAG in c.get("metadata", {}).get("tags", [])]
