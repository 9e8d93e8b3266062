"""gpt2/fast/gpu_kernels.py: each CUDA kernel equals the reference NumPy function it replaces
(gpt2/model.py's REFERENCE), and a GPU engine's ops are the kernels. Runs only where CuPy and a GPU
are present (bench.gpu's machine); elsewhere these tests are skipped, and say why. On the CPU the
GPU ops' dispatch runs through a stand-in (tests/gpt2/fast/test_ops.py)."""
import numpy as np
import pytest

from gpt2.fast import gpu_kernels
from gpt2.model import REFERENCE

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the CUDA kernels cannot run here")
try:
    cupy.cuda.runtime.getDeviceCount()
except Exception as e:  # noqa: BLE001 - any CUDA failure means no GPU to test on
    pytest.skip(f"no usable GPU ({e})", allow_module_level=True)
REFERENCE = REFERENCE._asdict()

SHAPES = [(1, 8), (3, 256), (5, 768), (2, 3, 1600), (4, 12, 7, 131), (1, 50257)]


@pytest.mark.parametrize("shape", SHAPES)
def test_kernels_equal_the_numpy_functions(shape):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape, dtype=np.float32) * 3).astype(np.float32)
    g = rng.standard_normal(shape[-1], dtype=np.float32)
    b = rng.standard_normal(shape[-1], dtype=np.float32)
    for name, args in (("layer_norm", (x, g, b)), ("softmax", (x,)), ("gelu", (x,))):
        f = getattr(gpu_kernels, name)
        want = REFERENCE[name](*args)  # gpt2.model's own NumPy function
        got = f(*[cupy.asarray(a) for a in args]).get()
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=f"{name} {shape}")


def test_softmax_of_masked_scores():
    """Attention's masked entries are -inf (a causal pattern: row i sees at most i + 1 entries):
    they get probability 0 and the rest still sums to 1."""
    x = np.random.default_rng(0).standard_normal((4, 6, 9), dtype=np.float32)
    x[:, :, 5:] = -np.inf
    above = np.triu_indices(6, 1)  # (i, j) with j > i
    x[:, above[0], above[1]] = -np.inf
    got = gpu_kernels.softmax(cupy.asarray(x)).get()
    assert (got[:, :, 5:] == 0).all()
    np.testing.assert_allclose(got, REFERENCE["softmax"](x), rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["layer_norm", "softmax", "gelu"])
def test_a_non_contiguous_input(name):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6), dtype=np.float32)
    extra = [rng.standard_normal(8, dtype=np.float32)
             for _ in range(2)] if name == "layer_norm" else []
    got = getattr(gpu_kernels, name)(cupy.asarray(x).T, *map(cupy.asarray, extra)).get()  # [6, 8]
    np.testing.assert_allclose(got, REFERENCE[name](x.T, *extra), rtol=2e-5, atol=2e-6)


def test_a_gpu_engine_runs_on_the_kernels_unless_told_not_to():
    from gpt2.engine import GPT2
    from tests.support.micro import random_gpt2

    hparams, params = random_gpt2()
    ops = GPT2(hparams, params, device="gpu").plan.ops
    assert (ops.gelu, ops.softmax, ops.layer_norm) == (gpu_kernels.gelu, gpu_kernels.softmax,
                                                       gpu_kernels.layer_norm)
    assert GPT2(hparams, params, device="gpu", fused=False).plan.kind == "reference"
