"""EAGLE-3's draft head (Li, Wei, Zhang, Zhang 2025, "EAGLE-3: Scaling up Inference Acceleration of
Large Language Models via Training-Time Test", arXiv:2503.01840): EAGLE's one-block head (
gpt2/eagle.py) on features fused from three depths of the target, predicting tokens of a draft
vocabulary of its own. picospec/eagle3.py drafts with it.

    F_i     = [l_i, m_i, h_i]            [3C]  the target's block outputs at its `layers`, after x_i
    a_i     = F_i @ fuse.w + fuse.b      [C]   fused (context items); a tree node reads instead
                                               its parent's output g: the head's own feature
    z_i     = [wte[t_(i+1)], a_i]        [2C]  the target's frozen embedding beside it
    g_(i+1) = block(fc(z_0) .. fc(z_i))[i]  [C]   one GPT-2 block, causal over the head's inputs
    p_(i+2) = softmax(ln(g_(i+1)) @ lm.w)  [V_d]  the law over the draft vocabulary; d2t[j] is
                                               draft token j's target id

Trained on tokens only, with training-time test (gpt2/train/eagle3.py). Shapes: C n_embd, V_d the
draft vocabulary's size, L the target's blocks.
"""
from pathlib import Path

import numpy as np

from gpt2.backend import aligned
from gpt2.eagle import EagleHead, TREE_SLOTS, eagle_shapes, init_eagle, load_eagle, save_eagle
from gpt2.fast.ops import CPU
from gpt2.model import linear

RETRAIN = "re-train the head with `python -m gpt2.train.eagle3` (see README)"


def default_layers(n_layer):
    """The three depths read: a low, a middle and a high block. 6 blocks -> (1, 3, 4)."""
    if n_layer < 3:
        raise ValueError(f"EAGLE-3 reads three depths of the target, which has {n_layer} "
                         f"blocks: give a backbone of 3 blocks or more")
    return tuple(sorted({1, n_layer // 2, n_layer - 2})) if n_layer >= 5 else (0, 1, 2)


def init_eagle3(n_embd, n_head, d2t, layers, wte, ln_f, rng):
    """A fresh head -> (params, config): EAGLE's fc and block, a fusion of len(layers) depths
    (starting as their mean), a norm from the target's ln_f and an LM head from wte's rows d2t."""
    C, k = n_embd, len(layers)
    params, _ = init_eagle(C, n_head, rng)
    fuse = np.concatenate([np.eye(C, dtype=np.float32) / k] * k)  # [k C, C]
    params["fuse"] = {"w": fuse, "b": np.zeros(C, np.float32)}
    params["ln"] = {"g": np.array(ln_f["g"], np.float32), "b": np.array(ln_f["b"], np.float32)}
    params["lm"] = {"w": np.ascontiguousarray(np.asarray(wte, np.float32)[d2t].T)}  # [C, V_d]
    params["d2t"] = np.asarray(d2t, np.int64)  # [V_d]
    config = {"kind": "eagle3", "n_embd": C, "n_head": n_head, "layers": list(layers),
              "n_draft": int(len(d2t))}
    return params, config


def eagle3_shapes(config):
    """{name in eagle3.safetensors: shape} for a config's head."""
    C, k, N = config["n_embd"], len(config["layers"]), config["n_draft"]
    shapes = {f"eagle3.{name[len('eagle.'):]}": shape for name, shape in eagle_shapes(C).items()}
    return {**shapes, "eagle3.fuse.w": (k * C, C), "eagle3.fuse.b": (C,), "eagle3.ln.g": (C,),
            "eagle3.ln.b": (C,), "eagle3.lm.w": (C, N), "eagle3.d2t": (N,)}


class Eagle3Head(EagleHead):
    """The draft contract of EAGLE's head, over the draft vocabulary: head(x, F, tokens=(),
    parents=()) -> logits [1 + m, V_d], F[j] the target's block outputs at `layers` after x[j]
    [3C]; .d2t [V_d], .layers."""

    def __init__(self, params, config, wte, capacity, ops=CPU, threads=None):
        super().__init__(params, config, wte, capacity, ops, threads)
        self.layers = tuple(config["layers"])
        self.use_vocabulary(len(params["d2t"]))

    def use_vocabulary(self, n):
        """Draft over the n most frequent tokens of the head's vocabulary (d2t is by frequency)."""
        if len(getattr(self, "d2t", ())) == n:  # as it is: no copy
            return
        if not 1 <= n <= len(self.params["d2t"]):
            most = len(self.params["d2t"])
            raise ValueError(f"--draft_vocab {n}: this EAGLE-3 head drafts over at most {most} "
                             f"tokens; give --draft_vocab {most} or fewer")
        self.d2t = self.params["d2t"][:n]  # [n]
        self.lm_head = aligned(self.params["lm"]["w"][:, :n])  # [C, n]

    @property
    def settings(self):  # what a run drafts with, as --json reports it
        return {"draft_vocab": len(getattr(self, "d2t", self.params["d2t"]))}

    def features(self, F):  # [n, 3C] -> a [n, C]: the three depths fused
        return linear(F, **self.params["fuse"], ops=self.ops)

    def readout(self, g):  # [r, C] -> logits [r, V_d]
        with self.threads.scope(len(g)):
            return self.ops.matmul(self.ops.layer_norm(g, **self.params["ln"]), self.lm_head)


# ---- files ----

def save_eagle3(folder, params, config, dtype="float16", record=None):
    """eagle3.safetensors (the weights; d2t as integers) and eagle3.json (config and record)."""
    save_eagle(folder, params, config, dtype, record, kind="eagle3")


def load_eagle3(folder, n_embd=None, n_layer=None, n_vocab=None):
    """-> params, config; a bad or mismatched file is a ValueError naming it."""
    from gpt2.weights import CorruptFile, read_json

    folder = Path(folder)
    if (folder / "eagle3.json").is_file():  # the fields shapes need, checked first
        config = read_json(folder / "eagle3.json", fix=RETRAIN)
        layers, N = (config.get("layers"), config.get("n_draft")) if isinstance(config, dict) \
            else (None, None)
        if not (isinstance(layers, list) and layers and all(type(i) is int for i in layers)
                and type(N) is int and N >= 1):
            raise CorruptFile(folder / "eagle3.json", "layers must be a list of block indices and "
                              "n_draft a whole number >= 1", RETRAIN)
    params, config = load_eagle(folder, n_embd, "eagle3", eagle3_shapes, RETRAIN)
    if n_layer is not None and not all(0 <= i < n_layer for i in config["layers"]):
        raise ValueError(f"the EAGLE-3 head in {folder} reads blocks {config['layers']}, but the "
                         f"target has {n_layer}: give a head trained on this target (python -m "
                         f"gpt2.train.eagle3 --backbone NAME --out DIR)")
    d2t = params["d2t"]
    if n_vocab is not None and (d2t.min() < 0 or d2t.max() >= n_vocab
                                or len(np.unique(d2t)) != len(d2t)):
        raise CorruptFile(folder / "eagle3.safetensors",
                          f"d2t must hold distinct target ids 0 to {n_vocab - 1}", RETRAIN)
    return params, config


def eagle3_head(folder, model):
    """An Eagle3Head for engine `model` from `folder`, its cache as long as the engine's."""
    from gpt2.addons import note_other_target
    from gpt2.backend import to_numpy

    h = model.hparams
    params, config = load_eagle3(folder, h["n_embd"], h["n_layer"], h["n_vocab"])
    note_other_target(folder, "eagle3", config, model)  # same width, other weights
    host = model.device == "cpu"  # the head runs on the host: the target's ops and threads there
    return Eagle3Head(params, config, to_numpy(model.params["wte"]), model.n_ctx + TREE_SLOTS,
                      model.plan.ops if host else CPU,
                      model.plan.threads if host else None), config
