"""Drafting without a draft model, and with two: the skip-set search, the exit layers, and the bench
rows of layer_skip (Draft & Verify), early_exit (LayerSkip) and cascade (CS Drafting) against
speculative sampling.

    # all 4096 skip sets of tiny-target; greedy and hill climbing beside
    python -m bench.self_draft --task search
    # each exit layer's agreement, plain LM head and trained exit adapter
    python -m bench.self_draft --task exits
    python -m bench.self_draft                 # the bench table, temperature 0 and 1

search and exits write the choices into the target's folder (self_draft.json, early_exit/) unless
--no-write. The search scores a skip set by the speedup its draft would give greedy decoding: its
agreement with the target at every position of held-out prompts' greedy continuations (batched, on
the target's cache, as the engine drafts: gpt2/train/skip_search.py skip_set_search), walked step by
step with K drafts (picospec.theory.greedy_walk), timed by a cost model of the engine measured here
(a draft call from its kept sublayers, the verification from its cut). Shapes: B prompts, m scored
positions per prompt.
"""
import hashlib
import json
import os
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np

from bench.harness import header, write_text
from picospec_app.load import load_draft, load_self_draft as load_as_main
from picospec_app.run import compare, measure_alpha
from picospec.autoregressive import autoregressive_sampling
from picospec.sampling import warp
from picospec.theory import cascade_speedup, expected_tokens_per_call, greedy_walk, walk_speedup


def search_sequences(target, encoder, n_prompts, prompt_tokens, new_tokens, seed):
    """Held-out prompts, each followed by the target's greedy continuation -> ids [B, prompt_tokens
    + new_tokens]."""
    from gpt2.train.corpus import heldout_prompts

    seqs = []
    for x in heldout_prompts(encoder, n_prompts, prompt_tokens, seed=seed):
        target.reset()
        seqs.append(autoregressive_sampling(x, target, new_tokens, np.random.default_rng(0),
                                            temperature=0))
    return np.array(seqs)


# ---- the cost model of a draft path (ms on this machine, one BLAS thread) ----

def measure_costs(target, reps=60):
    """Draft calls of four paths (none, attention only, MLPs only, all) give a call's fixed cost and
    each sublayer's; target calls of n = 1..9 new tokens give the verification's cost. Interleaved,
    medians. On the weights the target engine decodes with (its weight panels and LM head copy,
    where it has them), as main.py loads a self-draft."""
    from gpt2.self_draft import SelfDraft

    hparams, params, forward = target.hparams, target.params, target.forward
    L, x = hparams["n_layer"], list(range(7, 7 + 100))
    paths = {"none": range(2 * L), "attention": range(1, 2 * L, 2), "mlp": range(0, 2 * L, 2),
             "all": ()}
    engines = {k: SelfDraft(hparams, params, skip, forward=forward) for k, skip in paths.items()}
    full = SelfDraft(hparams, params, (), forward=forward)
    for e in list(engines.values()) + [full]:
        e.target(x)
    times = {k: [] for k in list(paths) + [f"v{n}" for n in range(1, 10)]}
    for _ in range(reps):
        for k, e in engines.items():
            start = time.thread_time()
            e.draft(x + [3])  # reads one token on the target's cache of x
            times[k].append(time.thread_time() - start)
        for n in range(1, 10):
            start = time.thread_time()
            full.target(x + list(range(20, 20 + n)), n)  # n new tokens after the cached x
            times[f"v{n}"].append(time.thread_time() - start)
    ms = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
    attention, mlp = (ms["attention"] - ms["none"]) / L, (ms["mlp"] - ms["none"]) / L
    return {"call": ms["none"], "attention": max(attention, 0.0), "mlp": max(mlp, 0.0),
            "verify": [ms[f"v{n}"] for n in range(1, 10)], "reps": reps}


def cpu_costs(skip, costs, n_layer):
    """This machine (costs from measure_costs) -> c (a draft call over a 1-token target call), v(k)
    (the verification of k drafts, reusing the draft's work below the cut: those sublayers run 1
    token, not k + 1)."""
    sub = [costs["attention"] if s % 2 == 0 else costs["mlp"] for s in range(2 * n_layer)]
    V, cut = costs["verify"], min(skip, default=2 * n_layer)
    c = (costs["call"] + sum(t for s, t in enumerate(sub) if s not in skip)) / V[0]
    below = sum(sub[:cut]) / sum(sub)  # share of the sublayers' time before the cut
    return c, lambda k: (V[k] - below * (V[k] - V[0])) / V[0]


def memory_bound_costs(skip, hparams):
    """A memory-bound accelerator: a call costs the weights it reads, whatever its tokens -> c = the
    draft path's share of the weights (the tied embedding / LM head, 4C^2 per attention, 8C^2 per
    MLP), v(k) = 1."""
    C, V = hparams["n_embd"], hparams["n_vocab"]
    sub = [4 * C * C if s % 2 == 0 else 8 * C * C for s in range(2 * hparams["n_layer"])]
    kept = V * C + sum(w for s, w in enumerate(sub) if s not in skip)
    return kept / (V * C + sum(sub)), lambda k: 1.0


GAMMAS = (0.0, 0.2, 0.4, 0.6, 0.8)  # thresholds of the early stop searched with each set


def score(agree, confidence, models, Ks=range(1, 9), gammas=GAMMAS):
    """The best K and threshold gamma of one skip set under each cost model (c, v) in `models`, from
    its agreement and confidence [B, m] -> [(speedup, K, gamma, tokens per target call)] per
    model."""
    best = [(0.0, 0, 0.0, 0.0)] * len(models)
    for K in Ks:
        for gamma in gammas if K > 1 else (0.0,):
            walks = [greedy_walk(a, K, q, gamma) for a, q in zip(agree, confidence)]
            tpc = (agree.size + len(agree)) / sum(1 + len(steps) for steps in walks)
            best = [max(b, (walk_speedup(walks, c, v), K, gamma, tpc)) for b,
                    (c, v) in zip(best, models)]
    return best


def skip_of(mask, n_layer):
    return [s for s in range(2 * n_layer) if mask >> s & 1]


def names(skip):
    from gpt2.self_draft import sublayer_name

    return ",".join(sublayer_name(s) for s in skip) or "(none)"


def greedy_search(objective, n):
    """Forward selection: skip one more sublayer at a time, the one that scores best -> (best mask,
    evaluations)."""
    mask, best, seen = 0, (objective(0), 0), {0}
    for _ in range(n):
        options = [mask | 1 << s for s in range(n) if not mask >> s & 1]
        seen.update(options)
        mask = max(options, key=objective)
        best = max(best, (objective(mask), mask))
    return best[1], len(seen)


def hill_climb(objective, n, restarts, rng):
    """Random-restart hill climbing over single flips -> (best mask, evaluations)."""
    best, seen = (-1.0, 0), set()
    for _ in range(restarts):
        mask = int(rng.integers(1, 2 ** n))
        seen.add(mask)
        while True:
            options = [mask ^ 1 << s for s in range(n)]
            seen.update(options)
            top = max(options, key=objective)
            if objective(top) <= objective(mask):
                break
            mask = top
        best = max(best, (objective(mask), mask))
    return best[1], len(seen)


MODELS = ("this CPU (measured)", "memory-bound (weights read)")


def search(target, encoder, n_prompts, prompt_tokens, new_tokens, seed, restarts, write, folder,
           runs):
    from gpt2.train.skip_search import skip_set_search

    h, params = target.hparams, target.params
    L, n_sets = h["n_layer"], 2 ** (2 * h["n_layer"])
    x = search_sequences(target, encoder, n_prompts, prompt_tokens, new_tokens, seed)
    # kept
    saved = Path(runs) / (f"agree-{fingerprint(target)}-{n_prompts}-{prompt_tokens}-{new_tokens}-"
                          f"{seed}.npz")
    cached = read_search(saved, x, n_sets)
    if cached is not None:
        agree, confidence, seconds = cached
    else:
        start = time.thread_time()
        agree, confidence = skip_set_search(params, h, x, prompt_tokens)  # [2^(2L), B, m] each
        seconds = time.thread_time() - start
        saved.parent.mkdir(parents=True, exist_ok=True)
        tmp = saved.with_name(saved.name + ".partial")
        # a temp file renamed over the cache: an interrupted save leaves no broken cache
        with open(tmp, "wb") as f:
            np.savez_compressed(f, x=x, agree=agree, confidence=confidence, seconds=seconds)
        os.replace(tmp, saved)
    costs = measure_costs(target)
    scores = [score(agree[mask], confidence[mask], [cpu_costs(skip_of(mask, L), costs, L),
                                                    memory_bound_costs(skip_of(mask, L), h)])
              for mask in range(n_sets)]
    # skipping nothing drafts with the target itself: not a draft
    scores[0] = [(0.0, 0, 0.0, 1.0)] * 2
    lines = [f"Every skip set of {Path(folder).name} ({n_sets} sets; agreement and confidence on "
             f"{agree.shape[1]} held-out prompts x {agree.shape[2]} positions of the target's "
             f"greedy continuation, {seconds:.0f} CPU s). This CPU (ms, thread time): draft call "
             f"without sublayers {costs['call']:.3f}, attention {costs['attention']:.3f}, MLP "
             f"{costs['mlp']:.3f}; target call on 1..9 tokens "
             f"{', '.join(f'{v:.2f}' for v in costs['verify'])}."]
    record = {"search": {"command": f"python -m bench.self_draft --task search --n_prompts "
                                    f"{n_prompts} --prompt_tokens {prompt_tokens} --new_tokens "
                                    f"{new_tokens} --seed {seed}",
                         "sequences": x.tolist(), "start": prompt_tokens, "costs_ms": costs,
                         "cpu_seconds": seconds,
                         "agreement": [round(float(a.mean()), 5) for a in agree], "gammas": GAMMAS}}
    for i, model in enumerate(MODELS):
        objective = lambda mask: scores[mask][i][0]  # noqa: E731
        order = sorted(range(n_sets), key=objective, reverse=True)
        g, g_evals = greedy_search(objective, 2 * L)
        r, r_evals = hill_climb(objective, 2 * L, restarts, np.random.default_rng(seed))
        best = order[0]
        lines += ["",
                  f"Cost model: {model}. The 10 best sets, then the exits (every sublayer after "
                  f"layer E skipped):",
                  "",
                  "| rank | skip set | skipped | agreement | K | gamma | tokens/target call | "
                  "expected speedup |",
                  "|---|---|---|---|---|---|---|---|"]
        exits = [sum(1 << s for s in range(2 * E, 2 * L)) for E in range(L)]
        for mask in order[:10] + exits:
            sp, K, gamma, tpc = scores[mask][i]
            lines.append(f"| {order.index(mask) + 1} | {names(skip_of(mask, L))} | "
                         f"{bin(mask).count('1')} "
                         f"| {agree[mask].mean():.3f} | {K} | {gamma:g} | {tpc:.2f} | {sp:.3f}x |")
        lines += ["",
                  "| search | sets evaluated | best skip set | expected speedup | of the optimum |",
                  "|---|---|---|---|---|",
                  f"| exhaustive | {n_sets} | {names(skip_of(best, L))} | {objective(best):.3f}x | "
                  f"100% |"]
        for label, mask, evals in (("greedy (one more sublayer at a time)", g, g_evals),
                                   (f"hill climbing, {restarts} random restarts", r, r_evals)):
            lines.append(f"| {label} | {evals} | {names(skip_of(mask, L))} | "
                         f"{objective(mask):.3f}x | {objective(mask) / objective(best):.1%} |")
        key = "cpu" if i == 0 else "memory_bound"
        record["search"][key] = {
            "best": names(skip_of(best, L)), "speedup": [round(s[i][0], 4) for s in scores],
            "greedy": {"skip": names(skip_of(g, L)), "evaluations": g_evals},
            "hill_climb": {"skip": names(skip_of(r, L)), "evaluations": r_evals,
                           "restarts": restarts}}
        if i == 0:  # what ships: the best set on this machine
            sp, K, gamma, tpc = scores[best][0]
            record.update({"skip": names(skip_of(best, L)), "K": K, "threshold": gamma,
                           "predicted": {"tokens_per_call": tpc, "speedup": sp,
                                         "agreement": float(agree[best].mean())}})
    if write:
        update_config(folder, "layer_skip", record)
    return lines


def fingerprint(target):
    """12 hex digits of a hash of the target's shape and weights: the key of what --runs keeps for
    this target."""
    from gpt2.backend import to_numpy

    digest = hashlib.sha1(json.dumps(target.hparams, sort_keys=True, default=str).encode())

    def walk(tree):
        if isinstance(tree, dict):
            for k in sorted(tree):
                walk(tree[k])
        elif isinstance(tree, (list, tuple)):
            for v in tree:
                walk(v)
        else:
            digest.update(np.ascontiguousarray(to_numpy(tree)).view(np.uint8))

    walk(target.params)
    return digest.hexdigest()[:12]


def read_search(saved, x, n_sets):
    """The kept agreement and confidence [2^(2L), B, m] and CPU seconds of these sequences x, or
    None when the file is missing, unreadable (an interrupted save of an older version) or of other
    sequences: then the search runs again."""
    try:
        with np.load(saved) as data:
            if not np.array_equal(data["x"], x) or data["agree"].shape[0] != n_sets:
                return None
            return data["agree"], data["confidence"], float(data["seconds"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None


def target_name(folder):
    return Path(folder).name


def update_config(folder, kind, record):
    from gpt2.self_draft import CONFIG, ENTRY_KINDS, read_config

    config = read_config(folder)
    config[kind] = {"kind": ENTRY_KINDS[kind], **record}  # the entry declares what it holds
    write_text(Path(folder) / CONFIG, json.dumps(config, separators=(",", ":")) + "\n")


# ---- exit layers: agreement with the plain LM head and with a trained exit adapter ----

def training_windows(encoder, n_windows, n_ctx, seed):
    """n_windows random windows of n_ctx tokens from the standard library's train split."""
    from gpt2.train.corpus import split_files, stdlib_files, tokenize

    rng = np.random.default_rng(seed)
    files = split_files(stdlib_files())["train"]
    ids = tokenize([files[i] for i in rng.permutation(len(files))[:120]], encoder)
    starts = rng.integers(0, len(ids) - n_ctx, n_windows)
    return np.array([ids[s:s + n_ctx] for s in starts])


def exits(target, encoder, exit_layers, steps, n_windows, write, folder, runs):
    """Each exit layer's agreement on the search's sequences (self_draft.json), with the plain LM
    head and with an exit adapter trained for it; ships the exit layer (and adapter) with the best
    expected speedup on this machine."""
    from gpt2.heads import load_heads
    from gpt2.train.exit_adapter import train_exit_adapter
    from gpt2.self_draft import ADAPTER
    from gpt2.self_draft import exit_skip, read_config
    from gpt2.train.skip_search import draft_logits

    h, params = target.hparams, target.params
    L = h["n_layer"]
    # there: checked by main before any work
    search_record = read_config(folder)["layer_skip"]["search"]
    x, start, costs = (np.array(search_record["sequences"]), search_record["start"],
                       search_record["costs_ms"])
    windows = training_windows(encoder, n_windows, 128, 0)
    q = softmax_np(draft_logits(params, h, x, start, []))  # the target's law at the rows
    lines = ["| exit after layer | head | agreement with the target (T=0) | alpha (T=1) | K | "
             "gamma | tokens/target call | expected speedup (this CPU) | expected speedup "
             "(memory-bound) |",
             "|---|---|---|---|---|---|---|---|---|"]
    results, curve = [], {"LM head": {}, "adapter": {}}
    key = fingerprint(target)
    for E in exit_layers:
        # what the adapter depends on
        out = Path(runs) / f"exit{E}-{key}-{steps}steps-{n_windows}windows"
        if not (out / "heads.json").exists():
            partial = out.with_name(out.name + ".partial")  # trained aside, renamed when whole
            for old in (partial, out):
                shutil.rmtree(old, ignore_errors=True)
            train_exit_adapter(params, h, windows, E, partial, steps=steps)
            os.replace(partial, out)
        heads, config = load_heads(out)
        for label, adapter in (("LM head", None),
                               ("adapter", {"head": heads[0], "act": config["act"]})):
            skip = exit_skip(E, L)
            p = softmax_np(draft_logits(params, h, x, start, skip, adapter))  # [B, m, V]
            agree, confidence = p.argmax(-1) == x[:, start + 1:], p.max(-1)
            alpha = float(np.minimum(p, q).sum(-1).mean())
            models = [cpu_costs(skip, costs, L), memory_bound_costs(skip, h)]
            # LayerSkip: no stop
            (sp, K, gamma, tpc), (mb, *_) = score(agree, confidence, models, gammas=(0.0,))
            results.append((sp, E, label, K, gamma, tpc, out))
            curve[label][E] = {"agreement": float(agree.mean()), "alpha": alpha}
            lines.append(f"| {E} | {label} | {agree.mean():.3f} | {alpha:.3f} | {K} | {gamma:g} | "
                         f"{tpc:.2f} | {sp:.3f}x | {mb:.3f}x |")
            print(lines[-1], flush=True)
    sp, E, label, K, gamma, tpc, out = max(results)
    if write:
        record = {"exit_layer": E, "adapter": label == "adapter", "K": K, "threshold": gamma,
                  "predicted": {"tokens_per_call": tpc, "speedup": sp}, "curve": curve,
                  "command": f"python -m bench.self_draft --task exits --exit_layers "
                             f"{','.join(map(str, exit_layers))} --steps {steps} --n_windows "
                             f"{n_windows}"}
        if label == "adapter":
            (Path(folder) / ADAPTER).mkdir(exist_ok=True)
            for name in ("heads.json", "heads.safetensors"):
                tmp = Path(folder) / ADAPTER / f"{name}.tmp"
                shutil.copy(out / name, tmp)
                os.replace(tmp, Path(folder) / ADAPTER / name)
        update_config(folder, "early_exit", record)
    return lines


def softmax_np(logits):
    z = np.exp(logits - logits.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


# ---- the bench table: each method against autoregressive decoding, side by side ----

def call_cost(model, x, n, reps=30):
    """Median time of a call on n new tokens over a 1-token call (the model's cache holds x)."""
    times = {1: [], n: []}
    for _ in range(reps):
        for m in (1, n):
            model.reset() if hasattr(model, "reset") else None
            model(x)
            start = time.perf_counter()
            model(x + list(range(30, 30 + m)), m)
            times[m].append(time.perf_counter() - start)
    return float(np.median(times[n]) / np.median(times[1]))


def self_draft_alpha(engine, target, prompts, n_tokens, options):
    """alpha of a self-draft on the target's own continuations, the draft reading the target's cache
    (as it drafts)."""
    from gpt2.train.skip_search import draft_logits

    seqs = []
    for x in prompts:
        target.reset()
        seqs.append(autoregressive_sampling(x, target, n_tokens, np.random.default_rng(0),
                                            **options))
    x, start = np.array(seqs), len(prompts[0])
    # the engine's weights without its panels (draft_logits runs [B, T] arrays)
    params = target.params
    p = warp(softmax_np(draft_logits(params, engine.hparams, x, start, engine.skip,
                                     engine.adapter)), **options)
    q = warp(softmax_np(draft_logits(params, engine.hparams, x, start, [])), **options)
    return float(np.minimum(p, q).sum(-1).mean())


def bench(target, encoder, target_name, n_prompts, prompt_tokens, n_tokens, seeds, temperatures):
    from gpt2.train.corpus import heldout_prompts
    from picospec_app.settings import read_settings
    from gpt2.hub import resolve
    from gpt2.self_draft import read_config

    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)  # seed 0, as bench.harness
    tiny, ngram = (load_draft(name, target, target_name) for name in ("tiny-draft", "ngram"))
    folder = resolve(target_name, offline=read_settings().offline)
    config = read_config(folder)
    # loaded as main.py loads them: on the weights the target engine decodes with (its panels and LM
    # head copy)
    skip, paper, exit_ = (load_as_main(kind, options, target, target_name)["target"].engine
                          for kind, options in
                          (("layer_skip", {}), ("layer_skip", {"skip": "m2"}), ("early_exit", {})))
    K_skip, K_exit, E = (config["layer_skip"]["K"], config["early_exit"]["K"],
                         config["early_exit"]["exit_layer"])
    # ..., the alpha of the theory column
    rows = [("speculative", "tiny-draft", {"draft": tiny}, {"K": 4}, "tiny"),
            ("speculative", "ngram", {"draft": ngram}, {"K": 4}, "ngram"),
            ("layer_skip", f"skip {config['layer_skip']['skip']} (searched)",
             {"target": skip.target, "draft": skip.draft, "self_draft": skip.settings},
             {"K": K_skip}, "skip"),
            ("layer_skip", "skip m2 (agreement 0.91), the paper's loop",
             {"target": paper.target, "draft": paper.draft, "self_draft": paper.settings},
             {"K": 4, "threshold": 0.6, "adaptive": True}, "m2"),
            ("early_exit", f"exit after {E}" + (" + adapter" if exit_.adapter else ""),
             {"target": exit_.target, "draft": exit_.draft, "self_draft": exit_.settings},
             {"K": K_exit}, "exit"),
            ("cascade", "vertical: tiny-draft over ngram", {"draft": tiny, "draft2": ngram},
             {"K": 4, "K_inner": 2, "K_tail": 0}, None),
            ("cascade", "horizontal: tiny-draft, then ngram", {"draft": tiny, "draft2": ngram},
             {"K": 3, "K_inner": 0, "K_tail": 2}, None),
            ("cascade", "both", {"draft": tiny, "draft2": ngram},
             {"K": 3, "K_inner": 2, "K_tail": 2}, None)]
    lines = [f"`python -m bench.self_draft --bench_prompts {n_prompts} --n_tokens {n_tokens} "
             f"--seeds {seeds} --temperatures {','.join(map(str, temperatures))}`", "",
             "| method | drafter | options | T | tokens/target call (median) | draft calls per "
             "target call (tiny-draft or self / ngram) | c = draft call / target call | verify "
             "call / 1-token call | speedup vs autoregressive (median, IQR) | theory speedup |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    # tiny-draft's review call of K_inner + 1 tokens
    v1 = {k: call_cost(tiny, prompts[0], k + 1) for k in (2,)}
    alphas = []
    for T in temperatures:
        options = {"temperature": T}
        alpha = {"tiny": measure_alpha(tiny, target, prompts, n_tokens, options),
                 "ngram": measure_alpha(ngram, target, prompts, n_tokens, options),
                 "ngram_tiny": measure_alpha(ngram, tiny, prompts, n_tokens, options),
                 "skip": self_draft_alpha(skip, target, prompts, n_tokens, options),
                 "exit": self_draft_alpha(exit_, target, prompts, n_tokens, options),
                 "m2": self_draft_alpha(paper, target, prompts, n_tokens, options)}
        alphas.append(f"| {T:g} | " + " | ".join(f"{a:.3f}" for a in alpha.values()) + " |")
        measured = {}
        for method, drafter, loaded, opts, key in rows:
            r = compare(method, prompts, {"target": target, **loaded}, n_tokens, range(seeds),
                        options, **opts)
            measured[(method, drafter)] = r
            K = opts["K"]
            if method == "cascade":
                c1 = measured[("speculative", "tiny-draft")]["c"]
                c2 = measured[("speculative", "ngram")]["c"]
                theory = cascade_speedup(alpha["tiny"], alpha["ngram"], K, opts["K_tail"], c1, c2,
                                         r["verify_cost"],
                                         alpha["ngram_tiny"], opts["K_inner"], v1[2])
                calls = f"{r['draft_calls_per_step']:.2f} / {r['draft2_calls_per_step']:.2f}"
                cost = f"{r['c']:.3f} / {r['c2']:.3f}"
            else:
                theory = expected_tokens_per_call(alpha[key], K) / (K * r["c"] + r["verify_cost"])
                calls, cost = f"{r['draft_calls_per_step']:.2f}", f"{r['c']:.3f}"
            shown = ", ".join(f"{k} {v}" for k, v in opts.items())
            lines.append(f"| {method} | {drafter} | {shown} | {T:g} | {r['tokens_per_call']:.2f} | "
                         f"{calls} | {cost} | {r['verify_cost']:.2f} | {r['speedup']:.2f}x "
                         f"({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) | {theory:.2f}x |")
            print(lines[-1], flush=True)
    lines += ["",
              f"The theory column's inputs: alpha = E[sum min(p, q)] on the same prompts' "
              f"continuations (the self-drafts read the target's cache, as they draft), c and v "
              f"measured in the rows above, tiny-draft's 3-token review call = {v1[2]:.2f} of its "
              f"1-token call. Self-drafts: E[tokens](alpha, K) / (K c + v) at a fixed K "
              f"(layer_skip also stops early); cascades: picospec.theory.cascade_speedup.", "",
              "| T | alpha tiny-draft | alpha ngram | alpha ngram under tiny-draft | alpha "
              "layer_skip "
              "| alpha early_exit | alpha skip m2 |", "|---|---|---|---|---|---|---|"] + alphas
    return lines


def check_before_work(task, target, folder, exit_layers, runs):
    """The mistakes the search and the exit layers would meet only after minutes, as one line each,
    before any work: a model too deep to score every skip set, exits without a saved search or past
    the last layer, a --runs folder that cannot be made or written."""
    from picospec_cli import cannot_write_in
    from gpt2.self_draft import CONFIG, read_config
    from gpt2.train.skip_search import MAX_LAYERS, too_many_layers
    from gpt2.weights import hparams_from_config, read_json

    L = hparams_from_config(read_json(Path(folder) / "config.json"))["n_layer"]
    if task == "search" and (problem := too_many_layers(L)) is not None:
        raise ValueError(f"--task search on {target}: {problem}; search a model of at most "
                         f"{MAX_LAYERS} layers, or choose a skip set by hand: python main.py "
                         f"--target {target} --method layer_skip --skip a3,m4 (or --method "
                         f"early_exit --exit_layer E --no-adapter)")
    if task == "exits":
        if "search" not in read_config(folder).get("layer_skip", {}):
            raise ValueError(f"--task exits measures the exit layers on the sequences of the "
                             f"skip-set search, and "
                             f"{Path(folder) / CONFIG} has none: run `python -m bench.self_draft "
                             f"--task search --target {target}` first (without --no-write)")
        if bad := [E for E in exit_layers if E >= L]:
            raise ValueError(f"--exit_layers {','.join(map(str, exit_layers))}: {target} has {L} "
                             f"layers; exit after "
                             f"1..{L - 1}, not {','.join(map(str, bad))}" if L > 1 else
                             f"--task exits: {target} has 1 layer, so there is no layer to exit "
                             f"after")
    path = Path(runs)
    first = next(p for p in [path, *path.parents] if p.exists() or p == Path(p.anchor)
                 or p == Path("."))
    if not first.is_dir():
        raise ValueError(f"--runs {runs}: {first} is a file, not a folder; name a folder for the "
                         f"kept search and adapters")
    if (why := cannot_write_in(first)) is not None:
        raise ValueError(f"--runs {runs}: no file can be made in {first} ({why}); name another "
                         f"folder")


def main(task="bench", target="tiny-target", n_prompts=16, prompt_tokens=64, new_tokens=33, seed=1,
         restarts=10,
         exit_layers=(1, 2, 3, 4), steps=400, n_windows=256, runs="runs/self_draft", write=True,
         bench_prompts=8, n_tokens=64, seeds=2, temperatures=(0.0, 1.0), out=None):
    """The skip-set search (--task search), the exit layers (--task exits), or the bench table
    (--task bench)."""
    from picospec_app.machine import thread_policy
    from picospec_app.settings import read_settings
    from gpt2.hub import resolve
    from gpt2.load import load_model
    from picospec_app.settings import engine_choices

    offline = read_settings().offline  # PICOSPEC_OFFLINE, as main.py reads it
    folder = resolve(target, offline=offline)
    if task in ("search", "exits"):
        check_before_work(task, target, folder, exit_layers, runs)
    model, encoder = load_model(target, offline=offline, **engine_choices())
    top = header(thread_policy(model.n_params))
    print(top, flush=True)
    if task == "search":
        lines = search(model, encoder, n_prompts, prompt_tokens, new_tokens, seed, restarts, write,
                       folder, runs)
    elif task == "exits":
        lines = exits(model, encoder, exit_layers, steps, n_windows, write, folder, runs)
    else:
        lines = bench(model, encoder, target, bench_prompts, prompt_tokens, n_tokens, seeds,
                      temperatures)
    text = "\n".join(lines)
    print(text)
    if out:
        from bench.page import write_page

        write_page(out, text, top)


if __name__ == "__main__":
    from bench.families import command
    from picospec_cli import Option

    command(main, [
        Option("task", str, "bench",
               "search (every skip set), exits (exit layers and adapters), or bench (the table)",
               choices=("search", "exits", "bench")),
        Option("target", str, "tiny-target", "the target model"),
        Option("n_prompts", int, 16, "search: held-out prompts", low=1),
        Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
        Option("new_tokens", int, 33,
               "search: greedy tokens after each prompt (the positions scored)", low=2),
        Option("seed", int, 1, "search: seed of the held-out prompts (the bench uses seed 0)",
               low=0),
        Option("restarts", int, 10, "search: random restarts of hill climbing", low=1),
        Option("exit_layers", "ints", (1, 2, 3, 4), "exits: the exit layers to measure", low=1),
        Option("steps", int, 400, "exits: training steps of each exit adapter", low=1),
        Option("n_windows", int, 256, "exits: training windows of 128 tokens", low=1),
        Option("runs", str, "runs/self_draft",
               "the search's agreement and the trained adapters (reused when there)"),
        Option("write", bool, True,
               "write the choices into the target's folder (--no-write: only print)"),
        Option("bench_prompts", int, 8, "bench: held-out prompts (seed 0, as bench.harness)",
               low=1),
        Option("n_tokens", int, 64, "bench: new tokens per run", low=2),
        Option("seeds", int, 2, "bench: seeds per prompt", low=1),
        Option("temperatures", "floats", (0.0, 1.0), "bench: temperatures, a row each", low=0),
        Option("out", "out", None, "also write the table to this file")])
