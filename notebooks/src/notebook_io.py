"""What the notebook makers share: writing a notebook normalised, and executing notebooks in full.

    python notebooks/src/make_medusa.py      # writes notebooks/medusa.ipynb, cells without outputs
    python notebooks/src/notebook_io.py      # executes every notebook in full, writes it back
    python notebooks/src/notebook_io.py notebooks/medusa.ipynb

A notebook is written without execution timestamps (each cell's metadata "execution"), so executing
it again changes only what its cells print. Every notebook reads PICOSPEC_QUICK: set on (1, true,
yes; tests/test_notebooks.py does), it runs every cell on fewer prompts, tokens and repeats; the
notebooks are written back only from a run without it.
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


def main(names, environ=None):
    """Execute notebooks in full and write them back; with PICOSPEC_QUICK on, in quick mode as
    asked, and not written back (the committed notebooks hold full-mode outputs)."""
    sys.path.insert(0, str(NOTEBOOKS.parent))
    from picospec_cli import env_flag

    quick = env_flag("PICOSPEC_QUICK", False, os.environ if environ is None else environ)
    for name in names or sorted(NOTEBOOKS.glob("*.ipynb")):
        print(f"executing {name}" + " in quick mode" * quick, flush=True)
        nb = execute(name, quick=quick)
        if quick:
            print(f"PICOSPEC_QUICK is on: {name} ran in quick mode and is not written back (the "
                  f"committed notebooks hold full-mode outputs; unset it to write them)")
        else:
            save(nb, name)


if __name__ == "__main__":
    main(sys.argv[1:])
