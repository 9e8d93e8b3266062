"""safetensors in NumPy: round trips, every malformed file gives a clear error, and the reference
reader agrees."""
import json
import re
import struct

import numpy as np
import pytest

from gpt2.weights import (load_checkpoint, params_from_state_dict, read_safetensors,
                          save_checkpoint, state_dict_from_params, write_safetensors)
from tests.support.micro import random_gpt2


@pytest.mark.parametrize("dtype, tol", [(None, 0), ("float16", 1e-3), ("bfloat16", 1e-2)])
def test_round_trip(tmp_path, dtype, tol):
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    tensors = {"a": a, "ids": np.arange(7, dtype=np.int64), "empty": np.zeros((0, 4), np.float32)}
    write_safetensors(tmp_path / "t.safetensors", tensors, metadata={"k": "v"}, dtype=dtype)
    back = read_safetensors(tmp_path / "t.safetensors")
    assert (back["a"].dtype == np.float32 and back["ids"].dtype == np.int64
            and back["empty"].shape == (0, 4))
    np.testing.assert_allclose(back["a"], a, rtol=tol, atol=tol)
    np.testing.assert_array_equal(back["ids"], np.arange(7))


def test_bf16_values_exact():
    from gpt2.weights import to_bf16

    assert to_bf16(np.array([1.0, -2.0, 1 + 2**-8, 1 + 3 * 2**-8], np.float32)).tolist() == [0x3F80,
                                                                                             0xC000,
                                                                                             0x3F80,
                                                                                             0x3F82]


def raw_file(path, header, data=b"", length=None):
    head = json.dumps(header).encode() if isinstance(header, dict) else header
    path.write_bytes(struct.pack("<Q", len(head) if length is None else length) + head + data)
    return path


@pytest.mark.parametrize("header, data, length, message", [
    (None, None, None, "shorter than the 8-byte"),
    ({}, b"", 10**6, "beyond the end of the file"),
    (b"{not json", b"", None, "not valid JSON"),
    (b"[1, 2]", b"", None, "not a JSON object"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 80]}}, b"\0" * 8, None,
     "outside the file"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None,
     "do not hold shape"),
    ({"a": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None,
     "unknown dtype 'Q7'"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, None, "overlap"),
])
def test_malformed_files(tmp_path, header, data, length, message):
    path = tmp_path / "bad.safetensors"
    if header is None:
        path.write_bytes(b"\1\2")
    else:
        raw_file(path, header, data, length)
    with pytest.raises(ValueError, match=message) as e:
        read_safetensors(path)
    assert "bad.safetensors" in str(e.value)


def test_checkpoint_round_trip_and_errors(tmp_path):
    hparams, params = random_gpt2()
    save_checkpoint(tmp_path, hparams, params)
    h2, p2 = load_checkpoint(tmp_path)
    assert h2 == hparams
    np.testing.assert_array_equal(p2["blocks"][1]["mlp"]["c_fc"]["w"],
                                  params["blocks"][1]["mlp"]["c_fc"]["w"])
    # the prefix is accepted
    sd = {"transformer." + k: v for k, v in state_dict_from_params(params).items()}
    np.testing.assert_array_equal(params_from_state_dict(sd, hparams)["wte"], params["wte"])
    del sd["transformer.h.1.ln_2.bias"]
    with pytest.raises(ValueError, match="'h.1.ln_2.bias' is missing"):
        params_from_state_dict(sd, hparams)
    sd = state_dict_from_params(params)
    sd["wpe.weight"] = sd["wpe.weight"][:5]
    with pytest.raises(ValueError, match=r"'wpe.weight' has shape \(5, 16\), expected \(32, 16\)"):
        params_from_state_dict(sd, hparams)
    with pytest.raises(ValueError, match="config.json is missing"):
        load_checkpoint(tmp_path / "nowhere")
    # a folder where a file belongs is named as a folder, not read (no "Is a directory")
    (tmp_path / "odd" / "model.safetensors").mkdir(parents=True)
    (tmp_path / "odd" / "config.json").write_bytes((tmp_path / "config.json").read_bytes())
    with pytest.raises(ValueError, match=r"odd: model.safetensors is a folder; a checkpoint folder "
                                         r"needs the files config.json and model.safetensors"):
        load_checkpoint(tmp_path / "odd")


def test_no_half_written_file_on_failure(tmp_path):
    with pytest.raises(ValueError):
        write_safetensors(tmp_path / "x.safetensors", {"ok": np.zeros(2), "bad": np.array(["s"])})
    assert list(tmp_path.iterdir()) == []


def test_reference_reader_agrees(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    a = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    write_safetensors(tmp_path / "t.safetensors", {"a": a, "b": np.arange(3, dtype=np.int32)},
                      dtype="float16")
    ref = st.load_file(str(tmp_path / "t.safetensors"))
    np.testing.assert_array_equal(ref["a"], a.astype(np.float16))
    st.save_file({"c": a}, str(tmp_path / "r.safetensors"))
    np.testing.assert_array_equal(read_safetensors(tmp_path / "r.safetensors")["c"], a)


@pytest.mark.parametrize("entry, message", [
    ({"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}, "shape '2' is not a list of sizes"),
    ({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}, "shape [-2] is not a list of sizes"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 9]}, "are not two byte offsets"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, "8"]}, "are not two byte offsets"),
    ({"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}, "unknown dtype"),
    # sizes whose product passes int64: never an OverflowError, nor a product wrapped to 0
    ({"dtype": "F32", "shape": [2**70], "data_offsets": [0, 8]}, "do not hold shape [1180591620"),
    ({"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 0]},
     "0 bytes do not hold shape [1099511627776, 1099511627776]"),
])
def test_malformed_entries_name_the_file(tmp_path, entry, message):
    path = raw_file(tmp_path / "bad.safetensors", {"a": entry}, b"\0" * 8)
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        read_safetensors(path)
    assert str(e.value).startswith(f"{path}: ") and "replace it with a good copy" in str(e.value)


@pytest.fixture
def checkpoint(tmp_path):
    hparams, params = random_gpt2()
    save_checkpoint(tmp_path, hparams, params)
    return tmp_path, params


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del config[key]
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("changes, message", [
    ({"n_layer": 0}, "n_layer is 0; it must be a whole number >= 1"),
    ({"n_head": 0}, "n_head is 0; it must be a whole number >= 1"),
    ({"n_head": 3}, "n_embd 16 is not divisible by n_head 3"),
    ({"n_positions": 0}, "n_positions is 0"),
    ({"n_positions": None, "n_ctx": -1}, "n_ctx is -1"),  # an older config names the context n_ctx
    ({"vocab_size": 0}, "vocab_size is 0"),
    ({"n_layer": 2.5}, "n_layer is 2.5"),
    ({"n_layer": 2.0}, "n_layer is 2.0"),
    ({"n_embd": "16"}, "n_embd is '16'"),
    ({"n_head": True}, "n_head is True"),
    ({"n_embd": None}, "n_embd is missing"),
    ({"model_type": "llama"}, "model_type is 'llama': picospec runs GPT-2's architecture"),
    ({"activation_function": "swish"}, "activation_function is 'swish': picospec's GPT-2 computes "
                                       "GELU"),
])
def test_impossible_configs_are_refused(checkpoint, changes, message):
    folder, _ = checkpoint
    edit_config(folder, **changes)
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        load_checkpoint(folder)
    assert str(e.value).startswith(f"{folder / 'config.json'}: ")


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 32000,
         "max_position_embeddings": 2048}  # the keys of a Llama's config.json: none is GPT-2's


@pytest.mark.parametrize("cached", [False, True])
def test_another_architecture_is_named_as_one(tmp_path, cached):
    """A Llama's config is whole: refused for its model_type, not as a GPT-2 config with keys
    missing, and never for deletion (downloading it again brings the same file)."""
    folder = tmp_path / "mine"
    if cached:  # the layout of a snapshot in the Hugging Face cache
        folder = tmp_path / "hf" / "models--meta--llama" / "snapshots" / ("c" * 40)
    save_checkpoint(folder, *random_gpt2())
    (folder / "config.json").write_text(json.dumps(LLAMA))
    with pytest.raises(ValueError) as e:
        load_checkpoint(folder)
    assert str(e.value) == (f"{folder / 'config.json'}: model_type is 'llama': picospec runs "
                            f"GPT-2's architecture (model_type gpt2); give a GPT-2 checkpoint")


@pytest.mark.parametrize("text", ['{"n_layer": 2,', "[1, 2]", b"\xff\xfe{}"])
def test_corrupt_config_is_named(checkpoint, text):
    folder, _ = checkpoint
    path = folder / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as e:
        load_checkpoint(folder)
    assert str(e.value).startswith(f"{path}: ") and "replace it with a good copy" in str(e.value)
    assert "delete" not in str(e.value)  # a file the user supplied is theirs


def test_truncated_weights_are_named(checkpoint):
    folder, _ = checkpoint
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])  # an interrupted copy
    with pytest.raises(ValueError, match="outside the file's data") as e:
        load_checkpoint(folder)
    assert str(e.value).startswith(f"{path}: ") and "replace it with a good copy" in str(e.value)


# writing 1e5 as float16 overflows, on purpose
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("value, dtype", [(np.nan, None), (np.inf, None), (-np.inf, "bfloat16"),
                                          (1e5, "float16"),  # beyond float16's 65504: stored as inf
                                          (1e300, "float64")])  # finite in float64, inf as float32
def test_non_finite_weights_are_refused(tmp_path, value, dtype):
    hparams, params = random_gpt2()
    fc = params["blocks"][1]["mlp"]["c_fc"]
    fc["w"] = fc["w"].astype(np.float64)
    params["blocks"][1]["mlp"]["c_fc"]["w"][3, 5] = value
    save_checkpoint(tmp_path, hparams, params, dtype=dtype)
    with pytest.raises(ValueError,
                       match=r"tensor 'h.1.mlp.c_fc.weight' holds NaN or infinite values") as e:
        load_checkpoint(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'model.safetensors'}: ")


class DeviceArray:
    """Stands in for a CuPy array: its type lives in a module named cupy..., it refuses NumPy's
    implicit conversion (as CuPy does) and comes to the host only through .get()."""
    __module__ = "cupy._core.core"

    def __init__(self, a):
        self.a = a

    def __array__(self, *args, **kw):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()`")

    def get(self):
        return self.a


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_arrays_on_the_gpu_are_written_from_the_host(tmp_path, dtype):
    """A model trained with --device gpu is saved from CuPy arrays (this failed on the GPU before:
    implicit conversion)."""
    from gpt2.weights import write_safetensors

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(DeviceArray(a))
    write_safetensors(tmp_path / "w.safetensors", {"w": DeviceArray(a)}, dtype=dtype)
    assert np.array_equal(read_safetensors(tmp_path / "w.safetensors")["w"], a)


def test_ctrl_c_just_after_the_rename_is_still_an_interrupt(tmp_path, monkeypatch):
    """Ctrl-C landing after os.replace (the file is complete, the temp name gone): the
    KeyboardInterrupt reaches the command (exit 130, "interrupted"), not a FileNotFoundError from
    removing the temp file a second time."""
    import os

    from gpt2 import weights

    real_replace = os.replace

    def replace_then_interrupt(src, dst):
        real_replace(src, dst)
        raise KeyboardInterrupt

    monkeypatch.setattr(weights.os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        weights.write_safetensors(tmp_path / "a.safetensors", {"w": np.ones(3, np.float32)})
    monkeypatch.undo()
    assert read_safetensors(tmp_path / "a.safetensors")["w"].tolist() == [1, 1, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.safetensors"]
