"""The build backend: setuptools' own, once it is known to build a wheel by itself.

setuptools before 70.1 builds wheels only with the separate `wheel` package: `pip install
--no-build-isolation .` in a fresh virtualenv (setuptools 65) failed after 30 lines with "invalid
command 'bdist_wheel'". pyproject.toml asks for setuptools>=70.1, which pip installs for the build
unless --no-build-isolation tells it to use what is there; then this says what to do, in one line.
"""
import importlib.util
import sys

FIX = "pip install 'setuptools>=70.1', or drop --no-build-isolation"
if importlib.util.find_spec("setuptools") is None:
    sys.exit(f"error: building picospec needs setuptools>=70.1 (none is installed): {FIX}")

from setuptools import __version__  # noqa: E402
from setuptools.build_meta import *  # noqa: E402, F401, F403 (the backend's hooks)

if (tuple(int(p) for p in __version__.split(".")[:2] if p.isdigit()) < (70, 1)
        and importlib.util.find_spec("wheel") is None):
    sys.exit(f"error: building picospec needs setuptools>=70.1 (found {__version__}, without the "
             f"wheel package): {FIX}")
