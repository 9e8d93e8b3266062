"""Train extra heads on a GPT-2 backbone with the shared trainer (gpt2/train.py's AdamW, schedule, clipping, checkpoints).

    python -m gpt2.train_heads --backbone tiny-target --data DIR --out DIR --n_heads 4            # MEDUSA-1
    python -m gpt2.train_heads --backbone tiny-target --data DIR --out DIR --stage medusa2        # MEDUSA-2
    python -m gpt2.train_heads --backbone tiny-target --data DIR --out DIR --tied --act relu       # Blockwise heads

MEDUSA-1 (Cai et al. 2024, sec. 2.2.1): backbone frozen, loss sum_k lambda_k L_k with lambda_k = decay^k (0.8^k).
MEDUSA-2 (sec. 2.2.2): backbone and heads together, loss lambda_0 L_LM + sum_k lambda_k L_k; the heads' learning rate
is `head_lr_ratio` (4x) the backbone's, and the first `warmup_heads` steps train the heads alone (the backbone's rate
is 0), so fresh heads do not send large gradients into a trained backbone. --distill_tokens T trains on T tokens the
backbone itself wrote after training-text prompts (self-distillation, sec. 2.3.2) instead of the text, at
--distill_temperature (1 samples; 0 is greedy, what the heads must match when decoding greedily); the tokens are
decoded 64 rows at a time (gpt2/generate.py) and saved as OUT/distill.bin (+ distill.json), which --distill_data FILE
reuses. With distilled data the heads' accuracy is measured on the backbone's own continuations of validation prompts
(`accuracy`, what the sparse tree is built from) and on the validation text (`accuracy_text`).
DIR holds train.bin / val.bin as written by `python -m gpt2.corpus`. OUT gets heads.safetensors + heads.json (and for
MEDUSA-2 the fine-tuned backbone, so OUT is a complete model folder). Shapes: B batch, T n_ctx, C n_embd, V n_vocab.
"""
import json
import os
import time
from pathlib import Path

import numpy as np

from gpt2.backprop import gpt2_hidden_backward, gpt2_hidden_forward, lm_head_forward_backward
from gpt2.heads import heads_loss_and_grads, init_heads, ranks_of_targets, head_forward, save_heads
from gpt2.train import AdamW, clip_grads, flatten, load_state, lr_at, random_windows, save_state
from gpt2.weights import _atomic_write


def evaluate_heads(backbone, hparams, heads, config, data, n_ctx, batch_size=8, max_batches=8, topk=10):
    """Per-head accuracy on consecutive windows of `data`: rank histogram [K + 1, topk] (row 0: the LM head).

    rank_share[k][r] = share of positions where the true token is head k's rank-r candidate, so top-1 accuracy is
    rank_share[k][0] and top-5 is rank_share[k][:5].sum(); the sparse tree is built from these (picospec.tree)."""
    counts = np.zeros((len(heads) + 1, topk))
    totals = np.zeros(len(heads) + 1)
    n = min(max_batches * batch_size, (len(data) - 1) // n_ctx)
    for start in range(0, n, batch_size):
        buf = np.stack([data[r * n_ctx:(r + 1) * n_ctx + 1] for r in range(start, min(n, start + batch_size))])
        ids, targets = buf[:, :-1].astype(np.int64), buf[:, 1:].astype(np.int64)
        h, _ = gpt2_hidden_forward(backbone, hparams, ids)  # [B, T, C]
        C = h.shape[-1]
        for k in range(len(heads) + 1):  # k = 0: the LM head predicts targets[:, t]; head k: targets[:, t + k]
            hk = h[:, :n_ctx - k].reshape(-1, C)
            logits = hk @ backbone["wte"].T if k == 0 else head_forward(hk, heads[k - 1], backbone["wte"], config["act"])[0]
            ranks = ranks_of_targets(logits, targets[:, k:].reshape(-1))
            counts[k] += np.bincount(ranks[ranks < topk], minlength=topk)
            totals[k] += len(ranks)
    share = counts / totals[:, None]
    return {"rank_share": share.tolist(), "top1": share[:, 0].tolist(), "top5": share[:, :5].sum(1).tolist()}


def self_distill(hparams, params, data, n_tokens, rng, temperature=1.0, prompt_len=16, new_tokens=112, batch_size=64):
    """Token ids the backbone itself wrote (at `temperature`; 0 is greedy) after prompts cut out of `data`, as
    rows of prompt_len + new_tokens tokens, batch_size rows decoded at once (gpt2/generate.py)."""
    from tqdm import tqdm

    from gpt2.generate import generate_batch

    new_tokens = min(new_tokens, hparams["n_ctx"] - prompt_len)  # a row fits the context window
    rows = []
    with tqdm(total=n_tokens, desc=f"self-distillation data (T={temperature})") as bar:
        while len(rows) * (prompt_len + new_tokens) < n_tokens:
            starts = rng.integers(0, len(data) - prompt_len, batch_size)
            prompts = np.stack([data[s:s + prompt_len] for s in starts])  # [batch_size, prompt_len]
            rows += list(generate_batch(hparams, params, prompts, new_tokens, rng, temperature))
            bar.update(batch_size * (prompt_len + new_tokens))
    return np.concatenate(rows)[:n_tokens].astype(np.uint16)


def main(backbone="tiny-target", data=None, out=None, n_heads=4, stage="medusa1", tied=False, act="silu",
         decay=0.8, lambda_0=1.0, n_ctx=128, batch_size=8, lr=1e-3, head_lr_ratio=4.0, warmup=50, warmup_heads=100,
         max_steps=1000, max_minutes=None, clip=1.0, eval_every=100, seed=0, distill_tokens=0, distill_temperature=1.0,
         distill_data=None, from_lm_head=True,
         resume=True, dtype="float16"):
    """Train heads (and for medusa2 the backbone) on token files; checkpoints in OUT/ckpt, resumable."""
    from tqdm import tqdm

    from gpt2.hub import resolve
    from gpt2.weights import load_checkpoint, save_checkpoint

    if stage not in ("medusa1", "medusa2"):
        raise ValueError(f"--stage must be medusa1 or medusa2; got {stage!r}")
    if act not in ("silu", "relu"):
        raise ValueError(f"--act must be silu or relu; got {act!r}")
    if tied and stage == "medusa2":
        raise ValueError("tied heads (--tied) project with the backbone's wte; train them with a frozen backbone "
                         "(--stage medusa1)")
    if data is None or out is None:
        raise ValueError("give --data DIR (train.bin, val.bin from `python -m gpt2.corpus`) and --out DIR")
    if distill_tokens and distill_data:
        raise ValueError("give --distill_tokens N (make new data) or --distill_data FILE (reuse data), not both")
    if distill_temperature < 0:
        raise ValueError(f"--distill_temperature must be >= 0 (0 is greedy); got {distill_temperature}")
    if distill_data and not Path(distill_data).is_file():
        raise ValueError(f"--distill_data {distill_data}: no such file; make one with --distill_tokens N "
                         "(it is saved as OUT/distill.bin)")
    folder, data, out = resolve(str(backbone)), Path(data), Path(out)
    hparams, backbone_params = load_checkpoint(folder)
    n_ctx = min(n_ctx, hparams["n_ctx"])
    rng = np.random.default_rng(seed)
    train_ids = np.fromfile(data / "train.bin", dtype=np.uint16)
    val_ids = np.fromfile(data / "val.bin", dtype=np.uint16)
    if distill_tokens and resume and (out / "distill.bin").exists():  # a resumed run reuses the data it made
        distill_data = out / "distill.bin"
    elif distill_tokens:
        ids = self_distill(hparams, backbone_params, train_ids, int(distill_tokens), rng, distill_temperature)
        out.mkdir(parents=True, exist_ok=True)
        made = {"temperature": distill_temperature, "tokens": len(ids), "backbone": str(backbone)}
        _atomic_write(out / "distill.json", [(json.dumps(made) + "\n").encode()])
        _atomic_write(out / "distill.bin", [ids.tobytes()])  # written last: it marks the data as complete
        distill_data = out / "distill.bin"  # --distill_data OUT/distill.bin trains other heads on the same data
    if distill_data:  # made once with --distill_tokens and saved: reuse it (at the temperature it was made with)
        train_ids = np.fromfile(distill_data, dtype=np.uint16)
        made = Path(distill_data).with_suffix(".json")
        if made.exists():
            distill_temperature = json.loads(made.read_text())["temperature"]
    if distill_data:  # calibrate on what the heads must match: the backbone's own continuations
        text_val_ids = val_ids
        val_ids = self_distill(hparams, backbone_params, val_ids, 8 * 8 * n_ctx + 1, np.random.default_rng(seed + 1),
                               distill_temperature)
    heads, config = init_heads(n_heads, backbone_params["wte"], tied=tied, act=act, from_lm_head=from_lm_head, rng=rng)
    lambdas = [decay ** (k + 1) for k in range(n_heads)]
    joint = stage == "medusa2"
    params = {"heads": heads, **({"backbone": backbone_params} if joint else {})}
    opt = AdamW(params, lr=lr, weight_decay=0.0)
    log = {"stage": stage, "args": dict(n_ctx=n_ctx, batch_size=batch_size, lr=lr, decay=decay, lambda_0=lambda_0,
           head_lr_ratio=head_lr_ratio, warmup_heads=warmup_heads, max_steps=max_steps, seed=seed,
           distill_tokens=distill_tokens, distill_temperature=distill_temperature,
           distill_data=str(distill_data) if distill_data else None), "history": [], "seconds": 0.0, "step": 0}
    if resume and (out / "ckpt" / "state.json").exists():
        log = load_state(out / "ckpt", params, opt, rng)["log"]
        print(f"resumed from step {log['step']}")

    def loss_and_grads(ids, targets):
        h, cache = gpt2_hidden_forward(params.get("backbone", backbone_params), hparams, ids)  # [B, T, C]
        loss, losses, g_heads, dh = heads_loss_and_grads(h, targets, params["heads"], backbone_params["wte"],
                                                         config, lambdas)
        grads = {"heads": g_heads}
        if joint:
            lm_loss, dh_lm, dwte_head = lm_head_forward_backward(h, params["backbone"]["wte"], targets)
            grads["backbone"] = gpt2_hidden_backward(dh + lambda_0 * dh_lm, cache, params["backbone"])
            grads["backbone"]["wte"] = grads["backbone"]["wte"] + lambda_0 * dwte_head
            loss += lambda_0 * float(lm_loss)
            losses = [float(lm_loss)] + losses
        return loss, losses, grads

    start, t0, first = time.time() - log["seconds"], time.time(), log["step"]
    bar = tqdm(range(log["step"], max_steps), initial=log["step"], total=max_steps, desc=f"train {stage}",
               mininterval=1 if os.isatty(2) else 60)
    for step in bar:
        x, y = random_windows(train_ids, n_ctx, batch_size, rng)
        loss, losses, grads = loss_and_grads(x, y)
        log.setdefault("first_losses", losses)  # the untrained heads' losses, to compare against
        flat = flatten(grads)
        norm = clip_grads(flat, clip)
        head_rate = lr_at(step, max_steps, lr, warmup)  # --lr is the heads' rate; the backbone's is head_lr_ratio x lower
        opt_step(opt, params, flat, head_rate, 0.0 if step < warmup_heads else head_rate / head_lr_ratio)
        elapsed = time.time() - start
        log.update(step=step + 1, seconds=elapsed)
        bar.set_postfix(loss=f"{loss:.3f}", heads=" ".join(f"{v:.2f}" for v in losses), refresh=False)
        last = step + 1 == max_steps or (max_minutes and elapsed > 60 * max_minutes)
        if (step + 1) % eval_every == 0 or last:
            log["history"].append({"step": step + 1, "loss": loss, "losses": losses, "grad_norm": norm,
                                   "seconds": elapsed})
            bar.write(json.dumps(log["history"][-1]))
            save_state(out / "ckpt", params, opt, step + 1, rng, {"log": log})
        if last:
            break
    trained_backbone = params.get("backbone", backbone_params)
    log["accuracy"] = evaluate_heads(trained_backbone, hparams, params["heads"], config, val_ids, n_ctx)
    if distill_data:
        log["accuracy"]["on"] = f"the backbone's own continuations (T={distill_temperature}) of validation prompts"
        log["accuracy_text"] = evaluate_heads(trained_backbone, hparams, params["heads"], config, text_val_ids, n_ctx)
    log["tokens_seen"] = log["step"] * batch_size * n_ctx
    log["machine"] = {"cores": os.cpu_count(), "numpy": np.__version__, "minutes": round(log["seconds"] / 60, 1)}
    if joint:
        import shutil

        save_checkpoint(out, hparams, trained_backbone, dtype=dtype)
        for name in ("vocab.json", "merges.txt", "encoder.json", "vocab.bpe"):  # the backbone's tokenizer, as is
            if (folder / name).exists():
                shutil.copyfile(folder / name, out / name)
    save_heads(out, params["heads"], config, dtype=dtype, record={"backbone": str(backbone), **log})
    print(json.dumps({"top1": log["accuracy"]["top1"], "top5": log["accuracy"]["top5"]}))
    return log["accuracy"]["top1"]


def opt_step(opt, params, flat, head_rate, backbone_rate):
    """One AdamW step with a learning rate per group: the heads' and (MEDUSA-2) the backbone's."""
    if "backbone" not in params:
        return opt.step(params, flat, head_rate)
    opt.step({"heads": params["heads"]}, {k: v for k, v in flat.items() if k.startswith("heads")}, head_rate)
    opt.t -= 1  # one step of time for both groups
    opt.step({"backbone": params["backbone"]}, {k: v for k, v in flat.items() if k.startswith("backbone")}, backbone_rate)


if __name__ == "__main__":
    from gpt2.cli import fire_cli

    fire_cli(main)
