"""The shape of the house (docs/architecture.md), read from the imports: the door (picospec_cli)
imports the standard library only and is the one command-line parser; picospec imports neither
gpt2 nor the app, and its algorithm files import only numpy, the standard library and picospec's
shared pieces; gpt2 imports neither picospec nor the app, and the model (gpt2/ outside gpt2/train/)
never imports training; nothing imports main; bench is imported by nothing but tests (so neither by
the app nor by the notebooks); no import circle, lazy imports included; every method file is a row
of the table. The checker is shown to fail on deliberately broken copies."""
import ast
import json
import shutil
import sys
from pathlib import Path

import pytest

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
                      "lookahead"}}
STDLIB = set(sys.stdlib_module_names)


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
    for node in ast.walk(ast.parse(text)):
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
    files = [p for p in root.rglob("*.py")
             if ".git" not in p.parts] + list((root / "notebooks").glob("*.ipynb"))
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
            found.append(f"{rel} imports {sorted(names & {'picospec', 'picospec_app'})}: gpt2 "
                         f"knows nothing of picospec")
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
    for path in (root / "picospec").glob("*.py"):
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
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
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
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("picospec.")):
            continue
        module = node.module.split(".")[1]
        if module in SHARED | {"batched"} or module != path.stem:
            continue
        source = root / "picospec" / f"{module}.py"
        classes = {n.name for n in ast.parse(source.read_text(encoding="utf-8")).body
                   if isinstance(n, ast.ClassDef)}
        for a in node.names:
            if a.name in classes:
                found.append(f"{rel} imports the class {module}.{a.name}: a batched form writes "
                             f"its step itself and shares the method's step functions and the "
                             f"verification rules, not a state machine")
    return found


def test_the_checkout_follows_the_architecture():
    assert violations(ROOT) == []


@pytest.fixture
def copy(tmp_path):
    for sub in ("picospec_cli", "picospec", "gpt2", "picospec_app", "bench", "notebooks"):
        shutil.copytree(ROOT / sub, tmp_path / sub,
                        ignore=shutil.ignore_patterns("assets", "__pycache__", "*.png"))
    shutil.copy(ROOT / "main.py", tmp_path / "main.py")
    assert violations(tmp_path) == []
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
    parts = ("picospec_cli", "picospec", "gpt2", "picospec_app", "bench")
    files = {module_name(root, p): p for sub in parts for p in (root / sub).rglob("*.py")}
    files["main"] = root / "main.py"
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
                                  "picospec_app"])
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
    for path in [*(Path(root) / "picospec").rglob("*.py"), *(Path(root) / "gpt2").rglob("*.py")]:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
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


def docstring_share(root):
    """Characters of docstrings (module, class, function) over all characters of picospec/."""
    total = docs = 0
    for path in (Path(root) / "picospec").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        total += len(text)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                docs += len(ast.get_docstring(node, clean=False) or "")
    return docs / total


def test_docstrings_say_what_not_the_proofs():
    """Docstrings stay under a fifth of picospec/ (picoGPT and minbpe: 6-11%); proofs live in
    docs/proofs.md."""
    assert docstring_share(ROOT) < 0.20


# the block (gpt2/fast/ holds kernels)
FORWARD = ("linear", "ffn", "attention", "mha", "transformer_block")


def forward_copies(root):
    """Definitions of the forward's functions outside gpt2/model.py, and gpt2 modules that
    gpt2/model.py imports besides the backend's array functions (no performance module:
    docs/architecture.md)."""
    root, out = Path(root), []
    for path in [*root.rglob("*.py")]:
        if (".git" in path.parts or path.parts[len(root.parts)] == "tests"
            or path == root / "gpt2" / "model.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in FORWARD:
                out.append(f"{path.relative_to(root)} defines {node.name}: the forward is written "
                           f"once, in model.py")
    for node in ast.walk(ast.parse((root / "gpt2" / "model.py").read_text(encoding="utf-8"))):
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
             [*(root / "gpt2").rglob("*.py"), *(root / "picospec").rglob("*.py")])
    for path in paths:
        rel, tree = path.relative_to(root), ast.parse(path.read_text(encoding="utf-8"))
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
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if ".git" in rel.parts or rel.parts[0] in ("tests", "picospec_cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
    """picospec_cli builds on argparse; the picospec command calls the door's `read` once and
    nothing else splits argv (it used to re-split it at three places)."""
    door = ast.parse((ROOT / "picospec_cli" / "__init__.py").read_text(encoding="utf-8"))
    assert "argparse" in {a.name for n in door.body if isinstance(n, ast.Import) for a in n.names}
    calls = [n.func.id for n in ast.walk(ast.parse((ROOT / "picospec_app" / "command.py")
                                                   .read_text(encoding="utf-8")))
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
