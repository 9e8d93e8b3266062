"""NumPy or CuPy, chosen in one place: get_xp("cpu" or "gpu") imports CuPy only when asked;
xp_of(a) names an array's module."""
import numpy as np


DEVICES = ("cpu", "gpu")
DEVICE_WORDS = {"cuda": "gpu", "numpy": "cpu", "cupy": "gpu"}  # what users type for them


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
    """numpy or cupy, whichever owns `a`."""
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy
    return np


def to_numpy(a):
    """`a` as a host NumPy array."""
    return a if isinstance(a, np.ndarray) else a.get()


ALIGN = 64  # bytes: a cache line, and one AVX-512 register


def aligned_empty(shape, dtype):
    """An uninitialised host array whose data starts on an ALIGN-byte boundary."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    buffer = np.empty(n + ALIGN, np.uint8)
    start = -buffer.ctypes.data % ALIGN
    return buffer[start:start + n].view(dtype).reshape(shape)


def aligned(a):
    """A host array `a` C-contiguous from an ALIGN-byte boundary, copied there (once) if it is not
    (OpenBLAS's kernels read a weight that crosses cache lines more slowly: docs/performance.md);
    anything else as it is. The copy keeps the values and shape."""
    if (not isinstance(a, np.ndarray) or a.nbytes == 0
            or (a.flags.c_contiguous and a.ctypes.data % ALIGN == 0)):
        return a
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def tree_map(f, tree):
    """f on every leaf of a tree of dicts and lists (a model's params)."""
    if isinstance(tree, dict):
        return {k: tree_map(f, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [tree_map(f, v) for v in tree]
    return f(tree)


def to_device(tree, xp):
    """Every array of `tree` moved to module xp."""
    return tree_map(to_numpy if xp is np else xp.asarray, tree)
