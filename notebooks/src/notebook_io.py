"""What the notebook makers share: writing a notebook normalised, and executing notebooks in full.

    python notebooks/src/make_medusa.py      # writes notebooks/medusa.ipynb, cells without outputs
    python notebooks/src/notebook_io.py      # executes every notebook in full, writes it back
    python notebooks/src/notebook_io.py notebooks/medusa.ipynb

A notebook is written without execution timestamps (each cell's metadata "execution"), so executing
it again changes only what its cells print. Every notebook reads PICOSPEC_QUICK: set to 1
(tests/test_notebooks.py does), it runs every cell on fewer prompts, tokens and repeats; the
notebooks are executed here without it.
"""
import os
import sys
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1]


def save(nb, path):
    """Write notebook `nb` to `path` without the cells' execution timestamps."""
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, str(path))


def execute(path, quick=False, timeout=1200, then=()):
    """Run the notebook at `path` top to bottom in its folder (quick: PICOSPEC_QUICK=1), then the
    code cells `then` (sources) -> the executed notebook, `then` included."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(source) for source in then]
    env = dict(os.environ, PICOSPEC_QUICK="1" if quick else "0")
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute(env=env)
    return nb


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(NOTEBOOKS.glob("*.ipynb")):
        print(f"executing {name}", flush=True)
        save(execute(name), name)
