"""Training in NumPy: AdamW, warm-up + cosine schedule, clipping, checkpoints, and the one
train_loop that main (GPT-2), heads.py and eagle.py use. DIR holds train.bin / val.bin (uint16
token ids) and meta.json, from gpt2.train.corpus.

    python -m gpt2.train.gpt2 --data DIR --out DIR --n_layer 6 --n_embd 256 --n_head 4 --n_ctx 256 \
        --max_minutes 60

AdamW (Loshchilov & Hutter 2019), weight decay on matrices only:
    m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
    w <- w - lr (m_hat / (sqrt(v_hat) + eps) + wd w)
Shapes: B batch_size, T n_ctx.
"""
import json
import math
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from gpt2.backend import DEVICE_WORDS, DEVICES, get_xp, to_device, to_numpy, xp_of
from picospec_cli import Option, cannot_write_in
from gpt2.weights import flatten


def init_params(hparams, rng):
    """GPT-2's initialisation: normal(0, 0.02), residual projections / sqrt(2 n_layer), gains 1."""
    C, V, L = hparams["n_embd"], hparams["n_vocab"], hparams["n_layer"]

    def w(*shape, std=0.02):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def lin(i, o, std=0.02):
        return {"w": w(i, o, std=std), "b": np.zeros(o, np.float32)}

    def ln():
        return {"g": np.ones(C, np.float32), "b": np.zeros(C, np.float32)}

    proj_std = 0.02 / math.sqrt(2 * L)
    blocks = [{"ln_1": ln(), "attn": {"c_attn": lin(C, 3 * C), "c_proj": lin(C, C, proj_std)},
               "ln_2": ln(), "mlp": {"c_fc": lin(C, 4 * C), "c_proj": lin(4 * C, C, proj_std)}}
               for _ in range(L)]
    return {"wte": w(V, C), "wpe": w(hparams["n_ctx"], C, std=0.01), "blocks": blocks, "ln_f": ln()}


def lr_at(step, max_steps, lr, warmup, min_lr_ratio=0.1):
    """Linear warm-up to lr over `warmup` steps, then cosine decay to min_lr_ratio * lr."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


# scales the flat grads dict in place; returns the norm before clipping
def clip_grads(grads, max_norm):
    xp = xp_of(next(iter(grads.values())))
    norm = float(xp.sqrt(sum(xp.sum(g * g) for g in grads.values())))  # scalar
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
        """One AdamW update from the flat grads; lr: a rate, or {top-level key of params: rate}."""
        lr = self.lr if lr is None else lr
        self.t += 1
        c1, c2 = 1 - self.b1**self.t, 1 - self.b2**self.t
        for name, p in flatten(params).items():
            rate = lr[name.split(".")[0]] if isinstance(lr, dict) else lr
            g, m, v = grads[name], self.m[name], self.v[name]
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            if self.wd and self.decay(name, p):
                p -= rate * self.wd * p
            p -= (rate / c1) * m / (xp_of(v).sqrt(v / c2) + self.eps)

    def state(self):
        return {**{f"m.{k}": v for k, v in self.m.items()},
                **{f"v.{k}": v for k, v in self.v.items()}}

    def load_state(self, tensors, t):
        for k in self.m:
            self.m[k][...] = tensors[f"m.{k}"]
            self.v[k][...] = tensors[f"v.{k}"]
        self.t = t


def random_windows(data, n_ctx, batch_size, rng):  # -> inputs, targets [B, T] int64
    ix = rng.integers(0, len(data) - n_ctx - 1, batch_size)
    buf = np.stack([data[i:i + n_ctx + 1] for i in ix]).astype(np.int64)  # [B, T + 1]
    return buf[:, :-1], buf[:, 1:]


def mean_loss(loss_fn, data, n_ctx, batch_size, max_batches=8):
    """Mean loss over consecutive windows from the start of `data`."""
    n = min(max_batches * batch_size, (len(data) - 1) // n_ctx)
    losses = []
    for start in range(0, n, batch_size):
        rows = range(start, min(n, start + batch_size))
        # [B, T + 1]
        buf = np.stack([data[r * n_ctx:(r + 1) * n_ctx + 1] for r in rows]).astype(np.int64)
        losses.append(float(loss_fn(buf[:, :-1], buf[:, 1:])) * len(rows))
    return sum(losses) / n


def save_state(folder, params, opt, step, rng, extra):
    """folder/state.safetensors (params, AdamW's moments; step, rng, log as metadata), written
    atomically, and state.json."""
    from gpt2.weights import write_safetensors
    from picospec_cli import replace_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"p.{k}": to_numpy(v) for k, v in flatten(params).items()}
    tensors.update({k: to_numpy(v) for k, v in opt.state().items()})
    state = json.dumps({"step": step, "adam_t": opt.t, "rng": rng.bit_generator.state, **extra})
    write_safetensors(folder / "state.safetensors", tensors, metadata={"state": state})
    replace_file(folder / "state.json", [state.encode()])


def has_state(folder):
    return (Path(folder) / "state.safetensors").exists()


def read_state(folder):
    """The step, rng and log saved in folder; a damaged checkpoint is a one-line error."""
    from gpt2.weights import read_header

    path = Path(folder) / "state.safetensors"
    keep = ("the run is left as it is: restore the file from a copy to resume, or give another "
            "--out")
    try:
        header, start, size = read_header(path)
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
                  default=0)
        meta = header.get("__metadata__", {})
        # older checkpoints
        text = meta["state"] if "state" in meta else (Path(folder) / "state.json").read_text()
        state = json.loads(text)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        why = str(e).removeprefix(f"{path}: ").split("; ")[0]
        raise ValueError(f"the checkpoint {path} is damaged ({why}): {keep}") from None
    if start + end > size:
        raise ValueError(f"the checkpoint {path} is damaged (cut short: {size} bytes, its tensors "
                         f"end at byte {start + end}): {keep}")
    return state


def load_state(folder, params, opt, rng):
    from gpt2.weights import read_safetensors

    state = read_state(folder)
    tensors = read_safetensors(Path(folder) / "state.safetensors")
    for k, p in flatten(params).items():
        if tensors.get(f"p.{k}", np.zeros(0)).shape != p.shape:
            raise ValueError(f"{folder} holds another model (its {k!r} is not of shape {p.shape}): "
                             f"resume with the options it was trained with, give another --out, or "
                             f"--no-resume to start over")
        p[...] = xp_of(p).asarray(tensors[f"p.{k}"])
    opt.load_state({k: v for k, v in tensors.items() if not k.startswith("p.")}, state["adam_t"])
    rng.bit_generator.state = state["rng"]
    return state


def check_resume(ckpt, wanted):
    """A checkpoint's settings that shape its params ({name: value}) must be this run's."""
    if not has_state(ckpt):
        return
    log = read_state(ckpt).get("log", {})
    saved = {**log.get("args", {}), **log}
    for name, value in wanted.items():
        if name in saved and saved[name] != value:
            raise ValueError(f"{ckpt} was trained with {name} {saved[name]}, not {value}: resume "
                             f"with the same "
                             "options, give another --out, or --no-resume to start over")


def check_out(out):
    """OUT is a folder, or can become one, where this user can write."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file: give a folder (it gets the model, the log and "
                         f"OUT/ckpt)")
    existing = next(p for p in [out, *out.absolute().parents] if p.exists())
    if not existing.is_dir():
        raise ValueError(f"--out {out}: {existing} is a file, so no folder can be made under it")
    check_writable(existing, f"--out {out}")


def check_writable(folder, what):
    """A folder can be made in `folder` (tried, then removed), else a one-line ValueError."""
    if (why := cannot_write_in(folder)) is not None:
        raise (ValueError(f"{what}: cannot write in {folder} ({why}): give a folder you can write "
                          f"to"))


def check_tokens(path, n_ctx, what, too_few=None):
    """A uint16 token file holds at least n_ctx + 2 tokens; too_few: what a short file's message
    says after "too few for" (default: a window of --n_ctx, and to give a smaller one)."""
    size = Path(path).stat().st_size
    if size % 2:
        raise ValueError(f"{what} {path}: {size} bytes is not a file of uint16 token ids (from "
                         f"`python -m gpt2.train.corpus`)")
    if size // 2 < n_ctx + 2:
        too_few = too_few or f"a window of --n_ctx {n_ctx}; give a smaller --n_ctx or more data"
        raise ValueError(f"{what} {path} holds {size // 2} tokens, too few for {too_few}")


def check_data(data, n_ctx, files=("train.bin", "val.bin"), too_few=None):
    for name in files:
        if not (Path(data) / name).is_file():
            raise ValueError(f"--data {data} has no {name}: make the token files with `python -m "
                             f"gpt2.train.corpus --out {data}`")
        check_tokens(Path(data) / name, n_ctx, "--data", too_few)


def check_tokenizer(data, backbone, folder):
    """--data's token files were made with the tokenizer of --backbone (in `folder`): the
    fingerprint meta.json records against the backbone's, where both are known."""
    from gpt2.encoder import load_encoder
    from gpt2.train.corpus import has_tokenizer, meta_string

    made_with = meta_string(Path(data) / "meta.json")
    if made_with is None or has_tokenizer(folder) is not None:
        return
    theirs = load_encoder(folder).fingerprint
    if made_with != theirs:
        source = meta_string(Path(data) / "meta.json", "tokenizer_folder")
        made = made_with[:12] + (f", {source}" if source else "")
        raise ValueError(f"--data {data} was tokenized with another tokenizer ({made}) than "
                         f"--backbone {backbone}'s ({theirs[:12]}, {folder}): remake it with "
                         f"`python -m gpt2.train.corpus --tokenizer {folder} --out DIR`")


def n_params(hparams):
    """GPT-2's parameter count: wte, wpe, ln_f and 12 C^2 + 13 C a block (init_params' shapes).
    Example: n_vocab 20, n_ctx 16, n_embd 16, n_layer 1 -> 320 + 256 + 32 + 3280 = 3888."""
    C = hparams["n_embd"]
    return ((hparams["n_vocab"] + hparams["n_ctx"] + 2) * C
            + hparams["n_layer"] * (12 * C * C + 13 * C))


def check_memory(hparams):
    """Training holds every parameter 4 times in float32 (the weights, their gradients, AdamW's m
    and v): a model whose 16 bytes a parameter pass this machine's memory is refused before any
    work, not after filling the memory block by block."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not known here
        return
    n = n_params(hparams)
    if 16 * n > memory:
        raise ValueError(f"--n_layer {hparams['n_layer']} and --n_embd {hparams['n_embd']} make "
                         f"{n:,} parameters: training holds each 4 times in float32 (weights, "
                         f"gradients, AdamW's two moments), {16 * n / 1e9:,.1f} GB, more than "
                         f"this machine's {memory / 1e9:,.1f} GB of memory; give a smaller model")


def read_n_vocab(meta):
    """meta.json's n_vocab, an integer in 1..65536, else a ValueError naming the file.
    Example: {"n_vocab": 4096} -> 4096; 1e9, -5, "20" or 20.5 -> error."""
    remake = f"remake the token files with `python -m gpt2.train.corpus --out {meta.parent}`"
    try:
        n_vocab = json.loads(meta.read_text())["n_vocab"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        raise ValueError(f"{meta}: expected JSON with an integer n_vocab; {remake}") from None
    if type(n_vocab) is not int or not 1 <= n_vocab <= 65536:
        raise ValueError(f"{meta}: n_vocab {json.dumps(n_vocab)} is not a vocabulary size (an "
                         f"integer from 1 to 65536, what uint16 token files hold); {remake}")
    return n_vocab


def check_ids(ids, n_vocab, where):  # token ids beyond the vocabulary would index outside wte
    if len(ids) and int(ids.max()) >= n_vocab:
        raise ValueError(f"{where} holds token id {int(ids.max())}, but the model has {n_vocab} "
                         f"tokens: the data were made with another tokenizer")


def holds_run(out, wanted, marks=()):
    """OUT holds a run of this command: a checkpoint whose log names every setting in `wanted`,
    or one of `marks`."""
    if has_state(Path(out) / "ckpt"):
        log = read_state(Path(out) / "ckpt").get("log", {})
        return all(name in {**log.get("args", {}), **log} for name in wanted)
    return any((Path(out) / mark).exists() for mark in marks)


def replaces_out(out, wanted, resume, overwrite, inputs, marks=()):
    """-> True when the run starts over in a non-empty OUT, False when it writes into OUT as it is;
    refuses other files in OUT unless --overwrite, and a resume whose settings differ."""
    out = Path(out)
    held = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if not held:
        return False
    ours = holds_run(out, wanted, marks)
    if ours and resume and not overwrite:
        check_resume(out / "ckpt", wanted)
        return False
    if not ours and not overwrite:
        shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        raise ValueError(f"--out {out} is not empty ({shown}) and holds no run of this command to "
                         f"resume: give a new "
                         "or empty folder, or --overwrite to replace its contents with this run's")
    how, where = "--overwrite" if overwrite else "--no-resume", out.resolve()
    for flag, path in inputs.items():
        if path is not None and where in (Path(path).resolve(), *Path(path).resolve().parents):
            raise ValueError(f"{how} replaces {out} when the run ends, and {flag} {path} lies "
                             f"inside it: move it out first, or give another --out")
    for name, place in (("the current folder", Path.cwd()), ("your home folder", Path.home())):
        if where in (place.resolve(), *place.resolve().parents):
            raise ValueError(f"{how} would replace {out}, which holds {name}: give another --out")
    # the new folder is made beside OUT, then renamed
    check_writable(where.parent, f"{how} replaces --out {out}")
    return True


@contextmanager
def written_into(out, replace):
    """The folder the run writes into: OUT itself, or (replace) a new folder that takes OUT's place
    whole when the run ends, so that a failed, interrupted or terminated run (SIGTERM: the door
    raises it as Ctrl-C) leaves OUT as it was."""
    if not replace:
        with no_empty_folders_left(out):
            yield Path(out)
        return
    print(f"starting over: this run's outputs replace the contents of {out} when it ends",
          file=sys.stderr)
    out = Path(out).resolve()
    work = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.new-"))
    try:
        yield work
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    # mkdtemp makes 0700; the new OUT keeps the old one's permissions
    work.chmod(out.stat().st_mode & 0o7777)
    old = work.with_name(work.name.replace(".new-", ".old-", 1))
    out.rename(old)
    work.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    if old.exists():
        print(f"note: the old contents of {out} are left in {old}: remove it by hand",
              file=sys.stderr)


@contextmanager
def no_empty_folders_left(out):
    """The folders a run made (OUT, its parents, OUT/ckpt) go if it fails while they are empty."""
    out = Path(out).absolute()
    made = [p for p in [out / "ckpt", out, *out.parents] if not p.exists()]  # deepest first
    try:
        yield
    except BaseException:
        for folder in made:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


def finite(params):
    """Every weight of `params` is a finite number."""
    return all(bool(xp_of(p).isfinite(p).all()) for p in flatten(params).values())


def diverged(bar, what, step, lr, saved=None):
    """The one line of a run whose numbers are no longer finite; the progress bar is taken away.
    saved: the step of the checkpoint a rerun resumes from (None: no checkpoint)."""
    bar.leave = False
    bar.close()
    lower = "lower the learning rate" if lr is None else f"lower --lr ({lr:g} now)"
    if saved is not None and saved == step - 1:  # the loss or gradient of its weights: any rate
        lower += (f" and start over with --no-resume (the checkpoint at step {saved} holds the "
                  f"weights that diverged: a run resumed from it diverges too)")
    return ValueError(f"{what} at step {step}: training diverged; {lower}")


def train_loop(params, loss_and_grads, ckpt, max_steps, learning_rate, rng, clip=1.0,
               weight_decay=0.1,
               evaluate=None, eval_every=100, max_minutes=None, stop_at=None, log=None, resume=True,
               tokens_per_step=None, desc="train", lr=None):
    """Train `params` (updated in place) with AdamW and gradient clipping -> log.

        loss_and_grads(params, step, rng) -> ({name: number or list}, grads in params' layout); the
            first entry is the loss trained on
        learning_rate(step) -> a rate, or {top-level key of params: rate}
        evaluate(step) -> {name: number} to log, or None
    Every eval_every steps and at the last the loop logs and checkpoints to `ckpt`; with resume it
    starts from that checkpoint, so a resumed run gives the numbers of an uninterrupted one. A loss
    or gradient norm that is not finite (each step), or weights that are not (before each
    checkpoint), stop the run with a ValueError naming the step and --lr (its peak `lr`): no
    checkpoint of such weights is written."""
    from tqdm import tqdm

    opt = AdamW(params, weight_decay=weight_decay)
    log = {} if log is None else log
    # a fresh run's record, unless given
    log.update({"history": [], "seconds": 0.0, "step": 0, **log})
    if resume and has_state(ckpt):
        saved = load_state(ckpt, params, opt, rng)["log"]
        log.clear()
        log.update(saved)
        was = saved.get("args", {}).get("lr")  # a rate changed on resuming is said, not kept quiet
        changed = lr is not None and was is not None and lr != was
        print(f"resumed from step {log['step']}" + (f" (--lr {lr:g} now, {was:g} before)"
                                                     if changed else ""))
    start, t0, first = time.time() - log["seconds"], time.time(), log["step"]
    saved_at = first if first else None  # the step of the checkpoint in ckpt
    # updated by hand after each step: a bar iterated over would miss the step the loop breaks at
    bar = tqdm(initial=log["step"], total=max_steps, desc=desc,
               mininterval=1 if os.isatty(2) else 60)
    with bar:  # closed however the loop ends (a failed write: the error on its own line)
        for step in range(log["step"], max_steps):
            # what overflows shows as a loss, a norm or weights that are not finite, checked here
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                losses, grads = loss_and_grads(params, step, rng)
                loss = float(next(iter(losses.values())))
                if not math.isfinite(loss):
                    raise diverged(bar, f"the loss is {loss}", step + 1, lr, saved_at)
                grads = flatten(grads)
                norm = clip_grads(grads, clip)
                if not math.isfinite(norm):
                    raise diverged(bar, f"the gradient's norm is {norm}", step + 1, lr, saved_at)
                opt.step(params, grads, learning_rate(step))
            elapsed = time.time() - start
            log.update(step=step + 1, seconds=elapsed)
            shown = {k: f"{v:.3f}" if np.isscalar(v) else " ".join(f"{x:.2f}" for x in v) for k,
                     v in losses.items()}
            if tokens_per_step:
                shown["tok_s"] = f"{(step + 1 - first) * tokens_per_step / (time.time() - t0):.0f}"
            bar.set_postfix(shown, refresh=False)
            bar.update()
            last = step + 1 in (max_steps, stop_at) or (max_minutes and elapsed > 60 * max_minutes)
            if (step + 1) % eval_every == 0 or last:
                if not finite(params):
                    raise diverged(bar, "the weights are not finite", step + 1, lr)
                log["history"].append({"step": step + 1, **losses,
                                       **(evaluate(step + 1) if evaluate else {}),
                                       "grad_norm": norm, "seconds": elapsed})
                bar.write(json.dumps(log["history"][-1]))
                save_state(ckpt, params, opt, step + 1, rng, {"log": log})
                saved_at = step + 1
            if last:
                break
    return log


def main(data, out, n_layer=6, n_embd=256, n_head=4, n_ctx=256, batch_size=16, lr=1e-3,
         min_lr_ratio=0.1,
         warmup=100, max_steps=2000, max_minutes=None, weight_decay=0.1, clip=1.0, eval_every=100,
         seed=0, device="cpu", dtype="float16", resume=True, stop_at=None, overwrite=False):
    """Train a GPT-2 from scratch on token files; checkpoints in OUT/ckpt, the model in OUT.

    max_minutes or stop_at end a run early; the next resumes, unless --no-resume or --overwrite."""
    from gpt2.train.backprop import gpt2_forward_backward, gpt2_loss
    from gpt2.weights import save_checkpoint
    from picospec_cli import replace_file

    # Step 0: every option checked before any work (a failed run leaves nothing behind)
    data, out = Path(data), Path(out)
    check_data(data, n_ctx)
    if not (data / "meta.json").is_file():
        raise ValueError(f"--data {data} has no meta.json: make the token files with `python -m "
                         f"gpt2.train.corpus --out {data}`")
    check_out(out)
    if n_embd % n_head:
        raise ValueError(f"--n_embd {n_embd} must be a multiple of --n_head {n_head}")
    if stop_at is not None and stop_at > max_steps:
        raise ValueError(f"--stop_at {stop_at} is past --max_steps {max_steps}: the run would "
                         f"never stop there")
    n_vocab = read_n_vocab(data / "meta.json")
    hparams = {"n_vocab": n_vocab, "n_ctx": n_ctx, "n_embd": n_embd, "n_head": n_head,
               "n_layer": n_layer}
    if device == "cpu":  # a GPU's memory: CuPy's out-of-memory error says it
        check_memory(hparams)
    replace = replaces_out(out, {"hparams": hparams}, resume, overwrite, {"--data": data})
    xp = get_xp(device)

    # Step 1: the data and a fresh model (a checkpoint in OUT/ckpt replaces it in train_loop)
    train_ids = np.fromfile(data / "train.bin", dtype=np.uint16)
    val_ids = np.fromfile(data / "val.bin", dtype=np.uint16)
    check_ids(train_ids, n_vocab, data / "train.bin")
    check_ids(val_ids, n_vocab, data / "val.bin")
    rng = np.random.default_rng(seed)
    params = to_device(init_params(hparams, rng), xp)
    log = {"hparams": hparams,
           "args": dict(batch_size=batch_size, lr=lr, warmup=warmup, max_steps=max_steps,
           weight_decay=weight_decay, clip=clip, seed=seed)}

    def loss_and_grads(params, step, rng):  # next-token cross-entropy on B random windows
        x, y = random_windows(train_ids, n_ctx, batch_size, rng)  # [B, T] each
        loss, grads = gpt2_forward_backward(params, hparams, xp.asarray(x), xp.asarray(y))
        return {"train_loss": float(loss)}, grads

    def evaluate(step):
        def loss(x, y):  # windows [B, T] each -> scalar
            return gpt2_loss(params, hparams, xp.asarray(x), xp.asarray(y))

        val_loss = mean_loss(loss, val_ids, n_ctx, batch_size)
        return {"tokens": step * batch_size * n_ctx, "val_loss": val_loss}

    # Step 2: train, then write the model and the log
    with written_into(out, replace) as work:
        train_loop(params, loss_and_grads, work / "ckpt", max_steps,
                   lambda step: lr_at(step, max_steps, lr, warmup,
                   min_lr_ratio), rng, clip=clip, weight_decay=weight_decay, evaluate=evaluate,
                   eval_every=eval_every,
                   max_minutes=max_minutes, stop_at=stop_at, log=log, resume=resume,
                   tokens_per_step=batch_size * n_ctx, lr=lr)
        save_checkpoint(work, hparams, params, dtype=dtype)
        log["final_val_loss"] = log["history"][-1]["val_loss"]
        log["machine"] = {"cores": os.cpu_count(), "numpy": np.__version__, "device": device}
        replace_file(work / "train_log.json", [json.dumps(log, indent=1).encode()])
    return log["final_val_loss"]


RUN_CONTROL = [  # the run-control options of every trainer (gpt2, heads, eagle)
    Option("max_minutes", float, None,
           "stop after this many minutes (with a checkpoint; rerun to resume)", above=0),
    Option("stop_at", int, None, "stop after this step (with a checkpoint; rerun to resume)",
           low=1),
    Option("resume", bool, True,
           "resume from OUT/ckpt when it holds a checkpoint (--no-resume starts over: the new "
           "run replaces OUT's contents when it ends)"),
    Option("overwrite", bool, False,
           "an --out holding other files is replaced: the run starts over, and its outputs "
           "take the place of OUT's whole contents when it ends"),
    Option("device", str, "cpu", "cpu (NumPy) or gpu (CuPy)", choices=DEVICES,
           means=DEVICE_WORDS),
    Option("dtype", str, "float16", "dtype of the saved weights",
           choices=("float32", "float16", "bfloat16")),
    Option("clip", float, 1.0, "largest gradient norm; larger gradients are scaled down", above=0),
]

OPTIONS = [
    Option("data", "dir", None,
           "folder of train.bin, val.bin and meta.json (from python -m gpt2.train.corpus)",
           required=True),
    Option("out", "path", None,
           "folder for the model, train_log.json and ckpt/ (made with its parents): new, empty, "
           "or a run to resume", required=True),
    Option("n_layer", int, 6, "transformer blocks", low=1),
    Option("n_embd", int, 256, "width of the residual stream (a multiple of --n_head)", low=1),
    Option("n_head", int, 4, "attention heads per block", low=1),
    Option("n_ctx", int, 256, "context window: tokens per training window", low=1),
    Option("batch_size", int, 16, "windows per step", low=1),
    Option("lr", float, 1e-3, "peak learning rate, after the warm-up", above=0),
    Option("min_lr_ratio", float, 0.1, "the cosine decay ends at min_lr_ratio * lr", low=0, high=1),
    Option("warmup", int, 100, "steps of linear warm-up", low=0),
    Option("max_steps", int, 2000, "steps of the schedule", low=1),
    Option("weight_decay", float, 0.1, "AdamW's weight decay, on matrices only", low=0),
    Option("eval_every", int, 100, "steps between evaluations on val.bin and checkpoints", low=1),
    Option("seed", int, 0, "seed of the initialisation and the batches", low=0),
    *RUN_CONTROL,
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
