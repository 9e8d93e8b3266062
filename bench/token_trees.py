"""Token trees from drafts: a chain, SpecInfer's expansion trees and Sequoia's dynamic-program trees
at equal node budgets on the built-in pair (tiny-target, tiny-draft), with what verification costs
here.

    python -m bench.token_trees                     # the full tables (about 15 minutes on 2 cores)
    # a quick look
    python -m bench.token_trees --budgets 4 --temperatures 0 --n_prompts 2 --seeds 1
    # also store the vectors in its sequoia.json
    python -m bench.token_trees --record gpt2/assets/tiny-target

1. Cost: a target tree forward over m draft nodes (and the root) in units of a one-token call, and
   one draft call (medians of repeated calls after a held-out prompt).
2. Acceptance vectors (Sequoia section 3.1): on calibration prompts (held-out, a different seed from
   the evaluation prompts) followed by the target's own continuation: top-k children at temperature
   0, children drawn without replacement (Sequoia) and i.i.d. (SpecInfer) at temperature > 0
   (`acceptance_vector`). --record stores the draft's vectors at temperatures 0 and 1 in the target
   folder's sequoia.json, where main.py's Sequoia finds them.
3. Tree size against cost: the dynamic program's expected tokens per step for each size and the
   modelled speedup c(n, d) / (v(n) + draft calls * c), and Sequoia's hardware-aware choice of n and
   d.
4. Equal budgets: every row follows picospec_app.compare (autoregressive decoding and the method
   back to back on the same prompts and seeds, each from a cold cache; medians over prompts x
   seeds), beside the expected accepted tokens per step under positional acceptance; "measured" is
   the mean accepted per step over steps whose tree was not cut short by the end of the text.
Shapes: none; this file only times things.
"""
import json
import time
from pathlib import Path

import numpy as np

from bench.harness import check_room
from gpt2.load import load_draft
from picospec_app.compare import mean_accepted
from picospec_app.run import run_method
from picospec.autoregressive import autoregressive_sampling
from picospec_cli import replace_file
from picospec.sequoia import (acceptance_vector, build_choices, choose_size, sequoia_table,
                              sequoia_tree, tree_value)
from tools.families import command
from tools.page import header, measured_command, write_page

# SpecInfer expansions of that many nodes, shaped
CONFIGS = {4: (1, 1, 2), 8: (1, 1, 3, 1), 16: (1, 3, 1, 1, 1, 1)}
# like the paper's <1, 1, 3, 1, 1, 1, 1, 1> (20 nodes): one path, then three branches


def expansion_choices(expansion):
    """The unmerged tree of an expansion configuration as rank paths: every node of depth i - 1 gets
    k_i children."""
    level, out = [()], []
    for k in expansion:
        level = [c + (r,) for c in level for r in range(k)]
        out += [list(c) for c in level]
    return out


def record_vectors(folder, draft, vectors, protocol):
    """Store the draft's measured vectors (greedy: T = 0, sampled: T = 1) in folder/sequoia.json,
    beside the other drafts' entries; the file is replaced whole, never half-written."""
    path = Path(folder) / "sequoia.json"
    entries = json.loads(path.read_text()) if path.exists() else {}
    entries[draft] = {"greedy": [round(float(a), 3) for a in vectors[0.0, "top"]],
                      "sampled": [round(float(a), 3) for a in vectors[1.0, "without_replacement"]],
                      "protocol": protocol}
    text = json.dumps(entries, indent=1) + "\n"
    replace_file(path, [text.encode()])


def verification_costs(target, draft, x, sizes, repeats=50):
    """{m: median ms of a target tree forward over m nodes after x} and the median ms of one draft
    call (one new token). The sizes take turns within each repeat, so a change in the machine's load
    reaches all of them alike."""
    rng = np.random.default_rng(0)
    trees = {m: ([int(t) for t in rng.integers(0, target.n_vocab, m)],
                 [-1 if i < 2 else int(rng.integers(-1, i)) for i in range(m)]) for m in sizes}
    times, draft_times = {m: [] for m in sizes}, []
    target(x), draft(x)
    for _ in range(repeats):
        for m in sizes:
            start = time.perf_counter()
            target.tree(x, *trees[m], probs=True)
            times[m].append(time.perf_counter() - start)
        start = time.perf_counter()
        draft(x + [int(rng.integers(target.n_vocab))])  # rolls back one token, runs one
        draft_times.append(time.perf_counter() - start)
    return {m: 1e3 * float(np.median(t)) for m,
            t in times.items()}, 1e3 * float(np.median(draft_times))


def row(label, tree, T, expected, r, full_depth):
    stats = r["stats"]
    nodes = np.mean([s["nodes"] for s in stats if s["drafted"] == full_depth] or [0])
    expected = "-" if np.isnan(expected) else f"{expected:.2f}"
    return (f"| {label} | {tree} | {nodes:.1f} | {T:g} | {expected} | "
            f"{mean_accepted(stats, full_depth):.2f} "
            f"| {r['tokens_per_call']:.2f} | {r['c']:.2f} "
            f"| {r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")


def main(draft="tiny-draft", second_draft="ngram", budgets=(4, 8), temperatures=(0.0, 1.0),
         n_prompts=8,
         prompt_tokens=64, n_tokens=64, seeds=2, calibration_prompts=8, max_depth=8, out=None,
         record=None):
    """Chain vs SpecInfer vs Sequoia at equal node budgets, with the cost of verification and the
    acceptance vectors."""
    from picospec_app.machine import thread_policy
    from gpt2.train.corpus import heldout_prompts
    from gpt2.hub import resolve
    from gpt2.load import load_model
    from picospec_app.settings import engine_choices

    if record and Path(record).resolve() != resolve("tiny-target").resolve():
        raise ValueError(f"--record {record} is not the folder of tiny-target, the target "
                         f"measured: give {resolve('tiny-target')}")
    if record and not {0.0, 1.0} <= set(temperatures):
        raise ValueError("--record stores the vectors at temperatures 0 and 1: include both in "
                         "--temperatures")
    target, encoder = load_model("tiny-target", **engine_choices())
    check_room(target.n_ctx, prompt_tokens, n_tokens)
    drafts = {name: load_draft(name, target, "tiny-target") for name in (draft, second_draft)}
    lines = [header(thread_policy(target.n_params)), "",
             f"`{measured_command()}`"]
    print("\n".join(lines), flush=True)
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    calibration = heldout_prompts(encoder, calibration_prompts, prompt_tokens, seed=1)

    # 1. what a tree forward costs here
    sizes = list(range(0, 33))
    costs, draft_ms = verification_costs(target, drafts[draft], prompts[0], sizes)
    v = [costs[m] / costs[0] for m in sizes]  # v[m]: m draft nodes + the root, in one-token calls
    c = draft_ms / costs[0]
    # a tree never costs less than a smaller one: dips are noise
    v_model = np.maximum.accumulate(v).tolist()

    # 2. acceptance vectors where decoding goes: calibration prompts and the target's own
    # continuation
    vectors = {}
    for T in temperatures:
        seqs = [autoregressive_sampling(x, target, n_tokens, np.random.default_rng(i),
                                        temperature=T)
                for i, x in enumerate(calibration)]
        kinds = ("top",) if T == 0 else ("without_replacement", "iid")
        for kind in kinds:
            vectors[T, kind] = acceptance_vector(drafts[draft], target, seqs, prompt_tokens, 8,
                                                 np.random.default_rng(0), siblings=kind, repeats=4,
                                                 temperature=T)
    lines += ["",
              f"Acceptance vectors of {draft} for tiny-target (P(the k-th child is the one "
              f"accepted), k = 1..8), {calibration_prompts} calibration prompts x {n_tokens} "
              f"tokens of the target's own continuation:", "",
              "| T | children | a_1 .. a_8 | sum |", "|---|---|---|---|"]
    for (T, kind), a in vectors.items():
        lines.append(f"| {T:g} | {kind} | {' '.join(f'{x:.3f}' for x in a)} | {a.sum():.3f} |")
    print("\n".join(lines[-len(vectors) - 4:]), flush=True)
    if record:
        record_vectors(record, draft, vectors,
                       f"python -m bench.token_trees --record: {calibration_prompts} held-out "
                       f"calibration prompts followed by {n_tokens} tokens of the target's own "
                       f"continuation; greedy: top-k children at temperature 0, sampled: children "
                       f"drawn without replacement at temperature 1")

    # 3. tree size against cost, and the hardware-aware choice
    main_vector = {T: vectors[T, "top" if T == 0 else "without_replacement"] for T in temperatures}
    lines += ["",
              f"Tree size against verification cost (one-token target call {costs[0]:.2f} ms, one "
              f"{draft} call {draft_ms:.2f} ms: c = {c:.2f}; medians of 50 calls each, sizes in "
              f"turn); c(n, d) = the dynamic program's expected tokens per step at depth <= "
              f"{max_depth}; modelled speedup = c(n, d) / (v' + draft calls * c), v' = the running "
              f"maximum of v (a tree never costs less than a smaller one):", "",
              "| draft nodes | v = tree call / 1-token call | " + " | ".join(
                  f"T={T:g}: c(n, d) | T={T:g}: modelled speedup" for T in temperatures) + " |",
              "|---|---|" + "---|---|" * len(temperatures)]
    tables = {T: sequoia_table(main_vector[T], len(sizes), max_depth) for T in temperatures}
    for m in sizes:
        cells = []
        for T in temperatures:
            best, choice = tables[T]
            value = best[max_depth][m + 1]
            internal = len({tuple(ch[:-1]) for ch in build_choices(choice, m + 1, max_depth)})
            cells += [f"{value:.2f}", f"{value / (v_model[m] + c * internal):.2f}x"]
        lines.append(f"| {m} | {v[m]:.2f} | " + " | ".join(cells) + " |")
    chosen = {}
    for T in temperatures:
        n, d, speedup, choices = choose_size(main_vector[T], v_model, c, max_depth)
        chosen[T] = (n, d)
        lines.append(f"\nHardware-aware choice at T={T:g}: n = {n} ({n - 1} draft nodes), d = {d}, "
                     f"modelled {speedup:.2f}x, tree {choices}")
    print("\n".join(lines[-len(sizes) - len(temperatures) - 4:]), flush=True)

    # 4. equal budgets, measured
    lines += ["",
              f"Equal node budgets, {draft} drafting for tiny-target, {n_prompts} held-out prompts "
              f"x {seeds} seeds, {n_tokens} new tokens:", "",
              "| method | tree | nodes scored (mean) | T | expected accepted / step | measured "
              "accepted / step | tokens / target call (median) | verify call / 1-token call "
              "(median) | speedup vs autoregressive (median, IQR) |",
              "|---|---|---|---|---|---|---|---|---|"]
    loaded = {"target": target, "draft": drafts[draft]}
    for T in temperatures:
        a, a_iid = main_vector[T], vectors[T, "top" if T == 0 else "iid"]
        cases = []
        for B in budgets:
            cases.append((f"chain (speculative K={B})", "speculative", dict(K=B), loaded, "chain",
                          tree_value([[0] * i for i in range(1, B + 1)], a[:1]), B))
            if B in CONFIGS:
                e = CONFIGS[B]
                cases.append(("SpecInfer", "specinfer", dict(expansion=e), loaded,
                              f"<{','.join(map(str, e))}>",
                              tree_value(expansion_choices(e), a_iid), len(e)))
                cases.append((f"SpecInfer + {second_draft} merged", "specinfer",
                              dict(expansion=e, merge=True),
                              {**loaded, "draft2": drafts[second_draft]},
                              f"<{','.join(map(str, e))}> x 2", float("nan"), len(e)))
            choices, value = sequoia_tree(a, B + 1, max_depth)
            depth = max(map(len, choices))
            cases.append(("Sequoia", "sequoia", dict(nodes=B, depth=max_depth, acceptance=tuple(a)),
                          loaded, f"DP n={B + 1}, depth {depth}", value, depth))
        n, d = chosen[T]
        choices, value = sequoia_tree(a, n, d)
        cases.append(("Sequoia, hardware-aware", "sequoia",
                      dict(nodes=n - 1, depth=d, acceptance=tuple(a)), loaded,
                      f"n={n}, d={d}", value, max(map(len, choices), default=0)))
        for label, method, options, needs, tree, value, full_depth in cases:
            r = measure(method, prompts, needs, n_tokens, range(seeds), {"temperature": T},
                        **options)
            lines.append(row(label, tree, T, value - 1, r, full_depth))
            print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if out:
        write_page(out, text)


def measure(method, prompts, loaded, n_tokens, seeds, sampling, **options):
    """picospec_app.compare's protocol (autoregressive decoding and the method back to back,
    from cold caches, on every prompt and seed; medians), keeping the method's step records, which
    compare does not return."""
    rows = []
    for x in prompts:
        for seed in seeds:
            base = run_method("autoregressive", x, {"target": loaded["target"]}, n_tokens, seed,
                              sampling)
            rows.append((base, run_method(method, x, loaded, n_tokens, seed, sampling, **options)))
    speedup = [b["seconds"] / r["seconds"] for b, r in rows]
    call = np.median([b["target_s"] / b["target_calls"] for b, _ in rows])
    return {"tokens_per_call": float(np.median([r["tokens_per_call"] for _, r in rows])),
            "c": float(np.median([r["target_s"] / r["target_calls"] for _, r in rows]) / call),
            "speedup": float(np.median(speedup)),
            "speedup_iqr": np.percentile(speedup, [25, 75]).tolist(),
            "stats": [s for _, r in rows for s in r["stats"]]}


if __name__ == "__main__":
    from picospec_cli import Option

    command(main, [
        Option("draft", str, "tiny-draft", "the draft model"),
        Option("second_draft", str, "ngram",
               "the drafter merged in by the multi-draft SpecInfer rows"),
        Option("budgets", "ints", (4, 8),
               "draft nodes per tree, a set of rows each (SpecInfer rows for 4, 8, 16)",
               low=1, high=32),
        Option("temperatures", "floats", (0.0, 1.0), "temperatures, a set of rows each", low=0),
        Option("n_prompts", int, 8, "held-out prompts", low=1),
        Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
        Option("n_tokens", int, 64, "new tokens per run", low=1),
        Option("seeds", int, 2, "seeds per prompt", low=1),
        Option("calibration_prompts", int, 8, "prompts the acceptance vectors are measured on",
               low=1),
        Option("max_depth", int, 8,
               "deepest tree the dynamic program considers (2 or more: the table's largest "
               "trees do not fit in one level)", low=2, high=32),
        Option("out", "out", None, "also write the tables to this file"),
        Option("record", "dir", None,
               "store the draft's acceptance vectors in DIR/sequoia.json (DIR: the "
               "target's folder; main.py's Sequoia reads them)")])
