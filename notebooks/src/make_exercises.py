"""Writes notebooks/exercises.ipynb without outputs (run it: notebook_io.py). Each exercise's
statement, answer and grading come from picospec/exercises/; its answer cell is tagged "answer"
and names the exercise in its metadata, so `python -m picospec.exercises handout` can clear it."""
import sys
from pathlib import Path

import nbformat as nbf

from notebook_io import NOTEBOOKS, save

sys.path.insert(0, str(NOTEBOOKS.parent))
from picospec.exercises import EXERCISES  # noqa: E402

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
cells = [
md("""# Exercises: write it, and be told whether it is right

Twelve functions at the heart of speculative decoding, each stated in its paper's notation. Write
the function in the cell marked **your answer**, run the grading cell below it, and read the
verdict: what was checked, pass or FAIL, and for a FAIL the smallest case that shows it.

* Samplers (`verify_chain`, `verify_without_replacement`) and EAGLE-3's `draft_law` (inside the
  verifier) are graded by their **law**: the exact-law checker (`picospec.check`, docs/checker.md)
  runs your function many times on toy models whose law of whole sequences is known exactly, and a
  G-test compares what came out with it. The verdict states its power: the smallest error (in
  total variation) each case catches with probability 0.9. A FAIL names the first failing case and
  either the first call that broke a rule (its inputs, the uniforms it drew, what it returned) or
  the sequences whose counts are furthest from the exact law.
* Deterministic functions (buffers, masks, matches, formulas) are compared with picospec's own on
  many cases, smallest first; a FAIL prints the first case where your output differs, beside the
  expected one.

The cells below hold the project's own answers, so every grade passes; one wrong answer is graded
too, to show what a FAIL looks like.

**For a teacher.** `python -m picospec.exercises handout notebooks/exercises.ipynb --out
handout.ipynb` writes this notebook with every answer cell back to its stub and no outputs. Hand
it out; collect the notebooks (or `.py` files defining the functions by the exercises' names:
`python -m picospec.exercises template` writes one) in a folder, then
`python -m picospec.exercises grade FOLDER` grades each file in its own process under a time
limit and prints a table, one row per learner and one column per exercise, with k of 12 (`--json`
and `--csv` give the same table; exit status 0 when every learner passes every exercise).
`python -m picospec.exercises list` names the exercises; `template NAME` writes one exercise's
statement and stub."""),
code("""import os, sys
try:  # installed (pip install picospec, or pip install . in its repository)
    import picospec
except ImportError:  # this notebook beside the repository's picospec/
    sys.path.insert(0, "..")
    try:
        import picospec
    except ImportError:
        raise ImportError("picospec is not installed: run `pip install .` in its repository "
                          "(or put this notebook in its notebooks/ folder), then restart the "
                          "kernel") from None
from picospec_cli import env_flag
QUICK = env_flag("PICOSPEC_QUICK", False)  # CI (1, true, yes): fewer samples and tokens
from picospec_app.settings import engine_choices
ENGINE = engine_choices()  # as main.py: its PICOSPEC_* settings and the cores idle now
import numpy as np
from picospec.exercises import grade
SAMPLES = 100 if QUICK else 20_000  # sequences per case of the law-graded exercises"""),
]
family = None
for name, module in EXERCISES.items():
    if module.FAMILY != family:
        family = module.FAMILY
        cells.append(md(f"## {family[0].upper() + family[1:]}"))
    cells.append(md(module.STATEMENT))
    cells.append(code(f"# your answer\n{module.ANSWER}",
                      metadata={"tags": ["answer"], "exercise": name}))
    cells.append(code(f"print(grade({name!r}, {name}, SAMPLES))"))
    if name == "verify_chain":
        cells += [
            md("""A subtly wrong answer: at a rejection, draw the replacement from q itself rather than
from the residual norm(max(0, q - p)). Each single output looks plausible; the law does not."""),
            code("""from picospec.exercises.verify_chain import resample_from_target
print(grade("verify_chain", resample_from_target, SAMPLES))"""),
        ]
cells += [
md("""## Then measure it

Your `predicted_speedup` on the built-in pair (tiny-draft for tiny-target, K = 4, temperature 0):
E, c and c_d measured from interleaved runs of autoregressive decoding and speculative sampling
(`picospec_app.run.call_costs`), the prediction beside the speedup the same runs measured (the
median of the rounds' ratios). Where the two differ, look at what the cost model leaves out: time
spent outside the model calls, and calls whose cost varies from step to step. picospec's prediction,
printed beside yours, counts the first: E (1 + r_0) / (c + K c_d + r), r the rest of a step and r_0
that of an autoregressive token (the first notebook, speculative_sampling, derives it)."""),
code("""from gpt2.load import load_model
from picospec_app.machine import blas_line, policy
from picospec_app.run import call_costs, interleaved, run_method, speedup_of
target, encoder = load_model("tiny-target", **ENGINE)
draft = load_model("tiny-draft", **ENGINE)[0]
print(blas_line(policy(target)))
x = encoder.encode("def read_lines(path):\\n    with open(path) as f:\\n        return ")
N, ROUNDS, K = (16, 2, 4) if QUICK else (64, 7, 4)
greedy = {"temperature": 0}
base, runs = interleaved([
    lambda: run_method("autoregressive", x, {"target": target}, N, 0, greedy),
    lambda: run_method("speculative", x, {"target": target, "draft": draft}, N, 0, greedy, K=K)],
    rounds=ROUNDS)
costs = call_costs(base, runs)
d = costs["drafts"]["draft"]
mine = predicted_speedup(costs["E"], costs["c"], d["per_target_call"], d["c_d"])
measured = speedup_of(base, runs)
print(f"E = {costs['E']:.2f} tokens per target call, c = {costs['c']:.2f}, "
      f"{d['per_target_call']:.1f} draft calls per target call at c_d = {d['c_d']:.3f}")
print(f"your prediction {mine:.2f}x, picospec's {costs['predicted']:.2f}x; measured "
      f"{measured['median']:.2f}x (median of {measured['rounds']} rounds, range "
      f"{measured['range'][0]:.2f} to {measured['range'][1]:.2f})")"""),
]
nb.cells = cells
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
save(nb, NOTEBOOKS / "exercises.ipynb")
