"""Regenerate the tables of README.md and docs/ from their sources, so that they cannot drift.

    python -m tools.readme            # rewrite every generated section
    python -m tools.readme --check    # exit 2 if a section differs from its source (a test runs it)

Each generated section sits between two markers, <!-- NAME:begin (python -m tools.readme) --> and
<!-- NAME:end -->. Sources: the method table (picospec/methods.py) for the method tables; the
results pages docs/results/demo.md (the demo on each kernel family), panels.md (every row on each
kernel family), gpu.md (every row on a GPU), engine.md and engine_gpu.md (c(5)) for the README's
demo and results and docs/performance.md's tables.
"""
import itertools
import re
from pathlib import Path

from picospec.methods import METHODS, markdown

ROOT = Path(__file__).resolve().parents[1]
CPU_PAGE, GPU_PAGE = "docs/results/panels.md", "docs/results/gpu.md"  # every row on a CPU, a GPU
DEMO_PAGE = "docs/results/demo.md"


def markers(name):
    return f"<!-- {name}:begin (python -m tools.readme) -->", f"<!-- {name}:end -->"


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


def page(root, path):
    if not (root / path).exists():
        raise ValueError(f"{path} is missing: write it with the command its page names")
    return (root / path).read_text(encoding="utf-8")


def by_family(text):
    """A page's sections, one per kernel family -> {family: text}; {"": text} without sections."""
    parts = re.split(r"^## (\w+) kernels$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2])) if len(parts) > 1 else {"": text}


def table(text, first_cell, path):
    """The first table in text whose header starts with first_cell -> (header, rows), as cells
    (bold kept)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |")), None)
    if start is None:
        raise ValueError(f"{path} has no table starting with '| {first_cell} |'")
    block = itertools.takewhile(lambda line: line.startswith("|"), lines[start:])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in block]
    return cells[0], cells[2:]


def rows(text, first_cell, path):
    return table(text, first_cell, path)[1]


def bold(cells):  # the cell a page marks as the one that counts
    return next(c for c in cells if c.startswith("**")).strip("*")


def protocol_field(text, field):
    found = re.search(rf"^\| {field} \| (.*) \|$", text, flags=re.M)
    return found.group(1) if found else "not recorded"


def cpu_rows(root):
    """{family: {row name: cells}} of the every-row page (bench.panels)."""
    return {f: {r[0]: r for r in rows(t, "method", CPU_PAGE)}
            for f, t in by_family(page(root, CPU_PAGE)).items()}


def gpu_rows(root):
    return {r[0]: r for r in rows(page(root, GPU_PAGE), "method", GPU_PAGE)}


def gpu_of(text):
    """A GPU page's versions row "..., CUDA runtime N; GPU: name" -> (name, "..., CUDA runtime N");
    a row that names no GPU is its software alone."""
    versions = protocol_field(text, "versions")
    software, _, name = versions.rpartition("; GPU: ")
    return (name, software) if software else ("", versions)


NAMES = [m.name for m in METHODS if m.name != "autoregressive"] + ["speculative, T = 1"]


def label(name):
    return "`speculative`, T = 1" if name.endswith("T = 1") else f"`{name}`"


def results_table(root):
    """Every method's tokens per target call and speedup on each CPU kernel family (panels.md, the
    layout the engine's policy chose there) and on a GPU (gpu.md)."""
    cpu, gpu, text = cpu_rows(root), gpu_rows(root), page(root, CPU_PAGE)
    families = list(cpu)
    device, software = gpu_of(page(root, GPU_PAGE))
    lines = [f"CPU: {protocol_field(text, 'CPU')}, each OpenBLAS kernel family in its own process "
             f"([results/panels.md](docs/results/panels.md)). GPU: "
             f"{f'{device} ({software})' if device else software} "
             f"([results/gpu.md](docs/results/gpu.md)). Temperature 0 unless noted; speedups "
             f"against autoregressive decoding on the same device.", "",
             "| method | tokens / target call | "
             + " | ".join(f"CPU, {f} kernels: speedup" for f in families)
             + " | GPU: tokens / target call | GPU: speedup |",
             "|---|---|" + "---|" * len(families) + "---|---|"]
    for name in NAMES:
        first = cpu[families[0]].get(name)
        cells = [first[1] if first else "not measured"]
        cells += [bold(cpu[f][name]) if name in cpu[f] else "not measured" for f in families]
        g = gpu.get(name)
        cells += [g[1], bold(g)] if g else ["not measured"] * 2
        lines.append(f"| {label(name)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def methods_table(root):
    """docs/performance.md: per kernel family, every row's E, c, drafting, measured speedup, the
    cost model's and what holds it down (panels.md); the GPU's E, c and speedup (gpu.md)."""
    lines = []
    for family, table in cpu_rows(root).items():
        lines += [f"**CPU, OpenBLAS {family} kernels** ([results/panels.md](results/panels.md), "
                  f"the layout the engine's policy chooses there):", "",
                  "| method | E (tokens / target call) | c | drafting | measured | cost model | "
                  "limit (and the cost model without it) |", "|---|---|---|---|---|---|---|"]
        for name in NAMES:
            if name in table:
                r = table[name]
                on = r[7].startswith("**")  # the policy's layout: panels on
                c = r[2].split(" / ")[on]
                lines.append(f"| {label(name)} | {r[1]} | {c} | {r[3]} | {bold(r)} | {r[8]} | "
                             f"{r[9]} |")
        lines.append("")
    gpu = gpu_rows(root)
    lines += ["**GPU** ([results/gpu.md](results/gpu.md)):", "",
              "| method | E (tokens / target call) | c | measured |", "|---|---|---|---|"]
    lines += [f"| {label(n)} | {gpu[n][1]} | {gpu[n][4]} | {bold(gpu[n])} |" for n in NAMES
              if n in gpu]
    return "\n".join(lines)


def cost_curve(root):
    """docs/performance.md: c(5) of the 124M shape and the tiny target per kernel family
    (engine.md, the engine's default layout) and on a GPU (engine_gpu.md)."""
    def c5(text, path):
        header, found = table(text, "shape | layout", path)
        col = header.index("M=5")
        return {r[0]: r[col].split()[0] for r in found if r[1].startswith("default")}, found

    lines = ["| machine | c(5), 124M shape | c(5), tiny target | page |", "|---|---|---|---|"]
    for family, text in by_family(page(root, "docs/results/engine.md")).items():
        c, found = c5(text, "docs/results/engine.md")
        layout = next(r[1] for r in found if r[1].startswith("default"))  # default (panels on)
        lines.append(f"| CPU, OpenBLAS {family} kernels, {layout.replace('default ', '')[1:-1]} | "
                     f"{c.get('124M', 'not measured')} | {c.get('tiny', 'not measured')} | "
                     f"[results/engine.md](results/engine.md) |")
    gpu_text = page(root, "docs/results/engine_gpu.md")
    c = c5(gpu_text, "docs/results/engine_gpu.md")[0]
    lines.append(f"| GPU ({gpu_of(gpu_text)[0] or 'not recorded'}), fused "
                 f"kernels | {c.get('124M', 'not measured')} | {c.get('tiny', 'not measured')} | "
                 f"[results/engine_gpu.md](results/engine_gpu.md) |")
    return "\n".join(lines)


DEMO_FIGURES = {  # what the table shows of each family's run -> its pattern in the output
    "speedup, runs of the command: median (range)": r"Speedup over \d+ runs .*: median ([\d.]+x), "
                                                   r"range ([\d.]+-[\d.]+x)",
    "c": r"^why: .*a target call costs c = ([\d.]+)",
    "c_d": r"^why: .*a draft call c_d = ([\d.]+)",
    "cost model": r"^why: .* = ([\d.]+x) from this run's own costs",
    "limit here": r"^limit here: (\w+)"}


def demo(root):
    """The README's demo: main.py's output on the first kernel family (docs/results/demo.md), then
    one row of figures per family (the text is the same on each)."""
    families = by_family(page(root, DEMO_PAGE))
    head = list(DEMO_FIGURES)
    rows = ["| OpenBLAS kernels | 1-minute load at the start | " + " | ".join(head) + " |",
            "|---" * (len(head) + 2) + "|"]
    for family, text in families.items():
        load = protocol_field(text, "load").split(" at the start")[0]
        cells = []
        for name, pattern in DEMO_FIGURES.items():
            if (m := re.search(pattern, text, flags=re.M)) is None:
                raise ValueError(f"{DEMO_PAGE} ({family} kernels) prints no {name}: run "
                                 f"python -m tools.demo --out {DEMO_PAGE}")
            cells.append(" (".join(m.groups()) + ")" * (len(m.groups()) - 1))
        rows.append(f"| {family} | {load} | " + " | ".join(cells) + " |")
    family, text = next(iter(families.items()))
    body = text.split("\n\n", 2)[2].strip() if text.lstrip().startswith("|") else text.strip()
    body = body.split("\n\nSpeedup over")[0]
    return "\n".join([f"**OpenBLAS {family} kernels** ([results/demo.md](docs/results/demo.md)):",
                      "", body, "", *rows])


GENERATED = [("README.md", "methods", lambda root: method_summary()),
             ("README.md", "demo", demo),
             ("README.md", "results", results_table),
             ("docs/performance.md", "curve", cost_curve),
             ("docs/performance.md", "methods", methods_table),
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
                         "run python -m tools.readme")
    for path in dict.fromkeys(p for p, _, _ in GENERATED):
        tmp = root / f"{path}.tmp"
        tmp.write_text(texts[path], encoding="utf-8")
        tmp.replace(root / path)
    print(f"wrote {', '.join(stale)}")


if __name__ == "__main__":
    from picospec_cli import Option, command

    command(main, [Option("check", bool, False, "only compare; exit 2 when a table is stale")])
