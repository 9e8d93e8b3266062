"""Shared test set-up: a deterministic hypothesis profile, so CI never flakes on a new random
example; one BLAS thread for every test module, the count gpt2/fast/policy.py gives the products
of every model below SMALL_MODEL (all the suite's models but 124M's): on 2 shared cores (and
with `-n 2`, two workers) the BLAS default spins threads over the tiny products and cost some
tests 15x the CPU time (a test that sets its own count still does, and the next module starts
from one again; an engine's forwards of 33+ token rows take the cores its policy gives them,
unless it was built with threads=1, as the built-in models below, tests/support's engines and
the tests running many such forwards build theirs); the built-in models loaded once per
test session; huggingface_hub kept off the user's cache, token and network; the project's
bytecode written once per run where no process would write it (compile_the_project)."""
import atexit
import importlib.util
import os
import py_compile
import shutil
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings

# import gpt2/ and picospec/ from the checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# the user's own picospec settings (and NO_COLOR) stay out of the verdict: a test that wants one
# sets it
for name in [n for n in os.environ if n.startswith("PICOSPEC_") or n == "NO_COLOR"]:
    os.environ.pop(name)

# huggingface_hub reads its settings once, when first imported: the test run's own Hugging Face
# cache, no token, online, and an endpoint nothing listens on (a test that downloads starts its own
# hub on 127.0.0.1 and passes its address)
for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
             "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
    os.environ.pop(name, None)
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="picospec-tests-hf-")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
assert "huggingface_hub" not in sys.modules, "huggingface_hub was imported before the tests' setup"

import pytest  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import gpt2.fast.policy as policy  # noqa: E402
from tests.support.tracked import project_files, tracked  # noqa: E402


def compile_the_project():
    """The project's bytecode, written once by the run's first process when
    PYTHONDONTWRITEBYTECODE is set (as on CI): a fresh checkout then has none, and each of the run's
    Python processes (the workers, and the hundreds the tests start: main.py, the checker, the
    graders' children, the notebooks' kernels) compiled every module it imported again. Written
    where Python writes it without that setting (__pycache__, which git ignores), hash-checked (PEP
    552): a pyc is read only while its source is the one compiled, whatever the source's timestamp
    (a file changed and restored within one second, as a mutation run does, never runs stale
    code). A folder that cannot be written stays as it was; a tree that is not a git checkout (such
    as tests/suite/mutants.py's copies) is left to Python."""
    root = Path(__file__).resolve().parents[1]
    if tracked(str(root)) is None:  # not a checkout: its files may be a venv's, thousands
        return
    for path in project_files(root, "*.py"):
        try:
            pyc = Path(importlib.util.cache_from_source(str(path)))
            source = path.read_bytes()
            with open(pyc, "rb") as f:  # magic, flags (3: hash-checked), the source's hash
                fresh = f.read(16) == (importlib.util.MAGIC_NUMBER + (3).to_bytes(4, "little")
                                       + importlib.util.source_hash(source))
        except OSError:
            fresh = False
        try:
            if not fresh:
                py_compile.compile(str(path), quiet=2,
                                   invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        except OSError:  # a read-only checkout: each process compiles as before
            pass


if sys.dont_write_bytecode and "PYTEST_XDIST_WORKER" not in os.environ:
    compile_the_project()

# main.py and the benchmarks run in the test processes over 200 times (tests/support/clitools.py
# run_here), each measuring the cores idle now while a core waits: a fifth of the window (0.02 s,
# two ticks of a CPU's clock) still measures (gpt2/fast/policy.py); the processes the tests start
# watch the shipped window.
policy.IDLE_WINDOW /= 5


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="session")
def tiny_target():
    """The shipped tiny-target engine and its tokenizer, loaded once per test session, on one BLAS
    thread (threads=1). The engine keeps a cache of the last text it read and reuses only a matching
    prefix, so any test may decode any prompt with it."""
    from gpt2.load import load_model

    return load_model("tiny-target", threads=1)


@pytest.fixture(scope="session")
def tiny_draft():
    from gpt2.load import load_model

    return load_model("tiny-draft", threads=1)
