"""EAGLE-1, EAGLE-2 and EAGLE-3 beside Medusa and the draft-model methods on the built-in target.

    # the full table (8 held-out prompts x 2 seeds)
    python -m bench.eagle
    # also store the EAGLE rows in the head's eagle.json (and the EAGLE-3 rows in eagle3.json of
    # the eagle3/ folder beside it: the target's heads, measured together)
    python -m bench.eagle --record gpt2/assets/tiny-target/eagle

Every row is picospec_app.compare: autoregressive decoding and the method back to back on the
same held-out prompts and seeds, each from a cold cache (the EAGLE head's too); medians over prompts
x seeds. Columns: tokens per target call E (new tokens / target forwards, prefill included),
acceptance (accepted / drafted, drafted = the depth of each step's tree or the chain's length, the
same definition for every method), the cost c of one of the method's target calls over one
autoregressive call, the drafting of a step in one-token target calls (the draft's or the head's
calls), the wall-clock speedup, and the cost model's limit (picospec_app.run.limit: the cost whose
removal would gain most, and the speedup without it). Shapes: none; this file only times things.
"""
import json
import sys
from pathlib import Path

from bench.harness import check_room
from bench.panels import limit_cell
from gpt2.load import load_draft
from picospec_app.load import check_target, load_eagle, load_heads
from picospec_app.compare import compare
from tools.families import command
from tools.page import header, measured_command, write_page, write_text

HEADER = ["| method | setting | T | tokens/target call E (median) | acceptance | c: target call / "
          "1-token call (median) | drafting per step (median) "
          "| speedup vs autoregressive (median, IQR) | limit |",
          "|---|---|---|---|---|---|---|---|---|"]


def rows(temperature):
    """(method, setting shown, options, need) at one temperature: draft-model methods, Medusa,
    EAGLE-1, EAGLE-2, EAGLE-3."""
    out = [("speculative", "tiny-draft, K 4", {"K": 4}, "draft")]
    if temperature == 0:
        out.append(("greedy", "tiny-draft, K 4", {"K": 4}, "draft"))
    out += [("medusa", "shipped 2 heads, sparse tree (7 nodes)", {"tree": "sparse"}, "medusa"),
            ("eagle", "chain of 5", {"tree": "chain", "depth": 5}, "eagle"),
            ("eagle", "sparse tree, 10 nodes", {"tree": "sparse", "nodes": 10}, "eagle")]
    if temperature > 0:
        out.append(("eagle", "sparse tree, 10 nodes, top-k candidates (one-hot)",
                    {"tree": "sparse", "nodes": 10, "candidates": "topk"}, "eagle"))
    out += [("eagle2", "depth 5, top-k 4, 8 nodes",
             {"depth": 5, "tree_top_k": 4, "total_tokens": 8}, "eagle"),
            ("eagle2", "depth 5, top-k 4, 16 nodes (default)", {}, "eagle"),
            ("eagle3", "depth 5, top-k 4, 8 nodes",
             {"depth": 5, "tree_top_k": 4, "total_tokens": 8}, "eagle3"),
            ("eagle3", "depth 5, top-k 4, 16 nodes (default)", {}, "eagle3")]
    return out


def main(target="tiny-target", heads=None, temperatures=(0.0, 1.0), n_prompts=8, prompt_tokens=64,
         n_tokens=64, seeds=2, out=None, record=None):
    """The EAGLE table: every row against autoregressive decoding, side by side."""
    from picospec_app.machine import thread_policy
    from gpt2.train.corpus import heldout_prompts
    from gpt2.load import load_model
    from picospec_app.settings import engine_choices

    check_target(target)
    if record and not (Path(record) / "eagle.json").is_file():
        raise ValueError(f"--record {record} holds no eagle.json: give the folder of the EAGLE "
                         f"head measured")
    from picospec_app.settings import read_settings

    model, encoder = load_model(target, offline=read_settings().offline, **engine_choices())
    check_room(model.n_ctx, prompt_tokens, n_tokens)
    needs = {"draft": {"draft": load_draft("tiny-draft", model, target)},
             "medusa": {"heads": load_heads(target, "medusa", None, model)},
             "eagle": {"heads": load_eagle(target, heads, model)},
             "eagle3": {"heads": load_eagle(target, None, model, kind="eagle3")}}
    measured_head = Path(needs["eagle"]["heads"].folder).resolve()
    if record and Path(record).resolve() != measured_head:  # one head's rows on another's card
        raise ValueError(f"--record {record} is not the EAGLE head measured ({measured_head}): "
                         f"record into the same folder as --heads (default: the target's eagle/)")
    top = header(thread_policy(model.n_params))
    print(top, flush=True)
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    lines = [f"`{measured_command()}` ({top})", ""] + HEADER
    measured = []
    for T in temperatures:
        for method, setting, options, need in rows(T):
            r = compare(method, prompts, {"target": model, **needs[need]}, n_tokens, range(seeds),
                        {"temperature": T}, **options)
            lines.append(f"| {method} | {setting} | {T:g} | {r['tokens_per_call']:.2f} | "
                         f"{r['acceptance']:.2f} | {r['c']:.2f} | {r['drafting']:.2f} | "
                         f"{r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-"
                         f"{r['speedup_iqr'][1]:.2f}) | {limit_cell(r)} |")
            print(lines[-1], flush=True)
            if need in ("eagle", "eagle3"):
                measured.append({"method": method, "setting": setting, "temperature": T,
                                 "tokens_per_call": round(r["tokens_per_call"], 3),
                                 "acceptance": round(r["acceptance"], 3),
                                 "drafting": round(r["drafting"], 3),
                                 "speedup": round(r["speedup"], 3)})
    text = "\n".join(lines)
    print(text)
    if out:
        write_page(out, text, top)
    if record:  # the heads' card entries read these (gpt2/train/card.py): EAGLE's, EAGLE-3's
        paths = [Path(record) / "eagle.json"]
        eagle3 = Path(needs["eagle3"]["heads"].folder).resolve()
        if eagle3.parent == Path(record).resolve().parent:  # beside it: one backbone's heads
            paths.append(eagle3 / "eagle3.json")
        else:
            print(f"the EAGLE-3 rows are not recorded: the EAGLE-3 head measured ({eagle3}) is not "
                  f"beside {record}", file=sys.stderr)
        for path in paths:
            config = json.loads(path.read_text())
            config["measured"] = {"command": lines[0], "rows": measured}
            write_text(path, json.dumps(config, indent=1))


if __name__ == "__main__":
    from picospec_cli import Option

    command(main, [
        Option("target", str, "tiny-target",
               "the target model (its eagle/, eagle3/ and medusa/ heads are used)"),
        Option("heads", "dir", None, "folder of the EAGLE head (default: the target's eagle/)"),
        Option("temperatures", "floats", (0.0, 1.0), "temperatures, a block of rows each", low=0),
        Option("n_prompts", int, 8, "held-out prompts", low=1),
        Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
        Option("n_tokens", int, 64, "new tokens per run", low=1),
        Option("seeds", int, 2, "seeds per prompt", low=1),
        Option("out", "out", None, "also write the table to this file"),
        Option("record", "dir", None,
               "store the EAGLE rows in DIR/eagle.json, and the EAGLE-3 rows in the EAGLE-3 "
               "head's eagle3.json where that head sits beside DIR (the heads' card entries read "
               "them)")])
