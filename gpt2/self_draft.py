"""Self-drafting: the draft is the target itself on a shorter path through its sublayers, on the target's KV cache.

Draft & Verify (Zhang et al. 2023, arXiv:2309.08168) drafts with a set of attention and MLP sublayers skipped;
LayerSkip (Elhoushi et al. 2024, arXiv:2404.16710) drafts with the first E layers and an early exit. Both are a
*path*: the sublayers the draft keeps. Sublayer s = 2l is the attention of layer l, s = 2l + 1 its MLP; a skip set is
written with their names, "a3,m4" = skip layer 3's attention and layer 4's MLP; exiting after layer E skips every
sublayer from 2E on.

One engine, two model functions on one cache (`SelfDraft(...).target`, `.draft`, each `model(x, n=1) -> probs`):
- the draft reads the keys/values that the target wrote for the verified prefix (no cache of its own: it never
  reads a token twice) and writes its own for its draft tokens, in the layers it keeps;
- everything the draft computes before its first skipped sublayer, the cut f, is the target's own computation: the
  keys/values of those layers and the residual stream at the cut. The target's verification reuses them and runs only
  sublayers f.. on the drafted tokens (LayerSkip's single KV cache and exit query cache); the draft's last token,
  which it never read, goes through sublayers ..f-1 first. Nothing else is reused: above the cut the draft's
  keys/values are its own guesses and the verification overwrites them.

Example (6 layers, exit after layer 2 = skip a2..m5, f = 4): after the draft read [t, d1, d2] and proposed d3, the
target's call on the prefix + [t, d1, d2, d3] runs d3 through sublayers 0-3, then all four tokens through sublayers
4-11, starting from the saved residuals of t, d1, d2. The logits equal a full forward (tests/test_self_draft.py).

An exit adapter (optional) is a tied residual head of gpt2/heads.py on the draft's final hidden state; it is trained
and loaded in gpt2/exit_adapter.py. The batched skip-set search that picks a skip set is gpt2/skip_search.py.
Shapes: n_seq (tokens run in one call), n_kv, n_embd, n_vocab, B (sequences).
"""
import numpy as np

from gpt2.backend import to_numpy, xp_of
from gpt2.cache import KVCache
from gpt2.engine import common_prefix_length
from gpt2.model import causal_mask, ffn, layer_norm, mha, softmax
from gpt2.panels import matmul


def sublayer_name(s):  # 0 -> "a0", 3 -> "m1"
    return f"{'am'[s % 2]}{s // 2}"


def parse_skip(text, n_layer):
    """"a3,m4" (or a list of names) -> sorted sublayer numbers; "" -> []. ValueError names a bad entry."""
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    out = set()
    for name in names:
        if len(name) < 2 or name[0] not in "am" or not name[1:].isdigit() or int(name[1:]) >= n_layer:
            raise ValueError(f"skip set entry {name!r}: write a<layer> (attention) or m<layer> (MLP), layer 0.."
                             f"{n_layer - 1}, e.g. 'a3,m4'")
        out.add(2 * int(name[1:]) + (name[0] == "m"))
    return sorted(out)


def exit_skip(exit_layer, n_layer):
    """Early exit after `exit_layer` layers as a skip set: every sublayer of the layers after it."""
    return list(range(2 * exit_layer, 2 * n_layer))


def sublayer(x, s, block, n_head, mask, cache=None):  # one residual sublayer: [n_seq, n_embd] -> [n_seq, n_embd]
    if s % 2 == 0:
        return x + mha(layer_norm(x, **block["ln_1"]), **block["attn"], n_head=n_head, mask=mask, cache=cache)
    return x + ffn(layer_norm(x, **block["ln_2"]), **block["mlp"])


def lm_head(h, params, adapter=None, head=None):  # final hidden states [n, n_embd] -> logits [n, n_vocab]
    """head: (W [n_embd, n_vocab] contiguous, its column panels or None), the engine's copy of the tied head (a few
    rows times wte.T, a transposed view, cost 1.5-6x more on the built-in target); None: wte.T itself."""
    from gpt2.heads import head_forward

    x = layer_norm(h, **params["ln_f"])  # [n, n_embd]
    W, P = head if head is not None else (params["wte"].T, None)  # [n_embd, n_vocab]
    if adapter is None:
        return matmul(x, W, P)
    return head_forward(x, adapter["head"], W.T, adapter["act"])[0]  # head_forward multiplies by (W.T).T = W


def tied_head(params, xp):  # -> (W, None) for lm_head: a contiguous copy of wte.T on the CPU, the transposed view on
    # a GPU. An engine's own copy and its panels come in through SelfDraft(head=...), as bench.harness passes them.
    W = params["wte"].T  # [n_embd, n_vocab]
    return (np.ascontiguousarray(W) if xp is np else W), None


class SelfDraft:
    """A GPT-2 (hparams + params on one device, float32) and a draft path through it, on one per-layer KV cache."""

    def __init__(self, hparams, params, skip=(), adapter=None, head=None):
        self.hparams, self.params, self.adapter = hparams, params, adapter
        self.xp = xp_of(params["wte"])
        self.head = tied_head(params, self.xp) if head is None else head  # the LM head's weights for lm_head
        L, d = hparams["n_layer"], hparams["n_embd"] // hparams["n_head"]
        self.skip = sorted(set(skip))
        self.cut = min(self.skip, default=2 * L)  # first skipped sublayer: the draft is exact before it
        self.kept = [s for s in range(2 * L) if s not in self.skip]
        # one cache per layer, so that each layer can hold its own number of tokens
        self.caches = [KVCache(1, hparams["n_head"], hparams["n_ctx"], d, self.xp, params["wte"].dtype)
                       for _ in range(L)]
        self.target, self.draft = Model(self, self._verify), Model(self, self._propose)
        self.batch = None  # its batched form for --batch, once gpt2/batch_self_draft.py's batch_side has built it
        self.reset()

    def reset(self):
        self.full = []  # tokens whose keys/values are the target's in every layer
        self.read = []  # tokens the draft has read (they extend `full`): exact in the layers before the cut
        self.h_cut = self.xp.zeros((0, self.hparams["n_embd"]), dtype=self.params["wte"].dtype)  # their residuals
        for cache in self.caches:
            cache.n = 0

    def _run(self, h, sublayers, start):  # the residual stream [n_seq, n_embd] of tokens at start.. through sublayers
        for s in sublayers:
            cache = self.caches[s // 2] if s % 2 == 0 else None
            if cache is not None:
                cache.rollback(cache.n - start)  # forget everything after the tokens before `start`
            mask = causal_mask(len(h), start, self.xp) if len(h) > 1 else None  # [n_seq, start + n_seq]
            h = sublayer(h, s, self.params["blocks"][s // 2], self.hparams["n_head"], mask, cache)
            if cache is not None:
                cache.n += len(h)
        return h

    def _embed(self, tokens, start):  # -> [n_seq, n_embd]
        xp = self.xp
        ids = xp.asarray(tokens, dtype=xp.int64)
        return self.params["wte"][ids] + self.params["wpe"][xp.arange(start, start + len(tokens))]

    def _check(self, x, n):
        if len(x) == 0:
            raise ValueError("the prompt is empty: give at least one token")
        if not 1 <= n <= len(x):
            raise ValueError(f"n must be between 1 and len(x) = {len(x)}; got {n}")
        if len(x) > self.hparams["n_ctx"]:
            raise ValueError(f"{len(x)} tokens do not fit the model's context window of {self.hparams['n_ctx']}")

    def _propose(self, x, n=1):  # the draft: logits [n, n_vocab] after the last n prefixes of x
        self._check(x, n)
        p = min(common_prefix_length(self.read, x), len(x) - n)  # tokens already read stay read
        if p < len(self.full):
            self.full = self.full[:p]
        self.h_cut = self.h_cut[:p - len(self.full)]
        # Step 1: the new tokens through the sublayers before the cut: the target's own computation, kept for reuse
        h = self._run(self._embed(x[p:], p), range(self.cut), p)  # [n_seq, n_embd]
        self.h_cut = self.xp.concatenate([self.h_cut, h])
        # Step 2: the rest of the draft's path (its keys/values above the cut are its own)
        h = self._run(h, [s for s in self.kept if s >= self.cut], p)
        self.read = list(x)
        return lm_head(h[-n:], self.params, self.adapter, self.head)

    def _verify(self, x, n=1):  # the target: logits [n, n_vocab], reusing what the draft computed before the cut
        self._check(x, n)
        u = min(common_prefix_length(self.full, x), len(x) - n)  # tokens whose keys/values are the target's
        if u == len(self.full):  # the usual case: x = the verified prefix + what the draft read + its last token
            r = min(common_prefix_length(self.read, x), len(x))
            h_new = self._run(self._embed(x[r:], r), range(self.cut), r)  # tokens the draft has not read
            h = self.xp.concatenate([self.h_cut[:r - u], h_new])  # [len(x) - u, n_embd] at the cut
        else:  # x leaves the verified prefix: run it all
            h = self._run(self._embed(x[u:], u), range(self.cut), u)
        h = self._run(h, range(self.cut, 2 * self.hparams["n_layer"]), u)  # every sublayer after the cut
        self.full, self.read = list(x), list(x)
        self.h_cut = self.h_cut[:0]
        return lm_head(h[-n:], self.params, head=self.head)


class Model:
    """One side of a SelfDraft behind the model contract: model(x, n=1) -> probs [n, n_vocab]; of a BatchSelfDraft
    (gpt2/batch_self_draft.py) behind the batched one: model(xs, n=1) -> probs [B, n, n_vocab]."""

    def __init__(self, engine, forward):
        self.engine, self.forward = engine, forward

    def __call__(self, x, n=1):  # -> probs [n, n_vocab] (batched: [B, n, n_vocab])
        return to_numpy(softmax(self.forward(list(x), n)))

    def logits(self, x, n=1):  # -> logits [n, n_vocab] (batched: [B, n, n_vocab])
        return to_numpy(self.forward(list(x), n))

    def reset(self):
        self.engine.reset()

    @property
    def n_vocab(self):
        return self.engine.hparams["n_vocab"]

    @property
    def n_ctx(self):
        return self.engine.hparams["n_ctx"]


# ---- the shipped configuration ----

CONFIG = "self_draft.json"  # in the model's folder: {"layer_skip": {"skip", "K", ...}, "early_exit": {...}}
ENTRY_KINDS = {"layer_skip": "skip_set", "early_exit": "exit_layer"}  # each entry's declared "kind"
HOLDS = {"skip_set": "a skip set", "exit_layer": "an exit layer"}


def entry_kind(entry):
    """The kind of one self_draft.json entry: declared, else by its fields (skip: a skip set;
    exit_layer: an exit layer), else None. Example: {"skip": "a1", "K": 2} -> "skip_set"."""
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
    fix = "rebuild it with `python -m bench.self_draft --task search` (see README)"
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
    """What is wrong with one self_draft.json setting, or None (keys this file does not use pass)."""
    whole = type(value) is int  # not bool, not 4.0
    if key == "K" and not (whole and 1 <= value <= 64):
        return "K must be a whole number from 1 to 64"
    if key == "threshold" and not (type(value) in (int, float) and 0 <= value <= 1):
        return "the threshold must be a number from 0 to 1"
    if key == "exit_layer" and not (whole and value >= 1):
        return "the exit layer must be a whole number >= 1"
    if key == "skip" and not (isinstance(value, str) or isinstance(value, list) and all(isinstance(v, str)
                                                                                          for v in value)):
        return "the skip set must be a string such as 'a3,m4' or a list of such names"
    if key == "kind" and value not in HOLDS:
        return f"the kind must be one of {', '.join(HOLDS)}"
    return None


def load_self_draft(hparams, params, folder, kind, skip=None, exit_layer=None, adapter=True, head=None):
    """A SelfDraft for --method layer_skip (kind "layer_skip": --skip, else the set in folder/self_draft.json) or
    early_exit (--exit_layer, else the shipped one; with the shipped exit adapter unless adapter is False).
    Its .settings: the K and threshold searched with it (K 4, threshold 0 where nothing was searched). head: the
    target engine's (W, panels) for the LM head (GPT2.head, .head_panels), shared instead of copied."""
    from gpt2.exit_adapter import load_adapter  # here, not above: gpt2/exit_adapter.py imports this file

    L, config = hparams["n_layer"], read_config(folder).get(kind, {})
    held = entry_kind(config)
    if held is not None and held != ENTRY_KINDS[kind]:
        task = "search" if kind == "layer_skip" else "exits"
        raise ValueError(f"the {kind!r} entry of {folder}/{CONFIG} holds {HOLDS[held]}, but "
                         f"--method {kind} needs {HOLDS[ENTRY_KINDS[kind]]}: rebuild it with "
                         f"`python -m bench.self_draft --task {task}`")
    settings = {"K": config.get("K", 4), "threshold": config.get("threshold", 0.0)}
    if kind == "layer_skip":
        if skip is None and "skip" not in config:
            raise ValueError(f"no skip set for this model: {folder}/{CONFIG} has none; search one with `python -m "
                             "bench.self_draft --task search --target NAME` or pass --skip a3,m4")
        skipped = parse_skip(config["skip"] if skip is None else skip, L)
        if len(skipped) == 2 * L:  # a draft of the embeddings alone: one guess whatever the context
            where = f"--skip {skip}" if skip is not None else f"the skip set in {folder}/{CONFIG}"
            raise ValueError(f"{where} skips all {2 * L} sublayers of the target's {L} layers, so "
                             "the draft would have no layers at all: keep at least one sublayer "
                             "(the search's set is the default)")
        engine = SelfDraft(hparams, params, skipped, head=head)
        engine.settings = settings
        return engine
    if exit_layer is None and "exit_layer" not in config:
        raise ValueError(f"no exit layer for this model in {folder}/{CONFIG}: pass --exit_layer E")
    E = config["exit_layer"] if exit_layer is None else exit_layer
    if L < 2:
        raise ValueError(f"early exit drafts with the first layers of the target, which has only {L} layer: use a "
                         "target of 2 or more layers, or another method")
    if not 1 <= E < L:
        raise ValueError(f"--exit_layer {E}: the model has {L} layers; exit after 1..{L - 1}")
    exit_head = load_adapter(folder, E, hparams["n_embd"]) if adapter else None
    if exit_head is not None:  # the adapter goes where the model is (CuPy or NumPy)
        exit_head["head"] = {k: {n: xp_of(params["wte"]).asarray(a) for n, a in v.items()}
                             for k, v in exit_head["head"].items()}
    engine = SelfDraft(hparams, params, exit_skip(E, L), exit_head, head=head)
    engine.settings = settings
    return engine


# the search and the exit adapter lived in this file until it was split by concept: their old names
# still import from here
MOVED = {"gpt2.skip_search": ("draft_logits", "draft_sublayer", "full_forward", "skip_set_search", "split_heads"),
         "gpt2.exit_adapter": ("ADAPTER", "load_adapter", "train_exit_adapter")}


def __getattr__(name):  # `from gpt2.self_draft import skip_set_search`: the module that holds it now (on first use)
    import importlib

    for module, names in MOVED.items():
        if name in names:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'gpt2.self_draft' has no attribute {name!r}")
