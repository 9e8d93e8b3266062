"""Self-drafting: the draft is the target on a shorter path through its sublayers, on its KV cache.
Draft & Verify (Zhang et al. 2023, arXiv:2309.08168) skips sublayers; LayerSkip (Elhoushi et al.
2024, arXiv:2404.16710) exits after E layers. Sublayer 2l is layer l's attention, 2l + 1 its MLP
("a3,m4": 6 and 9). The draft reads the keys/values the target wrote for the verified prefix (its
law depends on this). Below its first skipped sublayer, the cut f, it computes what the target does:
verification reuses that and runs sublayers f.. only. Example: 6 layers, exit after 2 (f = 4), the
draft read [t, d1, d2] and proposed d3: verifying runs d3 through 0-3, then all four through 4-11.

    engine = BatchSelfDraft(self_draft, rows)
    engine.draft(xs, n=1), engine.target(xs, n=1) -> probs [B, n, V]

Shapes: B rows, T new tokens per row, C n_embd, V n_vocab, L n_layer.
"""
import numpy as np

from gpt2.backend import to_numpy, xp_of
from gpt2.engine import NO_TREE, RowCaches, check, n_params, read_rows, row_layout
from gpt2.fast import Choices, build
from gpt2.model import REFERENCE, attention_sublayer, mlp_sublayer

# the folder of the exit adapter (heads.json + heads.safetensors), beside self_draft.json
ADAPTER = "early_exit"


def sublayer_name(s):  # 0 -> "a0", 3 -> "m1"
    return f"{'am'[s % 2]}{s // 2}"


def parse_skip(text, n_layer):
    """"a3,m4" (or a list of names) -> sorted sublayer numbers [6, 9]; "" -> []."""
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    out = set()
    for name in names:
        if (len(name) < 2 or name[0] not in "am" or not name[1:].isdigit()
            or int(name[1:]) >= n_layer):
            raise ValueError(f"skip set entry {name!r}: write a<layer> (attention) or m<layer> "
                             f"(MLP), layer 0..{n_layer - 1}, e.g. 'a3,m4'")
        out.add(2 * int(name[1:]) + (name[0] == "m"))
    return sorted(out)


def exit_skip(exit_layer, n_layer):
    """Exit after `exit_layer` layers as a skip set: every sublayer from 2 * exit_layer on."""
    return list(range(2 * exit_layer, 2 * n_layer))


# one residual sublayer: [B, T, C] -> [B, T, C]
def sublayer(x, s, block, n_head, mask=None, cache=None, ops=REFERENCE):
    """Half of gpt2/model.py's transformer_block: s = 2l its attention, 2l + 1 its MLP."""
    if s % 2 == 0:
        return attention_sublayer(x, block["attn"], block["ln_1"], n_head, mask, cache, s // 2,
                                  ops)
    return mlp_sublayer(x, block["mlp"], block["ln_2"], ops)


# final hidden states [..., C] -> logits [..., V]
def lm_head(h, params, adapter=None, head=None, ops=REFERENCE):
    """head: W [C, V] (None: wte.T); adapter: an exit adapter (gpt2/heads.py) before W."""
    from gpt2.heads import head_forward

    x = ops.layer_norm(h, **params["ln_f"])  # [..., C]
    W = params["wte"].T if head is None else head  # [C, V]
    if adapter is None:
        return ops.matmul(x, W)  # [..., C] @ [C, V]
    return head_forward(x, adapter["head"], W.T, adapter["act"])[0]  # it multiplies by (W.T).T


class SelfDraft:
    """A GPT-2 and a draft path; .target and .draft are its sides on a one-row BatchSelfDraft."""

    def __init__(self, hparams, params, skip=(), adapter=None, plan=None):
        self.hparams, self.params, self.adapter = hparams, params, adapter
        self.xp = xp_of(params["wte"])
        device = "cpu" if self.xp is np else "gpu"
        self.plan = plan or build(params, n_params(hparams), Choices(device))
        L = hparams["n_layer"]
        self.skip = sorted(set(skip))
        # first skipped sublayer: the draft is exact before it
        self.cut = min(self.skip, default=2 * L)
        self.kept = [s for s in range(2 * L) if s not in self.skip]
        self.rows = BatchSelfDraft(self, 1)
        self.target = Model(self, self.rows._verify, one=True)
        self.draft = Model(self, self.rows._propose, one=True)
        self.batch = None  # its batched form for --batch, once batch_side has built it

    def reset(self):
        self.rows.reset()


class BatchSelfDraft(RowCaches):
    """A SelfDraft's .target and .draft for `rows` sequences, a cache row each."""

    def __init__(self, engine, rows):
        super().__init__(engine.hparams, rows, engine.xp, 0, engine.plan,
                         dtype=engine.params["wte"].dtype)
        self.engine = engine
        self.target, self.draft = Model(self, self._verify), Model(self, self._propose)
        self.reset()

    def reset(self):
        super().reset()
        # per row: the tokens whose keys/values are the target's in every layer
        self.verified = [0] * self.rows
        # per row [tokens - verified, C] at the cut
        self.h_cut = [self._no_residuals() for _ in range(self.rows)]

    def _no_residuals(self):  # -> [0, C]
        return self.xp.zeros((0, self.hparams["n_embd"]), dtype=self.engine.params["wte"].dtype)

    def _move(self, order):  # rows move up with what they hold, verified and residuals too
        super()._move(order)
        self.verified = [self.verified[r] for r in order]
        self.h_cut = [self.h_cut[r] for r in order]

    # -> gpt2/engine.py's row_layout of each row's tokens from p_b on (no trees)
    def _layout(self, xs, p):
        return row_layout(xs, [int(pb) for pb in p], NO_TREE * len(xs), self.slots,
                          self.hparams["n_ctx"], self.xp)

    def _embed(self, rows):  # -> token + position embeddings [B, T, C] of a row_layout
        return self.engine.params["wte"][rows["ids"]] + self.engine.params["wpe"][rows["positions"]]

    # the draft: logits [B, n, V] after the last n prefixes of each xs[b]
    def _propose(self, xs, n=1):
        xs, B, cut = [list(x) for x in xs], len(xs), self.engine.cut
        # Step 1: what each row has read stays read; its verified prefix ends where it reads again
        p = np.minimum(self._prefixes(xs, n), [len(x) - n for x in xs])  # [B]
        self.verified[:B] = np.minimum(self.verified[:B], p).tolist()
        # Step 2: the new tokens below the cut (the target's own computation), kept per row
        rows = self._layout(xs, p)
        x = self._pass(self._embed(rows), rows, range(cut))  # [B, T, C]
        new = rows["s"]
        for b in range(B):
            self.h_cut[b] = self.xp.concatenate([self.h_cut[b][:p[b] - self.verified[b]],
                                                 x[b, :new[b]]])
        # Step 3: the rest of the draft's path (its keys/values above the cut are its own)
        x = self._pass(x, rows, [s for s in self.engine.kept if s >= cut])
        self._ran(xs, sum(new))
        h = read_rows(x, new, [0] * B, n, self.xp)  # [B*n, C]
        f = self.plan
        with f.threads.scope(len(h)):
            logits = lm_head(h, self.engine.params, self.engine.adapter, f.head, f.ops)  # [B*n, V]
        return logits.reshape(B, n, -1)

    # the target: logits [B, n, V] after the last n prefixes of each xs[b]
    def _verify(self, xs, n=1):
        xs, B, cut, C = [list(x) for x in xs], len(xs), self.engine.cut, self.hparams["n_embd"]
        # Step 1: per row, u the prefix whose keys/values are the target's; when the row keeps its
        # verified prefix, its tokens up to r (those the draft read) have their residuals at the
        # cut, and only the rest runs below it
        read = self._prefixes(xs, n)  # [B]
        lengths = np.array([len(x) for x in xs])  # [B]
        u = np.minimum(np.minimum(read, lengths - n), self.verified[:B])  # [B]
        r = np.where(u == self.verified[:B], read, u)  # [B]
        # Step 2: the tokens from r on through the sublayers below the cut
        below, ran = None, int((lengths - r).sum())
        if ran:
            rows = self._layout(xs, r)
            below = self._pass(self._embed(rows), rows, range(cut))  # [B, T1, C]
        # Step 3: every row's tokens from u on, from their residuals at the cut, through the rest
        rows = self._layout(xs, u)
        new = rows["s"]
        x = self.xp.zeros((B, max(new), C), dtype=self.engine.params["wte"].dtype)  # [B, T, C]
        for b in range(B):
            x[b, :r[b] - u[b]] = self.h_cut[b][:r[b] - u[b]]
            if r[b] < lengths[b]:
                x[b, r[b] - u[b]:new[b]] = below[b, :lengths[b] - r[b]]
        x = self._pass(x, rows, range(cut, 2 * self.hparams["n_layer"]))  # [B, T, C]
        self._ran(xs, ran + sum(new))
        self.verified[:B] = lengths.tolist()
        self.h_cut[:B] = [self._no_residuals() for _ in range(B)]
        h = read_rows(x, new, [0] * B, n, self.xp)  # [B*n, C]
        f = self.plan
        with f.threads.scope(len(h)):
            logits = lm_head(h, self.engine.params, head=f.head, ops=f.ops)  # [B*n, V]
        return logits.reshape(B, n, -1)

    # -> [B] the prefix each row's cache holds of its sequence (rows matched, moved up)
    def _prefixes(self, xs, n):
        if not 1 <= len(xs) <= self.rows:
            raise ValueError(f"this batched engine holds {self.rows} rows; got {len(xs)} sequences")
        for x in xs:
            check(x, n, 0, self.hparams["n_ctx"])
        return np.array(self._match(xs))  # [B]

    # padded rows [B, T, C] through `sublayers` in one batched pass
    def _pass(self, x, rows, sublayers):
        def run(x=x):
            for s in sublayers:  # [B, T, C] -> [B, T, C]
                x = sublayer(x, s, self.engine.params["blocks"][s // 2], self.hparams["n_head"],
                             rows["mask"], self.cache, self.plan.ops)
            return x

        return super()._pass(rows, run)


class Model:
    """One side of a BatchSelfDraft: model(xs, n=1) -> probs [B, n, V] (one=True: x -> [n, V])."""

    def __init__(self, engine, forward, one=False):
        self.engine, self.run, self.one = engine, forward, one

    def __call__(self, x, n=1):  # -> probs [n, n_vocab] (batched: [B, n, n_vocab])
        return to_numpy(self.engine.plan.ops.softmax(self.logits_on_device(x, n)))

    def logits(self, x, n=1):  # -> logits [n, n_vocab] (batched: [B, n, n_vocab])
        return to_numpy(self.logits_on_device(x, n))

    def logits_on_device(self, x, n):
        return self.run([list(x)], n)[0] if self.one else self.run([list(row) for row in x], n)

    def reset(self):
        self.engine.reset()

    @property
    def n_vocab(self):
        return self.engine.hparams["n_vocab"]

    @property
    def n_ctx(self):
        return self.engine.hparams["n_ctx"]


def batch_side(model, rows):
    """A SelfDraft's .target or .draft -> that side of its one BatchSelfDraft of `rows` rows."""
    engine = model.engine
    if engine.batch is None or engine.batch.rows != rows:
        engine.batch = BatchSelfDraft(engine, rows)
    return engine.batch.target if model is engine.target else engine.batch.draft


def load_adapter(folder, exit_layer, n_embd):
    """The exit adapter in folder/early_exit for `exit_layer` -> {"head", "act"}."""
    from pathlib import Path

    from gpt2.addons import check_kind, folder_kind
    from gpt2.heads import load_heads

    path = Path(folder) / ADAPTER
    if folder_kind(path) is None:
        raise ValueError(f"no exit adapter in {path}: train one with `python -m "
                         f"gpt2.train.self_draft --task exits`, or pass --no-adapter for the plain "
                         f"LM head")
    check_kind(path, "early_exit", f"{path} (the target's exit adapter folder)",
               "--method early_exit")
    heads, config = load_heads(path, n_embd=n_embd)
    if config.get("exit_layer") != exit_layer:
        raise ValueError(f"the exit adapter in {path} was trained for exit layer "
                         f"{config.get('exit_layer')}, not {exit_layer}: pass --exit_layer "
                         f"{config.get('exit_layer')}, or --no-adapter")
    return {"head": heads[0], "act": config["act"]}


# ---- the shipped configuration ----

# in the model's folder: {"layer_skip": {"skip", "K", ...}, "early_exit": {...}}
CONFIG = "self_draft.json"
ENTRY_KINDS = {"layer_skip": "skip_set", "early_exit": "exit_layer"}  # each entry's declared "kind"
HOLDS = {"skip_set": "a skip set", "exit_layer": "an exit layer"}


def entry_kind(entry):
    """A self_draft.json entry's kind: declared, else by its fields, else None."""
    if entry.get("kind") is not None:
        return entry["kind"]
    return "skip_set" if "skip" in entry else "exit_layer" if "exit_layer" in entry else None


def read_config(folder):
    """folder/self_draft.json as a dict ({} when there is none)."""
    from pathlib import Path

    from gpt2.weights import CorruptFile, read_json

    path = Path(folder) / CONFIG
    if not path.exists():
        return {}
    fix = "rebuild it with `python -m gpt2.train.self_draft --task search` (see README)"
    config = read_json(path, fix=fix)
    if not isinstance(config, dict):
        raise CorruptFile(path, "not a JSON object", fix)
    for kind, entry in config.items():
        if not isinstance(entry, dict):
            raise CorruptFile(path, f"{kind!r} is not a JSON object", fix)
        for key, value in entry.items():
            if (problem := config_problem(key, value)) is not None:
                raise CorruptFile(path, f"{kind}.{key} is {value!r}: {problem}", fix)
    return config


def config_problem(key, value):
    """What is wrong with one self_draft.json setting, or None."""
    whole = type(value) is int  # not bool, not 4.0
    if key == "K" and not (whole and 1 <= value <= 64):
        return "K must be a whole number from 1 to 64"
    if key == "threshold" and not (type(value) in (int, float) and 0 <= value <= 1):
        return "the threshold must be a number from 0 to 1"
    if key == "exit_layer" and not (whole and value >= 1):
        return "the exit layer must be a whole number >= 1"
    if key == "skip" and not (isinstance(value, str) or isinstance(value, list)
                              and all(isinstance(v, str) for v in value)):
        return "the skip set must be a string such as 'a3,m4' or a list of such names"
    if key == "kind" and value not in HOLDS:
        return f"the kind must be one of {', '.join(HOLDS)}"
    return None


def load_self_draft(hparams, params, folder, kind, skip=None, exit_layer=None, adapter=True,
                    plan=None):
    """A SelfDraft for --method layer_skip or early_exit (flags, else self_draft.json)."""
    L, config = hparams["n_layer"], read_config(folder).get(kind, {})
    held = entry_kind(config)
    if held is not None and held != ENTRY_KINDS[kind]:
        task = "search" if kind == "layer_skip" else "exits"
        raise ValueError(f"the {kind!r} entry of {folder}/{CONFIG} holds {HOLDS[held]}, but "
                         f"--method {kind} needs {HOLDS[ENTRY_KINDS[kind]]}: rebuild it with "
                         f"`python -m gpt2.train.self_draft --task {task}`")
    settings = {"K": config.get("K", 4), "threshold": config.get("threshold", 0.0)}
    if kind == "layer_skip":
        if skip is None and "skip" not in config:
            raise ValueError(f"no skip set for this model: {folder}/{CONFIG} has none; search one "
                             "with `python -m gpt2.train.self_draft --task search --target NAME` "
                             "or pass --skip a3,m4")
        skipped = parse_skip(config["skip"] if skip is None else skip, L)
        if len(skipped) == 2 * L:  # a draft of the embeddings alone: one guess whatever the context
            where = f"--skip {skip}" if skip is not None else f"the skip set in {folder}/{CONFIG}"
            raise ValueError(f"{where} skips all {2 * L} sublayers of the target's {L} layers, so "
                             "the draft would have no layers at all: keep at least one sublayer "
                             "(the search's set is the default)")
        engine = SelfDraft(hparams, params, skipped, plan=plan)
        engine.settings = {**settings, "skip": ",".join(map(sublayer_name, skipped))}
        return engine
    if exit_layer is None and "exit_layer" not in config:
        raise ValueError(f"no exit layer for this model in {folder}/{CONFIG}: pass --exit_layer E")
    E = config["exit_layer"] if exit_layer is None else exit_layer
    if L < 2:
        raise ValueError(f"early exit drafts with the first layers of the target, which has only "
                         f"{L} layer: use a target of 2 or more layers, or another method")
    if not 1 <= E < L:
        raise ValueError(f"--exit_layer {E}: the model has {L} layers; exit after 1..{L - 1}")
    exit_head = load_adapter(folder, E, hparams["n_embd"]) if adapter else None
    if exit_head is not None:  # the adapter goes where the model is (CuPy or NumPy)
        exit_head["head"] = {k: {n: xp_of(params["wte"]).asarray(a) for n, a in v.items()}
                             for k, v in exit_head["head"].items()}
    engine = SelfDraft(hparams, params, exit_skip(E, L), exit_head, plan=plan)
    engine.settings = {**settings, "exit_layer": E, "adapter": exit_head is not None}
    return engine
