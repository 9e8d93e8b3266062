"""The README's demo as a user runs it: `python main.py` several times, on each kernel family.

    python -m tools.demo --out docs/results/demo.md       # every family (tools/families.py)
    python -m tools.demo --args "--method layer_skip" --runs 3

Each run is a fresh process, as a user's is (loading, warm-up and timing included). The page keeps
the output of the run whose speedup is the median, and the speedup of every run: the spread a
reader may expect on the same machine. `python -m tools.readme` copies each family's output into
the README. Shapes: none; this file only runs the command.
"""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

from picospec_cli import Option

ROOT = Path(__file__).resolve().parents[1]


def speedup(output):
    found = re.search(r"^speedup ([\d.]+)x", output, flags=re.M)
    if found is None:
        raise ValueError(f"main.py printed no speedup line:\n{output}")
    return float(found.group(1))


def main(args="--method speculative --K 4", runs=5, out=None):
    """Run `python main.py ARGS` `runs` times -> the median run's output and every run's speedup."""
    from tools.page import write_page

    outputs = []
    for i in range(runs):
        done = subprocess.run([sys.executable, "main.py", *shlex.split(args)], cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode:
            why = done.stderr.strip().removeprefix("error: ")
            raise ValueError(f"python main.py {args} failed: {why}")
        outputs.append(done.stdout.rstrip())
        print(f"run {i + 1}: speedup {speedup(outputs[-1]):.2f}x", file=sys.stderr, flush=True)
    speedups = [speedup(o) for o in outputs]
    middle = outputs[int(np.argsort(speedups)[len(speedups) // 2])]
    text = "\n".join([f"```\n$ python main.py {args}\n{middle}\n```", "",
                      f"Speedup over {runs} runs of the command (each a fresh process): median "
                      f"{np.median(speedups):.2f}x, range {min(speedups):.2f}-{max(speedups):.2f}x "
                      f"({', '.join(f'{s:.2f}' for s in speedups)})."])
    print(text)
    if out:
        write_page(out, text, threads="as the BLAS: line of the output says")


OPTIONS = [
    Option("args", str, "--method speculative --K 4", "main.py's options, as typed"),
    Option("runs", int, 5, "runs of the command (a fresh process each)", low=1),
    Option("out", "out", None, "also write a results page (docs/results/demo.md)"),
]

if __name__ == "__main__":
    from tools.families import command

    command(main, OPTIONS)
