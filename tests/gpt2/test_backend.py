"""gpt2/backend.py's aligned: a host array moved onto a 64-byte boundary keeps its values, shape and
dtype, an aligned one is left as it is; and every weight an engine multiplies by starts there (the
engine's weights, its LM head copy, its panels, the heads')."""
import numpy as np
import pytest

from gpt2.backend import ALIGN, aligned, tree_map
from gpt2.engine import GPT2
from gpt2.load import load_model
from tests.support.micro import random_gpt2


def misaligned(shape, offset, dtype=np.float32):
    """An array of `shape` whose data starts `offset` bytes past a 64-byte boundary."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buffer = np.empty(n + 2 * ALIGN, np.uint8)
    start = -buffer.ctypes.data % ALIGN + offset
    a = buffer[start:start + n].view(dtype).reshape(shape)
    a[...] = np.arange(a.size).reshape(shape)
    return a


@pytest.mark.parametrize("offset", [4, 16, 32, 48, 60])
@pytest.mark.parametrize("shape, dtype", [((7, 5), np.float32), ((3,), np.int64),
                                          ((2, 3, 4), np.float64), ((1,), np.float32)])
def test_aligned_moves_an_array_onto_the_boundary(offset, shape, dtype):
    a = misaligned(shape, offset, dtype)
    assert a.ctypes.data % ALIGN == offset
    b = aligned(a)
    assert b.ctypes.data % ALIGN == 0
    assert b.shape == a.shape and b.dtype == a.dtype and b.flags.c_contiguous
    np.testing.assert_array_equal(b, a)


def test_aligned_leaves_alone_what_needs_no_move():
    a = misaligned((8, 8), 0)
    assert aligned(a) is a
    empty = np.zeros((0, 4), np.float32)
    assert aligned(empty) is empty
    assert aligned([1, 2]) == [1, 2] and aligned(None) is None
    view = misaligned((4, 6), 16).T  # a transposed view: copied C-contiguous, same values
    np.testing.assert_array_equal(aligned(view), view)


def test_a_checkpoint_loads_on_the_boundary(tmp_path):
    """read_safetensors gives float tensors on the boundary, from float32 and float64 alike, so an
    engine built on them copies nothing."""
    from gpt2.weights import read_safetensors, write_safetensors

    arrays = {"a": misaligned((5, 3), 16), "b": np.arange(7, dtype=np.float64),
              "c": np.arange(4, dtype=np.int64)}
    write_safetensors(tmp_path / "m.safetensors", arrays)
    read = read_safetensors(tmp_path / "m.safetensors")
    for name in ("a", "b"):
        assert read[name].dtype == np.float32 and read[name].ctypes.data % ALIGN == 0
        np.testing.assert_array_equal(read[name], arrays[name].astype(np.float32))
    hparams, params = random_gpt2(n_vocab=30, n_ctx=16, n_embd=16, n_head=2, n_layer=1)
    params = tree_map(aligned, params)
    model = GPT2(hparams, params)
    w = params["blocks"][0]["attn"]["c_attn"]["w"]
    assert model.params["blocks"][0]["attn"]["c_attn"]["w"] is w  # no copy of an aligned weight


def every_array(tree):
    out = []
    tree_map(lambda a: out.append(a) if isinstance(a, np.ndarray) else None, tree)
    return out


@pytest.mark.parametrize("ops", ["cpu", "panels", "panel_rows"])
def test_an_engine_multiplies_by_aligned_weights(ops):
    """Its weights (given misaligned), the LM head copy and every panel."""
    hparams, params = random_gpt2(n_vocab=30, n_ctx=16, n_embd=16, n_head=2, n_layer=2)
    params = tree_map(lambda a: misaligned(a.shape, 16, a.dtype), params)
    model = GPT2(hparams, params, ops=ops)
    arrays = every_array(model.params) + [model.plan.head]
    if ops != "cpu":
        arrays += [p for _, p in model.plan.ops.matmul.panels.values()]
    assert all(a.ctypes.data % ALIGN == 0 for a in arrays)


def test_the_shipped_heads_multiply_by_aligned_weights():
    """Medusa's heads as read, the EAGLE and EAGLE-3 heads as loaded (their LM heads too)."""
    from gpt2.heads import load_heads
    from gpt2.load import ASSETS
    from picospec_app.load import load_eagle

    heads, _ = load_heads(ASSETS / "tiny-target" / "medusa")
    arrays = every_array(heads)
    target = load_model("tiny-target")[0]
    for kind in ("eagle", "eagle3"):
        head = load_eagle("tiny-target", None, target, None, kind)
        arrays += every_array(head.params) + [head.lm_head]
    floats = [a for a in arrays if a.dtype == np.float32]
    assert len(floats) > 20 and all(a.ctypes.data % ALIGN == 0 for a in floats)
