"""NumPy or CuPy, chosen in one place.

`get_xp("cpu")` is NumPy; `get_xp("gpu")` imports CuPy only when asked and says clearly why it
cannot when it cannot. `xp_of(a)` gives the module an array belongs to, so array code runs unchanged
on either.
"""
import numpy as np


DEVICES = ("cpu", "gpu")


def get_xp(device="cpu"):
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use one of {', '.join(DEVICES)}")
    if device == "cpu":
        return np
    try:
        import cupy
    except ImportError as e:
        raise ValueError(f"--device gpu needs CuPy, which is not importable here ({e}); "
                         "install the wheel for your CUDA version, e.g. `pip install "
                         "cupy-cuda12x`, or use --device cpu") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # the CUDA driver or runtime is missing
        raise ValueError(f"--device gpu: CuPy is installed but CUDA is not usable ({e}); use "
                         f"--device cpu") from None
    if n == 0:
        raise ValueError("--device gpu: CuPy is installed but no GPU is visible; use --device cpu")
    return cupy


def xp_of(a):
    """The array module (numpy or cupy) that owns array `a`."""
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy
    return np


def to_numpy(a):
    """A host NumPy array from a NumPy or CuPy array."""
    return a if isinstance(a, np.ndarray) else a.get()


def tree_map(f, tree):
    """f applied to every array of a tree of dicts and lists (a model's params), the tree's shape
    kept."""
    if isinstance(tree, dict):
        return {k: tree_map(f, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [tree_map(f, v) for v in tree]
    return f(tree)


def to_device(tree, xp):
    """A tree of arrays, each moved to array module xp: numpy brings CuPy arrays to the host."""
    return tree_map(to_numpy if xp is np else xp.asarray, tree)
