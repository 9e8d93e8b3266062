"""Train an EAGLE head (gpt2/eagle.py) on a frozen GPT-2 with the shared train_loop, on
self-distilled rows (heads.py's self_distill: 16 prompt tokens, then the backbone's own tokens):

    f = features[:, :-1] + U(-noise, noise),  tokens = ids[:, 1:],  f_next = features[:, 1:]
    loss = SmoothL1(head(f, tokens), f_next) + w_cls * CE(q, p)   (q = target, p = head's draft)

    # the shipped head
    python -m gpt2.train.eagle --backbone tiny-target --data DIR --out DIR --distill_tokens 320000 \
        --distill_temperature 0 --batch_size 8 --max_steps 1000 --max_minutes 18 --eval_every 25

OUT gets eagle.safetensors + eagle.json, with accuracy.rank_share[k][r]: the share of positions
whose true token k + 1 ahead is the head's rank-r draft. Shapes: R rows, B batch, T row length,
C n_embd, V n_vocab.
"""
import json
import os
import time
from pathlib import Path

import numpy as np

from gpt2.backend import get_xp, to_device, to_numpy, xp_of
from picospec_cli import Option
from gpt2.eagle import EagleHead, init_eagle, save_eagle, TREE_SLOTS
from gpt2.train.backprop import block_backward, block_forward, linear_backward, linear_forward
from gpt2.train.gpt2 import (RUN_CONTROL, check_data, check_ids, check_out, check_tokenizer,
                             check_tokens, lr_at, replaces_out, train_loop, written_into)
from gpt2.addons import weights_sha256
from gpt2.train.heads import (PROMPT_LEN, backbone_hparams, check_backbone, distill_data_missing,
                              made_at, read_record, self_distill)
from picospec_cli import replace_file


# ---- training: paired forward / backward (gpt2/train/backprop.py's style) ----

# f [B, T, C], tokens [B, T] -> g [B, T, C], cache
def eagle_forward(f, tokens, params, wte, n_head):
    """g[:, i]: the guessed feature after tokens[:, i], from f[:, :i + 1] and tokens[:, :i + 1]."""
    z = xp_of(f).concatenate([wte[tokens], f], -1)  # [B, T, 2C]
    x, c_fc = linear_forward(z, **params["fc"])  # [B, T, C]
    g, c_block = block_forward(x, params["block"], n_head)  # [B, T, C]
    return g, (c_fc, c_block)


# dg [B, T, C] -> df [B, T, C], grads of params (wte is frozen)
def eagle_backward(dg, cache, params):
    c_fc, c_block = cache
    dx, g_block = block_backward(dg, c_block, params["block"])  # [B, T, C]
    dz, dw, db = linear_backward(dx, c_fc, params["fc"]["w"])  # [B, T, 2C]
    C = dg.shape[-1]
    return dz[..., C:], {"fc": {"w": dw, "b": db}, "block": g_block}


# d [...] -> loss per entry, d(loss)/d(d): 0.5 d^2 inside |d| < 1, |d| - 0.5 outside
def smooth_l1(d):
    xp = xp_of(d)
    a = xp.abs(d)
    return xp.where(a < 1, 0.5 * d * d, a - 0.5), xp.clip(d, -1.0, 1.0)  # [...] each


def log_softmax(z):  # [..., V] -> [..., V]
    z = z - z.max(-1, keepdims=True)
    xp = xp_of(z)
    return z - xp.log(xp.exp(z).sum(-1, keepdims=True))


def eagle_loss_and_grads(f, tokens, f_next, params, wte, n_head, w_cls=0.1):
    """SmoothL1(g, f_next) + w_cls * CE(q, p) over f [B, T, C] (noised), tokens [B, T], f_next
    [B, T, C] -> loss, {"reg", "cls"}, grads (params' layout), df [B, T, C]."""
    g, cache = eagle_forward(f, tokens, params, wte, n_head)  # [B, T, C]
    B, T, C = g.shape
    xp = xp_of(g)
    reg, dreg = smooth_l1(g - f_next)  # [B, T, C]
    log_p = log_softmax(g @ wte.T)  # [B, T, V] the head's (draft's) law p
    q = xp.exp(log_softmax(f_next @ wte.T))  # [B, T, V] the target's law q (a constant)
    cls = -(q * log_p).sum(-1).mean()  # scalar
    dlogits = (xp.exp(log_p) - q) / (B * T)  # [B, T, V]: d cls / d logits
    dg = dreg / (B * T * C) + w_cls * (dlogits @ wte)  # [B, T, C]
    df, grads = eagle_backward(dg, cache, params)
    loss = float(reg.mean()) + w_cls * float(cls)
    return loss, {"reg": float(reg.mean()), "cls": float(cls)}, grads, df


# ---- decoding: the head behind the draft contract of picospec/eagle.py and picospec/eagle2.py ----

# tokens per self-distilled row: the prompt and what the backbone wrote
def row_length(hparams, new_tokens=112):
    return PROMPT_LEN + min(new_tokens, hparams["n_ctx"] - PROMPT_LEN)


def features_of(hparams, params, rows, batch=32, desc="target features"):
    """The backbone's last hidden state after ln_f: rows [R, T] -> [R, T, C] float16."""
    from tqdm import tqdm

    from gpt2.train.backprop import gpt2_hidden_forward

    xp = xp_of(params["wte"])  # numpy, or cupy: the features come back to the host
    out = np.empty(rows.shape + (hparams["n_embd"],), np.float16)
    for s in tqdm(range(0, len(rows), batch), desc=desc, mininterval=1 if os.isatty(2) else 60):
        # [batch, T, C]
        hidden, _ = gpt2_hidden_forward(params, hparams, xp.asarray(rows[s:s + batch]))
        out[s:s + batch] = to_numpy(hidden)  # [batch, T, C]
    return out


def accuracy_ahead(head, rows, feats, steps, start=PROMPT_LEN, topk=10):
    """-> rank_share [steps, topk]: the rank of the true token 1..steps ahead among the head's
    drafts, each step fed the head's own features, from every position of the rows. A head with a
    draft vocabulary (.d2t, EAGLE-3's) misses every token outside it."""
    counts, totals = np.zeros((steps, topk)), np.zeros(steps)  # [steps, topk], [steps]
    d2t = getattr(head, "d2t", None)
    t2d = None if d2t is None else {int(t): j for j, t in enumerate(d2t)}  # target id -> column
    for ids, f in zip(rows, feats):
        ids = [int(t) for t in ids]
        head.reset()
        for i in range(start - 1, len(ids) - 2):
            k = min(steps, len(ids) - i - 2)  # steps with a true token inside the row
            # [k, V]
            logits = head(ids[:i + 2], f[:i + 1], ids[i + 2:i + 1 + k], list(range(-1, k - 2)))
            truth = ids[i + 2:i + 2 + k]
            if t2d is not None:  # columns of the draft vocabulary; -1: outside it
                truth = [t2d.get(t, -1) for t in truth]
            # [k] 0 = the head's top token
            ranks = (logits > logits[np.arange(k), truth][:, None]).sum(-1)
            ranks[np.array(truth) < 0] = topk  # never drafted: a miss
            totals[:k] += 1
            for s, r in enumerate(ranks):
                if r < topk:
                    counts[s, r] += 1
    share = counts / totals[:, None]  # [steps, topk]
    return {"rank_share": share.tolist(), "top1": share[:, 0].tolist(),
            "top5": share[:, :5].sum(1).tolist(), "positions": totals.astype(int).tolist()}


def record_run(log, head, val_rows, val_feats, steps, temperature, tokens_per_step, device):
    """The end of a head trainer's log: the accuracy per step ahead on the validation rows, the
    tokens seen, the machine."""
    log["accuracy"] = accuracy_ahead(head, val_rows, val_feats.astype(np.float32), steps)
    log["accuracy"]["on"] = (f"the backbone's own continuations (T={temperature:g}) of validation "
                             f"prompts, {len(val_rows)} rows")
    log["tokens_seen"] = log["step"] * tokens_per_step
    log["machine"] = {"cores": os.cpu_count(), "numpy": np.__version__,
                      "minutes": round(log["seconds"] / 60, 1), "device": device}


def check_run(backbone, data, out, distill_tokens, distill_data, max_steps, stop_at, device,
              resume, overwrite, offline):
    """Step 0 of a head trainer on self-distilled rows: every option checked before any work (a
    failed run leaves nothing behind) -> xp, data, out, backbone folder, hparams, row length T,
    whether OUT is replaced, the sha256 of the backbone's weights."""
    from gpt2.hub import resolve

    if data is None or out is None:
        raise ValueError("give --data DIR (train.bin, val.bin from `python -m gpt2.train.corpus`) "
                         "and --out DIR")
    if bool(distill_tokens) == bool(distill_data):
        raise ValueError("give --distill_tokens N (the backbone writes N tokens to train on) or "
                         "--distill_data FILE (an OUT/distill.bin made before), one of them")
    if distill_data and (why := distill_data_missing(distill_data)):
        raise ValueError(f"--distill_data {distill_data}: {why}")
    if distill_data:
        made_at(distill_data, 0.0)  # its record, checked before any work
    if stop_at is not None and stop_at > max_steps:
        raise ValueError(f"--stop_at {stop_at} is past --max_steps {max_steps}: the run would "
                         f"never stop there")
    xp = get_xp(device)  # a ValueError without CuPy, before any work
    data, out = Path(data), Path(out)
    check_out(out)  # before the backbone is resolved (it may be downloaded)
    folder = resolve(str(backbone), offline=offline)
    hparams = backbone_hparams(backbone, folder)
    if hparams["n_ctx"] <= PROMPT_LEN + 2:
        raise ValueError(f"self-distillation continues {PROMPT_LEN}-token prompts; the backbone's "
                         f"context window ({hparams['n_ctx']}) leaves no room")
    T = row_length(hparams)
    row = f"a row of {T} tokens ({PROMPT_LEN} of a prompt and {T - PROMPT_LEN} the backbone writes)"
    check_data(data, T, too_few=f"{row}; give more data")
    if distill_data:
        check_tokens(distill_data, T, "--distill_data", f"{row}; give a longer file, or make one "
                     f"with --distill_tokens {2 * T} or more")
    if distill_tokens and distill_tokens < 2 * T:
        raise ValueError(f"--distill_tokens {distill_tokens} is too few: give at least two rows of "
                         f"{T} tokens ({2 * T})")
    check_tokenizer(data, backbone, folder)
    # none may be in an OUT replaced
    inputs = {"--data": data, "--backbone": folder, "--distill_data": distill_data}
    replace = replaces_out(out, {"backbone": str(backbone), "n_embd": hparams["n_embd"]}, resume,
                           overwrite, inputs, marks=["distill.bin"])
    weights = weights_sha256(folder)  # the name may stay while the weights change
    if not replace:
        check_backbone(out / "ckpt", weights, backbone)
    return xp, data, out, folder, hparams, T, replace, weights


def distilled_rows(work, out, backbone, hparams, target, data, T, distill_tokens,
                   distill_temperature, distill_data, eval_rows, seed, rng, log):
    """Step 1's data: the backbone's own continuations, made once into work/distill.bin (a rerun
    reuses them) -> rows [R, T], val_rows [eval_rows, T] (the same recipe on val prompts), the
    distillation's temperature; log gets "data"."""
    train_ids = np.fromfile(data / "train.bin", dtype=np.uint16)
    val_ids = np.fromfile(data / "val.bin", dtype=np.uint16)
    check_ids(train_ids, hparams["n_vocab"], data / "train.bin")
    made = {"temperature": distill_temperature, "tokens": distill_tokens,
            "backbone": str(backbone)}
    start = time.time()
    own, own_json = work / "distill.bin", work / "distill.json"
    if distill_tokens and own.exists() and read_record(own_json) == made:
        distill_data = own  # a rerun into the same OUT reuses the rows it made
    elif distill_tokens:
        ids = self_distill(hparams, target, train_ids, int(distill_tokens), rng,
                           distill_temperature)
        work.mkdir(parents=True, exist_ok=True)
        replace_file(own_json, [(json.dumps(made) + "\n").encode()])
        replace_file(own, [ids.tobytes()])  # written last: it marks the data as complete
        distill_data = own
        log["distill_seconds"] = time.time() - start
    ids = np.fromfile(distill_data, dtype=np.uint16)  # [n]
    check_ids(ids, hparams["n_vocab"], distill_data)
    distill_temperature = made_at(distill_data, distill_temperature)
    rows = ids[:len(ids) // T * T].reshape(-1, T).astype(np.int64)  # [R, T]
    val_rows = self_distill(hparams, target, val_ids, eval_rows * T,
                            np.random.default_rng(seed + 1), distill_temperature)
    val_rows = val_rows.reshape(-1, T).astype(np.int64)  # [eval_rows, T]
    kept = out / "distill.bin" if distill_data == own else distill_data  # where it stays
    log["data"] = {"rows": len(rows), "tokens": int(rows.size), "file": str(kept),
                   "temperature": distill_temperature}
    return rows, val_rows, distill_temperature


def main(backbone="tiny-target", data=None, out=None, distill_tokens=0, distill_temperature=0.0,
         distill_data=None, batch_size=8, lr=1e-3, warmup=50, max_steps=1000, max_minutes=None,
         clip=1.0, eval_every=50, w_cls=0.1, noise=0.1, steps=5, eval_rows=32, seed=0, resume=True,
         dtype="float16", stop_at=None, device="cpu", overwrite=False, offline=False):
    """Train an EAGLE head on a frozen backbone's self-distilled features; checkpoints in OUT/ckpt.

    A rerun resumes; --no-resume or --overwrite start over, replacing OUT's contents at the end."""
    from gpt2.weights import load_checkpoint

    # Step 0: every option checked before any work (a failed run leaves nothing behind)
    xp, data, out, folder, hparams, T, replace, weights = check_run(
        backbone, data, out, distill_tokens, distill_data, max_steps, stop_at, device, resume,
        overwrite, offline)

    # Step 1: the backbone, the self-distilled rows (made once), their features, a fresh head
    hparams, target = load_checkpoint(folder)
    target = to_device(target, xp)
    rng = np.random.default_rng(seed)
    log = {"backbone": str(backbone), "backbone_sha256": weights, "n_embd": hparams["n_embd"],
           "args": dict(batch_size=batch_size, lr=lr, warmup=warmup, max_steps=max_steps, clip=clip,
                        w_cls=w_cls, noise=noise, steps=steps, seed=seed, row=T)}
    with written_into(out, replace) as work:
        rows, val_rows, distill_temperature = distilled_rows(
            work, out, backbone, hparams, target, data, T, distill_tokens, distill_temperature,
            distill_data, eval_rows, seed, rng, log)
        start = time.time()
        feats = features_of(hparams, target, rows)  # [R, T, C] float16
        val_feats = features_of(hparams, target, val_rows, desc="val features")
        log["feature_seconds"] = time.time() - start
        wte = target["wte"]
        params, config = init_eagle(hparams["n_embd"], hparams["n_head"], rng)
        params = to_device(params, xp)

        def batch(ids, f, noisy, rng):  # -> f + noise, tokens, f_next for the pairs of each row
            f_in = f[:, :-1].astype(np.float32)  # [B, T - 1, C]
            if noisy:  # EAGLE's feature noise
                f_in += rng.uniform(-noise, noise, f_in.shape).astype(np.float32)
            f_next = f[:, 1:].astype(np.float32)  # [B, T - 1, C]
            return xp.asarray(f_in), xp.asarray(ids[:, 1:]), xp.asarray(f_next)

        def loss_and_grads(params, step, rng):
            pick = rng.integers(0, len(rows), batch_size)
            loss, parts, grads, _ = eagle_loss_and_grads(*batch(rows[pick], feats[pick], True, rng),
                                                         params, wte, hparams["n_head"], w_cls)
            log.setdefault("first_losses", {"loss": loss, **parts})  # the fresh head's
            return {"loss": loss, **parts}, grads

        def evaluate(step):  # validation loss and step-1 top-1 agreement (teacher-forced), 16 rows
            f, tokens, f_next = batch(val_rows[:16], val_feats[:16], False, None)
            loss, parts, _, _ = eagle_loss_and_grads(f, tokens, f_next, params, wte,
                                                     hparams["n_head"], w_cls)
            g, _ = eagle_forward(f, tokens, params, wte, hparams["n_head"])
            guess = (g @ wte.T).argmax(-1)[:, PROMPT_LEN:]  # [16, T - 1 - PROMPT_LEN]
            truth = (f_next @ wte.T).argmax(-1)[:, PROMPT_LEN:]  # [16, T - 1 - PROMPT_LEN]
            top1 = float(xp.mean(guess == truth))  # scalar
            return {"val_loss": loss, "val_reg": parts["reg"], "val_cls": parts["cls"],
                    "val_top1": top1}

        # Step 2: train, then measure the accuracy per step ahead and write the head
        train_loop(params, loss_and_grads, work / "ckpt", max_steps,
                   lambda step: lr_at(step, max_steps, lr, warmup),
                   rng, clip=clip, weight_decay=0.0, evaluate=evaluate, eval_every=eval_every,
                   max_minutes=max_minutes, stop_at=stop_at, log=log, resume=resume,
                   tokens_per_step=batch_size * (T - 1), desc="train eagle", lr=lr)
        head = EagleHead(to_device(params, np), config, to_numpy(wte),
                         hparams["n_ctx"] + TREE_SLOTS)  # on the CPU
        record_run(log, head, val_rows, val_feats, steps, distill_temperature, batch_size * (T - 1),
                   device)
        save_eagle(work, params, config, dtype=dtype, record={**log, "target_sha256": weights})
    print(json.dumps({"top1": log["accuracy"]["top1"], "top5": log["accuracy"]["top5"]}))
    return log["accuracy"]["top1"]


def data_options(kind):
    """The options of a head trainer on self-distilled rows (EAGLE's, EAGLE-3's) that say what it
    trains on and where it writes."""
    return [
        Option("backbone", str, "tiny-target",
               "the GPT-2 whose features the head reads: tiny-target, gpt2, ..., or a checkpoint "
               "folder", also=("target", "model")),
        Option("data", "dir", None,
               "folder of train.bin and val.bin (from python -m gpt2.train.corpus): the prompts",
               required=True),
        Option("out", "path", None,
               f"folder for {kind}.safetensors, {kind}.json, ckpt/ and distill.bin (made with its "
               f"parents): new, empty, or a run to resume", required=True),
        Option("distill_tokens", int, 0, "train on this many tokens the backbone writes itself",
               low=0),
        Option("distill_temperature", float, 0.0,
               "temperature of the self-distillation (0 is greedy)", low=0),
        Option("distill_data", "path", None, "train on the distill.bin of an earlier run instead",
               check=distill_data_missing)]


def schedule_options():
    """The training schedule's options of those trainers."""
    return [
        Option("batch_size", int, 8, "rows per step", low=1),
        Option("lr", float, 1e-3, "peak learning rate", above=0),
        Option("warmup", int, 50, "steps of linear warm-up", low=0),
        Option("max_steps", int, 1000, "steps of the schedule", low=1),
        Option("eval_every", int, 50,
               "steps between log entries (validation loss) and checkpoints", low=1)]


def run_options():
    """The last options of those trainers: validation rows, seed, run control, offline."""
    return [
        Option("eval_rows", int, 32,
               "validation rows (the backbone's continuations of val.bin prompts)", low=1),
        Option("seed", int, 0, "seed of the data, the initialisation and the batches", low=0),
        *RUN_CONTROL,
        Option("offline", bool, False, "never touch the network: the backbone must be in the "
               "Hugging Face cache (HF_HUB_OFFLINE=1 also counts)")]


OPTIONS = [
    *data_options("eagle"),
    *schedule_options(),
    Option("w_cls", float, 0.1, "weight of the token cross-entropy beside the feature SmoothL1",
           low=0),
    Option("noise", float, 0.1, "input features get uniform noise U(-noise, noise)", low=0),
    Option("steps", int, 5, "steps ahead measured at the end (top-1 / top-5 per step)", low=1,
           high=32),
    *run_options(),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
