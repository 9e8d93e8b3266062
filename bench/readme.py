"""Regenerate the tables of README.md and docs/ from their sources, so that they cannot drift.

    python -m bench.readme            # rewrite every generated section
    python -m bench.readme --check    # exit 2 if a section differs from its source (a test runs it)

Each generated section sits between two markers, <!-- NAME:begin (python -m bench.readme) --> and
<!-- NAME:end -->. Sources: the method table (picospec/methods.py) for the method tables; the
results pages docs/results/panels.md (every row on a CPU) and docs/results/gpu.md (every row on a
GPU) for the README's results.
"""
import re
from pathlib import Path

from picospec.methods import METHODS, markdown

ROOT = Path(__file__).resolve().parents[1]
CPU_PAGE, GPU_PAGE = "docs/results/panels.md", "docs/results/gpu.md"  # every row on a CPU, a GPU


def markers(name):
    return f"<!-- {name}:begin (python -m bench.readme) -->", f"<!-- {name}:end -->"


def section(text, name="methods", path="README.md"):
    """The generated part of a text, markers excluded."""
    begin, end = markers(name)
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no {begin} ... {end} section: add the two markers where "
                         "the table goes")
    return text.split(begin, 1)[1].split(end, 1)[0]


def method_summary():
    """One row per method: what it does, its paper, its law, the command that runs it."""
    laws = {"lossless": "lossless", "greedy": "greedy-only", "lossy": "lossy"}
    lines = ["| method | what it does | paper | law at temperature > 0 | run it |",
             "|---|---|---|---|---|"]
    for m in METHODS:
        law = "depends on --posterior" if callable(m.law) else laws[m.law]
        run = f"`python main.py --method {m.name}`"
        lines.append(f"| `{m.name}` | {m.help} | {m.paper} | {law} | {run} |")
    return "\n".join(lines)


def table_rows(root, path, first_cell):
    """The rows of the table in a results page whose header starts with first_cell -> (page text,
    [[cells]]), bold marks removed."""
    if not (root / path).exists():
        raise ValueError(f"{path} is missing: write it with the command its page names")
    text = (root / path).read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |")), None)
    if start is None:
        raise ValueError(f"{path} has no table starting with '| {first_cell} |'")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip().replace("**", "") for c in line.strip("|").split("|")])
    return text, rows


def protocol_field(text, field):
    found = re.search(rf"^\| {field} \| (.*) \|$", text, flags=re.M)
    return found.group(1) if found else "not recorded"


def results_table(root):
    """Every method's tokens per target call and speedup on a CPU (panels.md, the column of the
    layout the engine's policy chose there) and on a GPU (gpu.md)."""
    cpu_text, cpu_rows = table_rows(root, CPU_PAGE, "method")
    gpu_text, gpu_rows = table_rows(root, GPU_PAGE, "method")
    panels = "on" if "weight panels on" in protocol_field(cpu_text, "threads") else "off"
    cpu = {r[0]: (r[1], r[5] if panels == "off" else r[6]) for r in cpu_rows}
    gpu = {r[0]: (r[1], r[5]) for r in gpu_rows}
    names = [m.name for m in METHODS if m.name != "autoregressive"] + ["speculative, T = 1"]
    lines = [f"CPU: {protocol_field(cpu_text, 'CPU')}, {protocol_field(cpu_text, 'BLAS')}, weight "
             f"panels {panels} ([results/panels.md](docs/results/panels.md)). GPU: "
             f"{protocol_field(gpu_text, 'versions')} ([results/gpu.md](docs/results/gpu.md)). "
             f"Temperature 0 unless noted; speedups against autoregressive decoding on the same "
             f"device.", "",
             "| method | CPU: tokens / target call | CPU: speedup | GPU: tokens / target call "
             "| GPU: speedup |", "|---|---|---|---|---|"]
    for name in names:
        c, g = cpu.get(name, ("not measured",) * 2), gpu.get(name, ("not measured",) * 2)
        label = "`speculative`, T = 1" if name.endswith("T = 1") else f"`{name}`"
        lines.append(f"| {label} | {c[0]} | {c[1]} | {g[0]} | {g[1]} |")
    return "\n".join(lines)


GENERATED = [("README.md", "methods", lambda root: method_summary()),
             ("README.md", "results", results_table),
             ("docs/methods.md", "methods", lambda root: markdown())]  # (file, section, source)


def main(check=False, root=ROOT):
    """Write (or with --check only compare) every generated section of the files under root."""
    root, stale, texts = Path(root), [], {}
    for path, name, make in GENERATED:
        text = texts.setdefault(path, (root / path).read_text(encoding="utf-8"))
        fresh = "\n" + make(root) + "\n"
        if section(text, name, path) == fresh:
            continue
        stale.append(f"{path} ({name})")
        begin, end = markers(name)
        head, rest = text.split(begin, 1)
        texts[path] = head + begin + fresh + end + rest.split(end, 1)[1]
    if not stale:
        print("every generated table is up to date")
        return
    if check:
        raise ValueError(f"generated tables differ from their sources: {', '.join(stale)}; "
                         "run python -m bench.readme")
    for path in dict.fromkeys(p for p, _, _ in GENERATED):
        tmp = root / f"{path}.tmp"
        tmp.write_text(texts[path], encoding="utf-8")
        tmp.replace(root / path)
    print(f"wrote {', '.join(stale)}")


if __name__ == "__main__":
    from picospec_cli import Option, command

    command(main, [Option("check", bool, False, "only compare; exit 2 when a table is stale")])
