"""Self-drafting's choices, made on the target itself and written into its folder: the skip-set
search of Draft & Verify (Zhang et al. 2023, arXiv:2309.08168) and the exit layer of LayerSkip
(Elhoushi et al. 2024, arXiv:2404.16710), with or without a trained exit adapter.

    # all 4096 skip sets of tiny-target; greedy and hill climbing beside
    python -m gpt2.train.self_draft --task search
    # each exit layer's agreement, plain LM head and trained exit adapter
    python -m gpt2.train.self_draft --task exits

Both write their choice into the target's folder (self_draft.json, early_exit/) unless --no-write.
The search scores a skip set by the speedup its draft would give greedy decoding: its agreement
with the target at every position of held-out prompts' greedy continuations (batched, on the
target's cache, as the engine drafts: skip_search.skip_set_search), walked step by step with K
drafts (picospec.theory.greedy_walk), timed by a cost model of the engine measured here (a draft
call from its kept sublayers, the verification from its cut). Shapes: B prompts, m scored
positions per prompt.
"""
import hashlib
import json
import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from gpt2.backend import to_numpy
from gpt2.heads import load_heads
from gpt2.hub import resolve
from gpt2.load import load_model
from gpt2.model import softmax
from gpt2.self_draft import (ADAPTER, CONFIG, ENTRY_KINDS, SelfDraft, exit_skip, read_config,
                             sublayer_name)
from gpt2.train.corpus import heldout_prompts, split_files, stdlib_files, tokenize
from gpt2.train.exit_adapter import train_exit_adapter
from gpt2.train.skip_search import MAX_LAYERS, draft_logits, skip_set_search, too_many_layers
from gpt2.weights import hparams_from_config, read_json
from picospec.theory import greedy_walk, walk_speedup
from picospec_cli import Option, UsageError, cannot_make, command, replace_file


def search_sequences(target, encoder, n_prompts, prompt_tokens, new_tokens, seed):
    """Held-out prompts, each followed by the target's greedy continuation -> ids [B, prompt_tokens
    + new_tokens]."""
    seqs = []
    for x in heldout_prompts(encoder, n_prompts, prompt_tokens, seed=seed):
        target.reset()
        for _ in range(new_tokens):  # greedy: the argmax of each next-token law
            x = x + [int(np.argmax(target(x)[-1]))]
        seqs.append(x)
    return np.array(seqs)


# ---- the cost model of a draft path (ms on this machine, one BLAS thread) ----

def measure_costs(target, reps=60):
    """Draft calls of four paths (none, attention only, MLPs only, all) give a call's fixed cost and
    each sublayer's; target calls of n = 1..9 new tokens give the verification's cost. Interleaved,
    medians. On the weights the target engine decodes with (its weight panels and LM head copy,
    where it has them), as main.py loads a self-draft."""
    hparams, params, plan = target.hparams, target.params, target.plan
    L, x = hparams["n_layer"], list(range(7, 7 + 100))
    paths = {"none": range(2 * L), "attention": range(1, 2 * L, 2), "mlp": range(0, 2 * L, 2),
             "all": ()}
    engines = {k: SelfDraft(hparams, params, skip, plan=plan) for k, skip in paths.items()}
    full = SelfDraft(hparams, params, (), plan=plan)
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
    """This machine (costs from measure_costs) -> c_d (a draft call over a 1-token target call),
    c(k) (the verification of k drafts, reusing the draft's work below the cut: those sublayers run
    1 token, not k + 1)."""
    sub = [costs["attention"] if s % 2 == 0 else costs["mlp"] for s in range(2 * n_layer)]
    V, cut = costs["verify"], min(skip, default=2 * n_layer)
    c_d = (costs["call"] + sum(t for s, t in enumerate(sub) if s not in skip)) / V[0]
    below = sum(sub[:cut]) / sum(sub)  # share of the sublayers' time before the cut
    return c_d, lambda k: (V[k] - below * (V[k] - V[0])) / V[0]


def memory_bound_costs(skip, hparams):
    """A memory-bound accelerator: a call costs the weights it reads, whatever its tokens -> c_d =
    the draft path's share of the weights (the tied embedding / LM head, 4C^2 per attention, 8C^2
    per MLP), c(k) = 1."""
    C, V = hparams["n_embd"], hparams["n_vocab"]
    sub = [4 * C * C if s % 2 == 0 else 8 * C * C for s in range(2 * hparams["n_layer"])]
    kept = V * C + sum(w for s, w in enumerate(sub) if s not in skip)
    return kept / (V * C + sum(sub)), lambda k: 1.0


GAMMAS = (0.0, 0.2, 0.4, 0.6, 0.8)  # thresholds of the early stop searched with each set


def score(agree, confidence, models, Ks=range(1, 9), gammas=GAMMAS):
    """The best K and threshold gamma of one skip set under each cost model (c_d, c) in `models`,
    from its agreement and confidence [B, m] -> [(speedup, K, gamma, tokens per target call)] per
    model."""
    best = [(0.0, 0, 0.0, 0.0)] * len(models)
    for K in Ks:
        for gamma in gammas if K > 1 else (0.0,):
            walks = [greedy_walk(a, K, q, gamma) for a, q in zip(agree, confidence)]
            tpc = (agree.size + len(agree)) / sum(1 + len(steps) for steps in walks)
            best = [max(b, (walk_speedup(walks, c_d, c), K, gamma, tpc)) for b,
                    (c_d, c) in zip(best, models)]
    return best


def skip_of(mask, n_layer):
    return [s for s in range(2 * n_layer) if mask >> s & 1]


def names(skip):

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
    record = {"search": {"command": f"python -m gpt2.train.self_draft --task search --n_prompts "
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

    config = read_config(folder)
    config[kind] = {"kind": ENTRY_KINDS[kind], **record}  # the entry declares what it holds
    text = json.dumps(config, separators=(",", ":")) + "\n"
    replace_file(Path(folder) / CONFIG, [text.encode()])  # written whole, then renamed


# ---- exit layers: agreement with the plain LM head and with a trained exit adapter ----

def training_windows(encoder, n_windows, n_ctx, seed):
    """n_windows random windows of n_ctx tokens from the standard library's train split."""
    rng = np.random.default_rng(seed)
    files = split_files(stdlib_files())["train"]
    ids = tokenize([files[i] for i in rng.permutation(len(files))[:120]], encoder)
    starts = rng.integers(0, len(ids) - n_ctx, n_windows)
    return np.array([ids[s:s + n_ctx] for s in starts])


def exits(target, encoder, exit_layers, steps, n_windows, write, folder, runs):
    """Each exit layer's agreement on the search's sequences (self_draft.json), with the plain LM
    head and with an exit adapter trained for it; ships the exit layer (and adapter) with the best
    expected speedup on this machine."""
    h, params = target.hparams, target.params
    L = h["n_layer"]
    # there: checked by main before any work
    search_record = read_config(folder)["layer_skip"]["search"]
    x, start, costs = (np.array(search_record["sequences"]), search_record["start"],
                       search_record["costs_ms"])
    windows = training_windows(encoder, n_windows, 128, 0)
    q = softmax(draft_logits(params, h, x, start, []))  # the target's law at the rows
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
            p = softmax(draft_logits(params, h, x, start, skip, adapter))  # [B, m, V]
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
                  "command": f"python -m gpt2.train.self_draft --task exits --exit_layers "
                             f"{','.join(map(str, exit_layers))} --steps {steps} --n_windows "
                             f"{n_windows}"}
        if label == "adapter":
            install_adapter(out, folder)
        update_config(folder, "early_exit", record)
    return lines


def install_adapter(trained, folder):
    """Put the trained adapter's folder in place of folder/early_exit whole, never a mix of two
    adapters' files: copied beside it under a hidden name, then swapped in by two renames. Stopped
    anywhere, it leaves the old adapter or the new one; a process killed between the renames leaves
    none (the loader says so), and the next install removes what it left aside."""
    folder, place = Path(folder), Path(folder) / ADAPTER
    for left in folder.glob(f".{ADAPTER}.*"):
        shutil.rmtree(left) if left.is_dir() else left.unlink()
    new = Path(tempfile.mkdtemp(dir=folder, prefix=f".{ADAPTER}.new-"))
    old = new.with_name(new.name.replace(".new-", ".old-"))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(new, 0o777 & ~umask)  # mkdtemp makes 0700; the folder gets the usual permissions
        for f in Path(trained).iterdir():  # heads.json, heads.safetensors
            shutil.copy2(f, new / f.name)
        if place.exists():
            os.replace(place, old)
        os.replace(new, place)
    finally:
        if old.exists() and not place.exists():  # stopped between the renames: the old one back
            os.replace(old, place)
        for left in (new, old):
            if left.exists():
                shutil.rmtree(left) if left.is_dir() else left.unlink()


def check_before_work(task, target, folder, exit_layers, runs, prompt_tokens=64, new_tokens=33):
    """The mistakes the search and the exit layers would meet only after minutes, as one line each,
    before any work: a model too deep to score every skip set, sequences longer than its context
    window, exits without a saved search or past the last layer, a --runs folder that cannot be
    made or written."""
    hparams = hparams_from_config(read_json(Path(folder) / "config.json"))
    L, n_ctx = hparams["n_layer"], hparams["n_ctx"]
    if task == "search" and (problem := too_many_layers(L)) is not None:
        raise ValueError(f"--task search on {target}: {problem}; search a model of at most "
                         f"{MAX_LAYERS} layers, or choose a skip set by hand: python main.py "
                         f"--target {target} --method layer_skip --skip a3,m4 (or --method "
                         f"early_exit --exit_layer E --no-adapter)")
    if task == "search" and prompt_tokens + new_tokens > n_ctx:
        raise ValueError(f"--prompt_tokens {prompt_tokens} + --new_tokens {new_tokens} = "
                         f"{prompt_tokens + new_tokens} tokens do not fit {target}'s context "
                         f"window of {n_ctx}: give a smaller --prompt_tokens or --new_tokens")
    if task == "exits":
        if "search" not in read_config(folder).get("layer_skip", {}):
            raise ValueError(f"--task exits measures the exit layers on the sequences of the "
                             f"skip-set search, and {Path(folder) / CONFIG} has none: run "
                             f"`python -m gpt2.train.self_draft --task search --target {target}` "
                             f"first (without --no-write)")
        if bad := [E for E in exit_layers if E >= L]:
            raise ValueError(f"--exit_layers {','.join(map(str, exit_layers))}: {target} has {L} "
                             f"layers; exit after "
                             f"1..{L - 1}, not {','.join(map(str, bad))}" if L > 1 else
                             f"--task exits: {target} has 1 layer, so there is no layer to exit "
                             f"after")
    if (found := cannot_make(runs)) is None:
        return
    first, why = found
    if why == "a file":
        raise ValueError(f"--runs {runs}: {first} is a file, not a folder; name a folder for the "
                         f"kept search and adapters")
    raise ValueError(f"--runs {runs}: no file can be made in {first} ({why}); name another folder")


def main(task="search", target="tiny-target", n_prompts=16, prompt_tokens=64, new_tokens=33,
         seed=1, restarts=10, exit_layers=(1, 2, 3, 4), steps=400, n_windows=256,
         runs="runs/self_draft", write=True, offline=False):
    """The skip-set search (--task search) or the exit layers (--task exits)."""
    folder = resolve(target, offline=offline)
    check_before_work(task, target, folder, exit_layers, runs, prompt_tokens, new_tokens)
    model, encoder = load_model(target, offline=offline)
    if task == "search":
        lines = search(model, encoder, n_prompts, prompt_tokens, new_tokens, seed, restarts, write,
                       folder, runs)
    else:
        lines = exits(model, encoder, exit_layers, steps, n_windows, write, folder, runs)
    print("\n".join(lines))


OPTIONS = [
    Option("task", str, "search",
           "search (every skip set) or exits (exit layers and adapters)",
           choices=("search", "exits")),
    Option("target", str, "tiny-target", "the target model"),
    Option("n_prompts", int, 16, "search: held-out prompts", low=1),
    Option("prompt_tokens", int, 64, "search: tokens per prompt", low=1),
    Option("new_tokens", int, 33, "search: greedy tokens after each prompt (the positions scored)",
           low=2),
    Option("seed", int, 1, "search: seed of the held-out prompts", low=0),
    Option("restarts", int, 10, "search: random restarts of hill climbing", low=1),
    Option("exit_layers", "ints", (1, 2, 3, 4), "exits: the exit layers to measure", low=1),
    Option("steps", int, 400, "exits: training steps of each exit adapter", low=1),
    Option("n_windows", int, 256, "exits: training windows of 128 tokens", low=1),
    Option("runs", str, "runs/self_draft",
           "the search's agreement and the trained adapters (reused when there)"),
    Option("write", bool, True,
           "write the choices into the target's folder (--no-write: only print)"),
    Option("offline", bool, False, "never touch the network: the target must be in the Hugging "
           "Face cache or a folder")]

# the task that reads each option its help names one for ("search: ...", "exits: ...")
TASK_OF = {o.name: o.help.split(":")[0] for o in OPTIONS
           if o.help.split(":")[0] in ("search", "exits")}


def check_task_options(values, given):
    """An option given that the chosen --task does not read is a mistake, not a silent no-op."""
    task = values["task"]
    chosen = f"--task {task}" + ("" if "task" in given else " (the default)")
    for name in sorted(given):
        if TASK_OF.get(name, task) != task:
            raise UsageError(f"--{name} is read by --task {TASK_OF[name]}, not by {chosen}: leave "
                             f"it out, or run --task {TASK_OF[name]}")


if __name__ == "__main__":
    command(main, OPTIONS, check=check_task_options)
