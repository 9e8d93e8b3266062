"""Extra decoding heads on a GPT-2 backbone. Medusa (Cai et al. 2024, arXiv:2401.10774), eq. (1),
head k on the hidden state h_t after ln_f, predicting the token k + 1 after the next:

    p_t^(k) = softmax(W2^(k) (SiLU(W1^(k) h_t + b1^(k)) + h_t)),   W1 [C, C], W2 [C, V]

W1 starts at 0, W2 at the LM head. Blockwise Parallel Decoding (Stern et al. 2018,
arXiv:1811.03115): the same block with ReLU, W2 tied to wte. Shapes: B rows, T positions, C n_embd,
V n_vocab, K heads.
"""
import json
from pathlib import Path

import numpy as np

from gpt2.addons import RETRAIN, read_heads_config
from gpt2.backend import xp_of
from picospec_cli import replace_file



def init_heads(n_heads, wte, tied=False, act="silu", from_lm_head=True, rng=None, kind=None):
    """K heads for a backbone whose LM head is wte [V, C] -> (heads, config)."""
    V, C = wte.shape
    rng = rng or np.random.default_rng(0)
    heads = []
    for _ in range(n_heads):
        # SiLU heads start at zero (the head then equals the LM head); ReLU has no gradient at
        # exactly 0, so its heads start small and random
        w1 = (np.zeros((C, C), np.float32) if act == "silu"
              else rng.standard_normal((C, C), dtype=np.float32) * 0.02)
        head = {"res": {"w": w1, "b": np.zeros(C, np.float32)}}
        if not tied:
            out = (wte.T.copy() if from_lm_head
                   else rng.standard_normal((C, V), dtype=np.float32) * np.float32(0.02))
            head["out"] = {"w": np.ascontiguousarray(out, dtype=np.float32)}
        heads.append(head)
    kind = kind or ("blockwise" if tied else "medusa")
    return heads, {"kind": kind, "n_heads": n_heads, "tied": tied, "act": act}


def _act(z, act):  # [..., C] -> a, da/dz: [..., C] each
    xp = xp_of(z)
    if act == "relu":
        return xp.maximum(z, 0), (z > 0).astype(z.dtype)
    s = 1 / (1 + xp.exp(-z))  # [..., C]: sigmoid(z), SiLU(z) = z s
    return z * s, s * (1 + z * (1 - s))


def head_forward(h, head, wte, act):  # h [..., C] -> logits [..., V], cache
    z = h @ head["res"]["w"] + head["res"]["b"]  # [..., C]
    a, da = _act(z, act)
    r = h + a  # [..., C]
    w_out = head["out"]["w"] if "out" in head else wte.T  # [C, V]
    return r @ w_out, (h, r, da, w_out)


def head_backward(dlogits, cache, head):  # -> dh [..., C], grads of the head
    h, r, da, w_out = cache
    C, V = w_out.shape
    dr = dlogits @ w_out.T  # [..., C]
    dz = dr * da  # [..., C]
    # W1 [C, C], b1 [C], W2 [C, V]: summed over the rows [..., C] flattened
    grads = {"res": {"w": h.reshape(-1, C).T @ dz.reshape(-1, C), "b": dz.reshape(-1, C).sum(0)}}
    if "out" in head:
        grads["out"] = {"w": r.reshape(-1, C).T @ dlogits.reshape(-1, V)}  # [C, V]
    return dr + dz @ head["res"]["w"].T, grads  # dh [..., C]: the residual and the block


def heads_logits(h, heads, wte, config):  # h [n, C] -> [K, n, V]: for decoding, no caches
    return np.stack([head_forward(h, head, wte, config["act"])[0] for head in heads])


def cross_entropy(logits, targets):  # [N, V], [N] -> mean loss, dlogits
    xp = xp_of(logits)
    z = logits - logits.max(-1, keepdims=True)  # [N, V]
    logp = z - xp.log(xp.exp(z).sum(-1, keepdims=True))  # [N, V]: log softmax
    n = len(targets)
    loss = -logp[xp.arange(n), targets].mean()  # scalar
    d = xp.exp(logp)  # [N, V]: softmax - onehot(targets), over n below
    d[xp.arange(n), targets] -= 1
    return loss, d / n


def heads_loss_and_grads(h, targets, heads, wte, config, lambdas):
    """h [B, T, C], targets [B, T] -> (sum_k lambdas[k] L_k, [L_k], grads, dh [B, T, C]), L_k the
    cross-entropy of head k on targets[:, t + k + 1] from h[:, t]."""
    xp = xp_of(h)
    B, T, C = h.shape
    dh = xp.zeros_like(h)
    total, losses, grads = 0.0, [], []
    for k, head in enumerate(heads):
        shift = k + 1
        hk = h[:, :T - shift].reshape(-1, C)  # positions whose target k + 1 ahead is in the window
        logits, cache = head_forward(hk, head, wte, config["act"])
        loss, dlogits = cross_entropy(logits, targets[:, shift:].reshape(-1))
        dhk, g = head_backward(lambdas[k] * dlogits, cache, head)
        dh[:, :T - shift] += dhk.reshape(B, T - shift, C)
        total += lambdas[k] * float(loss)
        losses.append(float(loss))
        grads.append(g)
    return total, losses, grads, dh


# [N, V], [N] -> rank of each target token in its row (0 = argmax)
def ranks_of_targets(logits, targets):
    return (logits > logits[xp_of(logits).arange(len(targets)), targets][:, None]).sum(-1)


def save_heads(folder, heads, config, dtype="float16", record=None):
    from gpt2.weights import flatten
    from gpt2.weights import write_safetensors

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # NumPy or CuPy: write_safetensors takes both
    tensors = {f"heads.{k}": v for k, v in flatten(heads).items()}
    write_safetensors(folder / "heads.safetensors", tensors, dtype=dtype)
    text = json.dumps({**config, **(record or {})}, indent=1)
    replace_file(folder / "heads.json", [text.encode()])


# what to do about heads of another backbone
OTHER_BACKBONE = ("give heads trained on this backbone (python -m gpt2.train.heads --backbone NAME "
                  "--out DIR)")
# out.w only in untied heads
HEAD_SHAPES = {"res.w": ("C", "C"), "res.b": ("C",), "out.w": ("C", "V")}


def load_heads(folder, n_embd=None, n_vocab=None):
    """-> heads (float32 dicts), config; a bad or mismatched file is a ValueError."""
    folder = Path(folder)
    if not (folder / "heads.json").exists() or not (folder / "heads.safetensors").exists():
        raise ValueError(f"no heads in {folder}: expected heads.json and heads.safetensors there "
                         "(train them with `python -m gpt2.train.heads`)")
    config = read_heads_config(folder / "heads.json")
    tensors = read_head_tensors(folder / "heads.safetensors", config)
    heads = []
    for k in range(config["n_heads"]):
        head = {"res": {"w": tensors[f"heads.{k}.res.w"], "b": tensors[f"heads.{k}.res.b"]}}
        if not config["tied"]:
            head["out"] = {"w": tensors[f"heads.{k}.out.w"]}
        heads.append(head)
    C = heads[0]["res"]["w"].shape[0]
    if n_embd is not None and C != n_embd:
        raise ValueError(f"heads in {folder} were trained for n_embd {C}, but the backbone has "
                         f"{n_embd}: {OTHER_BACKBONE}")
    if n_vocab is not None and not config["tied"] and heads[0]["out"]["w"].shape[1] != n_vocab:
        raise ValueError(f"heads in {folder} predict {heads[0]['out']['w'].shape[1]} tokens; the "
                         f"backbone has {n_vocab}: {OTHER_BACKBONE}")
    return heads, config


def read_head_tensors(path, config):
    """heads.safetensors as float32, each tensor present, finite, of its HEAD_SHAPES shape."""
    from gpt2.weights import CorruptFile, read_safetensors

    tensors, sizes = read_safetensors(path), {}
    for k in range(config["n_heads"]):
        for part, dims in HEAD_SHAPES.items():
            name = f"heads.{k}.{part}"
            if part == "out.w" and config["tied"]:
                continue
            if name not in tensors:
                raise CorruptFile(path, f"tensor {name!r} is missing", RETRAIN)
            a = tensors[name] = np.asarray(tensors[name], dtype=np.float32)
            if a.ndim != len(dims) or any(sizes.setdefault(d, n) != n
                                          for d, n in zip(dims, a.shape)):
                raise CorruptFile(path, f"tensor {name!r} has shape {a.shape}, not "
                                        f"[{', '.join(dims)}] with {sizes}", RETRAIN)
            if not np.isfinite(a).all():
                raise CorruptFile(path, f"tensor {name!r} holds NaN or infinite values", RETRAIN)
    return tensors


def keep_first_heads(src, dst, n):
    """Copy the first n heads in `src` to `dst` (independent given a frozen backbone):

        python -m gpt2.heads --src runs/medusa --dst gpt2/assets/tiny-target/medusa --n 2
    """
    from gpt2.weights import output_folder
    from gpt2.weights import read_header

    if Path(dst).resolve() == Path(src).resolve():
        raise ValueError(f"--dst {dst} is the --src folder: keeping {n} heads there would lose the "
                         f"others; give another folder")
    heads, config = load_heads(src)
    # keep the numbers as they are
    stored = read_header(Path(src) / "heads.safetensors")[0]["heads.0.res.w"]["dtype"]
    dtype = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}.get(
        stored, "float32")  # integers (read as float32 by load_heads) too
    if not 1 <= n <= config["n_heads"]:
        raise ValueError(f"--n {n}: {src} has {config['n_heads']} heads; cannot keep the first {n}")
    from gpt2.addons import NAMES, folder_kind, heads_kind

    # heads.json beside another add-on's config would hide it (heads.json is read first)
    held = folder_kind(dst) if Path(dst).is_dir() else None
    if held not in (None, "model", heads_kind(config)):
        raise ValueError(f"--dst {dst} holds {NAMES[held]}: {NAMES[heads_kind(config)]} written "
                         f"there would hide or replace it; give a new folder")
    record = {k: v for k, v in config.items() if k not in ("kind", "n_heads", "tied", "act")}
    for key in ("accuracy", "accuracy_text"):
        if key in record and not isinstance(record[key], dict):  # a table per measure
            from gpt2.weights import CorruptFile

            raise CorruptFile(Path(src) / "heads.json", f"{key} is {record[key]!r:.40}; it must "
                              f"be an object of tables (top1, top5, ...)", RETRAIN)
        if key in record:
            record[key] = {name: (rows[:n + 1] if isinstance(rows, list) else rows)
                           for name, rows in record[key].items()}
    record["kept"] = f"the first {n} of the {config['n_heads']} heads in {src}"
    with output_folder(dst):  # a failed run leaves no half-written folder behind
        kept = {"kind": heads_kind(config), "n_heads": n, "tied": config["tied"],
                "act": config["act"]}
        save_heads(dst, heads[:n], kept, dtype=dtype, record=record)


if __name__ == "__main__":
    from picospec_cli import Option, command, out_folder

    command(keep_first_heads, [
        Option("src", "dir", None,
               "folder with heads.json + heads.safetensors (from python -m gpt2.train.heads)",
               required=True),
        Option("dst", "path", None, "folder to write the kept heads into (made if missing)",
               check=out_folder, required=True),
        Option("n", int, None, "how many heads to keep, counted from the first", low=1,
               required=True),
    ])
