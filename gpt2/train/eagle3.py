"""Train an EAGLE-3 head (gpt2/eagle3.py) on a frozen GPT-2 with training-time test, on
self-distilled rows (gpt2/train/eagle.py's: 16 prompt tokens, then the backbone's own tokens).

The draft vocabulary: the V_d most frequent tokens of the training rows, d2t. Training-time test
unrolls the head as it drafts. Step 1 reads the target's fused features; step s > 1 reads, at each
position j, the head's own output of step s - 1 there, with the next true token:

    step s, item j:  z = [wte[t_(j+s)], a^s_j],  a^1_j = fuse(F_j),  a^s_j = g^(s-1)_j
    attention of item (s, j): step 1's items 0..j (the context) and (s', j) for 2 <= s' <= s (its
    own drafted path), as a tree node attends to the context and its ancestors when drafting
    loss = sum_s w^(s-1) CE(q^s, p^s),  q^s_j = softmax(target's logits at j + s over d2t),
    p^s_j = the head's law; positions whose target token is outside the vocabulary are left out.

    # the shipped head
    python -m gpt2.train.eagle3 --backbone tiny-target --data DIR --out DIR \
        --distill_tokens 320000 --distill_temperature 0 --max_minutes 60

OUT gets eagle3.safetensors + eagle3.json (its card: data, steps, loss by step and by test
position, accuracy per step ahead). Shapes: R rows, B batch, T row length, J = T - 1 items, C
n_embd, k depths, V n_vocab, V_d the draft vocabulary, H n_head, D = C // H.
"""
import json
import os
import time

import numpy as np

from gpt2.backend import to_device, to_numpy, xp_of
from gpt2.eagle import TREE_SLOTS
from gpt2.eagle3 import Eagle3Head, default_layers, init_eagle3, save_eagle3
from gpt2.train.backprop import (block_backward_past, block_forward, layernorm_backward,
                                 layernorm_forward, linear_backward, linear_forward)
from gpt2.train.eagle import (check_run, data_options, distilled_rows, log_softmax, record_run,
                              run_options, schedule_options)
from gpt2.train.gpt2 import lr_at, train_loop, written_into
from gpt2.train.heads import PROMPT_LEN
from picospec_cli import Option


def ttt_mask(J, s, xp=np):
    """[J, s J] bool: item j of step s sees step 1's items 0..j and the items j of steps 2..s."""
    j = xp.arange(J)
    first = j[None, :] <= j[:, None]  # [J, J] causal over the context
    own = xp.eye(J, dtype=bool)  # [J, J] its own path
    return xp.concatenate([first] + [own] * (s - 1), 1)


# ---- training-time test: paired forward / backward (gpt2/train/backprop.py's style) ----

# F [B, J, k C], ids [B, T] -> per step: logits [B, J, V_d]; caches
def ttt_forward(F, ids, params, wte, n_head, steps):
    """Steps 1..steps of the head, each on the outputs of the one before (training-time test)."""
    xp = xp_of(F)
    B, J, _ = F.shape
    T = ids.shape[1]
    a, c_fuse = linear_forward(F, **params["fuse"])  # [B, J, C]: a^1
    past, out, caches = None, [], []
    for s in range(1, steps + 1):
        tokens = ids[:, xp.minimum(xp.arange(J) + s, T - 1)]  # [B, J] t_(j+s), clipped at the end
        z = xp.concatenate([wte[tokens], a], -1)  # [B, J, 2C]
        u, c_fc = linear_forward(z, **params["fc"])  # [B, J, C]
        g, c_block = block_forward(u, params["block"], n_head, past, ttt_mask(J, s, xp))
        past = c_block[2][1:3]  # the attention's keys and values so far: [B, H, s J, D] each
        h, c_ln = layernorm_forward(g, **params["ln"])  # [B, J, C]
        out.append(h @ params["lm"]["w"])  # [B, J, V_d]
        caches.append((c_fc, c_block, c_ln, h))
        a = g  # the next step reads the head's own output
    return out, (c_fuse, caches)


# dlogits: per step [B, J, V_d] -> grads of params (wte is frozen)
def ttt_backward(dlogits, cache, params):
    c_fuse, caches = cache
    steps, C = len(caches), params["fc"]["b"].shape[0]
    grads = {"lm": {"w": 0.0}, "ln": {"g": 0.0, "b": 0.0}, "fc": {"w": 0.0, "b": 0.0},
             "block": None}
    dkv = [None] * (steps + 1)  # per step: more gradient of its keys and values, from later steps
    da = 0.0  # d loss / d a^(s+1) = d loss / d g^s (the next step's input)
    for s in range(steps, 0, -1):
        c_fc, c_block, c_ln, h = caches[s - 1]
        d = dlogits[s - 1]  # [B, J, V_d]
        grads["lm"]["w"] = grads["lm"]["w"] + h.reshape(-1, C).T @ d.reshape(-1, d.shape[-1])
        dg, dgn, dbn = layernorm_backward(d @ params["lm"]["w"].T, c_ln)  # [B, J, C]
        grads["ln"]["g"], grads["ln"]["b"] = grads["ln"]["g"] + dgn, grads["ln"]["b"] + dbn
        du, g_block, dpast = block_backward_past(dg + da, c_block, params["block"], dkv[s])
        grads["block"] = g_block if grads["block"] is None else add(grads["block"], g_block)
        if dpast is not None:  # split over the earlier steps: [B, H, (s - 1) J, D] each
            J = du.shape[1]
            for t in range(1, s):
                part = (dpast[0][:, :, (t - 1) * J:t * J], dpast[1][:, :, (t - 1) * J:t * J])
                dkv[t] = part if dkv[t] is None else (dkv[t][0] + part[0], dkv[t][1] + part[1])
        dz, dw, db = linear_backward(du, c_fc, params["fc"]["w"])  # [B, J, 2C]
        grads["fc"]["w"], grads["fc"]["b"] = grads["fc"]["w"] + dw, grads["fc"]["b"] + db
        da = dz[..., C:]  # [B, J, C]
    _, dw, db = linear_backward(da, c_fuse, params["fuse"]["w"])
    grads["fuse"] = {"w": dw, "b": db}
    return grads


def add(a, b):  # two gradient trees of one layout -> their sum
    return {k: add(v, b[k]) if isinstance(v, dict) else v + b[k] for k, v in a.items()}


def step_targets(target_logits, d2t, s, J):
    """Step s's targets from the target's logits [B, T, V]: q [B, J, V_d], item j's law the
    target's at position j + s over d2t, renormalised; keep [B, J]: the position exists and the
    target's token there (its argmax) is in the draft vocabulary."""
    xp = xp_of(target_logits)
    T = target_logits.shape[1]
    at = xp.arange(J) + s  # [J] the position whose law step s learns
    q_full = target_logits[:, xp.minimum(at, T - 1)]  # [B, J, V]
    in_vocab = xp.zeros(q_full.shape[-1], bool)  # [V]
    in_vocab[d2t] = True
    keep = (at < T)[None, :] & in_vocab[q_full.argmax(-1)]  # [B, J]
    return xp.exp(log_softmax(q_full[..., d2t])), keep


def ttt_loss_and_grads(F, ids, target_logits, d2t, params, wte, n_head, steps, weight=1.0):
    """F [B, J, k C] (fused inputs of positions 0..J - 1), ids [B, T], target_logits [B, T, V] ->
    loss, {"loss_by_step": [steps]}, grads (params' layout)."""
    xp = xp_of(F)
    J = F.shape[1]
    logits, cache = ttt_forward(F, ids, params, wte, n_head, steps)
    loss, by_step, dlogits = 0.0, [], []
    for s in range(1, steps + 1):
        q, keep = step_targets(target_logits, d2t, s, J)  # [B, J, V_d], [B, J]
        log_p = log_softmax(logits[s - 1])  # [B, J, V_d]
        n = max(int(keep.sum()), 1)
        ce = -(q * log_p).sum(-1)  # [B, J]
        by_step.append(float((ce * keep).sum()) / n)
        w = weight ** (s - 1)
        loss += w * by_step[-1]
        dlogits.append(w * (xp.exp(log_p) - q) * keep[..., None] / n)  # [B, J, V_d]
    return loss, {"loss_by_step": by_step}, ttt_backward(dlogits, cache, params)


# ---- data: the target's features at the head's depths ----

def taps_of(hparams, params, rows, layers, batch=32, desc="target features"):
    """rows [R, T] -> the backbone's block outputs at `layers` [R, T, k C] and its last hidden
    state after ln_f [R, T, C], both float16."""
    from tqdm import tqdm

    from gpt2.model import gpt2_hidden

    xp, C = xp_of(params["wte"]), hparams["n_embd"]
    taps = np.empty(rows.shape + (len(layers) * C,), np.float16)
    last = np.empty(rows.shape + (C,), np.float16)
    for s in tqdm(range(0, len(rows), batch), desc=desc, mininterval=1 if os.isatty(2) else 60):
        # [batch, T, (1 + k) C]
        h = to_numpy(gpt2_hidden(xp.asarray(rows[s:s + batch]), **params,
                                 n_head=hparams["n_head"], taps=tuple(layers)))
        last[s:s + batch], taps[s:s + batch] = h[..., :C], h[..., C:]
    return taps, last


def token_counts(rows, n_vocab, start=PROMPT_LEN):
    """How often each token follows a prompt in the rows: [V]."""
    return np.bincount(rows[:, start:].reshape(-1), minlength=n_vocab)


def vocabulary(counts, V_d):
    """d2t [V_d]: the V_d most frequent tokens, most frequent first, ties to the lower id (as
    picospec/eagle3.py's draft_vocabulary)."""
    return np.argsort(-counts, kind="stable")[:V_d]


def main(backbone="tiny-target", data=None, out=None, distill_tokens=0, distill_temperature=0.0,
         distill_data=None, draft_vocab=None, test_steps=3, step_weight=1.0, batch_size=8, lr=1e-3,
         warmup=50, max_steps=1000, max_minutes=None, clip=1.0, eval_every=50, steps=5,
         eval_rows=32, seed=0, resume=True, dtype="float16", stop_at=None, device="cpu",
         overwrite=False, offline=False):
    """Train an EAGLE-3 head on a frozen backbone's self-distilled rows; checkpoints in OUT/ckpt.

    A rerun resumes; --no-resume or --overwrite start over, replacing OUT's contents at the end."""
    from gpt2.weights import load_checkpoint

    # Step 0: every option checked before any work (a failed run leaves nothing behind)
    xp, data, out, folder, hparams, T, replace, weights = check_run(
        backbone, data, out, distill_tokens, distill_data, max_steps, stop_at, device, resume,
        overwrite, offline)
    draft_vocab = draft_vocab or max(1, hparams["n_vocab"] // 4)  # the paper: 32k of 128k
    if draft_vocab > hparams["n_vocab"]:
        raise ValueError(f"--draft_vocab {draft_vocab} is more than the backbone's "
                         f"{hparams['n_vocab']} tokens: give {hparams['n_vocab']} or fewer")
    layers = default_layers(hparams["n_layer"])

    # Step 1: the backbone, the self-distilled rows (made once), the draft vocabulary, features
    hparams, target = load_checkpoint(folder)
    target = to_device(target, xp)
    rng = np.random.default_rng(seed)
    log = {"backbone": str(backbone), "backbone_sha256": weights, "n_embd": hparams["n_embd"],
           "args": dict(draft_vocab=draft_vocab, test_steps=test_steps, step_weight=step_weight,
                        batch_size=batch_size, lr=lr, warmup=warmup, max_steps=max_steps,
                        clip=clip, steps=steps, seed=seed, row=T, layers=list(layers))}
    with written_into(out, replace) as work:
        rows, val_rows, distill_temperature = distilled_rows(
            work, out, backbone, hparams, target, data, T, distill_tokens, distill_temperature,
            distill_data, eval_rows, seed, rng, log)
        counts = token_counts(rows, hparams["n_vocab"])  # [V]
        d2t = vocabulary(counts, draft_vocab)  # [V_d]
        log["vocabulary"] = {"size": int(draft_vocab),
                             "coverage": float(counts[d2t].sum() / counts.sum())}
        start = time.time()
        feats, last = taps_of(hparams, target, rows, layers)  # [R, T, k C], [R, T, C]
        val_feats, val_last = taps_of(hparams, target, val_rows, layers, desc="val features")
        log["feature_seconds"] = time.time() - start
        wte = target["wte"]
        params, config = init_eagle3(hparams["n_embd"], hparams["n_head"], d2t, layers,
                                     to_numpy(wte), to_device(target["ln_f"], np), rng)
        params.pop("d2t")  # not trained
        params = to_device(params, xp)
        d2t_x = xp.asarray(d2t)

        def loss_of(ids, f, f_last, params):
            F = xp.asarray(f[:, :-1].astype(np.float32))  # [B, J, k C]
            target_logits = xp.asarray(f_last.astype(np.float32)) @ wte.T  # [B, T, V]
            return ttt_loss_and_grads(F, xp.asarray(ids), target_logits, d2t_x, params, wte,
                                      hparams["n_head"], test_steps, step_weight)

        def loss_and_grads(params, step, rng):
            pick = rng.integers(0, len(rows), batch_size)
            loss, parts, grads = loss_of(rows[pick], feats[pick], last[pick], params)
            log.setdefault("first_losses", {"loss": loss, **parts})  # the fresh head's
            return {"loss": loss, **parts}, grads

        def evaluate(step):  # validation loss by test step, 16 rows
            loss, parts, _ = loss_of(val_rows[:16], val_feats[:16], val_last[:16], params)
            return {"val_loss": loss, "val_loss_by_step": parts["loss_by_step"]}

        # Step 2: train, then measure the accuracy per step ahead and write the head
        train_loop(params, loss_and_grads, work / "ckpt", max_steps,
                   lambda step: lr_at(step, max_steps, lr, warmup),
                   rng, clip=clip, weight_decay=0.0, evaluate=evaluate, eval_every=eval_every,
                   max_minutes=max_minutes, stop_at=stop_at, log=log, resume=resume,
                   tokens_per_step=batch_size * (T - 1), desc="train eagle3", lr=lr)
        params = {**to_device(params, np), "d2t": d2t}
        head = Eagle3Head(params, config, to_numpy(wte), hparams["n_ctx"] + TREE_SLOTS)  # CPU
        record_run(log, head, val_rows, val_feats, steps, distill_temperature, batch_size * (T - 1),
                   device)
        save_eagle3(work, params, config, dtype=dtype, record={**log, "target_sha256": weights})
    print(json.dumps({"top1": log["accuracy"]["top1"], "top5": log["accuracy"]["top5"]}))
    return log["accuracy"]["top1"]


OPTIONS = [
    *data_options("eagle3"),
    Option("draft_vocab", int, None, "V_d: the draft vocabulary, the most frequent tokens of the "
           "training rows (default: a quarter of the backbone's, as the paper's 32k of 128k)",
           low=1),
    Option("test_steps", int, 3, "training-time test: steps the head runs on its own outputs",
           low=1, high=16),
    Option("step_weight", float, 1.0, "step s's loss is weighted step_weight^(s - 1)", above=0),
    *schedule_options(),
    Option("steps", int, 5, "steps ahead measured at the end (top-1 / top-5 per step)", low=1,
           high=32),
    *run_options(),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
