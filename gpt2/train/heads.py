"""Train Medusa heads (Cai et al. 2024, arXiv:2401.10774) or Blockwise heads on a GPT-2 with the
shared train_loop. MEDUSA-1 (sec. 2.2.1): backbone frozen, loss sum_k lambda_k L_k, lambda_k =
0.8^k. MEDUSA-2 (sec. 2.2.2): backbone too, loss lambda_0 L_LM + sum_k lambda_k L_k, the heads at
head_lr_ratio times the backbone's rate and alone for the first warmup_heads steps.
--distill_tokens trains on the backbone's own continuations (self-distillation, sec. 2.3.2).

    python -m gpt2.train.heads --backbone tiny-target --data DIR --out DIR --n_heads 4   # MEDUSA-1
    python -m gpt2.train.heads --backbone tiny-target --data DIR --out DIR --stage medusa2
    python -m gpt2.train.heads --backbone tiny-target --data DIR --out DIR --tied --act relu

OUT gets heads.safetensors + heads.json (for MEDUSA-2 also the tuned backbone). Shapes: B batch,
T n_ctx, C n_embd, V n_vocab.
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

from gpt2.addons import ACTIVATIONS, weights_sha256
from gpt2.backend import get_xp, to_device, to_numpy, xp_of
from gpt2.train.backprop import gpt2_hidden_backward, gpt2_hidden_forward, lm_head_forward_backward
from picospec_cli import Option
from gpt2.heads import heads_loss_and_grads, init_heads, ranks_of_targets, head_forward, save_heads
from gpt2.train.gpt2 import (RUN_CONTROL, check_data, check_ids, check_out, check_tokenizer,
                             check_tokens, has_state, lr_at, random_windows, read_state,
                             replaces_out, train_loop, written_into)
from picospec_cli import replace_file

PROMPT_LEN = 16  # tokens of text before each self-distilled continuation


def evaluate_heads(backbone, hparams, heads, config, data, n_ctx, batch_size=8, max_batches=8,
                   topk=10):
    """Rank histogram on windows of `data` -> {"rank_share" [K + 1, topk], "top1", "top5"}: the
    share of positions whose true token is head k's rank-r candidate (row 0: the LM head)."""
    xp = xp_of(backbone["wte"])  # numpy, or cupy for a backbone on the GPU
    counts = np.zeros((len(heads) + 1, topk))  # [K + 1, topk]
    totals = np.zeros(len(heads) + 1)  # [K + 1]
    n = min(max_batches * batch_size, (len(data) - 1) // n_ctx)
    for start in range(0, n, batch_size):
        buf = np.stack([data[r * n_ctx:(r + 1) * n_ctx + 1]  # [B, T + 1]
                        for r in range(start, min(n, start + batch_size))])
        ids = xp.asarray(buf[:, :-1].astype(np.int64))  # [B, T]
        targets = xp.asarray(buf[:, 1:].astype(np.int64))  # [B, T]
        h, _ = gpt2_hidden_forward(backbone, hparams, ids)  # [B, T, C]
        C = h.shape[-1]
        # k = 0: the LM head predicts targets[:, t]; head k: targets[:, t + k]
        for k in range(len(heads) + 1):
            hk = h[:, :n_ctx - k].reshape(-1, C)  # [B (T - k), C]
            if k == 0:
                logits = hk @ backbone["wte"].T  # [B (T - k), V]
            else:
                logits = head_forward(hk, heads[k - 1], backbone["wte"], config["act"])[0]
            ranks = to_numpy(ranks_of_targets(logits, targets[:, k:].reshape(-1)))
            counts[k] += np.bincount(ranks[ranks < topk], minlength=topk)  # [topk]
            totals[k] += len(ranks)
    share = counts / totals[:, None]  # [K + 1, topk]
    return {"rank_share": share.tolist(), "top1": share[:, 0].tolist(),
            "top5": share[:, :5].sum(1).tolist()}


def self_distill(hparams, params, data, n_tokens, rng, temperature=1.0, prompt_len=PROMPT_LEN,
                 new_tokens=112, batch_size=64):
    """Tokens the backbone wrote (at `temperature`, 0 greedy) after prompts cut from `data`: rows of
    prompt_len + new_tokens, batch_size rows at once -> [n_tokens] uint16."""
    from tqdm import tqdm

    from gpt2.train.generate import generate_batch

    new_tokens = min(new_tokens, hparams["n_ctx"] - prompt_len)  # a row fits the context window
    rows = []
    with tqdm(total=n_tokens, desc=f"self-distillation data (T={temperature})") as bar:
        while len(rows) * (prompt_len + new_tokens) < n_tokens:
            starts = rng.integers(0, len(data) - prompt_len, batch_size)
            prompts = np.stack([data[s:s + prompt_len] for s in starts])  # [batch_size, prompt_len]
            rows += list(generate_batch(hparams, params, prompts, new_tokens, rng, temperature))
            bar.update(batch_size * (prompt_len + new_tokens))
    return np.concatenate(rows)[:n_tokens].astype(np.uint16)


def distill_data_missing(path):  # -> None, or why --distill_data cannot be read
    if not Path(path).is_file():
        return "no such file; make one with --distill_tokens N (it is saved as OUT/distill.bin)"


def read_record(path):  # -> the JSON object in path, or None (none there, or not one)
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def made_at(distill_data, temperature):
    """The temperature that --distill_data FILE was made at: the record --distill_tokens writes
    beside it (FILE.json), else `temperature` (no record there)."""
    path = Path(distill_data).with_suffix(".json")
    if not path.exists():
        return temperature
    made = (read_record(path) or {}).get("temperature")
    if type(made) not in (int, float) or not made >= 0:  # NaN is not >= 0
        raise ValueError(f"--distill_data {distill_data}: {path} beside it is not the record "
                         f"--distill_tokens writes (a JSON object with the temperature >= 0 the "
                         f"data were made at): restore it, or copy {Path(distill_data).name} into "
                         f"a folder of its own and give --distill_temperature")
    return made


def check_backbone(ckpt, weights, backbone):
    """A checkpoint resumed was begun on --backbone's weights (`weights`: their sha256, which its
    log keeps as backbone_sha256); one written before the log kept them resumes as before."""
    log = read_state(ckpt).get("log", {}) if has_state(ckpt) else {}
    saved = log.get("backbone_sha256", weights)
    if saved != weights:
        raise ValueError(f"{ckpt} was begun on other backbone weights ({log.get('backbone')}, "
                         f"sha256 {saved[:12]}) than --backbone {backbone}'s (sha256 "
                         f"{weights[:12]}): resume with --backbone {log.get('backbone')}, give "
                         f"another --out, or --no-resume to start over")


def backbone_hparams(backbone, folder):
    """The hparams of --backbone's folder, or a ValueError naming the missing or broken file."""
    from gpt2.weights import hparams_from_config

    for name in ("config.json", "model.safetensors"):
        if not (folder / name).is_file():
            raise ValueError(f"--backbone {backbone}: {folder} has no {name}; a checkpoint folder "
                             f"needs config.json and model.safetensors")
    try:
        return hparams_from_config(json.loads((folder / "config.json").read_text()),
                                   folder / "config.json")
    except json.JSONDecodeError as e:
        raise ValueError(f"{folder / 'config.json'}: not valid JSON ({e})") from None


def main(backbone="tiny-target", data=None, out=None, n_heads=4, stage="medusa1", tied=False,
         act="silu", decay=0.8, lambda_0=1.0, n_ctx=None, batch_size=8, lr=1e-3, head_lr_ratio=4.0,
         warmup=50, warmup_heads=100, max_steps=1000, max_minutes=None, clip=1.0, eval_every=100,
         seed=0, distill_tokens=0, distill_temperature=1.0, distill_data=None, from_lm_head=True,
         resume=True, dtype="float16", stop_at=None, device="cpu", overwrite=False, offline=False):
    """Train heads (and for medusa2 the backbone) on token files; checkpoints in OUT/ckpt.

    A rerun resumes; --no-resume or --overwrite start over, replacing OUT's contents at the end. A
    resumed run that trains further removes OUT/medusa_choices.json, built from the heads before."""
    from gpt2.hub import resolve
    from gpt2.weights import load_checkpoint, save_checkpoint

    # Step 0: every option checked before any work (a failed run leaves nothing behind)
    if stage not in ("medusa1", "medusa2"):
        raise ValueError(f"--stage must be medusa1 or medusa2; got {stage!r}")
    if act not in ACTIVATIONS:
        raise ValueError(f"--act must be silu or relu; got {act!r}")
    if tied and stage == "medusa2":
        raise ValueError("tied heads (--tied) project with the backbone's wte; train them with a "
                         "frozen backbone (--stage medusa1)")
    if data is None or out is None:
        raise ValueError("give --data DIR (train.bin, val.bin from `python -m gpt2.train.corpus`) "
                         "and --out DIR")
    if distill_tokens and distill_data:
        raise ValueError("give --distill_tokens N (make new data) or --distill_data FILE (reuse "
                         "data), not both")
    if distill_temperature < 0:
        raise ValueError(f"--distill_temperature must be >= 0 (0 is greedy); got "
                         f"{distill_temperature}")
    if distill_data and (why := distill_data_missing(distill_data)):
        raise ValueError(f"--distill_data {distill_data}: {why}")
    if distill_data:
        made_at(distill_data, distill_temperature)  # its record, checked before any work
    if stop_at is not None and stop_at > max_steps:
        raise ValueError(f"--stop_at {stop_at} is past --max_steps {max_steps}: the run would "
                         f"never stop there")
    xp = get_xp(device)  # a ValueError without CuPy, before any work
    data, out = Path(data), Path(out)
    check_out(out)  # before the backbone is resolved (it may be downloaded)
    folder = resolve(str(backbone), offline=offline)
    hparams = backbone_hparams(backbone, folder)
    if n_ctx is not None and n_ctx > hparams["n_ctx"]:
        raise ValueError(f"--n_ctx {n_ctx} is longer than the backbone's context window of "
                         f"{hparams['n_ctx']} tokens: give --n_ctx {hparams['n_ctx']} or less")
    n_ctx = min(128, hparams["n_ctx"]) if n_ctx is None else n_ctx
    if n_ctx <= n_heads:
        raise ValueError(f"--n_ctx {n_ctx} leaves head {n_heads} no target: it predicts "
                         f"{n_heads + 1} tokens ahead; give fewer --n_heads or a longer --n_ctx")
    check_data(data, n_ctx)
    if distill_data:
        check_tokens(distill_data, n_ctx, "--distill_data")
    if distill_tokens and distill_tokens < n_ctx + 2:
        raise ValueError(f"--distill_tokens {distill_tokens} is too few for a window of --n_ctx "
                         f"{n_ctx}; give at least {n_ctx + 2}")
    if (distill_tokens or distill_data) and hparams["n_ctx"] <= PROMPT_LEN:
        raise ValueError(f"self-distillation continues {PROMPT_LEN}-token prompts; the backbone's "
                         f"context window ({hparams['n_ctx']}) has no room left")
    check_tokenizer(data, backbone, folder)
    # none may be in an OUT replaced
    inputs = {"--data": data, "--backbone": folder, "--distill_data": distill_data}
    replace = replaces_out(out, {"stage": stage, "n_heads": n_heads, "tied": tied, "act": act},
                           resume, overwrite, inputs, marks=["distill.bin"])
    weights = weights_sha256(folder)  # names the backbone: a resume must be on the same
    if not replace:
        check_backbone(out / "ckpt", weights, backbone)

    # Step 1: the backbone, the data (self-distilled: written by the backbone), fresh heads
    hparams, backbone_params = load_checkpoint(folder)
    wte_host = backbone_params["wte"]  # [V, C] NumPy: fresh heads start from it
    backbone_params = to_device(backbone_params, xp)
    rng = np.random.default_rng(seed)
    train_ids = np.fromfile(data / "train.bin", dtype=np.uint16)
    val_ids = np.fromfile(data / "val.bin", dtype=np.uint16)
    check_ids(train_ids, hparams["n_vocab"], data / "train.bin")
    check_ids(val_ids, hparams["n_vocab"], data / "val.bin")
    with written_into(out, replace) as work:
        # a resumed run reuses the data it made on these weights (or on unrecorded ones)
        made_on = (read_record(work / "distill.json") or {}).get("backbone_sha256", weights)
        if distill_tokens and resume and (work / "distill.bin").exists() and made_on == weights:
            distill_data = work / "distill.bin"
        elif distill_tokens:
            ids = self_distill(hparams, backbone_params, train_ids, int(distill_tokens), rng,
                               distill_temperature)
            work.mkdir(parents=True, exist_ok=True)
            made = {"temperature": distill_temperature, "tokens": len(ids),
                    "backbone": str(backbone), "backbone_sha256": weights}
            replace_file(work / "distill.json", [(json.dumps(made) + "\n").encode()])
            # written last: it marks the data as complete
            replace_file(work / "distill.bin", [ids.tobytes()])
            # --distill_data OUT/distill.bin trains other heads on the same data
            distill_data = work / "distill.bin"
        # made once with --distill_tokens and saved: reuse it (at the temperature it was made with)
        if distill_data:
            train_ids = np.fromfile(distill_data, dtype=np.uint16)  # [n]
            check_ids(train_ids, hparams["n_vocab"], distill_data)
            distill_temperature = made_at(distill_data, distill_temperature)
        if distill_data:  # calibrate on what the heads must match: the backbone's own continuations
            text_val_ids = val_ids
            val_ids = self_distill(hparams, backbone_params, val_ids, 8 * 8 * n_ctx + 1,
                                   np.random.default_rng(seed + 1), distill_temperature)
        heads, config = init_heads(n_heads, wte_host, tied=tied, act=act, from_lm_head=from_lm_head,
                                   rng=rng)
        heads = to_device(heads, xp)
        lambdas = [decay ** (k + 1) for k in range(n_heads)]
        joint = stage == "medusa2"
        params = {"heads": heads, **({"backbone": backbone_params} if joint else {})}
        # where the run leaves it
        kept = out / "distill.bin" if distill_data == work / "distill.bin" else distill_data
        log = {"stage": stage, "backbone": str(backbone), "backbone_sha256": weights,
               "args": dict(n_ctx=n_ctx, batch_size=batch_size, lr=lr, decay=decay,
                            lambda_0=lambda_0, head_lr_ratio=head_lr_ratio,
                            warmup_heads=warmup_heads, max_steps=max_steps, seed=seed,
                            distill_tokens=distill_tokens, distill_temperature=distill_temperature,
                            distill_data=str(kept) if distill_data else None, n_heads=n_heads,
                            tied=tied, act=act)}

        # MEDUSA-1: sum_k lambda_k L_k; MEDUSA-2: + lambda_0 L_LM
        def loss_and_grads(params, step, rng):
            windows = random_windows(train_ids, n_ctx, batch_size, rng)
            ids, targets = (xp.asarray(a) for a in windows)  # [B, T] each
            # [B, T, C]
            h, cache = gpt2_hidden_forward(params.get("backbone", backbone_params), hparams, ids)
            loss, losses, g_heads, dh = heads_loss_and_grads(h, targets, params["heads"],
                                                             backbone_params["wte"], config,
                                                             lambdas)
            grads = {"heads": g_heads}
            if joint:
                lm_loss, dh_lm, dwte_head = lm_head_forward_backward(h, params["backbone"]["wte"],
                                                                     targets)
                grads["backbone"] = gpt2_hidden_backward(dh + lambda_0 * dh_lm, cache,
                                                         params["backbone"])
                grads["backbone"]["wte"] = grads["backbone"]["wte"] + lambda_0 * dwte_head
                loss += lambda_0 * float(lm_loss)
                losses = [float(lm_loss)] + losses
            log.setdefault("first_losses", losses)  # the untrained heads', to compare against
            return {"loss": loss, "losses": losses}, grads

        # --lr is the heads' rate; MEDUSA-2's backbone learns head_lr_ratio x slower
        def learning_rate(step):
            rate = lr_at(step, max_steps, lr, warmup)
            if not joint:
                return rate
            return {"heads": rate, "backbone": 0.0 if step < warmup_heads else rate / head_lr_ratio}

        # Step 2: train, measure each head's accuracy, write the heads (and MEDUSA-2's backbone)
        resumed_at = read_state(work / "ckpt")["step"] if resume and has_state(work / "ckpt") else 0
        train_loop(params, loss_and_grads, work / "ckpt", max_steps, learning_rate, rng, clip=clip,
                   weight_decay=0.0, eval_every=eval_every, max_minutes=max_minutes,
                   stop_at=stop_at, log=log, resume=resume, tokens_per_step=batch_size * n_ctx,
                   desc=f"train {stage}", lr=lr)
        trained_backbone = params.get("backbone", backbone_params)
        log["accuracy"] = evaluate_heads(trained_backbone, hparams, params["heads"], config,
                                         val_ids, n_ctx)
        if distill_data:
            log["accuracy"]["on"] = (f"the backbone's own continuations (T={distill_temperature}) "
                                     f"of validation prompts")
            log["accuracy_text"] = evaluate_heads(trained_backbone, hparams, params["heads"],
                                                  config, text_val_ids, n_ctx)
        log["tokens_seen"] = log["step"] * batch_size * n_ctx
        log["machine"] = {"cores": os.cpu_count(), "numpy": np.__version__,
                          "minutes": round(log["seconds"] / 60, 1), "device": device}
        target = weights  # the weights the heads draft for: MEDUSA-2's, the tuned ones
        if joint:
            save_checkpoint(work, hparams, trained_backbone, dtype=dtype)
            target = weights_sha256(work)
            # the backbone's tokenizer, as is
            for name in ("vocab.json", "merges.txt", "encoder.json", "vocab.bpe"):
                if (folder / name).exists():
                    replace_file(work / name, [(folder / name).read_bytes()])
        save_heads(work, params["heads"], config, dtype=dtype,
                   record={"backbone": str(backbone), **log, "target_sha256": target})
        # heads newer than their tree
        if log["step"] > resumed_at and (work / "medusa_choices.json").exists():
            (work / "medusa_choices.json").unlink()
            print(f"removed {out / 'medusa_choices.json'}: it was built from the heads before this "
                  f"run; rebuild it with `python -m bench.trees --build {out}`", file=sys.stderr)
    print(json.dumps({"top1": log["accuracy"]["top1"], "top5": log["accuracy"]["top5"]}))
    return log["accuracy"]["top1"]


OPTIONS = [
    Option("backbone", str, "tiny-target",
           "the GPT-2 to put heads on: tiny-target, gpt2, ..., or a checkpoint folder",
           also=("target", "model")),
    Option("data", "dir", None,
           "folder of train.bin and val.bin (from python -m gpt2.train.corpus)", required=True),
    Option("out", "path", None,
           "folder for heads.safetensors, heads.json, ckpt/ and distill.bin (made with its "
           "parents): new, empty, or a run to resume", required=True),
    Option("n_heads", int, 4,
           "heads to train; head k guesses the token k + 1 places after the next", low=1),
    Option("stage", str, "medusa1",
           "medusa1: the backbone frozen; medusa2: backbone and heads together",
           choices=("medusa1", "medusa2")),
    Option("tied", bool, False,
           "Blockwise heads: project with the backbone's wte (with --stage medusa1)"),
    Option("act", str, "silu", "the heads' activation: silu (Medusa) or relu (Blockwise)",
           choices=ACTIVATIONS),
    Option("decay", float, 0.8, "head k's loss weighs decay^k", above=0, high=1),
    Option("lambda_0", float, 1.0, "medusa2: the weight of the LM head's loss", low=0),
    Option("n_ctx", int, None, "tokens per training window, at most the backbone's context "
           "(default: the backbone's context, at most 128)", low=2),
    Option("batch_size", int, 8, "windows per step", low=1),
    Option("lr", float, 1e-3, "the heads' peak learning rate", above=0),
    Option("head_lr_ratio", float, 4.0, "medusa2: the backbone learns at lr / head_lr_ratio",
           above=0),
    Option("warmup", int, 50, "steps of linear warm-up", low=0),
    Option("warmup_heads", int, 100, "medusa2: the first steps train the heads alone", low=0),
    Option("max_steps", int, 1000, "steps of the schedule", low=1),
    Option("eval_every", int, 100, "steps between log entries and checkpoints", low=1),
    Option("seed", int, 0, "seed of the batches (and of the self-distillation)", low=0),
    Option("distill_tokens", int, 0,
           "train on this many tokens the backbone writes itself (0: on the text)", low=0),
    Option("distill_temperature", float, 1.0, "temperature of the self-distillation (0 is greedy)",
           low=0),
    Option("distill_data", "path", None,
           "train on OUT/distill.bin of an earlier --distill_tokens run",
           check=distill_data_missing),
    Option("from_lm_head", bool, True,
           "untied heads' output layer starts as the LM head (--no-from_lm_head: random)"),
    *RUN_CONTROL,
    Option("offline", bool, False, "never touch the network: the backbone must be in the Hugging "
           "Face cache (HF_HUB_OFFLINE=1 also counts)"),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
