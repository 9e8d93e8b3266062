"""Training GPT-2 (or any params tree) in NumPy: AdamW, warm-up + cosine schedule, clipping, checkpoints.

    python -m gpt2.train --data DIR --out DIR --n_layer 6 --n_embd 256 --n_head 4 --n_ctx 256 --max_minutes 60

DIR holds train.bin / val.bin (uint16 token ids, `ndarray.tofile`) and meta.json ({"n_vocab": ...}), as written by
`python -m gpt2.corpus`. The pieces are reusable: `adamw_step` updates any params tree from a grads tree of the same
layout, and `train(loss_and_grads, params, batches, ...)` runs any loss (heads of Medusa, EAGLE, blockwise too).

AdamW (Loshchilov & Hutter 2019): m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
p <- p - lr (m_hat / (sqrt(v_hat) + eps) + wd p), weight decay on matrices only (not biases, gains, or wpe).
"""
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from gpt2.backend import get_xp, to_numpy, xp_of


def flatten(tree, path=""):  # {"a": {"b": x}} -> {"a.b": x}, in sorted order; lists become indices
    if isinstance(tree, dict):
        return {k: v for key in sorted(tree) for k, v in flatten(tree[key], f"{path}{key}.").items()}
    if isinstance(tree, list):
        return {k: v for i, item in enumerate(tree) for k, v in flatten(item, f"{path}{i}.").items()}
    return {path[:-1]: tree}


def init_params(hparams, rng):
    """GPT-2's initialisation: normal(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer), LN gains 1."""
    C, V, L = hparams["n_embd"], hparams["n_vocab"], hparams["n_layer"]

    def w(*shape, std=0.02):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def lin(i, o, std=0.02):
        return {"w": w(i, o, std=std), "b": np.zeros(o, np.float32)}

    def ln():
        return {"g": np.ones(C, np.float32), "b": np.zeros(C, np.float32)}

    proj_std = 0.02 / math.sqrt(2 * L)
    blocks = [{"ln_1": ln(), "attn": {"c_attn": lin(C, 3 * C), "c_proj": lin(C, C, proj_std)},
               "ln_2": ln(), "mlp": {"c_fc": lin(C, 4 * C), "c_proj": lin(4 * C, C, proj_std)}} for _ in range(L)]
    return {"wte": w(V, C), "wpe": w(hparams["n_ctx"], C, std=0.01), "blocks": blocks, "ln_f": ln()}


def lr_at(step, max_steps, lr, warmup, min_lr_ratio=0.1):
    """Linear warm-up to lr over `warmup` steps, then cosine decay to min_lr_ratio * lr at max_steps."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def clip_grads(grads, max_norm):  # scales the flat grads dict in place; returns the norm before clipping
    xp = xp_of(next(iter(grads.values())))
    norm = float(xp.sqrt(sum(xp.sum(g * g) for g in grads.values())))
    if norm > max_norm:
        for g in grads.values():
            g *= max_norm / (norm + 1e-6)
    return norm


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay=None):
        flat = flatten(params)
        self.lr, self.b1, self.b2, self.eps, self.wd = lr, betas[0], betas[1], eps, weight_decay
        self.m = {k: xp_of(p).zeros_like(p) for k, p in flat.items()}
        self.v = {k: xp_of(p).zeros_like(p) for k, p in flat.items()}
        self.decay = decay or (lambda name, p: p.ndim == 2 and not name.endswith("wpe"))
        self.t = 0

    def step(self, params, grads, lr=None):
        lr = self.lr if lr is None else lr
        self.t += 1
        c1, c2 = 1 - self.b1**self.t, 1 - self.b2**self.t
        for name, p in flatten(params).items():
            g, m, v = grads[name], self.m[name], self.v[name]
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            if self.wd and self.decay(name, p):
                p -= lr * self.wd * p
            p -= (lr / c1) * m / (xp_of(v).sqrt(v / c2) + self.eps)

    def state(self):
        return {**{f"m.{k}": v for k, v in self.m.items()}, **{f"v.{k}": v for k, v in self.v.items()}}

    def load_state(self, tensors, t):
        for k in self.m:
            self.m[k][...] = tensors[f"m.{k}"]
            self.v[k][...] = tensors[f"v.{k}"]
        self.t = t


def random_windows(data, n_ctx, batch_size, rng):  # -> inputs, targets [batch_size, n_ctx] int64
    ix = rng.integers(0, len(data) - n_ctx - 1, batch_size)
    buf = np.stack([data[i:i + n_ctx + 1] for i in ix]).astype(np.int64)  # [B, n_ctx + 1]
    return buf[:, :-1], buf[:, 1:]


def evaluate(loss_fn, data, n_ctx, batch_size, max_batches=8):
    """Mean loss over consecutive non-overlapping windows from the start of `data` (deterministic)."""
    n = min(max_batches * batch_size, (len(data) - 1) // n_ctx)
    losses = []
    for start in range(0, n, batch_size):
        rows = range(start, min(n, start + batch_size))
        buf = np.stack([data[r * n_ctx:(r + 1) * n_ctx + 1] for r in rows]).astype(np.int64)
        losses.append(float(loss_fn(buf[:, :-1], buf[:, 1:])) * len(rows))
    return sum(losses) / n


def save_state(folder, params, opt, step, rng, extra):
    from gpt2.weights import write_safetensors

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"p.{k}": to_numpy(v) for k, v in flatten(params).items()}
    tensors.update({k: to_numpy(v) for k, v in opt.state().items()})
    write_safetensors(folder / "state.safetensors", tensors)
    state = {"step": step, "adam_t": opt.t, "rng": rng.bit_generator.state, **extra}
    tmp = folder / "state.json.tmp"
    tmp.write_text(json.dumps(state))
    os.replace(tmp, folder / "state.json")


def load_state(folder, params, opt, rng):
    from gpt2.weights import read_safetensors

    tensors = read_safetensors(Path(folder) / "state.safetensors")
    state = json.loads((Path(folder) / "state.json").read_text())
    for k, p in flatten(params).items():
        p[...] = xp_of(p).asarray(tensors[f"p.{k}"])
    opt.load_state({k: v for k, v in tensors.items() if not k.startswith("p.")}, state["adam_t"])
    rng.bit_generator.state = state["rng"]
    return state


def main(data, out, n_layer=6, n_embd=256, n_head=4, n_ctx=256, batch_size=16, lr=1e-3, min_lr_ratio=0.1,
         warmup=100, max_steps=2000, max_minutes=None, weight_decay=0.1, clip=1.0, eval_every=100, seed=0,
         device="cpu", dtype="float16", resume=True, stop_at=None):
    """Train a GPT-2 from scratch on token files; checkpoint to OUT/ckpt, the final model to OUT (safetensors).

    The schedule runs over max_steps; max_minutes or stop_at end a run early, and the next run resumes from OUT/ckpt.
    """
    from tqdm import tqdm

    from gpt2.backprop import gpt2_forward_backward, gpt2_loss
    from gpt2.weights import save_checkpoint

    data, out, xp = Path(data), Path(out), get_xp(device)
    meta = json.loads((data / "meta.json").read_text())
    train_ids = np.fromfile(data / "train.bin", dtype=np.uint16)
    val_ids = np.fromfile(data / "val.bin", dtype=np.uint16)
    hparams = {"n_vocab": meta["n_vocab"], "n_ctx": n_ctx, "n_embd": n_embd, "n_head": n_head, "n_layer": n_layer}
    rng = np.random.default_rng(seed)
    params = _to_device(init_params(hparams, rng), xp)
    opt = AdamW(params, lr=lr, weight_decay=weight_decay)
    log = {"hparams": hparams, "args": dict(batch_size=batch_size, lr=lr, warmup=warmup, max_steps=max_steps,
           weight_decay=weight_decay, clip=clip, seed=seed), "history": [], "seconds": 0.0, "step": 0}
    if resume and (out / "ckpt" / "state.json").exists():
        log = load_state(out / "ckpt", params, opt, rng)["log"]
        print(f"resumed from step {log['step']}")

    def loss_and_grads(x, y):
        return gpt2_forward_backward(params, hparams, xp.asarray(x), xp.asarray(y))

    def val_loss():
        return evaluate(lambda x, y: gpt2_loss(params, hparams, xp.asarray(x), xp.asarray(y)), val_ids, n_ctx, batch_size)

    start, tokens_per_step = time.time() - log["seconds"], batch_size * n_ctx
    first_step, t0 = log["step"], time.time()
    bar = tqdm(range(log["step"], max_steps), initial=log["step"], total=max_steps, desc="train",
               mininterval=1 if os.isatty(2) else 60)
    for step in bar:
        loss, grads = loss_and_grads(*random_windows(train_ids, n_ctx, batch_size, rng))
        grads = flatten(grads)
        norm = clip_grads(grads, clip)
        opt.step(params, grads, lr_at(step, max_steps, lr, warmup, min_lr_ratio))
        elapsed = time.time() - start
        log.update(step=step + 1, seconds=elapsed)
        tok_s = (step + 1 - first_step) * tokens_per_step / (time.time() - t0)
        bar.set_postfix(loss=f"{float(loss):.3f}", tok_s=f"{tok_s:.0f}", refresh=False)
        last = step + 1 in (max_steps, stop_at) or (max_minutes and elapsed > 60 * max_minutes)
        if (step + 1) % eval_every == 0 or last:
            log["history"].append({"step": step + 1, "tokens": (step + 1) * tokens_per_step, "train_loss": float(loss),
                                   "val_loss": val_loss(), "grad_norm": norm, "seconds": elapsed})
            bar.write(json.dumps(log["history"][-1]))
            save_state(out / "ckpt", params, opt, step + 1, rng, {"log": log})
        if last:
            break
    save_checkpoint(out, hparams, params, dtype=dtype)
    log["final_val_loss"] = log["history"][-1]["val_loss"]
    log["machine"] = {"cores": os.cpu_count(), "numpy": np.__version__, "device": device}
    (out / "train_log.json").write_text(json.dumps(log, indent=1))
    return log["final_val_loss"]


def _to_device(tree, xp):
    if isinstance(tree, dict):
        return {k: _to_device(v, xp) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_to_device(v, xp) for v in tree]
    return xp.asarray(tree)


if __name__ == "__main__":
    import fire

    fire.Fire(main)
