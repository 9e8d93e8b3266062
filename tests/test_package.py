"""picospec as a package: pyproject.toml lists what the requirements files list, ships every
built-in model, and `pip install .` into a fresh virtualenv gives a `picospec` command that runs the
built-in pair from any folder, offline, and a `python -m picospec.check` that checks picospec's own
verifier. The notebooks' requirements include a front end: `jupyter lab notebooks/` serves them.

The install is offline: the new virtualenv sees the packages of the interpreter running the tests
(numpy, setuptools, ...: a virtualenv's own, not its base interpreter's, through a .pth file) and
pip installs picospec alone (--no-deps --no-build-isolation --no-index), so nothing is downloaded.
"""
import fnmatch
import importlib.util
import json
import os
import shutil
import socket
import site
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.tracked import project_files

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = {"test": "requirements-test.txt", "reference": "requirements-reference.txt",
          "notebooks": "requirements-notebooks.txt"}


def pyproject():
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def requirements(name):
    """Requirement lines of a requirements file, comments dropped.
    Example: 'numpy>=1.26  # arrays' -> 'numpy>=1.26'."""
    lines = (line.split("#")[0].strip() for line in (ROOT / name).read_text().splitlines())
    return [line for line in lines if line]


def test_pyproject_lists_equal_the_requirements_files():
    project = pyproject()["project"]
    assert project["dependencies"] == requirements("requirements.txt")
    for extra, name in EXTRAS.items():
        assert project["optional-dependencies"][extra] == requirements(name), extra
    # the front end that opens the notebooks
    assert "jupyterlab" in requirements("requirements-notebooks.txt")
    assert project["scripts"] == {"picospec": "picospec_app:cli"}


def test_every_built_in_asset_is_package_data():
    patterns = pyproject()["tool"]["setuptools"]["package-data"]["gpt2"]
    files = [p.relative_to(ROOT / "gpt2").as_posix()
             for p in project_files(ROOT, "*", "gpt2/assets")]
    assert files and all(any(fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/")
                             for pat in patterns)
                         for f in files)


@pytest.mark.slow
def test_a_setuptools_that_cannot_build_a_wheel_is_named_in_one_line(tmp_path):
    """`pip install --no-build-isolation .` in a fresh virtualenv with the setuptools that Python's
    ensurepip brings (65 on 3.11, none from 3.12): one line says what to do, not 30 ending in
    "invalid command 'bdist_wheel'"."""
    subprocess.run([sys.executable, "-m", "venv", tmp_path / "venv"], check=True, timeout=300)
    python = tmp_path / "venv" / "bin" / "python"
    found = subprocess.run([python, "-c", "import setuptools, importlib.util as u; print("
                            "setuptools.__version__, u.find_spec('wheel') is not None)"],
                           capture_output=True, text=True)
    version, wheel = found.stdout.split() if found.returncode == 0 else (None, "False")
    if version and (tuple(map(int, version.split(".")[:2])) >= (70, 1) or wheel == "True"):
        pytest.skip(f"this Python's virtualenv brings a setuptools that builds wheels ({version})")
    for name in ("pyproject.toml", "build_backend.py"):  # the build fails before it reads more
        shutil.copy(ROOT / name, tmp_path / name)
    out = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                          "--no-index", "--no-cache-dir", tmp_path], capture_output=True,
                         text=True, timeout=300)
    said = [line.strip() for line in (out.stdout + out.stderr).splitlines()
            if "building picospec needs" in line]
    assert out.returncode != 0 and "bdist_wheel" not in out.stdout + out.stderr
    why = f"found {version}, without the wheel package" if version else "none is installed"
    assert said == [f"error: building picospec needs setuptools>=70.1 ({why}): pip install "
                    f"'setuptools>=70.1', or drop --no-build-isolation"], out.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """picospec installed into a fresh virtualenv from a copy of the checkout (the checkout stays
    clean)."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed: an offline build needs it in the system site "
                    "packages")
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src"
    src.mkdir()
    for name in ["pyproject.toml", "MANIFEST.in", "README.md", "main.py", "build_backend.py",
                 *map(str, ROOT.glob("requirements*.txt"))]:
        shutil.copy(ROOT / name, src)
    # bench/ and main.py are there, not installed
    for package in ("picospec_cli", "gpt2", "picospec", "picospec_app", "bench"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp / "venv"], check=True)
    python = tmp / "venv" / "bin" / "python"
    inner = subprocess.run([python, "-c",
                            "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                           *site.getsitepackages()])
    # this interpreter's packages
    (Path(inner) / "outer-environment.pth").write_text("\n".join(outer) + "\n")
    seen = subprocess.run([python, "-c", "import setuptools; print(setuptools.__file__)"],
                          capture_output=True, text=True).stdout.strip()
    assert seen == importlib.util.find_spec("setuptools").origin, ("the build would use another "
                                                                   "setuptools")
    out = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                          "--no-build-isolation", "--no-index", "--no-cache-dir", "--quiet", src],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    (tmp / "elsewhere").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PICOSPEC_OFFLINE="1", PICOSPEC_CACHE=str(tmp / "cache"))
    return python, tmp / "elsewhere", env


@pytest.mark.slow
def test_installed_command_runs_the_built_in_pair_from_any_folder(venv):
    python, elsewhere, env = venv
    where = subprocess.run([python, "-c", "import gpt2, picospec, picospec_app, picospec_cli; "
                            "print(gpt2.__file__, picospec_app.__file__, picospec_cli.__file__, "
                            "sep=chr(10))"],  # a line each: a path may hold spaces
                           cwd=elsewhere, env=env, capture_output=True, text=True)
    paths = where.stdout.splitlines()
    assert len(paths) == 3 and all(str(python.parents[1]) in p
                                   for p in paths), where.stdout + where.stderr
    # the front-door file and the benchmarks stay in the repository
    for module in ("main", "bench"):
        found = subprocess.run([python, "-c",
                                f"import importlib.util as u; print(u.find_spec({module!r}))"],
                               cwd=elsewhere, env=env, capture_output=True, text=True)
        assert found.stdout.strip() == "None", (f"{module} is installed: "
                                                f"{found.stdout}{found.stderr}")
    out = subprocess.run([python.parent / "picospec", "--method", "speculative", "--K", "4"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "── speculative" in out.stdout and "texts identical" in out.stdout
    out = subprocess.run([python.parent / "picospec", "--method", "speculative", "--K", "0"],
                         cwd=elsewhere, env=env, capture_output=True, text=True)
    assert (out.returncode == 2 and out.stderr.startswith("error: --K")
            and "Traceback" not in out.stderr)


@pytest.mark.slow
def test_installed_checker_checks_picospecs_verifier(venv):
    python, elsewhere, env = venv
    out = subprocess.run([python, "-m", "picospec.check", "picospec.verify:verify_chain",
                          "--samples", "1000",
                          "--cases", "1,2", "--json"], cwd=elsewhere, env=env, capture_output=True,
                          text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["results"][0]["verdict"] == "pass"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_jupyter_lab_serves_the_notebooks(tmp_path):
    """`jupyter lab notebooks/` as a reader would run it (no browser; on 127.0.0.1; stopped after
    one request)."""
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.skip("jupyterlab is not installed (pip install -r requirements-notebooks.txt)")
    port, token = free_port(), "picospec-test"
    argv = [sys.executable, "-m", "jupyterlab", "notebooks/", "--no-browser", f"--port={port}",
            "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path),
           "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    server = subprocess.Popen(argv + (["--allow-root"] if os.geteuid() == 0 else []), cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        names, deadline = None, time.time() + 90
        while names is None and time.time() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}",
                                            timeout=5) as r:
                    names = {c["name"] for c in json.load(r)["content"]}
            except OSError:
                time.sleep(0.5)
        assert names is not None, "jupyter lab did not answer within 90 s"
        assert {p.name for p in (ROOT / "notebooks").glob("*.ipynb")} <= names
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=10) as r:
            assert r.status == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
