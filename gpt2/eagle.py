"""EAGLE's draft head (Li, Wei, Zhang, Zhang 2024, "EAGLE: Speculative Sampling Requires Rethinking
Feature Uncertainty", arXiv:2401.15077): autoregression on the target's features f_i (its hidden
state after ln_f). Letters: p = draft, q = target (Chen et al.); the paper's p is the target's law,
its p_hat the head's.

    z_i     = [wte[t_(i+1)], f_i]        [2C]  the target's frozen embedding beside the feature
    x_i     = z_i @ fc.w + fc.b          [C]   fc starts as [noise; I], so x_i ~ f_i
    g_(i+1) = block(x_0 .. x_i)[i]       [C]   one GPT-2 block, causal over the head's inputs
    p_(i+2) = softmax(g_(i+1) @ wte.T)   [V]   the head's law of the token after t_(i+1)

Drafting feeds g back as the next f. Training (gpt2/train/eagle.py) on the target's features:

    loss = SmoothL1(g_(i+1), f_(i+1)) + 0.1 CE(q, p),   q = softmax(f_(i+1) @ wte.T)

Shapes: B rows, T items per row, C n_embd, H n_head, V n_vocab, m nodes, S slots.
"""
import json
import math
from pathlib import Path

import numpy as np

from gpt2.backend import aligned, tree_map
from gpt2.cache import KVCache
from gpt2.engine import common_prefix_length
from gpt2.fast.ops import CPU
from gpt2.fast.policy import Threads
from gpt2.model import linear, transformer_block

RETRAIN = "re-train the head with `python -m gpt2.train.eagle` (see README)"
# cache slots beyond the context window for the nodes the head runs (EAGLE-2: top_k x depth)
TREE_SLOTS = 64 * 64


def init_eagle(n_embd, n_head, rng):
    """A fresh head of width C -> (params, config); fc.w = [noise; I] [2C, C]."""
    C = n_embd

    def w(*shape, std=0.02):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    # [2C, C]: rows 0..C-1 read the token, C.. f
    fc_w = np.concatenate([w(C, C), np.eye(C, dtype=np.float32)])
    block = {"ln_1": {"g": np.ones(C, np.float32), "b": np.zeros(C, np.float32)},
             "attn": {"c_attn": {"w": w(C, 3 * C), "b": np.zeros(3 * C, np.float32)},
                      "c_proj": {"w": w(C, C, std=0.02 / math.sqrt(2)),
                                 "b": np.zeros(C, np.float32)}},
             "ln_2": {"g": np.ones(C, np.float32), "b": np.zeros(C, np.float32)},
             "mlp": {"c_fc": {"w": w(C, 4 * C), "b": np.zeros(4 * C, np.float32)},
                     "c_proj": {"w": w(4 * C, C, std=0.02 / math.sqrt(2)),
                                "b": np.zeros(C, np.float32)}}}
    config = {"kind": "eagle", "n_embd": C, "n_head": n_head}  # the kind: gpt2/addons.py
    return {"fc": {"w": fc_w, "b": np.zeros(C, np.float32)}, "block": block}, config


def next_wave(nodes, start, n_context):
    """Nodes from `start` on whose parents have run -> (indices [w], mask [w, n_kv])."""
    wave = [start]
    while start + len(wave) < len(nodes) and nodes[start + len(wave)][1] < start:
        wave.append(start + len(wave))
    mask = np.zeros((len(wave), n_context + start + len(wave)), bool)  # [w, n_kv]
    mask[:, :n_context] = True
    for row, i in enumerate(wave):
        node = i
        while node >= 0:  # itself and its ancestors
            mask[row, n_context + node] = True
            node = nodes[node][1]
    return wave, mask


class EagleHead:
    """EAGLE's draft contract: head(x, F, tokens=(), parents=()) -> logits [1 + m, V], F[j] the
    target's feature after x[j] (L - 1 rows). Row 0: the law after x; 1 + i: after node i's path."""

    def __init__(self, params, config, wte, capacity, ops=CPU, threads=None):
        self.params, self.n_head = tree_map(aligned, params), config["n_head"]
        self.wte = np.asarray(wte, np.float32)
        self.ops, self.threads = ops, threads or Threads(self.wte.size)
        # [C, V] the target's LM head, contiguous for the product with few rows
        self.lm_head = aligned(self.wte.T)
        self.capacity = capacity  # cache slots per row: the context and the tree nodes
        self.rows = BatchEagleHead(self, 1)

    n_vocab = property(lambda self: self.wte.shape[0])
    calls = property(lambda self: self.rows.calls)  # forward passes of the head

    def reset(self):
        self.rows.reset()

    def features(self, F):  # the target's features [n, C] -> the head's input f [n, C]
        return F

    def readout(self, g):  # the head's outputs g [r, C] -> logits [r, V]: the target's LM head
        with self.threads.scope(len(g)):
            return self.ops.matmul(g, self.lm_head)

    def __call__(self, x, F, tokens=(), parents=()):
        return self.rows([0], [x], [F], [(tokens, parents)])[0]


class BatchEagleHead:
    """`rows` EAGLE heads on an EagleHead's weights, each running what changed:

        head(bs, xs, Fs, trees) -> [logits [1 + m, V] for each row in bs]
    """

    @staticmethod
    def row_bytes(head, tokens):
        """Upper bound on a row's bytes: its cache and a pass of `tokens` items."""
        C, H, V, S = head.wte.shape[1], head.n_head, head.wte.shape[0], head.capacity + 1
        return 4 * (2 * S * C + min(tokens, S) * (16 * C + H * S + 3 * V))

    def __init__(self, head, rows):
        self.head, self.rows = head, rows
        C, H = head.wte.shape[1], head.n_head
        # the head's capacity, and a spare slot where far padding writes
        self.slots = head.capacity + 1
        # the head's one block: [1, R, H, S, D]
        self.cache = KVCache(1, H, self.slots, C // H, np, rows=rows)
        self.calls = 0  # padded passes of the head
        self.reset()

    n_vocab = property(lambda self: self.head.n_vocab)
    accuracy = property(lambda self: getattr(self.head, "accuracy", None))
    d2t = property(lambda self: self.head.d2t)  # an EAGLE-3 head's (gpt2/eagle3.py)
    layers = property(lambda self: self.head.layers)

    def reset(self):
        # the tokens x each row's context pairs come from
        self.context = [[] for _ in range(self.rows)]
        # the (token, parent) nodes held after the context
        self.tree = [[] for _ in range(self.rows)]
        self.g = [[] for _ in range(self.rows)]  # their guessed features [C], in node order
        self.logits = [[] for _ in range(self.rows)]  # their laws [V]
        self.g0, self.logits0 = [None] * self.rows, [None] * self.rows  # the last context pair's

    def _pass(self, items, last_only=False):
        """{row: (f [n, C], tokens [n], slot, mask [n, n_kv])} -> {row: (g [n, C], logits)}."""
        bs = list(items)
        T, n_kv = max(len(items[b][1]) for b in bs), max(items[b][3].shape[1] for b in bs)
        C = self.head.wte.shape[1]
        # [B, T, C], [B, T]
        f, tokens = np.zeros((len(bs), T, C), np.float32), np.zeros((len(bs), T), np.int64)
        # [B, T] the slot of each item (padding: past the row's end)
        at = np.zeros((len(bs), T), np.int64)
        mask = np.zeros((len(bs), T, n_kv), bool)  # [B, T, n_kv]
        for i, b in enumerate(bs):
            fb, tb, start, mb = items[b]
            f[i, :len(tb)], tokens[i, :len(tb)] = fb, tb
            at[i] = np.minimum(start + np.arange(T), self.slots - 1)  # [T]
            mask[i, :len(tb), :mb.shape[1]] = mb
            # padding queries see one slot (their outputs are never read)
            mask[i, len(tb):, 0] = True
        params = self.head.params
        x = np.concatenate([self.head.wte[tokens], f], -1)  # [B, T, 2C]
        self.cache.at(at, n_kv, rows=np.array(bs))
        ops = self.head.ops
        with self.head.threads.scope(len(bs) * T):  # many rows: the wide count
            x = linear(x, **params["fc"], ops=ops)  # [B, T, 2C] -> [B, T, C]
            x = transformer_block(x, **params["block"], n_head=self.head.n_head, mask=mask[:, None],
                                  cache=self.cache, ops=ops)  # [B, T, C]
        self.calls += 1
        g = [x[i, :len(items[b][1])] for i, b in enumerate(bs)]  # per row [n, C]
        h = np.concatenate([h[-1:] if last_only else h for h in g])  # [sum of n (or B), C]
        logits = self.head.readout(h)  # [sum of n (or B), V]
        ends = np.cumsum([1 if last_only else len(h) for h in g])[:-1]
        # z: [n, V] per row, [1, V] when last_only
        return {b: (h, z) for b, h, z in zip(bs, g, np.split(logits, ends))}

    def __call__(self, bs, xs, Fs, trees):
        if (not (len(bs) == len(xs) == len(Fs) == len(trees))
                or any(not 0 <= b < self.rows for b in bs)):
            raise ValueError(f"this batched head holds {self.rows} rows; call it with one row "
                             f"index, x, F and tree each")
        # Step 1: each row's context pairs past its common prefix (pair j: while x[:j + 2] holds)
        items = {}
        for b, x, F in zip(bs, xs, Fs):
            L = len(x)
            if L < 2 or len(F) != L - 1:
                raise ValueError(f"the EAGLE head needs x of at least 2 tokens and one feature per "
                                 f"token but the last; got {L} tokens and {len(F)} features")
            if list(x) != self.context[b]:
                # always rerun the last pair
                keep = min(max(common_prefix_length(self.context[b], x) - 1, 0), L - 2)
                n = L - 1 - keep
                # [n, C]
                f = self.head.features(np.stack([np.asarray(F[j], np.float32)
                                                 for j in range(keep, L - 1)]))
                items[b] = (f, np.asarray(x[keep + 1:L]), keep,
                            np.tril(np.ones((n, keep + n), bool), k=keep))
                self.context[b], self.tree[b], self.g[b], self.logits[b] = list(x), [], [], []
        if items:
            for b, (g, logits) in self._pass(items, last_only=True).items():
                self.g0[b], self.logits0[b] = g[-1], logits[-1]  # [C], [V]
        # Step 2: each row's tree nodes after the part equal to its last call's, a wave per pass
        nodes = {b: [(int(t), int(p)) for t, p in zip(*tree)] for b, tree in zip(bs, trees)}
        for b in bs:
            same = common_prefix_length(self.tree[b], nodes[b])
            self.tree[b], self.g[b], self.logits[b] = (self.tree[b][:same], self.g[b][:same],
                                                       self.logits[b][:same])
        while True:
            items, waves = {}, {}
            for b in bs:
                start, n_context = len(self.tree[b]), len(self.context[b]) - 1
                if start == len(nodes[b]):
                    continue
                wave, mask = next_wave(nodes[b], start, n_context)  # [w], [w, n_kv]
                # [w, C]: each node is fed its parent's guessed feature
                f = np.stack([self.g0[b] if nodes[b][i][1] < 0 else self.g[b][nodes[b][i][1]]
                              for i in wave])
                items[b] = (f, np.asarray([nodes[b][i][0] for i in wave]), n_context + start, mask)
                waves[b] = wave
            if not items:
                break
            for b, (g, logits) in self._pass(items).items():
                self.tree[b] += [nodes[b][i] for i in waves[b]]
                self.g[b] += list(g)
                self.logits[b] += list(logits)
        # [1 + m, V] each
        return [np.stack([self.logits0[b]] + self.logits[b][:len(nodes[b])]) for b in bs]


# ---- files ----

def save_eagle(folder, params, config, dtype="float16", record=None, kind="eagle"):
    """KIND.safetensors (the weights, floats in dtype; integers as they are) and KIND.json (the
    config and the record) in folder; kind: "eagle", or "eagle3" (gpt2/eagle3.py)."""
    from gpt2.weights import flatten
    from gpt2.weights import write_safetensors
    from picospec_cli import replace_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / f"{kind}.safetensors",
                      {f"{kind}.{k}": v for k, v in flatten(params).items()}, dtype=dtype)
    replace_file(folder / f"{kind}.json",
                 [json.dumps({**config, **(record or {})}, indent=1).encode()])


def eagle_shapes(C):
    """{name in eagle.safetensors: shape} for a head of width C."""
    from gpt2.weights import flatten

    params, _ = init_eagle(C, 1, np.random.default_rng(0))  # shapes only: fc.w [2C, C], ...
    return {f"eagle.{k}": v.shape for k, v in flatten(params).items()}


def load_eagle(folder, n_embd=None, kind="eagle", shapes=None, retrain=RETRAIN):
    """-> params (float32; integer tensors kept), config; a bad or mismatched file is a ValueError
    naming it. kind: the files' name (eagle.json, eagle.safetensors) and the config's kind;
    shapes(config) -> {name: shape} (default: EAGLE's, eagle_shapes)."""
    from gpt2.addons import NAMES
    from gpt2.weights import CorruptFile, read_json, read_safetensors

    folder, RETRAIN = Path(folder), retrain
    json_file, tensors_file = folder / f"{kind}.json", folder / f"{kind}.safetensors"
    if not json_file.is_file() or not tensors_file.is_file():
        raise ValueError(f"no {NAMES[kind].removeprefix('an ')} in {folder}: expected "
                         f"{json_file.name} and {tensors_file.name} there (train one with "
                         f"`python -m gpt2.train.{kind}`)")
    config = read_json(json_file, fix=RETRAIN)
    if not isinstance(config, dict) or type(config.get("n_embd")) is not int \
            or type(config.get("n_head")) is not int \
            or config["n_head"] < 1 or config["n_embd"] % config["n_head"]:
        raise CorruptFile(json_file,
                          "n_embd and n_head must be whole numbers, n_embd a multiple of n_head",
                          RETRAIN)
    if config.get("kind", "eagle") != kind:
        raise CorruptFile(json_file, f"kind is {config.get('kind', 'eagle')!r}, not {kind!r}",
                          RETRAIN)
    accuracy = config.get("accuracy", {})
    share = accuracy.get("rank_share", [[1.0]]) if isinstance(accuracy, dict) else None
    if not (isinstance(share, list) and share
            and all(isinstance(row, list) and row and len(row) == len(share[0])
                    and all(type(v) in (int, float) and 0 <= v <= 1 for v in row)
                    for row in share)):
        raise CorruptFile(json_file,
                          "accuracy.rank_share must be a table of shares from 0 to 1 "
                          "(one row per step ahead, one column per rank)", RETRAIN)
    C = config["n_embd"]
    if n_embd is not None and C != n_embd:
        raise ValueError(f"the head in {folder} was trained for n_embd {C}, but the target "
                         f"has {n_embd}: give a head trained on this target (python -m "
                         f"gpt2.train.{kind} --backbone NAME --out DIR)")
    tensors = read_safetensors(tensors_file)
    params = {}
    for name, shape in (shapes or (lambda config: eagle_shapes(C)))(config).items():
        if name not in tensors:
            raise CorruptFile(tensors_file, f"tensor {name!r} is missing", RETRAIN)
        a = np.asarray(tensors[name])  # [*shape], checked below
        a = a if a.dtype.kind in "iu" else a.astype(np.float32)
        if a.shape != shape:
            raise CorruptFile(tensors_file,
                              f"tensor {name!r} has shape {a.shape}, not {shape}", RETRAIN)
        if not np.isfinite(a).all():  # scalar: every number finite
            raise CorruptFile(tensors_file,
                              f"tensor {name!r} holds NaN or infinite values", RETRAIN)
        node = params
        *path, last = name.split(".")[1:]
        for key in path:
            node = node.setdefault(key, {})
        node[last] = a
    return params, config


def eagle_folder(name, folder=None, offline=None, kind="eagle"):
    """--heads DIR, else eagle/ in the target's folder, checked to hold an EAGLE head (kind
    "eagle3": eagle3/, an EAGLE-3 head)."""
    from gpt2.addons import NAMES, check_kind, folder_kind
    from gpt2.hub import resolve

    path = Path(folder) if folder else resolve(name, offline=offline) / kind
    if folder_kind(path) is None:
        raise ValueError(f"no {NAMES[kind].removeprefix('an ')} for {name!r} at {path}: train one "
                         f"with `python -m gpt2.train.{kind} --backbone {name} --data DIR --out "
                         f"DIR` (see README) and pass --heads DIR")
    check_kind(path, kind, f"--heads {folder}" if folder else f"{path}",
               {"eagle": "--method eagle/eagle2", "eagle3": "--method eagle3"}[kind])
    return path


def eagle_head(folder, model):
    """An EagleHead for engine `model` from `folder`, its cache as long as the engine's."""
    from gpt2.addons import note_other_target
    from gpt2.backend import to_numpy

    params, config = load_eagle(folder, n_embd=model.hparams["n_embd"])
    note_other_target(folder, "eagle", config, model)  # same width, other weights
    host = model.device == "cpu"  # the head runs on the host: the target's ops and threads there
    return EagleHead(params, config, to_numpy(model.params["wte"]), model.n_ctx + TREE_SLOTS,
                     model.plan.ops if host else CPU,
                     model.plan.threads if host else None), config
