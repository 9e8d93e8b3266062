"""EAGLE's draft head (Li, Wei, Zhang, Zhang 2024, "EAGLE: Speculative Sampling Requires Rethinking
Feature Uncertainty", arXiv:2401.15077): autoregression one level below the tokens, on the target's
top-layer features.

The feature f_i is the target's last hidden state at position i (after ln_f: what its LM head
reads). The head takes f_i and the embedding of the token that followed it, t_(i+1), and guesses the
next feature; the target's own frozen LM head turns the guess into a token law:

    z_i     = [wte[t_(i+1)], f_i]              [2C]   token embedding (the target's, frozen) beside
    the feature x_i     = z_i @ fc.w + fc.b                [C]    the linear layer 2C -> C
    g_(i+1) = block(x_0 .. x_i)[i]             [C]    one GPT-2 block, causal attention over the
    head's own inputs p_(i+2) = softmax(g_(i+1) @ wte.T)         [V]    the head's law of the token
    after t_(i+1)

Drafting feeds the head its own guesses: (g_(i+1), t_(i+2)) gives g_(i+2), and so on down a tree.
The features of accepted tokens come from the target's verification forward, so the head's context
(its KV cache) holds true features and only the drafted part runs on guesses. fc starts as [small
noise; I] (x_i ~ f_i: a fresh head guesses "the next feature is about this one"), the block as
GPT-2's initialisation.

Training (gpt2/train/eagle.py) on the target's own features: loss = SmoothL1(g_(i+1), f_(i+1)),
averaged over positions and the C numbers, + w_cls * CE(p, p_hat), the cross-entropy of the head's
token law p_hat = softmax(g_(i+1) @ wte.T) against the target's p = softmax(f_(i+1) @ wte.T) (the
paper's L_reg + w_cls L_cls, w_cls = 0.1), with the input features f_i perturbed by uniform noise
U(-0.1, 0.1).

Files: FOLDER/eagle.safetensors (eagle.fc.w, eagle.fc.b, eagle.block.*: the block in GPT-2's names)
and FOLDER/eagle.json (n_embd, n_head, and the training record). Shapes: B batch, T positions, C
n_embd, V n_vocab, n new context pairs, m tree nodes, d = C // n_head.
"""
import json
import math
from pathlib import Path

import numpy as np

from gpt2.cache import KVCache
from gpt2.engine import common_prefix_length
from gpt2.fast.ops import CPU
from gpt2.fast.policy import Threads
from gpt2.model import linear, transformer_block

RETRAIN = "re-train the head with `python -m gpt2.train.eagle` (see README)"
# cache slots beyond the context window for the nodes the head runs (EAGLE-2: top_k x depth)
TREE_SLOTS = 64 * 64


def init_eagle(n_embd, n_head, rng):
    """A fresh head for a target of width C = n_embd: fc = [noise(0.02); I] (the feature passes
    through), one block."""
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
    """The tree nodes (token, parent) from `start` on that can run together, those whose parents are
    already run -> (their indices [w], their mask [w, n_context + start + w]: the context, their
    ancestors and themselves)."""
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
    """head(x, F, tokens=(), parents=()) -> logits [1 + m, V]: the draft contract of EAGLE's
    methods.

    x: the accepted tokens, L of them; F: the target's features at x's positions but the last (F[j]
    = f_j, the feature after x[j]; L - 1 rows, [C] each, a list or an array). The context is the
    pairs (F[j], x[j + 1]), j = 0..L-2. Row 0 is the head's law of the token after x (from the last
    pair). Tree node i holds tokens[i] below node parents[i] (-1: below x's last token); it is fed
    its parent's guessed feature (row 0's for -1) and its own token, sees the context, its ancestors
    and itself, and row 1 + i is the law of the token after its path. Like the engine, a call runs
    only what changed: context pairs after the longest common prefix with the tokens held, and the
    tree nodes after the part of the tree equal to the last call's (a tree grown a level per call
    runs each level once). Nodes whose parent is new run after it, a wave per level. The head's
    weights, and a one-row BatchEagleHead that runs it. It runs on the host, with `ops` (gpt2/fast:
    the target engine's where that runs on the CPU) and `threads` (its BLAS counts).
    """

    def __init__(self, params, config, wte, capacity, ops=CPU, threads=None):
        self.params, self.wte, self.n_head = params, np.asarray(wte, np.float32), config["n_head"]
        self.ops, self.threads = ops, threads or Threads(self.wte.size)
        # [C, V] the target's LM head (contiguous: faster for few rows)
        self.lm_head = np.ascontiguousarray(self.wte.T)
        self.capacity = capacity  # cache slots per row: the context and the tree nodes
        self.rows = BatchEagleHead(self, 1)

    n_vocab = property(lambda self: self.wte.shape[0])
    calls = property(lambda self: self.rows.calls)  # forward passes of the head

    def reset(self):
        self.rows.reset()

    def __call__(self, x, F, tokens=(), parents=()):
        return self.rows([0], [x], [F], [(tokens, parents)])[0]


class BatchEagleHead:
    """`rows` EAGLE draft heads at once (an EagleHead's weights, shared), each row with its own
    cache row:

        head(bs, xs, Fs, trees) -> [logits [1 + m, V] for each row]

    bs: the rows called (any subset, by index: a row keeps its cache whether or not it is called);
    xs[i], Fs[i] and trees[i] = (tokens, parents) are what EagleHead(x, F, tokens, parents) takes,
    and row i of the answer is what it gives. Every call runs, for all rows in one padded pass per
    wave, what changed since that row's last call: first each row's new context pairs (after the
    longest common prefix with the context it holds), then the new tree nodes a level (wave) at a
    time, a node fed its parent's guessed feature. The head has no position embedding, so a row's
    items only need their cache slots (context pairs, then tree nodes in node order) and masks
    (causal over the context; a node sees the context, its ancestors and itself). Shapes: B rows in
    a pass, T items per row (padded), C n_embd, H heads, D = C // H, S slots per row, V n_vocab.
    """

    @staticmethod
    def row_bytes(head, tokens):
        """An upper bound on the bytes one row takes: its cache (2 x S x C numbers) and the
        activations of a pass of `tokens` items (features, the block's 16 C, attention over S
        slots per head, logits [V])."""
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

    def reset(self):
        # the tokens x each row's context pairs come from
        self.context = [[] for _ in range(self.rows)]
        # the (token, parent) nodes held after the context
        self.tree = [[] for _ in range(self.rows)]
        self.g = [[] for _ in range(self.rows)]  # their guessed features [C], in node order
        self.logits = [[] for _ in range(self.rows)]  # their laws [V]
        self.g0, self.logits0 = [None] * self.rows, [None] * self.rows  # the last context pair's

    def _pass(self, items, last_only=False):
        """items: {row: (f [n, C], tokens [n], first slot, mask [n, n_kv])} -> {row: (g [n, C],
        logits [n or 1, V])}, the laws from ONE product with the LM head over every row's items (or
        its last item only)."""
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
            at[i] = np.minimum(start + np.arange(T), self.slots - 1)
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
        with self.head.threads.scope(len(h)):
            logits = ops.matmul(h, self.head.lm_head)  # [sum of n (or B), V]
        ends = np.cumsum([1 if last_only else len(h) for h in g])[:-1]
        return {b: (h, z) for b, h, z in zip(bs, g, np.split(logits, ends))}

    def __call__(self, bs, xs, Fs, trees):
        if not (len(bs) == len(xs) == len(Fs) == len(trees)) or any(not 0 <= b < self.rows
                                                                    for b in bs):
            raise ValueError(f"this batched head holds {self.rows} rows; call it with one row "
                             f"index, x, F and tree each")
        # Step 1: each row's context pairs after its common prefix (pair j is valid while x[:j + 2]
        # is unchanged)
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
                f = np.stack([np.asarray(F[j], np.float32) for j in range(keep, L - 1)])  # [n, C]
                items[b] = (f, np.asarray(x[keep + 1:L]), keep,
                            np.tril(np.ones((n, keep + n), bool), k=keep))
                self.context[b], self.tree[b], self.g[b], self.logits[b] = list(x), [], [], []
        if items:
            for b, (g, logits) in self._pass(items, last_only=True).items():
                self.g0[b], self.logits0[b] = g[-1], logits[-1]  # [C], [V]
        # Step 2: each row's tree nodes after the part equal to its last call's, a wave of new nodes
        # per pass
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

def save_eagle(folder, params, config, dtype="float16", record=None):
    from gpt2.weights import flatten
    from gpt2.weights import _atomic_write, write_safetensors

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "eagle.safetensors",
                      {f"eagle.{k}": v for k, v in flatten(params).items()}, dtype=dtype)
    _atomic_write(folder / "eagle.json",
                  [json.dumps({**config, **(record or {})}, indent=1).encode()])


def eagle_shapes(C):
    """{name in eagle.safetensors: shape} for a head of width C."""
    from gpt2.weights import flatten

    params, _ = init_eagle(C, 1, np.random.default_rng(0))
    return {f"eagle.{k}": v.shape for k, v in flatten(params).items()}


def load_eagle(folder, n_embd=None, n_vocab=None):
    """-> params (float32), config (eagle.json). Missing, corrupt (malformed, NaN or inf) or
    mismatched files are ValueErrors that name the file and say what to do."""
    from gpt2.weights import CorruptFile, read_json, read_safetensors

    folder = Path(folder)
    if not (folder / "eagle.json").is_file() or not (folder / "eagle.safetensors").is_file():
        raise ValueError(f"no EAGLE head in {folder}: expected eagle.json and eagle.safetensors "
                         f"there (train one with `python -m gpt2.train.eagle`)")
    config = read_json(folder / "eagle.json", fix=RETRAIN)
    if not isinstance(config, dict) or type(config.get("n_embd")) is not int \
            or type(config.get("n_head")) is not int \
            or config["n_head"] < 1 or config["n_embd"] % config["n_head"]:
        raise CorruptFile(folder / "eagle.json",
                          "n_embd and n_head must be whole numbers, n_embd a multiple of n_head",
                          RETRAIN)
    if config.get("kind", "eagle") != "eagle":
        raise CorruptFile(folder / "eagle.json", f"kind is {config['kind']!r}, not 'eagle'",
                          RETRAIN)
    accuracy = config.get("accuracy", {})
    share = accuracy.get("rank_share", [[1.0]]) if isinstance(accuracy, dict) else None
    if not (isinstance(share, list) and share
            and all(isinstance(row, list) and row and len(row) == len(share[0]) and
                                                      all(type(v) in (int, float) and 0 <= v <= 1
                                                          for v in row)
                                                      for row in share)):
        raise CorruptFile(folder / "eagle.json",
                          "accuracy.rank_share must be a table of shares from 0 to 1 (one row "
                                                 "per step ahead, one column per rank)", RETRAIN)
    C = config["n_embd"]
    if n_embd is not None and C != n_embd:
        raise ValueError(f"the EAGLE head in {folder} was trained for n_embd {C}, but the target "
                         f"has {n_embd}")
    tensors = read_safetensors(folder / "eagle.safetensors")
    params = {}
    for name, shape in eagle_shapes(C).items():
        if name not in tensors:
            raise CorruptFile(folder / "eagle.safetensors", f"tensor {name!r} is missing", RETRAIN)
        a = np.asarray(tensors[name], dtype=np.float32)
        if a.shape != shape:
            raise CorruptFile(folder / "eagle.safetensors",
                              f"tensor {name!r} has shape {a.shape}, not {shape}", RETRAIN)
        if not np.isfinite(a).all():
            raise CorruptFile(folder / "eagle.safetensors",
                              f"tensor {name!r} holds NaN or infinite values", RETRAIN)
        node = params
        *path, last = name.split(".")[1:]
        for key in path:
            node = node.setdefault(key, {})
        node[last] = a
    return params, config


def eagle_folder(name, folder=None, offline=None):
    """--heads DIR, else eagle/ inside the target's folder (the built-in tiny-target ships one);
    a folder of another kind of add-on is refused (gpt2/addons.py)."""
    from gpt2.addons import check_kind, folder_kind
    from gpt2.hub import resolve

    path = Path(folder) if folder else resolve(name, offline=offline) / "eagle"
    if folder_kind(path) is None:
        raise ValueError(f"no EAGLE head for {name!r} at {path}: train one with `python -m "
                         f"gpt2.train.eagle --backbone "
                         f"{name} --data DIR --out DIR` (see README) and pass --heads DIR")
    check_kind(path, "eagle", f"--heads {folder}" if folder else f"{path}", "--method eagle/eagle2")
    return path


def eagle_head(folder, model):
    """An EagleHead for the engine `model` from the head saved in `folder` (its cache as long as the
    engine's)."""
    from gpt2.backend import to_numpy

    params, config = load_eagle(folder, n_embd=model.hparams["n_embd"])
    host = model.device == "cpu"  # the head runs on the host: the target's ops and threads there
    return EagleHead(params, config, to_numpy(model.params["wte"]), model.n_ctx + TREE_SLOTS,
                     model.forward.ops if host else CPU,
                     model.forward.threads if host else None), config
