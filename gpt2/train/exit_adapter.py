"""LayerSkip's exit adapter (Elhoushi et al. 2024, arXiv:2404.16710), trained on a frozen target:
logits = wte (SiLU(W1 x + b1) + x), x = ln_f(h_E) after E layers, W1 [n_embd, n_embd] from zero
(a fresh adapter is the plain LM head), fitted to the target's next-token law by soft
cross-entropy. Saved as folder/early_exit/ for gpt2/self_draft.py. Shapes: B windows, T tokens.
"""
import numpy as np

from gpt2.backend import to_numpy, xp_of
from gpt2.model import layer_norm, softmax
from gpt2.train.skip_search import full_forward


def train_exit_adapter(params, hparams, windows, exit_layer, out, steps=400, batch_size=512,
                       lr=1e-3, seed=0):
    """Train the exit adapter after `exit_layer` layers on the positions of windows [B, T] with
    train_loop, save it to `out` (heads.json, heads.safetensors) -> the training log."""
    from pathlib import Path

    from gpt2.heads import head_backward, head_forward, init_heads, save_heads
    from gpt2.train.gpt2 import lr_at, train_loop

    L = hparams["n_layer"]
    if not 1 <= exit_layer < L:
        raise ValueError(f"exit layer {exit_layer}: the model has {L} layers; an exit adapter "
                         f"reads the residual after 1..{L - 1} of them")
    xp, wte = xp_of(params["wte"]), params["wte"]
    # ln_f of the residual at the exit and at the end: [B * T, n_embd] each
    features, finals = [], []
    C = hparams["n_embd"]
    for i in range(0, len(windows), 16):
        residuals = full_forward(params, hparams, windows[i:i + 16])[0]  # [2L + 1, 16, T, C]
        features.append(layer_norm(residuals[2 * exit_layer], **params["ln_f"]).reshape(-1, C))
        finals.append(layer_norm(residuals[-1], **params["ln_f"]).reshape(-1, C))  # [16 T, C]
    features, finals = xp.concatenate(features), xp.concatenate(finals)
    heads, config = init_heads(1, to_numpy(wte), tied=True, act="silu", kind="early_exit")
    head = {k: {n: xp.asarray(a) for n, a in v.items()} for k, v in heads[0].items()}

    # soft cross-entropy to the target's law on batch_size random positions
    def loss_and_grads(head, step, rng):
        idx = rng.integers(0, len(features), batch_size)
        logits, cache = head_forward(features[idx], head, wte, "silu")  # [batch_size, n_vocab]
        z = logits - logits.max(-1, keepdims=True)
        logp = z - xp.log(xp.exp(z).sum(-1, keepdims=True))  # [batch_size, n_vocab] log p, draft
        q = softmax(finals[idx] @ wte.T)  # [batch_size, n_vocab] the target's law q
        loss = float(-(q * logp).sum(-1).mean())
        return {"loss": loss}, head_backward((xp.exp(logp) - q) / batch_size, cache, head)[1]

    out = Path(out)
    log = train_loop(head, loss_and_grads, out / "ckpt", steps,
                     lambda step: lr_at(step, steps, lr, 20),
                     np.random.default_rng(seed), weight_decay=0.0, eval_every=100,
                     desc=f"exit adapter E={exit_layer}")
    save_heads(out, [{k: {n: to_numpy(a) for n, a in v.items()} for k, v in head.items()}], config,
               record={"exit_layer": exit_layer, "positions": int(len(features)), "steps": steps,
                       "final_loss": log["history"][-1]["loss"]})
    return log
