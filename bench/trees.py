"""Benchmarks of the methods that need no draft model: Medusa, Blockwise, prompt lookup, REST,
lookahead.

    # sparse tree, heads' record
    python -m bench.trees --build gpt2/assets/tiny-target/medusa --budgets 7
    python -m bench.trees --medusa gpt2/assets/tiny-target/medusa,runs/medusa4 --blockwise ... \
        --drafting

Every row is picospec_app.compare: autoregressive decoding and the method back to back on the
same held-out prompts and seeds, each from a cold cache; medians over prompts x seeds. Shapes: none;
this file only times things.
"""
import json
from pathlib import Path

from bench.harness import check_room
from picospec_app.load import load_heads, rest_datastore
from picospec_app.compare import compare, copy_prompts
from picospec.tree import cartesian_choices, chain_choices, sparse_tree
from picospec_cli import replace_file
from tools.families import command
from tools.page import header, write_page

HEADER = ["| tree / setting | nodes | T | posterior | tokens/target call (median) | tree call / "
          "1-token call (median) "
          "| speedup vs autoregressive (median, IQR) |", "|---|---|---|---|---|---|---|"]


def heads_record(folder):
    """FOLDER/heads.json with its calibration record (accuracy.rank_share, a table per head); one
    line naming the file when it is not JSON or has no such record."""
    from gpt2.weights import CorruptFile, read_json

    path, fix = Path(folder) / "heads.json", ("re-train the heads with `python -m "
                                              "gpt2.train.heads` (see README)")
    record = read_json(path, fix=fix)
    share = record.get("accuracy", {}).get("rank_share") if isinstance(record, dict) and isinstance(
        record.get("accuracy"), dict) else None
    if not (isinstance(share, list) and len(share) >= 2
            and all(isinstance(r, list) and r for r in share)):
        raise CorruptFile(path,
                          "has no accuracy.rank_share (the calibration record a sparse tree is "
                          "built from)", fix)
    return record


def build_tree(folder, budget=7):
    """Write FOLDER/medusa_choices.json: Medusa's sparse tree for `budget` nodes from the heads'
    calibration record."""
    folder = Path(folder)
    record = heads_record(folder)
    accuracy = record["accuracy"]["rank_share"][1:]  # row 0 is the LM head
    choices, expected = sparse_tree(accuracy, budget)
    text = json.dumps({"medusa_choices": choices, "budget": budget,
                       "expected_tokens_per_step": expected,
                       "from": f"heads.json accuracy.rank_share, measured on "
                               f"{record['accuracy'].get('on', 'held-out text')}"}) + "\n"
    replace_file(folder / "medusa_choices.json", [text.encode()])
    print(f"wrote {folder / 'medusa_choices.json'}: a sparse tree of {len(choices)} nodes, "
          f"{expected:.3f} tokens a step expected")
    return choices, expected


def accuracy_table(folders):
    lines = ["| heads | head | top-1 | top-5 | measured on |", "|---|---|---|---|---|"]
    for label, folder in folders:
        record = heads_record(folder)
        for key in ("accuracy", "accuracy_text"):
            acc = record.get(key)
            for k, (t1, t5) in enumerate(zip(acc["top1"], acc["top5"]) if acc else []):
                lines.append(f"| {label} | {'LM head' if k == 0 else f'head {k}'} | {t1:.3f} | "
                             f"{t5:.3f} | {acc.get('on', 'held-out text')} |")
    return lines


def row(label, nodes, T, posterior, r):
    return (f"| {label} | {nodes} | {T:g} | {posterior} | {r['tokens_per_call']:.2f} | "
            f"{r['c']:.2f} "
            f"| {r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")


def medusa_rows(label, model, heads, prompts, n_tokens, seeds, sparse, settings=None):
    n_heads = heads["n_heads"]
    trees = {"chain": chain_choices(n_heads), "cartesian 2x2": cartesian_choices(2, 2),
             "cartesian 3x3": cartesian_choices(3, 3) if n_heads >= 3 else cartesian_choices(2, 3)}
    trees.update(sparse)
    lines = []
    for name, choices in trees.items():
        for T, posterior in settings or ((0, "greedy"), (0.7, "typical"), (0.7, "lossless")):
            r = compare("medusa", prompts, {"target": model, "heads": heads}, n_tokens, seeds,
                        {"temperature": T}, tree=choices, topk=10, posterior=posterior)
            lines.append(row(f"{label}: {name}", len(choices), T, posterior, r))
            print(lines[-1], flush=True)
    return lines


def main(medusa=None, blockwise=None, drafting=False, build=None, budgets=(7, 15), n_prompts=8,
         prompt_tokens=64, n_tokens=64, seeds=2, greedy_only=False, pld_sweep=None, out=None):
    """Tables for --medusa DIRS (--greedy_only: temperature 0 rows only), --blockwise DIRS,
    --drafting, and --pld_sweep 3,5,7,10 (prompt lookup's num_pred_tokens against the cost of a
    wider verification call)."""
    from gpt2.addons import NAMES, folder_kind
    from gpt2.weights import CorruptFile

    for flag, kind, folders in (("--medusa", "medusa", medusa or []),
                                ("--blockwise", "blockwise", blockwise or []),
                                ("--build", "medusa", [build] if build else [])):
        for folder in folders:
            if not (Path(folder) / "heads.json").is_file():
                raise ValueError(f"{folder} holds no heads.json: give folders written by `python "
                                 f"-m gpt2.train.heads`")
            try:  # before any work, and named by this command's option
                held = folder_kind(folder)
            except CorruptFile:  # a damaged heads.json: named by its reader, below
                held = kind
            if held != kind:
                also = {"medusa": "--medusa", "blockwise": "--blockwise"}.get(held)
                raise ValueError(f"{flag} {folder} holds {NAMES[held]}, not {NAMES[kind]}: give "
                                 f"a folder of {NAMES[kind]}"
                                 + (f", or this one to {also}" if also and flag != "--build"
                                    else ""))
    if build and (medusa or blockwise or drafting or pld_sweep or out):
        raise ValueError("--build DIR only writes DIR/medusa_choices.json and measures nothing: "
                         "run it alone, then the tables (--medusa, --blockwise, --drafting, "
                         "--pld_sweep, --out) in a second command")
    if not (medusa or blockwise or drafting or build or pld_sweep):
        raise ValueError("nothing to measure: pass --medusa DIRS, --blockwise DIRS, --drafting, "
                         "--pld_sweep N,N or --build DIR (see --help)")
    from gpt2.train.corpus import heldout_prompts
    from gpt2.load import load_model
    from picospec_app.settings import engine_choices

    if build:
        build_tree(build, budgets[0])
        return
    from picospec_app.machine import thread_policy

    target, encoder = load_model("tiny-target", **engine_choices())
    check_room(target.n_ctx, prompt_tokens, n_tokens, encoder if drafting or pld_sweep else None)
    top = header(thread_policy(target.n_params))
    print(top, flush=True)
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    seeds = range(seeds)
    lines = []
    if medusa:
        folders = [Path(f) for f in medusa]
        lines += ["", "Medusa heads, per-head accuracy:", ""]
        lines += accuracy_table([(f.name, f) for f in folders])
        lines += ["", "Medusa decoding, built-in target, held-out prompts:", ""] + HEADER
        for folder in folders:
            model = load_model(str(folder))[0] if (folder
                                                   / "model.safetensors").exists() else target
            heads = load_heads("tiny-target", "medusa", folder, model)
            record = heads_record(folder)
            sparse = {f"sparse {b}": sparse_tree(record["accuracy"]["rank_share"][1:], b)[0]
                      for b in budgets}
            lines += medusa_rows(folder.name, model, heads, prompts, n_tokens, seeds, sparse,
                                 ((0, "greedy"),) if greedy_only else None)
    if blockwise:
        lines += ["", "Blockwise parallel decoding (greedy), built-in target, held-out prompts:",
                  "",
                  "| heads | k | variant | tokens/target call (median) | call / 1-token call "
                  "(median) "
                  "| speedup vs autoregressive (median, IQR) |", "|---|---|---|---|---|---|"]
        for folder in blockwise:
            heads = load_heads("tiny-target", "blockwise", folder, target)
            for k in range(2, heads["n_heads"] + 2):
                for merged in (True, False):
                    r = compare("blockwise", prompts, {"target": target, "heads": heads}, n_tokens,
                                seeds, {"temperature": 0}, K=k, merged=merged)
                    lines.append(f"| {Path(folder).name} | {k} | "
                                 f"{'merged' if merged else 'predict + verify'} "
                                 f"| {r['tokens_per_call']:.2f} | {r['c']:.2f} "
                                 f"| {r['speedup']:.2f}x "
                                 f"({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")
                    print(lines[-1], flush=True)
    if drafting:
        lines += drafting_rows(target, encoder, prompts, n_tokens, seeds)
    if pld_sweep:
        lines += prompt_lookup_sweep(target, encoder, prompts, n_tokens, seeds, pld_sweep)
    text = "\n".join(lines)
    print(text)
    if out:
        write_page(out, text, top)


def drafting_rows(target, encoder, prompts, n_tokens, seeds):
    """Prompt lookup, REST and lookahead side by side on copy-heavy and ordinary prompts,
    temperature 0."""
    store = rest_datastore(None, "tiny-target", encoder)
    methods = {"prompt lookup (3, 10)": "prompt_lookup", "REST (7 nodes)": "rest",
               "lookahead (W 4, N 3, G 4)": "lookahead"}
    lines = ["", "Model-free drafting, built-in target, temperature 0:", "",
             "| method | prompts | tokens/target call (median) | acceptance | speedup vs "
             "autoregressive (median, IQR) |",
             "|---|---|---|---|---|"]
    for label, xs in (("copy-heavy", copy_prompts(encoder, prompts)), ("ordinary", prompts)):
        for name, method in methods.items():
            r = compare(method, xs, {"target": target, "datastore": store}, n_tokens, seeds,
                        {"temperature": 0})
            lines.append(f"| {name} | {label} | {r['tokens_per_call']:.2f} | {r['acceptance']:.2f} "
                         f"| {r['speedup']:.2f}x "
                         f"({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")
            print(lines[-1], flush=True)
    return lines


def prompt_lookup_sweep(target, encoder, prompts, n_tokens, seeds, sizes):
    """Prompt lookup with num_pred_tokens in `sizes`: longer drafts accept more per call, and cost
    more per call."""
    lines = ["",
             "Prompt lookup, num_pred_tokens against the cost of its call (max_ngram_size 3), "
             "temperature 0:", "",
             "| prompts | num_pred_tokens | tokens/target call (median) | verify call / 1-token "
             "call (median) | speedup vs autoregressive (median, IQR) |", "|---|---|---|---|---|"]
    for label, xs in (("copy-heavy", copy_prompts(encoder, prompts)), ("ordinary", prompts)):
        for n in sizes:
            r = compare("prompt_lookup", xs, {"target": target}, n_tokens, seeds,
                        {"temperature": 0}, num_pred_tokens=n)
            lines.append(f"| {label} | {n} | {r['tokens_per_call']:.2f} | {r['c']:.2f} "
                         f"| {r['speedup']:.2f}x "
                         f"({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")
            print(lines[-1], flush=True)
    return lines


if __name__ == "__main__":
    from picospec_cli import Option

    command(main, [
        Option("medusa", "strs", None, "Medusa heads folders, compared side by side"),
        Option("blockwise", "strs", None, "Blockwise heads folders"),
        Option("drafting", bool, False, "prompt lookup, REST and lookahead side by side"),
        Option("build", "dir", None,
               "write DIR/medusa_choices.json (the sparse tree of --budgets' first value) and "
               "stop"),
        Option("budgets", "ints", (7, 15), "sparse tree sizes (nodes)", low=1, high=256),
        Option("n_prompts", int, 8, "held-out prompts", low=1),
        Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
        Option("n_tokens", int, 64, "new tokens per run", low=1),
        Option("seeds", int, 2, "seeds per prompt", low=1),
        Option("greedy_only", bool, False, "Medusa rows at temperature 0 only"),
        Option("pld_sweep", "ints", None, "prompt lookup num_pred_tokens values to sweep", low=1,
               high=64),
        Option("out", "out", None, "also write the tables to this file")],
        alone=lambda values: values["build"] is not None)  # --build measures nothing
