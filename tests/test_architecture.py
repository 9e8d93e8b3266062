"""The shape of the house (docs/architecture.md), read from the imports: the door (picospec_cli)
imports the standard library only and is the one command-line parser; picospec imports neither
gpt2 nor the app, and its algorithm files import only numpy, the standard library and picospec's
shared pieces; gpt2 imports neither picospec nor the app, and the model (gpt2/ outside gpt2/train/)
never imports training; nothing imports main; bench is imported by nothing but tests (so neither by
the app nor by the notebooks); no import circle, lazy imports included; every method file is a row
of the table. The prose of the code: docstrings at most 12% of each folder's characters, a shape
comment in reach of every array line of the model and the algorithms, no measured figures,
machines or dates in docstrings and comments. The tests mirror the tree: tests/picospec/test_x.py
tests picospec/x.py, shared code lives in tests/support/, no test module imports another. Each
checker is shown to fail on deliberately broken copies."""
import ast
import functools
import io
import json
import re
import shutil
import sys
import tokenize
from pathlib import Path

import pytest

from tests.support.tracked import project_files

ROOT = Path(__file__).resolve().parents[1]
# what a method file may import from picospec
SHARED = {"sampling", "verify", "tree"}
# picospec modules that are not a row of the table
NOT_METHODS = SHARED | {"__init__", "methods", "options", "theory"}
# packages of picospec and the extra picospec pieces their modules use: the checker imports its own
# modules and the batched sampler; the exercises, their references; a batched form imports
# batched/'s loops (and its own method's steps, checked by batched_imports)
ALSO = {"check": {"check", "batched"}, "batched": {"batched"},
        # the exercises grade a learner against picospec's own functions and the checker
        "exercises": {"exercises", "check", "theory", "medusa", "prompt_lookup", "rest",
                      "lookahead", "eagle3"},
        # EAGLE-3 drafts EAGLE-2's dynamic tree, as its paper does: the one method built on another
        "eagle3": {"eagle2"}}
STDLIB = set(sys.stdlib_module_names)


@functools.lru_cache(maxsize=None)
def parsed_text(text):
    """The syntax tree of a module's text, parsed once however many checks read it."""
    return ast.parse(text)


def parsed(path):
    return parsed_text(path.read_text(encoding="utf-8"))


def imports(path):
    """Top-level module names (and picospec submodules, as 'picospec.x'; training, as 'gpt2.train')
    that a .py file or a notebook imports."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                         if c["cell_type"] == "code")
        text = "\n".join(line for line in text.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
    names = set()
    for node in ast.walk(parsed_text(text)):
        if isinstance(node, ast.Import):
            for a in node.names:
                names.add(a.name if a.name.startswith("picospec.") else a.name.split(".")[0])
                names.add(a.name.split(".")[0])
                names |= {"gpt2.train"} & {".".join(a.name.split(".")[:2])}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
            names |= {"gpt2.train"} & {".".join(node.module.split(".")[:2])}
            if node.module == "gpt2":
                names.update({"gpt2.train"} & {f"gpt2.{a.name}" for a in node.names})
            if node.module == "picospec":
                names.update(f"picospec.{a.name}" for a in node.names)
            elif node.module.startswith("picospec."):
                names.add(node.module)
    return names


def violations(root):
    """Every broken rule in the tree at `root`, one line each."""
    root, found = Path(root), []
    files = project_files(root, "*.py") + project_files(root, "*.ipynb", "notebooks",
                                                        recursive=False)
    for path in files:
        rel, names = path.relative_to(root), imports(path)
        if "main" in names and rel.name != "main.py":
            found.append(f"{rel} imports main: nothing may import main")
        if "bench" in names and rel.parts[0] not in ("bench", "tests"):
            found.append(f"{rel} imports bench: bench is imported by nothing but tests")
        if rel.parts[0] == "picospec_cli" and names - STDLIB:
            found.append(f"{rel} imports {sorted(names - STDLIB)}: the door imports the standard "
                         "library only")
        if rel.parts[0] == "gpt2" and names & {"picospec", "picospec_app"}:
            # training may score a drafter's choices with the cost model, NumPy arithmetic only
            mine = {n for n in names if n.split(".")[0] in ("picospec", "picospec_app")}
            if rel.parts[1] == "train" and mine - {"picospec"} == {"picospec.theory"}:
                mine = set()
            if bad := mine:
                found.append(f"{rel} imports {sorted(bad)}: gpt2 knows nothing of picospec "
                             f"(training reads picospec.theory only)")
        if "tools" in names and rel.parts[0] not in ("bench", "tools", "tests"):
            found.append(f"{rel} imports tools: the tools serve the benchmarks and the tests only")
        if rel.parts[:2] != ("gpt2", "train") and rel.parts[0] == "gpt2" and "gpt2.train" in names:
            found.append(f"{rel} imports gpt2.train: the model never imports training")
        if rel.parts[0] == "picospec":
            if names & {"gpt2", "picospec_app"}:
                found.append(f"{rel} imports {sorted(names & {'gpt2', 'picospec_app'})}: picospec "
                             f"never imports the engine")
            allowed = {"numpy", "picospec", "picospec_cli", "bench"}
            outside = {n for n in names if "." not in n} - STDLIB - allowed
            if outside:
                found.append(f"{rel} imports {sorted(outside)}: algorithm files import numpy, "
                             "picospec and the door only")
            # a package's modules share its rules
            key = rel.parts[1] if len(rel.parts) > 2 else path.stem
            if key not in ("methods", "__init__"):
                own = {n.split(".")[1] for n in names if n.startswith("picospec.")} - SHARED - {key}
                own -= ALSO.get(key, set()) | ({path.stem} if key == "batched" else set())
                if own:
                    found.append(f"{rel} imports picospec.{sorted(own)}: methods import only "
                                 f"{sorted(SHARED)}")
            if key == "batched":
                found += batched_imports(root, path)
            elif len(rel.parts) == 2 and path.stem not in NOT_METHODS:
                found += batched_forms(rel, path)
    table = (root / "picospec" / "methods.py").read_text()
    rows = {n.split(".")[1] for n in imports(root / "picospec" / "methods.py")
            if n.startswith("picospec.")}
    for path in project_files(root, "*.py", "picospec", recursive=False):
        if path.stem not in NOT_METHODS and path.stem not in rows:
            found.append(f"picospec/{path.name} is not a row of picospec/methods.py: add its row "
                         f"(or list it as a shared piece)")
    if "METHODS = (" not in table:
        found.append("picospec/methods.py has no METHODS table")
    return found


def batched_forms(rel, path):
    """A method file that defines a batched form: a batch_ function, or an entry taking per-row
    generators."""
    found = []
    for node in parsed(path).body:
        if isinstance(node,
                      ast.FunctionDef) and (node.name.startswith("batch_") or "generators" in {
                a.arg for a in node.args.args + node.args.kwonlyargs}):
            found.append(f"{rel} defines the batched form {node.name}: batched forms live in "
                         f"picospec/batched/")
    return found


def batched_imports(root, path):
    """What picospec/batched/<m>.py takes from a method: only its own method's named steps
    (functions and constants), never a class of it (a step's state shared between the forms) nor
    another method's pieces."""
    found, rel = [], path.relative_to(root)
    for node in ast.walk(parsed(path)):
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("picospec.")):
            continue
        module = node.module.split(".")[1]
        if module in SHARED | {"batched"} or module != path.stem:
            continue
        source = root / "picospec" / f"{module}.py"
        classes = {n.name for n in parsed(source).body
                   if isinstance(n, ast.ClassDef)}
        for a in node.names:
            if a.name in classes:
                found.append(f"{rel} imports the class {module}.{a.name}: a batched form writes "
                             f"its step itself and shares the method's step functions and the "
                             f"verification rules, not a state machine")
    return found


def test_the_checkout_follows_the_architecture():
    assert violations(ROOT) == []


# a small tree of the house's shape, each file a few lines: what the "is caught" cases break
SMALL = {
    "main.py": "from picospec_app import cli\n",
    "picospec_cli/__init__.py": "import argparse\n",
    "picospec/__init__.py": "",
    "picospec/sampling.py": "import numpy as np\n\n\ndef residual(p, q):\n    return p - q\n",
    "picospec/verify.py": "from picospec.sampling import residual\n",
    "picospec/tree.py": "import numpy as np\n",
    "picospec/options.py": "from picospec_cli import Option\n",
    "picospec/theory.py": "import numpy as np\n",
    "picospec/methods.py": ("from picospec import greedy, medusa, rest, sequoia, speculative\n"
                            "from picospec.batched import greedy as batch_greedy\n\n"
                            "METHODS = (\n)\n"),
    "picospec/speculative.py": "from picospec.verify import residual\n",
    "picospec/greedy.py": "from picospec.sampling import residual\n",
    "picospec/medusa.py": "from picospec.tree import np\n",
    "picospec/sequoia.py": "import numpy as np\n",
    "picospec/rest.py": "class Datastore:\n    pass\n\n\ndef retrieve(x):\n    return x\n",
    "picospec/batched/__init__.py": "",
    "picospec/batched/loop.py": "import numpy as np\n",
    "picospec/batched/greedy.py": "from picospec.batched.loop import np\n",
    "picospec/batched/rest.py": "from picospec.rest import retrieve\n",
    "picospec/check/__init__.py": "",
    "picospec/check/__main__.py": "from picospec_cli import command\n",
    "gpt2/__init__.py": "",
    "gpt2/backend.py": "import numpy as np\n",
    "gpt2/model.py": ("from gpt2.backend import np\n\n\ndef linear(x):\n    return x\n\n\n"
                      "def mha(x):\n    return x\n"),
    "gpt2/engine.py": "from gpt2.model import linear\n",
    "gpt2/eagle.py": "from gpt2.model import mha\n",
    "gpt2/heads.py": "from gpt2.model import linear\n",
    "gpt2/train/__init__.py": "",
    "gpt2/train/heads.py": "from gpt2.heads import linear\n",
    "gpt2/train/eagle.py": "from picospec.theory import np\n",
    "gpt2/train/bpe.py": "import re\n",
    "picospec_app/__init__.py": "",
    "picospec_app/command.py": "from picospec_app.run import compare\n",
    "picospec_app/run.py": "from picospec.methods import METHODS\nfrom gpt2.engine import linear\n",
    "bench/__init__.py": "",
    "bench/trees.py": "from picospec_app.run import compare\nfrom tools.page import header\n",
    "bench/engine.py": "from gpt2.engine import linear\n",
    "tools/__init__.py": "",
    "tools/page.py": "from picospec_app.run import compare\n",
}


@pytest.fixture
def copy(tmp_path):
    """The small tree written at tmp_path, which breaks no rule."""
    for rel, text in SMALL.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f'"""{rel}."""\n{text}', encoding="utf-8")
    assert violations(tmp_path) == []
    assert circles(import_graph(tmp_path)) == shims(tmp_path) == []
    assert forward_copies(tmp_path) == second_parsers(tmp_path) == []
    return tmp_path


@pytest.mark.parametrize("file, line, rule", [
    ("picospec/speculative.py", "from gpt2.engine import GPT2",
     "picospec never imports the engine"),
    ("picospec/medusa.py", "import bench.harness", "bench is imported by nothing but tests"),
    ("picospec/sequoia.py", "from picospec_app.run import compare",
     "picospec never imports the engine"),
    ("picospec/rest.py", "from tqdm import tqdm", "import numpy, picospec and the door only"),
    ("picospec_cli/__init__.py", "import numpy as np", "the door imports the standard library"),
    ("picospec_cli/__init__.py", "import gpt2.hub", "the door imports the standard library"),
    ("picospec/greedy.py", "from picospec.speculative import speculative_sampling",
     "methods import only"),
    ("picospec/greedy.py", "from picospec.batched.loop import batch_tree_decoding",
     "methods import only"),
    ("picospec/batched/greedy.py", "from picospec.cascade import verify_drafts",
     "methods import only"),
    ("picospec/batched/rest.py", "from picospec.rest import Datastore",
     "imports the class rest.Datastore"),
    ("picospec/rest.py", "def batch_rest(xs):\n    pass", "defines the batched form batch_rest"),
    ("picospec/medusa.py", "def medusa_rows(xs, generators=None):\n    pass",
     "defines the batched form medusa_rows"),
    ("gpt2/engine.py", "from picospec.sampling import warp", "gpt2 knows nothing of picospec"),
    ("gpt2/train/heads.py", "from picospec_app.load import load_heads",
     "gpt2 knows nothing of picospec"),
    ("gpt2/train/eagle.py", "from picospec.verify import verify_chain",
     "training reads picospec.theory only"),
    ("gpt2/heads.py", "from picospec.theory import greedy_walk", "gpt2 knows nothing of picospec"),
    ("picospec_app/run.py", "from tools.page import header", "the tools serve the benchmarks"),
    ("gpt2/model.py", "from gpt2.train.backprop import block_backward",
     "the model never imports training"),
    ("gpt2/eagle.py", "from gpt2 import train", "the model never imports training"),
    ("picospec_app/run.py", "from bench.harness import header",
     "bench is imported by nothing but tests"),
    ("picospec_app/command.py", "import main", "nothing may import main"),
    ("bench/trees.py", "from main import cli", "nothing may import main"),
])
def test_a_wrong_import_is_caught(copy, file, line, rule):
    path = copy / file
    path.write_text(line + "\n" + path.read_text())
    assert any(rule in v for v in violations(copy)), violations(copy)


def test_a_method_missing_from_the_table_is_caught(copy):
    (copy / "picospec" / "my_new_method.py").write_text('"""A new method."""\nimport numpy as np\n')
    assert any("my_new_method.py is not a row" in v for v in violations(copy))


def module_name(root, path):
    """picospec/check/battery.py -> 'picospec.check.battery'; a package's __init__.py -> the
    package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root):
    """{module: the project's modules it imports}, every import counted, those inside functions
    (lazy) too; `from a.b import c` counts a.b.c when that is a module of the project, else a.b."""
    root = Path(root)
    parts = ("picospec_cli", "picospec", "gpt2", "picospec_app", "bench", "tools")
    files = {module_name(root, p): p for sub in parts for p in project_files(root, "*.py", sub)}
    files["main"] = root / "main.py"
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    edges.add(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base)
        graph[name] = {e for e in edges if e in files and e != name}
    return graph


def circles(graph):
    """Every import circle, as a list of modules (depth-first search; each circle reported once)."""
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


@pytest.mark.parametrize("part", ["picospec_cli", "picospec", "bench", "main", "gpt2",
                                  "picospec_app", "tools"])
def test_no_import_circles_anywhere_lazy_imports_included(part):
    assert [c for c in circles(import_graph(ROOT)) if c[0].split(".")[0] == part] == []


def test_an_import_circle_is_caught(copy):
    path = copy / "picospec" / "sampling.py"
    path.write_text(path.read_text()
                    + "\n\ndef late():\n    from picospec.verify import verify_chain\n")
    assert any("picospec.sampling" in c and "picospec.verify" in c
               for c in circles(import_graph(copy)))


def shims(root):
    """picospec and gpt2 modules that define a module __getattr__ or a table of moved names (MOVED =
    {...})."""
    out = []
    for path in [*project_files(root, "*.py", "picospec"), *project_files(root, "*.py", "gpt2")]:
        for node in parsed(path).body:
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                out.append(f"{path.relative_to(root)}: module __getattr__")
            tables = ("MOVED", "RENAMED",
                      "ALIASES") if path.relative_to(root).parts[0] == "picospec" else ("MOVED",
                                                                                        "RENAMED")
            # gpt2/hub.py's ALIASES
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "").upper() in tables
                                                    # are model names, not moved code
                                                    for t in node.targets):
                out.append(f"{path.relative_to(root)}: a table of moved names")
    return out


def test_no_shims_for_moved_names():
    assert shims(ROOT) == []


def test_a_shim_is_caught(copy):
    path = copy / "picospec" / "tree.py"
    path.write_text(path.read_text()
                    + '\n\nMOVED = {"old": "new"}\n\n\ndef __getattr__(name):\n    return '
                      'MOVED[name]\n')
    assert len(shims(copy)) == 2


# ---- prose: docstrings per folder, shapes on array lines, no measured figures in code ----

# each folder's own *.py files (not its subfolders); picoGPT has no docstrings, minbpe 11.5%,
# nanoGPT 7.1%
DOC_FOLDERS = ("picospec", "picospec/batched", "picospec/check", "picospec/exercises", "gpt2",
               "gpt2/fast", "gpt2/train", "picospec_app", "picospec_cli")
DOC_BOUND = 0.10  # function and class docstrings: a line or three each


def docstring_shares(root, folders=DOC_FOLDERS):
    """{folder: characters of its class and function docstrings over all its characters}; a
    module's header (the paper, its steps, a short proof) does not count."""
    shares = {}
    for folder in folders:
        total = docs = 0
        for path in project_files(root, "*.py", folder, recursive=False):
            text = path.read_text(encoding="utf-8")
            total += len(text)
            for node in ast.walk(parsed_text(text)):
                if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    docs += len(ast.get_docstring(node, clean=False) or "")
        shares[folder] = docs / total
    return shares


def test_docstrings_stay_within_the_bound_in_each_folder():
    """Function docstrings say what a function does and returns in a line or three; the teaching
    (the paper, its steps, a short proof) is the module's header; measurements live on the
    results pages."""
    over = {f: f"{s:.1%}" for f, s in docstring_shares(ROOT).items() if s > DOC_BOUND}
    assert over == {}, f"docstrings over {DOC_BOUND:.0%} of the folder's characters"


def test_a_folder_over_the_docstring_bound_is_caught(tmp_path):
    (tmp_path / "wordy").mkdir()
    (tmp_path / "lean").mkdir()
    body = "def f(x):\n    return x + 1\n"
    (tmp_path / "wordy" / "a.py").write_text(
        'def f(x):\n    """' + "A long story. " * 20 + '"""\n    return x + 1\n')
    (tmp_path / "lean" / "a.py").write_text('"""' + "The paper's steps. " * 40 + '"""\n'
                                            + 'def f(x):\n    """Add one."""\n' + body[10:] * 3)
    shares = docstring_shares(tmp_path, ("wordy", "lean"))
    assert shares["wordy"] > DOC_BOUND >= shares["lean"]


# an array operation: ` @ `, an np./xp. call (not a dtype or constant), .reshape(, .T, [:, or [...,
ARRAY_OP = re.compile(r"(\s@\s|\b(np|xp)\.(?!(float|int|uint|bool|ndarray|dtype|random\.Generator"
                      r"|inf|nan|newaxis|e\b|pi\b))[a-z_.]+\(|\.reshape\(|\.T\b|\[\s*(:|\.\.\.)\s*,)")
# a shape comment: a # comment holding a shape, [B, K, V] or [1 + m, V] or [...], or "scalar"
DIM = r"[\w.]+(?:\([\w.]*\))?(?:\s*[-+*/]\s*[\w.]+(?:\([\w.]*\))?)*"  # n, 1 + m, len(run), ...
SHAPE_NOTE = re.compile(rf"#.*(\[\s*{DIM}(?:\s*,\s*{DIM})*\s*\]|\bscalar\b)")
# an obvious scalar: the array operation wrapped in int(), float() or bool()
OBVIOUS = re.compile(r"\b(int|float|bool)\(\s*(np|xp)\.")
EMPTY_NOTE = re.compile(r"#\s*scalar\s*$")  # says what int() or float() already says
# the files whose array lines carry their shapes: the model and the algorithms
SHAPE_FILES = ["gpt2/model.py"] + [
    f"{folder}/{p.name}" for folder in ("picospec", "picospec/batched")
    for p in project_files(ROOT, "*.py", folder, recursive=False)
    if p.name not in ("__init__.py", "methods.py", "options.py")]


def shape_misses(text):
    """[(line number, line)] of the lines with an array operation whose result is not an obvious
    scalar and no shape comment on them or on the 3 lines above, and of the obvious scalars whose
    comment says only "scalar"; lines inside string tokens (docstrings) are not code."""
    lines = text.splitlines()
    in_strings = set()
    for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline):
        if tok.type == tokenize.STRING:
            in_strings.update(range(tok.start[0], tok.end[0] + 1))
    out = []
    for i, line in enumerate(lines, 1):
        code = line.split("#")[0]
        if i in in_strings or not ARRAY_OP.search(code):
            continue
        if OBVIOUS.search(code):
            if EMPTY_NOTE.search(line):
                out.append((i, line.strip()))
        elif not any(SHAPE_NOTE.search(r) for r in lines[max(0, i - 4):i]):
            out.append((i, line.strip()))
    return out


def test_every_array_line_has_its_shape_in_reach():
    misses = {f: shape_misses((ROOT / f).read_text(encoding="utf-8")) for f in SHAPE_FILES}
    assert {f: m for f, m in misses.items() if m} == {}


@pytest.mark.parametrize("code, missed", [
    ("h = x @ w  # [n, C]\n", []),
    ("# [B, T, C]\ny = np.tanh(x)\nz = y.reshape(B, -1)\n", []),
    ("p = np.exp(logits)\n", [1]),
    ("y = x.T\n", [1]),
    ("y = x[:, 0]  # the first column\n", [1]),
    ("# [n, V]\na = 1\nb = 2\nc = 3\nq = p[..., 0]\n", [5]),  # 4 lines above: out of reach
    ('"""x @ w in a docstring."""\nn = np.float32(1)  # no array call\n', []),
    ("i = int(np.argmax(q))\n", []),  # an obvious scalar needs no note
    ("i = int(np.argmax(q))  # scalar\n", [1]),  # and a note that says so says nothing
    ("c = np.partition(s, 2)[2]  # scalar: the third smallest\n", []),
    ("y = np.tanh(x)  # the shape of x\n", [1]),  # "shape" alone names no shape
    ("y = np.tanh(x)  # see [the paper]\n", [1]),  # words in brackets are no shape
])
def test_an_array_line_without_its_shape_is_caught(code, missed):
    assert [i for i, _ in shape_misses(code)] == missed


# measured figures, machine descriptions and dates belong on the results pages
# (docs/performance.md, docs/results/), never in the code's docstrings and comments
TIME_UNIT = r"(?:ms|µs|us|ns|s|sec|seconds?|minutes?|min|hours?|h)"
FIGURES = {
    # 1.64x, 0.91x; 3-4x more, 10x slower (a ratio of costs); not 0.5 x (1 + t) or 2 x S x C
    "speed ratio": re.compile(r"(?<![\w.])\d+\.\d+[x×](?!\w)|(?<![\w.])\d+(?:\.\d+)?(?:-\d+)?"
                              r"[x×] (?:slower|faster|more|less|fewer|the speed|speedup)\b"),
    # 12 ms, 11.8 us; 13-19 ms; about 4 s, takes 2 min; not "over the last 0.1 s" (a setting)
    "timing": re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|µs|us|ns)\b"
                         r"|(?<![\w.])\d+(?:\.\d+)?-\d+(?:\.\d+)?\s?" + TIME_UNIT + r"\b"
                         r"|\b(?:about|takes|took|in|within)\s+\d+(?:\.\d+)?\s?" + TIME_UNIT
                         + r"\b|~\s?\d+(?:\.\d+)?\s?" + TIME_UNIT + r"\b"),
    "throughput": re.compile(r"\d[\d,.]*\s?(?:new )?(?:tokens|tok|GB|MB)/s\b"),
    "measured on": re.compile(r"\bmeasured on (?:an? |\d+ )(?:[\w-]+ )?(?:machine|box|laptop|"
                              r"server|cores|CPUs|GPUs?)\b", re.I),
    "cores": re.compile(r"\bon \d+ (?:shared )?(?:CPU )?cores\b", re.I),
    # CPU and GPU models; BLAS kernel families (Haswell, SkylakeX) name code paths, not machines
    "machine": re.compile(r"\b(?:EPYC|Xeon|Ryzen|Threadripper|Core i[3579]|Graviton|Apple M[1-4]"
                          r"|[AHV]100|H200|RTX ?\d{4}|GTX ?\d{3,4})\b"),
    "date": re.compile(r"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b"),
}
FIGURE_FOLDERS = ("picospec", "gpt2", "picospec_app", "picospec_cli")


def prose_lines(text):
    """[(line number, text)] of a module's docstrings (module, class, function) and comments."""
    out = []
    for node in ast.walk(parsed_text(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                out += [(first.lineno + i, line)
                        for i, line in enumerate(first.value.value.splitlines())]
    out += [(tok.start[0], tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT]
    return out


def figures(text):
    """[(line number, kind, what)] of the measured figures, machines and dates in a module's
    prose."""
    return [(n, kind, m.group(0)) for n, line in prose_lines(text)
            for kind, pattern in FIGURES.items() for m in pattern.finditer(line)]


def test_no_measured_figures_machines_or_dates_in_code():
    found = [f"{path.relative_to(ROOT)}:{n}: {kind} {what!r}"
             for folder in FIGURE_FOLDERS for path in project_files(ROOT, "*.py", folder)
             for n, kind, what in figures(path.read_text(encoding="utf-8"))]
    assert found == [], "move them to docs/performance.md or a docs/results/ page"


@pytest.mark.parametrize("prose, kind", [
    ("# the panels run 1.64x one row", "speed ratio"),
    ('"""Slower on one core (0.91x)."""', "speed ratio"),
    ("# np.mean costs 3-4x more", "speed ratio"),
    ("# one token in 12 ms", "timing"),
    ('"""The search takes about 4 s."""', "timing"),
    ("# an add costs 10-15 us", "timing"),
    ("# 64 rows give 1,400 new tokens/s", "throughput"),
    ('"""Measured on an H100 machine."""', "measured on"),
    ("# for the tiny target on 2 cores", "cores"),
    ('"""Example: AMD EPYC, 2 CPUs."""', "machine"),
    ("# on a Xeon", "machine"),
    ("# Core i7 laptops", "machine"),
    ("# rerun on " + "-".join(("2024", "01", "31")), "date"),  # joined: not a date in this file
])
def test_a_figure_in_code_is_caught(prose, kind):
    assert kind in [k for _, k, _ in figures(prose + "\nx = 1\n")]


@pytest.mark.parametrize("prose", [
    "# K = 4 drafts; tolerance 1e-4; top_k 2x2 trees",
    '"""gelu(x) = 0.5 x (1 + t), t = tanh(c (x + 0.044715 x^3))."""',
    "# cache (2 x L x S x C numbers)",
    "# 3 x [B, n_head, n_seq, d]",
    "# OPENBLAS_CORETYPE=Haswell and SkylakeX kernels take the small-matrix path",
    "# the cores idle over the last 0.1 s",
    "# the head's learning rate is 4x the backbone's",
    "# the final accuracy is measured on the CPU",
    "# p = draft, q = target [k + 1, V]; the 124M shape: 768 x 2304",
])
def test_legitimate_prose_is_not_a_figure(prose):
    assert figures(prose + "\nx = 1\n") == []


# the block (gpt2/fast/ holds kernels)
FORWARD = ("linear", "ffn", "attention", "mha", "transformer_block")


def forward_copies(root):
    """Definitions of the forward's functions outside gpt2/model.py, and gpt2 modules that
    gpt2/model.py imports besides the backend's array functions (no performance module:
    docs/architecture.md)."""
    root, out = Path(root), []
    for path in project_files(root, "*.py"):
        if (".git" in path.parts or path.parts[len(root.parts)] == "tests"
            or path == root / "gpt2" / "model.py"):
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef) and node.name in FORWARD:
                out.append(f"{path.relative_to(root)} defines {node.name}: the forward is written "
                           f"once, in model.py")
    for node in ast.walk(parsed(root / "gpt2" / "model.py")):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module] if isinstance(node,
                                                ast.ImportFrom) else [a.name for a in node.names]
            out += [f"gpt2/model.py imports {n}" for n in names if n and n.startswith("gpt2")
                    and n != "gpt2.backend"]
    return out


def test_one_forward_and_no_performance_module_in_it():
    assert forward_copies(ROOT) == []


@pytest.mark.parametrize("file, text", [
    ("gpt2/eagle.py", "\n\ndef mha(x):\n    return x\n"),
    ("gpt2/model.py", "\nfrom gpt2.fast.ops import CPU\n"),
])
def test_a_second_forward_or_a_fast_import_is_caught(copy, file, text):
    assert forward_copies(copy) == []
    path = copy / file
    path.write_text(path.read_text() + text)
    assert len(forward_copies(copy)) == 1


def hidden_machinery(root, files=None):
    """What would make the code that runs depend on something nobody passed: the environment read
    under gpt2/ or picospec/, a module's names rebound (setattr on a module), an object standing in
    for an array (__rmatmul__, __array_ufunc__), module-level state written inside a function."""
    root, out = Path(root), []
    paths = ([root / f for f in files] if files is not None else
             [*project_files(root, "*.py", "gpt2"), *project_files(root, "*.py", "picospec")])
    for path in paths:
        rel, tree = path.relative_to(root), parsed(path)
        # names bound by imports (modules, or what a module holds)
        imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                    if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        state = {t.id for n in tree.body if isinstance(n, ast.Assign)
                 and isinstance(n.value, (ast.Dict, ast.List, ast.Set)) for t in n.targets
                 if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            text = ast.unparse(node) if isinstance(node, (ast.Attribute, ast.Call)) else ""
            if isinstance(node, ast.Attribute) and text in ("os.environ", "os.getenv"):
                out.append(f"{rel} reads {text}: settings come from the app (picospec_app)")
            elif (isinstance(node, ast.Call) and text.startswith("setattr(") and node.args
                  and ast.unparse(node.args[0]).split(".")[0] in imported):
                out.append(f"{rel} rebinds a name of {ast.unparse(node.args[0])}")
            elif isinstance(node, ast.FunctionDef) and node.name in ("__rmatmul__",
                                                                      "__array_ufunc__"):
                out.append(f"{rel} defines {node.name}: weights are plain arrays")
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__array_ufunc__" for t in node.targets):
                out.append(f"{rel} sets __array_ufunc__: weights are plain arrays")
            elif isinstance(node, ast.Global):
                out.append(f"{rel} writes module state: global {', '.join(node.names)}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    target = (inner.func.value if isinstance(inner, ast.Call)
                              and isinstance(inner.func, ast.Attribute)
                              and inner.func.attr in WRITES else
                              inner.targets[0].value if isinstance(inner, ast.Assign)
                              and isinstance(inner.targets[0], ast.Subscript) else None)
                    if isinstance(target, ast.Name) and target.id in state:
                        out.append(f"{rel} writes the module-level {target.id} in {node.name}")
    return out


WRITES = ("update", "clear", "append", "extend", "pop", "popitem", "setdefault", "add", "remove",
          "insert", "discard")


def test_no_hidden_machinery_in_the_model_or_the_algorithms():
    assert hidden_machinery(ROOT) == []


@pytest.mark.parametrize("file, text", [
    ("gpt2/engine.py", "\nimport os\nTHREADS = os.environ.get('PICOSPEC_THREADS')\n"),
    ("gpt2/fast/__init__.py", "\nimport gpt2.model\nsetattr(gpt2.model, 'gelu', None)\n"),
    ("gpt2/fast/ops.py", "\nimport gpt2\nsetattr(gpt2, 'gelu', None)\n"),
    ("gpt2/self_draft.py", "\nfrom gpt2 import model\nsetattr(model, 'gelu', None)\n"),
    ("gpt2/fast/panels.py", "\n\nclass W:\n    def __rmatmul__(self, x):\n        return x\n"),
    ("gpt2/backend.py", "\nAPPLIED = {}\n\n\ndef apply(n):\n    APPLIED['threads'] = n\n"),
    ("picospec/sampling.py", "\nSEEN = []\n\n\ndef note(x):\n    SEEN.append(x)\n"),
])
def test_hidden_machinery_is_caught(tmp_path, file, text):
    assert hidden_machinery(ROOT, [file]) == []
    path = tmp_path / file
    path.parent.mkdir(parents=True)
    path.write_text((ROOT / file).read_text() + text)
    assert len(hidden_machinery(tmp_path, [file])) >= 1


def second_parsers(root):
    """Command-line parsing outside the door: a module that imports argparse, optparse, getopt,
    click or fire, or defines a `parse`/`split`/`convert`/`usage` function or an `Option` class."""
    root, out = Path(root), []
    for path in project_files(root, "*.py"):
        rel = path.relative_to(root)
        if ".git" in rel.parts or rel.parts[0] in ("tests", "picospec_cli"):
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                         else [a.name for a in node.names])
                out += [f"{rel} imports {n}" for n in names if n.split(".")[0] in PARSERS]
            elif isinstance(node, ast.ClassDef) and node.name == "Option":
                out.append(f"{rel} defines a class Option: picospec_cli.Option is the one record")
            elif isinstance(node, ast.FunctionDef) and node.name in DOOR_FUNCTIONS:
                out.append(f"{rel} defines {node.name}: the door alone parses the command line")
    return out


PARSERS = {"argparse", "optparse", "getopt", "click", "fire", "typer"}
DOOR_FUNCTIONS = ("parse", "split", "convert", "usage")


def test_one_command_line_parser():
    assert second_parsers(ROOT) == []


def test_the_door_is_argparse_and_the_command_reads_argv_once():
    """picospec_cli builds on argparse; the picospec command's plan calls the door's `read` once and
    nothing of the app splits argv (it used to re-split it at three places)."""
    door = parsed(ROOT / "picospec_cli" / "__init__.py")
    assert "argparse" in {a.name for n in door.body if isinstance(n, ast.Import) for a in n.names}
    calls = [n.func.id for path in project_files(ROOT, "*.py", "picospec_app", recursive=False)
             for n in ast.walk(parsed(path))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert calls.count("read") == 1 and "split" not in calls and "parse" not in calls


@pytest.mark.parametrize("file, text", [
    ("picospec/check/__main__.py", "\nimport argparse\n"),
    ("bench/engine.py", "\n\ndef parse(argv):\n    return argv\n"),
    ("picospec/options.py", "\n\nclass Option:\n    pass\n"),
    ("gpt2/train/bpe.py", "\nfrom optparse import OptionParser\n"),
])
def test_a_second_parser_is_caught(copy, file, text):
    assert second_parsers(copy) == []
    path = copy / file
    path.write_text(path.read_text() + text)
    assert len(second_parsers(copy)) == 1


# ---- the test tree mirrors the source tree ----

# tests/<folder>/... mirrors the source folder; tests/cli/ and tests/ itself mirror the checkout's
# top (main.py, picospec_cli/, the notebooks/)
MIRRORS = {"picospec": "picospec", "gpt2": "gpt2", "app": "picospec_app", "bench": "bench",
           "tools": "tools", "cli": ".", "suite": "tests/suite"}
# the suite's own tools (mutants, power, timing): commands beside the tests they serve, not shared
# code; power plants each sized test's broken variant, so it imports test modules
SUITE = "suite"
# the tests of the whole project, at tests/ top
WHOLE_PROJECT = {"test_architecture.py", "test_lint.py", "test_readme.py", "test_package.py",
                 "test_process_words.py", "test_doc_names.py"}


def mirrored(source, name):
    """Whether tests/.../test_<name>.py has its source in the folder `source`: <name>.py or a folder
    <name>/, or <module>.py for a test_<module>_<aspect>.py."""
    stems = {p.stem for p in source.glob("*.py")} | {p.name for p in source.iterdir() if p.is_dir()}
    return name in stems or any(name.startswith(stem + "_") for stem in stems)


def mirror_problems(root):
    """Every tests/**/test_*.py names its source (or is a whole-project test), no test module
    imports another, and every other module of tests/ is in tests/support/."""
    root, problems = Path(root), []
    tests = root / "tests"
    for path in project_files(root, "*.py", "tests"):
        rel = path.relative_to(tests)
        if rel.parts[0] in ("support", "fixtures") or path.name in ("__init__.py", "conftest.py"):
            pass
        elif rel.parts[0] == SUITE and not path.name.startswith("test_"):
            continue
        elif not path.name.startswith("test_"):
            problems.append(f"tests/{rel}: shared code outside tests/support/")
        elif len(rel.parts) == 1:
            if path.name not in WHOLE_PROJECT and not mirrored(root, path.stem[5:]):
                problems.append(f"tests/{rel}: no source of that name and not a whole-project "
                                "test")
        elif rel.parts[0] not in MIRRORS:
            problems.append(f"tests/{rel}: tests/{rel.parts[0]}/ mirrors no source folder")
        else:
            source = root / MIRRORS[rel.parts[0]] / Path(*rel.parts[1:-1])
            if not source.is_dir() or not mirrored(source, path.stem[5:]):
                where = source.relative_to(root)
                problems.append(f"tests/{rel}: no source of that name in {where}/")
        for node in ast.walk(parsed(path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(part.startswith("test_") for n in names for part in n.split(".")):
                problems.append(f"tests/{rel}:{node.lineno}: imports a test module")
    return problems


def test_the_tests_mirror_the_tree():
    assert mirror_problems(ROOT) == []


def test_a_test_tree_out_of_shape_is_caught(tmp_path):
    for source in ("picospec/speculative.py", "picospec/batched/speculative.py", "main.py"):
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / source).write_text("")
    good = {"tests/picospec/test_speculative.py": "import numpy\n",
            "tests/picospec/batched/test_speculative_rows.py": "from tests.support import toy\n",
            "tests/cli/test_main.py": "", "tests/test_lint.py": "", "tests/support/toy.py": ""}
    bad = {"tests/picospec/test_medusa.py": "no source of that name",
           "tests/picospec/batched/test_eagle.py": "no source of that name",
           "tests/test_everything.py": "not a whole-project test",
           "tests/other/test_x.py": "mirrors no source folder",
           "tests/picospec/shared.py": "shared code outside tests/support/"}
    for rel, text in list(good.items()) + [(rel, "") for rel in bad]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "tests/picospec/test_speculative.py").write_text(
        "def f():\n    from tests.picospec.batched.test_speculative_rows import ROWS\n")
    problems = mirror_problems(tmp_path)
    for rel, why in bad.items():
        assert any(p.startswith(rel) and why in p for p in problems), (rel, problems)
    assert any(p.startswith("tests/picospec/test_speculative.py:2: imports a test module")
               for p in problems), problems
    assert len(problems) == len(bad) + 1, problems


def every_tree_check(root):
    """Each tree check's findings on the tree at root."""
    return {"violations": violations(root), "circles": circles(import_graph(root)),
            "shims": shims(root), "forward copies": forward_copies(root),
            "hidden machinery": hidden_machinery(root), "second parsers": second_parsers(root),
            "mirror": mirror_problems(root), "docstrings": docstring_shares(root)}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_build_output_a_venv_and_scratch_files_change_no_verdict(tmp_path):
    """A checkout of the project's files (the built-in weights aside), then what `pip install .`
    leaves (build/lib/ with a copy of the packages), a venv inside the checkout and a user's
    scratch files, each of which breaks a rule if read: every tree check finds what it found
    before, because the checks read the tracked files only."""
    from tests.support.tracked import git, new_checkout, project_files, tracked

    clone = tmp_path / "clone"
    for path in project_files(ROOT):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] != ("gpt2", "assets") and rel.parts[:2] != ("tests", "fixtures"):
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, clone / rel)
    before = every_tree_check(new_checkout(clone))
    for sub in ("gpt2", "picospec_cli", "picospec"):
        shutil.copytree(clone / sub, clone / "build" / "lib" / sub)
    (clone / "build" / "lib" / "gpt2" / "model.py").write_text("import picospec\n\n\n"
                                                               "def linear(x):\n    return x\n")
    (clone / "build" / "lib" / "picospec_cli" / "extra.py").write_text("import numpy\n")
    venv = clone / ".venv" / "lib" / "python3" / "site-packages" / "pkg"
    venv.mkdir(parents=True)
    (venv / "__init__.py").write_text("import argparse\nimport main\n")
    (clone / "scratch.py").write_text("import argparse\nimport main\n\n\ndef parse(x):\n"
                                      "    return x\n")
    (clone / "picospec" / "my_try.py").write_text('"""' + "words\n" * 500 + '"""\n')
    (clone / "tests" / "test_mine.py").write_text("from tests.test_lint import ROOT\n")
    assert every_tree_check(clone) == before
    # the same files, once tracked, are the project's: the checks see them
    git(clone, "add", "-f", "scratch.py", "tests/test_mine.py")
    tracked.cache_clear()
    after = every_tree_check(clone)
    assert after["second parsers"] != before["second parsers"]
    assert after["mirror"] != before["mirror"]
