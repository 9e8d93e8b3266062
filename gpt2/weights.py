"""Checkpoints as safetensors in NumPy (no torch, no pickle), in GPT2LMHeadModel's names. A file:
an 8-byte little-endian header length N, N bytes of JSON {name: {"dtype": "F32", "shape": [2],
"data_offsets": [0, 8]}, ...}, the tensors' bytes. h.{i}.ln_1.weight -> blocks[i]["ln_1"]["g"],
.bias -> "b"; Conv1D weights are [in, out]; lm_head.weight is wte, ignored.
"""
import contextlib
import json
import math
import os
import shutil
import struct
from pathlib import Path

import numpy as np

from gpt2.backend import aligned_empty, to_numpy
from picospec_cli import replace_file

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
          "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
          "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_}
NAMES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64",
         np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.int16): "I16",
         np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8", np.dtype(np.uint16): "U16",
         np.dtype(np.uint32): "U32", np.dtype(np.uint64): "U64", np.dtype(np.bool_): "BOOL"}


def fix_for(path):
    """What to do about a bad file: delete a download (in the Hugging Face cache), else replace."""
    path = Path(path).absolute()
    if path.parent.parent.name == "snapshots" and path.parents[2].name.startswith("models--"):
        blob = f" (and {path.resolve()}, the file it links to)" if path.is_symlink() else ""
        return f"delete it{blob} to download it again"
    return "replace it with a good copy, or re-train it if you made it"


class CorruptFile(ValueError):
    """A bad file; the message names it, says what is wrong and what to do."""

    def __init__(self, path, what, fix=None):
        super().__init__(f"{path}: {what}; {fix or fix_for(path)}")


def _fail(path, what):
    raise CorruptFile(path, what)


def read_json(path, fix=None):
    """The JSON value in `path`, or CorruptFile."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise CorruptFile(path, f"not valid JSON ({e})", fix) from None


def read_header(path):
    size = os.path.getsize(path)
    if size < 8:
        _fail(path, f"not a safetensors file: {size} bytes, shorter than the 8-byte header length")
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > size - 8:
            _fail(path,
                  f"header length {n} reaches beyond the end of the file ({size} bytes): truncated "
                  f"or not safetensors")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            _fail(path, f"header is not valid JSON ({e})")
    if not isinstance(header, dict):
        _fail(path, "header is not a JSON object")
    return header, 8 + n, size


def read_safetensors(path):
    """{name: array}; F16 and BF16 come back as float32."""
    header, start, size = read_header(path)
    header.pop("__metadata__", None)
    spans, tensors = [], {}
    for name, info in header.items():
        _check_entry(path, name, info)
        begin, end = info["data_offsets"]
        dtype = np.dtype(DTYPES[info["dtype"]])
        count = math.prod(info["shape"])  # exact: a huge shape must not wrap around in int64
        if not 0 <= begin <= end or start + end > size:
            _fail(path,
                  f"tensor {name!r}: data_offsets [{begin}, {end}] lie outside the file's data")
        if end - begin != count * dtype.itemsize:
            _fail(path,
                  f"tensor {name!r}: {end - begin} bytes do not hold shape {info['shape']} of "
                  f"{info['dtype']}")
        spans.append((begin, end, name))
    spans.sort()
    for (_, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            _fail(path, f"tensors {n0!r} and {n1!r} overlap")
    data = (np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(size - start,))
            if size > start else None)  # [size - start] bytes
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = (np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]]) if end > begin
               else np.zeros(0, DTYPES[info["dtype"]]))  # [count] of the tensor's dtype
        if info["dtype"] == "BF16":  # bfloat16 is the top half of a float32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        elif raw.dtype.kind == "f":  # float32 on a cache line's boundary, as engines want it
            out = aligned_empty(raw.shape, np.float32)
            # a float64 beyond float32's range becomes inf: load_checkpoint refuses
            with np.errstate(over="ignore"):
                out[...] = raw
            raw = out
        else:
            raw = raw.copy()
        tensors[name] = raw.reshape(info["shape"])
    return tensors


def _check_entry(path, name, info):
    """A header entry: a known dtype, a shape, two byte offsets."""
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
        _fail(path, f"tensor {name!r}: entry needs dtype, shape and data_offsets")
    if not isinstance(info["dtype"], str) or info["dtype"] not in DTYPES:
        _fail(path,
              f"tensor {name!r}: unknown dtype {info['dtype']!r} (known: {', '.join(DTYPES)})")
    shape, offsets = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(_is_size(d) for d in shape):
        _fail(path, f"tensor {name!r}: shape {shape!r} is not a list of sizes")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_size(o) for o in offsets):
        _fail(path, f"tensor {name!r}: data_offsets {offsets!r} are not two byte offsets")


def _is_size(n):
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def to_bf16(a):  # float32 -> bfloat16 bits (uint16), rounding to nearest even
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, metadata=None, dtype=None):
    """Write tensors, floats cast to `dtype` ("float32", "float16", "bfloat16"), atomically."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        # a model trained on the GPU
        a = to_numpy(a) if type(a).__module__.startswith("cupy") else np.asarray(a)
        if a.dtype.kind == "f" and dtype == "bfloat16":
            code, raw = "BF16", to_bf16(a).tobytes()
        else:
            if a.dtype.kind == "f" and dtype is not None:
                a = a.astype(dtype)
            if a.dtype not in NAMES:
                raise ValueError(f"{path}: tensor {name!r} has dtype {a.dtype}, which safetensors "
                                 f"cannot store")
            code, raw = (NAMES[a.dtype],
                         np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the data starts 8-byte aligned
    replace_file(path, [struct.pack("<Q", len(head)), head, *blobs])


@contextlib.contextmanager
def output_folder(path):
    """`with output_folder(out):` makes `out`, removed again if the writing fails."""
    path, made = Path(path), not Path(path).exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    except BaseException:
        if made:
            shutil.rmtree(path, ignore_errors=True)
        raise


def state_dict_from_params(params):
    sd = {"wte.weight": params["wte"], "wpe.weight": params["wpe"],
          "ln_f.weight": params["ln_f"]["g"], "ln_f.bias": params["ln_f"]["b"]}
    for i, block in enumerate(params["blocks"]):
        for ln in ("ln_1", "ln_2"):
            sd[f"h.{i}.{ln}.weight"], sd[f"h.{i}.{ln}.bias"] = block[ln]["g"], block[ln]["b"]
        for part, layers in (("attn", ("c_attn", "c_proj")), ("mlp", ("c_fc", "c_proj"))):
            for layer in layers:
                sd[f"h.{i}.{part}.{layer}.weight"] = block[part][layer]["w"]
                sd[f"h.{i}.{part}.{layer}.bias"] = block[part][layer]["b"]
    return sd


def expected_shapes(hparams):
    C, V, n_ctx = hparams["n_embd"], hparams["n_vocab"], hparams["n_ctx"]
    shapes = {"wte.weight": (V, C), "wpe.weight": (n_ctx, C), "ln_f.weight": (C,),
              "ln_f.bias": (C,)}
    for i in range(hparams["n_layer"]):
        for name, shape in (("ln_1.weight", (C,)), ("ln_1.bias", (C,)),
                            ("ln_2.weight", (C,)), ("ln_2.bias", (C,)),
                            ("attn.c_attn.weight", (C, 3 * C)), ("attn.c_attn.bias", (3 * C,)),
                            ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", (C,)),
                            ("mlp.c_fc.weight", (C, 4 * C)), ("mlp.c_fc.bias", (4 * C,)),
                            ("mlp.c_proj.weight", (4 * C, C)), ("mlp.c_proj.bias", (C,))):
            shapes[f"h.{i}.{name}"] = shape
    return shapes


def params_from_state_dict(tensors, hparams, source="checkpoint"):
    """The params tree from HF GPT-2 tensors, every shape and value checked."""
    sd = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    for name, shape in expected_shapes(hparams).items():
        if name not in sd:
            raise CorruptFile(source,
                              f"tensor {name!r} is missing (is this a GPT-2 checkpoint of the "
                              f"configured shape?)")
        if tuple(sd[name].shape) != shape:
            raise CorruptFile(source,
                              f"tensor {name!r} has shape {tuple(sd[name].shape)}, expected "
                              f"{shape} from config")
        # cast first: a float64 beyond float32's range becomes inf
        sd[name] = np.asarray(sd[name], dtype=np.float32)
        if not np.isfinite(sd[name]).all():
            raise CorruptFile(source, f"tensor {name!r} holds NaN or infinite values")
    f = sd.__getitem__  # float32 now
    blocks = []
    for i in range(hparams["n_layer"]):
        p = f"h.{i}."
        blocks.append({
            "ln_1": {"g": f(p + "ln_1.weight"), "b": f(p + "ln_1.bias")},
            "attn": {"c_attn": {"w": f(p + "attn.c_attn.weight"), "b": f(p + "attn.c_attn.bias")},
                     "c_proj": {"w": f(p + "attn.c_proj.weight"), "b": f(p + "attn.c_proj.bias")}},
            "ln_2": {"g": f(p + "ln_2.weight"), "b": f(p + "ln_2.bias")},
            "mlp": {"c_fc": {"w": f(p + "mlp.c_fc.weight"), "b": f(p + "mlp.c_fc.bias")},
                    "c_proj": {"w": f(p + "mlp.c_proj.weight"), "b": f(p + "mlp.c_proj.bias")}}})
    return {"wte": f("wte.weight"), "wpe": f("wpe.weight"), "blocks": blocks,
            "ln_f": {"g": f("ln_f.weight"), "b": f("ln_f.bias")}}


GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu")  # within 1e-3 of model.py's


def hparams_from_config(config, source="config.json"):
    """{n_vocab, n_ctx, n_embd, n_head, n_layer} from a Hugging Face config, checked."""
    if not isinstance(config, dict):
        raise CorruptFile(source, "not a GPT-2 config (not a JSON object)")
    # older configs: n_ctx
    n_ctx = "n_ctx" if "n_ctx" in config and "n_positions" not in config else "n_positions"
    keys = {"n_vocab": "vocab_size", "n_ctx": n_ctx, "n_embd": "n_embd", "n_head": "n_head",
            "n_layer": "n_layer"}
    # first: another architecture's config is whole, only its keys are not GPT-2's
    if config.get("model_type", "gpt2") != "gpt2":
        raise CorruptFile(source, f"model_type is {config['model_type']!r}: picospec runs GPT-2's "
                                  f"architecture (model_type gpt2)", "give a GPT-2 checkpoint")
    for key in keys.values():
        if key not in config:
            raise CorruptFile(source, f"not a GPT-2 config ({key} is missing)")
        if not _is_size(config[key]) or config[key] < 1:
            raise CorruptFile(source, f"{key} is {config[key]!r}; it must be a whole number >= 1")
    if config.get("activation_function", "gelu_new") not in GELUS:  # model.py's gelu: tanh's form
        raise CorruptFile(source, f"activation_function is {config['activation_function']!r}: "
                                  f"picospec's GPT-2 computes GELU ({', '.join(GELUS)})",
                          "give a GPT-2 checkpoint")
    hparams = {name: config[key] for name, key in keys.items()}
    if hparams["n_embd"] % hparams["n_head"]:
        raise CorruptFile(source,
                          f"n_embd {hparams['n_embd']} is not divisible by n_head "
                          f"{hparams['n_head']}")
    return hparams


def config_from_hparams(hparams):
    V = hparams["n_vocab"]
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
            "n_positions": hparams["n_ctx"], "n_ctx": hparams["n_ctx"], "n_embd": hparams["n_embd"],
            "n_head": hparams["n_head"], "n_layer": hparams["n_layer"], "layer_norm_epsilon": 1e-5,
            "activation_function": "gelu_new", "bos_token_id": V - 1, "eos_token_id": V - 1,
            "tie_word_embeddings": True}


def load_checkpoint(folder):
    """(hparams, params) from folder/config.json + folder/model.safetensors, checked."""
    folder = Path(folder)
    for name in ("config.json", "model.safetensors"):
        if not (folder / name).is_file():
            what = "a folder" if (folder / name).is_dir() else "missing"
            raise ValueError(f"{folder}: {name} is {what}; a checkpoint folder needs the files "
                             f"config.json and model.safetensors")
    hparams = hparams_from_config(read_json(folder / "config.json"), folder / "config.json")
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    if differences := sizes_differ(tensors, hparams):
        raise CorruptFile(folder / "config.json", f"{'; '.join(differences)}: the config and the "
                          "weights do not belong together",
                          "put this model's own config.json beside its model.safetensors")
    return hparams, params_from_state_dict(tensors, hparams, source=path)


def sizes_differ(tensors, hparams):
    """The sizes config.json states that the weights contradict, one sentence each."""
    sd = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    held = {}
    if getattr(sd.get("wte.weight"), "ndim", 0) == 2:
        held["vocab_size"], held["n_embd"] = sd["wte.weight"].shape
    if getattr(sd.get("wpe.weight"), "ndim", 0) == 2:
        held["n_positions"] = sd["wpe.weight"].shape[0]
    layers = {int(k.split(".")[1]) for k in sd if k.startswith("h.") and k.split(".")[1].isdigit()}
    if layers:
        held["n_layer"] = max(layers) + 1
    stated = {"vocab_size": hparams["n_vocab"], "n_embd": hparams["n_embd"],
              "n_positions": hparams["n_ctx"], "n_layer": hparams["n_layer"]}
    unit = {"vocab_size": "tokens", "n_embd": "numbers per token", "n_positions": "positions",
            "n_layer": "layers"}
    return [f"{key} is {stated[key]} but model.safetensors holds {held[key]} {unit[key]}"
            for key in stated if key in held and held[key] != stated[key]]


def save_checkpoint(folder, hparams, params, dtype="float32", metadata=None):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", state_dict_from_params(params), metadata,
                      dtype=dtype)
    replace_file(folder / "config.json",
                 [json.dumps(config_from_hparams(hparams), indent=2).encode()])


def flatten(tree, path=""):  # {"a": {"b": x}} -> {"a.b": x}, in sorted order; lists become indices
    if isinstance(tree, dict):
        return {k: v for key in sorted(tree)
                for k, v in flatten(tree[key], f"{path}{key}.").items()}
    if isinstance(tree, list):
        return {k: v for i, item in enumerate(tree)
                for k, v in flatten(item, f"{path}{i}.").items()}
    return {path[:-1]: tree}
