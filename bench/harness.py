"""One benchmark harness for every method of the table (picospec.methods): tokens per target call
and wall-clock speedup against autoregressive decoding measured in the same run, beside the theory's
prediction. It is also the wiring: `load_needs` loads what a method needs (draft, heads, datastore)
for main.py, the notebooks and the benches.

    python -m bench.harness                       # the built-in models, held-out prompts
    # the seeds' Figure 1: time per token, acceptance vs K
    python -m bench.harness --sweep_K 1,2,3,4,6,8

For every prompt and seed, autoregressive decoding and the method run back to back, each from a cold
cache, so the speedup is a ratio of two measurements taken side by side; tables report the median
over prompts and seeds and the spread (25th-75th percentile). alpha (acceptance of one draft token)
is measured on the same prompts with picospec.theory.estimate_alpha, and c (draft call time / target
call time) from the runs themselves. Shapes: none; this file only times things.
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

from picospec.autoregressive import autoregressive_sampling
from picospec.methods import call, find
from picospec.theory import (GPU_VERIFY_COST, cost_model_speedup, estimate_alpha,
                             expected_tokens_per_call)


class Timed:
    """A model with a call counter and a stopwatch."""

    def __init__(self, model):
        self.model, self.calls, self.seconds = model, 0, 0.0
        self.n_vocab = getattr(model, "n_vocab", None)

    def __call__(self, x, n=1):
        return self._timed(self.model, x, n)

    def logits(self, x, n=1, **kw):  # the richer interface of tree methods, timed and counted alike
        return self._timed(self.model.logits, x, n, **kw)

    def tree(self, x, tokens, parents, **kw):
        return self._timed(self.model.tree, x, tokens, parents, **kw)

    def accept(self, path):
        start = time.perf_counter()
        self.model.accept(path)
        self.seconds += time.perf_counter() - start

    def _timed(self, f, *args, **kw):
        start = time.perf_counter()
        out = f(*args, **kw)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out


class TimedHead(Timed):
    """EAGLE's head: a draft model of its own (its own forward through a block and the LM head), so
    its calls are counted and timed as draft calls. Everything else (accuracy, reset, ...) is the
    head's."""

    def __call__(self, *args, **kw):  # head(x, F, tokens, parents)
        return self._timed(self.model, *args, **kw)

    def __getattr__(self, name):
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)


# ---- wiring: what a method needs, loaded once (main.py, notebooks and benches share it) ----

def check_needs(method, options):
    """Mistakes in the options that name files, found before any model loads."""
    if "datastore" in method.needs and options.get("datastore") is not None:
        path = Path(options["datastore"])
        if path.is_dir():
            raise ValueError(f"--datastore {path} is a folder: give a .npz file")
        if not path.exists() and not options.get("build_datastore"):
            raise ValueError(f"--datastore {path} does not exist: give an existing datastore, or "
                             f"add --build_datastore to build it there (about 30 s)")
        if not path.exists() and not path.resolve().parent.is_dir():
            raise ValueError(f"--datastore {path}: the folder {path.resolve().parent} does not "
                             f"exist; create it first")
        if not path.exists():  # --build_datastore: an unwritable folder is named before the build
            from gpt2.cli import cannot_write_in

            if (why := cannot_write_in(path.resolve().parent)) is not None:
                raise ValueError(f"--datastore {path}: cannot write in {path.resolve().parent} "
                                 f"({why}); give a folder you can write to")


def load_needs(method, options, target, target_name, encoder, draft="tiny-draft", device="cpu",
               offline=None):
    """{"target", and as method.needs say: "draft", "draft2", "heads", "datastore"} for
    picospec.methods.call; "self_draft:KIND" replaces the target by one engine serving both the
    target and its own draft."""
    loaded = {"target": target}
    for need in method.needs:
        if need == "draft":
            loaded["draft"] = load_draft(draft, target, target_name, device, offline)
        elif need.startswith("heads:"):
            loaded["heads"] = load_heads(target_name, need.split(":")[1], options.get("heads"),
                                         target, offline)
        elif need == "datastore":
            loaded["datastore"] = rest_datastore(options.get("datastore"), target_name, encoder)
        elif need == "draft2":  # a second, smaller drafter (cascades): --draft2, default the n-gram
            name = options.get("draft2") or "ngram"
            loaded["draft2"] = load_draft(name, target, target_name, device, offline, "--draft2")
        # the target drafting for itself: both on one engine and cache
        elif need.startswith("self_draft:"):
            loaded.update(load_self_draft(need.split(":")[1], options, target, target_name,
                                          offline))
        # Sequoia's vectors measured for this pair, unless --acceptance gives one
        elif need == "acceptance":
            if options.get("acceptance") is None:
                loaded["acceptance"] = load_acceptance(target_name, draft, offline)
        else:
            raise ValueError(f"method {method.name} needs {need!r}, which bench.harness.load_needs "
                             f"cannot load")
    return loaded


def load_acceptance(target_name, draft, offline=None):
    """{"greedy": a, "sampled": a}: the acceptance vectors of `draft` for the target (at temperature
    0 and 1), measured by `python -m bench.token_trees --record` into the target folder's
    sequoia.json."""
    from gpt2.hub import resolve

    path = resolve(str(target_name), offline=offline) / "sequoia.json"
    try:
        vectors = json.loads(path.read_text()).get(str(draft)) if path.exists() else None
    except (ValueError, AttributeError):
        raise ValueError(f"{path} is not a JSON object of acceptance vectors by draft: measure "
                         "them again with python -m bench.token_trees --record, or give "
                         "--acceptance a_1,a_2,..") from None
    if not vectors:
        raise ValueError(f"no acceptance vector of draft {draft!r} for target {target_name!r} was "
                         f"measured (sequoia.json in the target's folder): give --acceptance "
                         f"a_1,a_2,.., e.g. --acceptance 0.6,0.1,0.05")
    return vectors


def load_self_draft(kind, options, target, target_name, offline=None):
    """{"target", "draft", "self_draft"}: the target and its own draft path (kind layer_skip or
    early_exit) on one KV cache, from --skip / --exit_layer / --adapter, else what the target's
    folder ships (gpt2/self_draft.py), and the K and threshold searched with that path (the defaults
    of --K and --threshold)."""
    from gpt2.hub import resolve
    from gpt2.self_draft import load_self_draft as load

    # forward_params: the target engine's weights, with its weight panels where it has them
    # (gpt2/fast/)
    engine = load(target.hparams, target.forward_params, resolve(str(target_name), offline=offline),
                  kind,
                  skip=options.get("skip"), exit_layer=options.get("exit_layer"),
                  adapter=options.get("adapter", True), head=target.head)
    return {"target": engine.target, "draft": engine.draft, "self_draft": engine.settings}


def batched_models(loaded, rows):
    """What load_needs loaded, for a method's batched form over `rows` rows (main.py --batch,
    bench.batch): a GPT-2 engine becomes a BatchGPT2, an EAGLE head a BatchEagleHead, a
    self-drafting side its side of one BatchSelfDraft (both sides share it, as they share one cache
    alone), a stateless model (the n-gram) one called row by row; heads' functions, datastores and
    settings stay as they are."""
    from gpt2.eagle import BatchEagleHead
    from gpt2.engine import BatchGPT2
    from gpt2.self_draft import batch_side
    from gpt2.eagle import EagleHead
    from gpt2.engine import GPT2
    from gpt2.self_draft import Model as SelfDraftSide
    from picospec.batched.loop import batched

    def batch(model):
        if isinstance(model, SelfDraftSide):
            return batch_side(model, rows)
        if isinstance(model, EagleHead):
            return BatchEagleHead(model, rows)
        return BatchGPT2(model, rows) if isinstance(model, GPT2) else batched(model)

    return {k: batch(v) if k in ("target", "draft", "draft2") or isinstance(v, EagleHead) else v
            for k, v in loaded.items()}


def batch_row_bytes(loaded, tokens):
    """An upper bound on the bytes one row of batched_models(loaded, rows) takes, for passes of at
    most `tokens` tokens per row: the KV caches and activations of each batched engine (a
    self-drafting pair's one engine counted once); stateless models and heads' functions take
    none."""
    from gpt2.eagle import BatchEagleHead, EagleHead
    from gpt2.engine import TREE_SLOTS, row_bytes
    from gpt2.engine import GPT2
    from gpt2.self_draft import Model as SelfDraftSide

    total, engines = 0, set()
    for model in loaded.values():
        if isinstance(model, SelfDraftSide) and id(model.engine) not in engines:
            engines.add(id(model.engine))
            total += row_bytes(model.engine.hparams, 0, tokens)
        elif isinstance(model, EagleHead):
            total += BatchEagleHead.row_bytes(model, tokens)
        elif isinstance(model, GPT2):
            total += row_bytes(model.hparams, TREE_SLOTS, tokens)
    return total


def load_draft(name, target, target_name, device="cpu", offline=None, role="draft"):
    from gpt2.load import load_model

    from gpt2.load import check_tokenizers

    model = load_model(str(name), device, offline)[0]
    check_tokenizers(model, target, name, target_name, role)
    return model


def load_heads(target_name, kind, folder, target, offline=None):
    """{"fn": heads(h, n_heads=None) -> logits, "n_heads", "sparse": the heads' medusa_choices.json
    or None}; for kind "eagle" the EAGLE head itself (load_eagle)."""
    if kind == "eagle":
        return load_eagle(target_name, folder, target, offline)
    from gpt2.load import heads_folder, heads_function

    folder = heads_folder(str(target_name), kind, folder, offline)
    fn, config = heads_function(folder, target)
    sparse, path = None, folder / "medusa_choices.json"
    if path.exists():
        from picospec.options import rank_paths
        from picospec.tree import check_choices

        try:
            sparse = json.loads(path.read_text(encoding="utf-8"))
            sparse = sparse.get("medusa_choices") if isinstance(sparse, dict) else None
            if not rank_paths(sparse):
                raise ValueError('expected {"medusa_choices": [[0], [0, 0], [1], ...]}, a list of '
                                 'rank paths')
            # no duplicates, every parent listed, one head per level
            check_choices(sparse, n_heads=config["n_heads"])
        except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ValueError(f"{path} is not a readable tree ({e}): rebuild it with `python -m "
                             f"bench.trees --build {folder} --budgets 7`") from None
    return {"fn": fn, "n_heads": config["n_heads"], "sparse": sparse, "folder": folder}


def load_eagle(target_name, folder, target, offline=None):
    """The EAGLE head (gpt2.eagle.EagleHead: the draft contract of picospec/eagle.py), its record's
    accuracy per step ahead (rank_share: EAGLE-1's sparse tree) as .accuracy, its folder as
    .folder."""
    from gpt2.eagle import eagle_folder, eagle_head

    folder = eagle_folder(str(target_name), folder, offline)
    head, config = eagle_head(folder, target)
    head.accuracy, head.folder = config.get("accuracy", {}).get("rank_share"), folder
    return head


def load_datastore(path, rebuild=None):
    """Datastore.load, its refusal worded for the command line: the fact, then what to do. rebuild:
    that advice, where the caller knows better (a file it built itself may be deleted); by default
    the user's file is left alone and a new one is built elsewhere."""
    from picospec.rest import Datastore

    rebuild = rebuild or ("give a datastore that --build_datastore wrote, or build one into a new "
                          "file with "
                          "--method rest --datastore NEW.npz --build_datastore (the standard "
                          "library's train split), or Datastore.build(tokens).save(path) in Python")
    try:
        return Datastore.load(path)
    except ValueError as e:
        raise ValueError(f"{e}; {rebuild}") from None


def rest_datastore(path, target, encoder):
    """Load --datastore FILE, or build it (FILE, or once into the cache) from the standard library's
    train split with the model's tokenizer. Written atomically: an interrupted build leaves no
    file."""
    from picospec.rest import Datastore

    if path is not None and Path(path).exists():
        return load_datastore(path)
    from tqdm import tqdm

    from gpt2.corpus import split_files, stdlib_files, tokenize
    from gpt2.hub import check_cache_dir

    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(target))
    # into the cache: a PICOSPEC_CACHE no file can be made in is named before the build, not after
    # it
    path = (Path(path) if path is not None
            else check_cache_dir() / "rest" / (f"{safe}-stdlib-train.npz"))
    if path.exists():  # only here, in the cache, is the file picospec's own to delete
        return load_datastore(path,
                              rebuild="picospec built it into its cache: delete it and run again "
                                      "to rebuild it")
    print(f"building the REST datastore {path} (once) from the standard library's train split",
          file=sys.stderr)
    files = split_files(stdlib_files())["train"]
    ids = [t for f in tqdm(files, desc="tokenize", unit="file") for t in tokenize([f], encoder)]
    store = Datastore.build(np.array(ids,
                                     dtype=np.uint16 if encoder.n_vocab <= 65536 else np.int64),
                            progress=lambda steps: tqdm(steps, desc="suffix array",
                                                        unit="doubling"))
    made = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        store.save(path)
    except BaseException:
        if made and not any(path.parent.iterdir()):
            path.parent.rmdir()
        raise
    return store


# ---- timed runs ----

def run_method(method, x, loaded, N, seed, sampling=None, **options):
    """One timed run of a table row (or its name) from cold caches -> output ids, seconds, calls and
    time per model, the step records."""
    method = find(method) if isinstance(method, str) else method
    for model in loaded.values():
        getattr(model, "reset", lambda: None)()  # neither run may reuse the other's cached work
    timed = {k: Timed(v) if k in ("target", "draft", "draft2") else v for k, v in loaded.items()}
    if "heads:eagle" in method.needs:
        timed["heads"] = TimedHead(loaded["heads"])
    stats, rng = [], np.random.default_rng(seed)
    start = time.perf_counter()
    out = call(method, x, N, rng, timed, sampling, options, stats=stats)
    seconds = time.perf_counter() - start
    t, d2 = timed["target"], timed.get("draft2", Timed(None))
    d = timed.get("draft") or (timed["heads"] if isinstance(timed.get("heads"), TimedHead)
                               else Timed(None))
    return {"output": out, "seconds": seconds, "target_calls": t.calls, "draft_calls": d.calls,
            "tokens_per_call": N / t.calls, "target_s": t.seconds, "draft_s": d.seconds,
            "stats": stats, "draft2_calls": d2.calls, "draft2_s": d2.seconds}


def interleaved(runs, rounds=None, seconds=1.0, least=3, most=50):
    """Time zero-argument functions (each -> a run dict with "seconds") in turns, A B A B ..., so
    that a change of load falls on all of them alike: `rounds` rounds, else rounds until `seconds`
    of measurement and at least `least` (at most `most`) -> one list of run dicts per function."""
    out = [[] for _ in runs]
    while True:
        for f, done in zip(runs, out):
            done.append(f())
        n, spent = len(out[0]), sum(r["seconds"] for done in out for r in done)
        if rounds is not None:
            if n >= rounds:
                return out
        elif n >= most or (n >= least and spent >= seconds):
            return out


def speedup_of(base_runs, runs):
    """Per round, autoregressive time over the method's (the two ran side by side) -> {"median",
    "range" [min, max], "rounds"}. Example: base [1.0, 1.2, 0.9] s, method [0.5, 0.5, 0.6] s ->
    ratios 2.0, 2.4, 1.5: median 2.0."""
    ratios = [b["seconds"] / r["seconds"] for b, r in zip(base_runs, runs)]
    return {"median": float(np.median(ratios)), "range": [min(ratios), max(ratios)],
            "rounds": len(ratios)}


def call_costs(base_runs, runs):
    """The cost model's inputs, medians over interleaved rounds: E (tokens per target call), c (the
    method's target call over autoregressive decoding's one-token call), each drafter's calls per
    target call and c_d (one call over a one-token target call) -> {"E", "c", "drafts": {name:
    {"per_target_call", "c_d"}}, "predicted", "predicted_gpu" (the same with c = GPU_VERIFY_COST)},
    the predictions from picospec.theory.cost_model_speedup."""
    def median(values):
        return float(np.median(list(values)))

    one = median(b["target_s"] / b["target_calls"] for b in base_runs)  # a one-token target call
    E = median(r["tokens_per_call"] for r in runs)
    c = median(r["target_s"] / r["target_calls"] for r in runs) / one
    drafts = {}
    for name in ("draft", "draft2"):
        if runs[0][f"{name}_calls"]:
            drafts[name] = {"per_target_call": runs[0][f"{name}_calls"] / runs[0]["target_calls"],
                            "c_d": median(r[f"{name}_s"] / r[f"{name}_calls"] for r in runs) / one}
    pairs = [(d["per_target_call"], d["c_d"]) for d in drafts.values()]
    return {"E": E, "c": c, "drafts": drafts, "predicted": cost_model_speedup(E, c, pairs),
            "predicted_gpu": cost_model_speedup(E, GPU_VERIFY_COST, pairs)}


def drafting(costs):
    """call_costs' dict -> the drafts' cost of one step, in one-token target calls: sum of k c_d."""
    return sum(d["per_target_call"] * d["c_d"] for d in costs["drafts"].values())


def limit_line(costs, measured):
    """What keeps the measured speedup below E, in one-token target calls a step: the largest of
    verification (c - 1), drafting (sum of k c_d) and the rest of the step (Python, sampling: the
    step's measured cost E / measured minus both) -> one line, with what c = GPU_VERIFY_COST
    gives."""
    d = drafting(costs)
    rest = costs["E"] / measured - costs["c"] - d
    parts = {"verification": costs["c"] - 1, "drafting": d, "the rest of the step": rest}
    worst = max(parts, key=parts.get)
    why = {"verification": f"a target call of this method costs c = {costs['c']:.2f} one-token "
                           "calls",
           "drafting": f"the draft calls of one step cost {d:.2f} one-token target calls",
           "the rest of the step": f"Python and sampling cost {rest:.2f} one-token target calls a "
                                   "step"}
    return (f"limit here: {worst} ({why[worst]}); with c = {GPU_VERIFY_COST} (verification nearly "
            f"free, as on a GPU) the cost model gives {costs['predicted_gpu']:.2f}x")


def summary(stats):
    """Acceptance = accepted / drafted, the same for every method; accepted / nodes scored beside it
    (trees)."""
    drafted, nodes = sum(s["drafted"] for s in stats), sum(s["nodes"] for s in stats)
    accepted = sum(s["accepted"] for s in stats)
    return {"drafted": drafted, "nodes": nodes, "accepted": accepted,
            "acceptance": accepted / drafted if drafted else None,
            "accepted_per_node": accepted / nodes if nodes else None}


def per_position_acceptance(stats, K):
    """P(draft t accepted | drafts before it accepted), t = 1..K, over full-K steps."""
    steps = [s for s in stats if s["drafted"] == K]
    reached = [sum(1 for s in steps if s["accepted"] >= t) for t in range(K)]
    return [sum(1 for s in steps if s["accepted"] >= t + 1) / r if r else float("nan") for t,
            r in enumerate(reached)]


def median_run(runs):
    """One run dict for repeats of a run: the first's output and counts, the median of each time."""
    times = ("seconds", "target_s", "draft_s", "draft2_s")
    return {**runs[0], **{k: float(np.median([r[k] for r in runs])) for k in times}}


def compare(method, prompts, loaded, N, seeds, sampling=None, repeats=1, **options):
    """method vs autoregressive on every prompt and seed, `repeats` interleaved rounds each (A B A B
    ...) -> medians and spreads; a row's speedup is the median of its rounds' ratios, "predicted"
    the cost model's (call_costs)."""
    rows = []
    for x in prompts:
        for seed in seeds:
            base = {"target": loaded["target"]}
            bases, runs = interleaved(
                [lambda: run_method("autoregressive", x, base, N, seed, sampling),
                 lambda: run_method(method, x, loaded, N, seed, sampling, **options)],
                rounds=repeats)
            rows.append({"speedup": speedup_of(bases, runs)["median"], **median_run(runs),
                         "base": median_run(bases), "costs": call_costs(bases, runs)})
    tpc = [r["tokens_per_call"] for r in rows]
    speedup = [r["speedup"] for r in rows]
    # 0 with no draft model
    c = np.median([r["draft_s"] / max(r["draft_calls"], 1) for r in rows]) / np.median(
        [r["base"]["target_s"] / r["base"]["target_calls"] for r in rows])
    # a second drafter's
    c2 = np.median([r["draft2_s"] / max(r["draft2_calls"], 1) for r in rows]) / np.median(
        [r["base"]["target_s"] / r["base"]["target_calls"] for r in rows])
    verify = np.median([r["target_s"] / r["target_calls"] for r in rows]) / np.median(
        [r["base"]["target_s"] / r["base"]["target_calls"] for r in rows])
    stats = [s for r in rows for s in r["stats"]]
    K = options.get("K", 0)
    return {"tokens_per_call": float(np.median(tpc)), "tokens_per_call_mean": float(np.mean(tpc)),
            "speedup": float(np.median(speedup)),
            "speedup_iqr": np.percentile(speedup, [25, 75]).tolist(),
            "c": float(c), "verify_cost": float(verify),
            "acceptance": summary(stats)["acceptance"] or 0.0,
            "c2": float(c2),
            "draft_calls_per_step": sum(r["draft_calls"] for r in rows) / len(stats),
            "draft2_calls_per_step": sum(r["draft2_calls"] for r in rows) / len(stats),
            "per_position": per_position_acceptance(stats, K) if K else [],
            "ms_per_token": 1e3 * float(np.median([r["seconds"] for r in rows])) / N,
            "ms_per_token_base": 1e3 * float(np.median([r["base"]["seconds"] for r in rows])) / N,
            "ms_per_loop": 1e3 * float(np.median([r["seconds"] / len(r["stats"]) for r in rows])),
            "predicted": float(np.median([r["costs"]["predicted"] for r in rows])),
            "predicted_gpu": float(np.median([r["costs"]["predicted_gpu"] for r in rows])),
            "drafting": float(np.median([drafting(r["costs"]) for r in rows])),
            "stats": stats}


def explain(r):
    """compare's result -> one line: the measured speedup beside the cost model's from E, c and the
    drafting cost (one-token target calls a step), what c = GPU_VERIFY_COST would give, and what
    costs most (as limit_line)."""
    E, c, d = r["tokens_per_call"], r["verify_cost"], r["drafting"]
    parts = {"verification": c - 1, "drafting": d, "the rest of the step": E / r["speedup"] - c - d}
    return (f"E {E:.2f}, c {c:.2f}, drafting {d:.2f}: measured {r['speedup']:.2f}x, cost model "
            f"{r['predicted']:.2f}x, with c = {GPU_VERIFY_COST} {r['predicted_gpu']:.2f}x; "
            f"limit: {max(parts, key=parts.get)}")


def measure_alpha(draft, target, prompts, N, options):
    """alpha on the prompts followed by the target's own continuation (what decoding actually
    visits)."""
    values = []
    for x in prompts:
        for model in (draft, target):
            getattr(model, "reset", lambda: None)()
        seq = autoregressive_sampling(x, target, N, np.random.default_rng(0), **options)
        values.append(estimate_alpha(draft, target, seq[len(x) - 1:], **options))
    return float(np.mean(values))


def main(drafts=("tiny-draft", "ngram"), target="tiny-target", K=4, temperatures=(0.0, 1.0),
         n_prompts=8,
         prompt_tokens=64, n_tokens=64, seeds=2, sweep_K=None, prompt_lookup=False, out=None):
    """Speculative sampling and greedy drafting against autoregressive decoding on held-out
    prompts."""
    check_target(target)
    from gpt2.corpus import heldout_prompts
    from gpt2.load import load_model

    from gpt2.backend import thread_policy

    target_model, encoder = load_model(target)
    # every model loads before any run
    drafts = {name: load_draft(name, target_model, target) for name in drafts}
    check_room(target_model.n_ctx, prompt_tokens, n_tokens, encoder if prompt_lookup else None)
    top = header(thread_policy(target_model.n_params))
    print(top, flush=True)
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    temps = list(temperatures)
    lines = [f"`python -m bench.harness --drafts {','.join(drafts)} --K {K} --temperatures "
             f"{','.join(map(str, temps))} "
             f"--n_prompts {n_prompts} --n_tokens {n_tokens} --seeds {seeds}`", "",
             "| draft | T | method | alpha | tokens/target call (theory) | tokens/target call "
             "(measured, median) | per-position acceptance | c = draft/target call | (K+1)-token "
             "verify / 1-token call | speedup vs autoregressive (median, IQR) | theory speedup "
             "E[tokens] / (K c + v) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, draft in drafts.items():
        for T in temps:
            options = {"temperature": T}
            alpha = measure_alpha(draft, target_model, prompts, n_tokens, options)
            for method in ["speculative"] + (["greedy"] if T == 0 else []):
                r = compare(method, prompts, {"target": target_model, "draft": draft}, n_tokens,
                            range(seeds), options, K=K)
                theory_tpc = expected_tokens_per_call(alpha, K)
                lines.append(
                    f"| {name} | {T:g} | {method} | {alpha:.3f} | {theory_tpc:.2f} | "
                    f"{r['tokens_per_call']:.2f} "
                    f"| {' '.join(f'{a:.2f}' for a in r['per_position'])} | {r['c']:.3f} | "
                    f"{r['verify_cost']:.2f} "
                    f"| {r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) "
                    f"| {theory_tpc / (K * r['c'] + r['verify_cost']):.2f}x |")
                print(lines[-1], flush=True)
    if prompt_lookup:
        lines += prompt_lookup_table(target_model, encoder, prompts, n_tokens, seeds)
    if sweep_K:
        first = next(iter(drafts))
        lines += sweep(sweep_K, first, draft_model=drafts[first], target=target_model,
                       prompts=prompts,
                       n_tokens=n_tokens, seeds=seeds,
                       plot_path=out and Path(out).with_name(Path(out).stem + "_K.png"))
    text = "\n".join(lines)
    print(text)
    if out:
        from bench.page import write_page

        write_page(out, text, top)


def header(threads):
    """The protocol line every benchmark prints first: BLAS threads, weight panels, the static step
    (gpt2/fast/static.py) and the machine's load when it started."""
    import os

    from gpt2.backend import panels_line, wide_line
    from gpt2.fast import static_step_on

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    static = "on (PICOSPEC_STATIC=1; CUDA graphs on a GPU)" if static_step_on() else "off"
    return (f"BLAS threads {threads['threads']} ({threads['why']}; the library reports "
            f"{threads['blas']}{wide_line(threads)}), weight panels {panels_line(threads)}, static "
            f"step {static}, {os.cpu_count()} CPUs, 1-minute load {load:.2f} at start")


def write_text(path, text):
    """Write a table atomically: a temp file in the same folder, renamed over path."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def check_target(name):
    """The n-gram drafts only (no hidden states, no heads, no checkpoint a peer library could
    load)."""
    if str(name) == "ngram":
        raise ValueError("--target ngram: the n-gram model drafts only; give a GPT-2 target such "
                         "as tiny-target")


def check_room(n_ctx, prompt_tokens, n_tokens, encoder=None, n_copy=12, fixed=False):
    """Before any run: held-out prompts of prompt_tokens (with encoder: also the copy-heavy ones,
    copy_prompts' blank line and n_copy tokens longer) and n_tokens new tokens fit the context
    window; else one line naming the options (fixed: the prompts' length is no option). Example:
    check_room(256, 64, 200) -> error (264 tokens)."""
    extra = len(encoder.encode("\n\n")) + n_copy if encoder is not None else 0
    need = prompt_tokens + extra + n_tokens
    if need > n_ctx:
        prompts = f"the longest prompt's {prompt_tokens} tokens" if fixed else (f"--prompt_tokens "
                                                                                f"{prompt_tokens}")
        copies = f" + {extra} for the copy-heavy prompts" if extra else ""
        raise ValueError(f"{prompts}{copies} + --n_tokens {n_tokens} = {need} tokens, more than "
                         f"the model's context window of {n_ctx}: lower "
                         f"{'' if fixed else '--prompt_tokens or '}--n_tokens")


def copy_prompts(encoder, prompts, n_copy=12):
    """Input-grounded prompts: a held-out chunk, a blank line, then the chunk's start again, so
    copying pays off."""
    blank = encoder.encode("\n\n")
    return [x + blank + x[:n_copy] for x in prompts]


def prompt_lookup_table(target, encoder, prompts, n_tokens, seeds):
    lines = ["", "Prompt lookup decoding (max_ngram_size 3, num_pred_tokens 10), temperature 0:",
             "",
             "| prompts | tokens/target call (median) | acceptance | speedup vs autoregressive "
             "(median, IQR) |",
             "|---|---|---|---|"]
    for label, xs in (("copy-heavy (chunk, blank line, chunk start)",
                       copy_prompts(encoder, prompts)),
                      ("ordinary continuation", prompts)):
        r = compare("prompt_lookup", xs, {"target": target}, n_tokens, range(seeds),
                    {"temperature": 0}, num_pred_tokens=10)
        lines.append(f"| {label} | {r['tokens_per_call']:.2f} | {r['acceptance']:.2f} | "
                     f"{r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")
        print(lines[-1], flush=True)
    return lines


def sweep(Ks, name, draft_model, target, prompts, n_tokens, seeds, plot_path=None):
    """The seeds' Figure 1 at temperature 0: time per generated token, acceptance and time per loop
    against K (and as a figure at plot_path, when matplotlib is installed)."""
    lines = ["", f"K sweep, draft {name}, temperature 0:", "",
             "| K | ms per token (speculative) | ms per token (autoregressive) | acceptance | ms "
             "per loop | speedup |",
             "|---|---|---|---|---|---|"]
    curves = []
    for K in Ks:
        r = compare("speculative", prompts, {"target": target, "draft": draft_model}, n_tokens,
                    range(seeds), {"temperature": 0}, K=K)
        ms_tok, ms_base, ms_loop = r["ms_per_token"], r["ms_per_token_base"], r["ms_per_loop"]
        curves.append((K, ms_tok, ms_base, r["acceptance"], ms_loop))
        lines.append(f"| {K} | {ms_tok:.2f} | {ms_base:.2f} | {r['acceptance']:.2f} | "
                     f"{ms_loop:.2f} | {ms_base / ms_tok:.2f}x |")
        print(lines[-1], flush=True)
    if plot_path is not None:
        plot(curves, name, plot_path)
    return lines


def plot(curves, name, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    K, ms_tok, ms_base, acc, ms_loop = zip(*curves)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    axes[0].plot(K, ms_tok, "o-", label="speculative")
    axes[0].plot(K, ms_base, "--", label="autoregressive")
    axes[0].set(xlabel="K", ylabel="ms per token")
    axes[0].legend()
    axes[1].plot(K, acc, "o-")
    axes[1].set(xlabel="K", ylabel="acceptance rate")
    axes[2].plot(K, ms_loop, "o-")
    axes[2].set(xlabel="K", ylabel="ms per loop")
    fig.suptitle(f"draft {name}, temperature 0")
    fig.tight_layout()
    # written whole, then renamed: no half a figure
    tmp = Path(path).with_name(Path(path).name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    tmp.replace(path)
    print(f"K sweep figure: {path}", flush=True)


if __name__ == "__main__":
    from gpt2.cli import Option, command

    command(main, [
        Option("drafts", "strs", ("tiny-draft", "ngram"),
               "draft models, a row each: tiny-draft, ngram, gpt2, a folder"),
        Option("target", str, "tiny-target", "the target model"),
        Option("K", int, 4, "draft tokens per step", low=1, high=64),
        Option("temperatures", "floats", (0.0, 1.0), "temperatures, a row each", low=0),
        Option("n_prompts", int, 8, "held-out prompts", low=1),
        Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
        Option("n_tokens", int, 64, "new tokens per run", low=1),
        Option("seeds", int, 2, "seeds per prompt", low=1),
        Option("sweep_K", "ints", None, "K values of the K sweep (the seeds' Figure 1; with --out, "
               "also as a figure beside it: OUT's name + _K.png, when matplotlib is installed)",
               low=1, high=64),
        Option("prompt_lookup", bool, False, "add the prompt lookup table"),
        Option("out", "out", None, "also write the tables to this file")])
