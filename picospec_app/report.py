"""What a run of the picospec command reports: one JSON object, the same shape for one prompt and
for --batch (docs/architecture.md, "The --json object"), and the text printed from it.
"""
import numpy as np

from gpt2.fast.policy import REQUESTED
from picospec.methods import law
from picospec_app.machine import blas_line
from picospec_app.run import call_costs, limit_line, median_run, speedup_of, summary

COLORS = {"draft": "\033[32m", "resample": "\033[33m", "bonus": "\033[34m"}  # green, yellow, blue
LEGEND = ("green: draft token accepted, yellow: target's correction, blue: bonus token from the "
          "target")


def result(plan, xs, rounds, encoder, threads, options):
    """The runs of every decoder of plan.order, the options they ran with -> the --json object."""
    runs = [decoder_run(plan, m, xs, r, encoder) for m, r in zip(plan.order, rounds)]
    out = {"method": plan.method.name, "law": law(plan.method, plan.options,
                                                  plan.sampling["temperature"]),
           "target": plan.target, "draft": plan.draft, "seed": plan.seed, **plan.sampling,
           "options": options,
           "prompts": plan.prompts, "prompt_ids": [[int(t) for t in x] for x in xs],
           "groups": rounds[-1][0].get("groups", [1]), "runs": runs, "speedup": None,
           "speedup_range": None, "rounds": len(rounds[-1]),
           "same_output": None, "cost_model": None}  # one decoder: nothing compared
    if len(runs) == 2:
        speedup = speedup_of(*rounds)  # the median of the rounds' ratios, and their range
        out.update(speedup=speedup["median"],  # one round has no range
                   speedup_range=speedup["range"] if speedup["rounds"] > 1 else None,
                   same_output=[a == b for a, b in zip(*(r["output_ids"] for r in runs))])
        if plan.batch is None:
            costs = call_costs(*rounds)
            out["cost_model"] = {**costs, "limit": limit_line(costs)}
    threads = asked_by(plan, threads)
    return {**out, "threads": threads, "blas": blas_line(threads)}


def asked_by(plan, threads):
    # a count given, named by who gave it: --threads, else PICOSPEC_THREADS (engine_choices' order)
    if threads["why"] != REQUESTED:
        return threads
    who = (f"--threads {plan.threads}" if plan.threads is not None
           else f"PICOSPEC_THREADS={plan.engine['threads']} from the environment")
    return {**threads, "why": who}


def decoder_run(plan, method, xs, rounds, encoder):
    """One decoder's rounds -> its texts and ids per row, median times, calls and acceptance."""
    first = median_run(rounds) if plan.batch is None else rounds[0]
    outputs = first["outputs"] if plan.batch is not None else [first["output"]]
    ids = [[int(t) for t in o[len(x):]] for o, x in zip(outputs, xs)]
    seconds = float(np.median([r["seconds"] for r in rounds]))
    n_new, stats = sum(map(len, ids)), first.get("stats")
    counts = summary(stats) if plan.batch is None else {"acceptance": None,
                                                         "accepted_per_node": None}
    by_row = first.get("tokens_per_target_call", [n_new / first["target_calls"]])
    # --batch: a row's calls are those it took part in (a batched call scores every active row),
    # so autoregressive decoding makes 1 token a call however many rows a call scores
    row_calls = first["target_calls"] if plan.batch is None else sum(first["target_calls_by_row"])
    return {"method": method, "texts": [encoder.decode(i) for i in ids], "output_ids": ids,
            "origins": [[o for s in stats for o in s["origins"]]] if plan.batch is None else None,
            "time_s": seconds, "times_s": [r["seconds"] for r in rounds], "rounds": len(rounds),
            "tokens_per_s": n_new / seconds, "target_calls": first["target_calls"],
            "row_target_calls": row_calls, "draft_calls": first.get("draft_calls"),
            "tokens_per_target_call": n_new / row_calls, "tokens_per_target_call_by_row": by_row,
            "acceptance_rate": counts["acceptance"],
            "accepted_per_node": counts["accepted_per_node"]}


def show(out, plan, encoder):
    """The text of a run: each decoder's text and figures, the speedup and why, the BLAS line."""
    if plan.batch is None:
        show_prompt(out, plan, encoder)
    else:
        show_batch(out, plan)
    print(f"{out['blas']}; timings on a busy machine vary")
    if plan.batch is None and len(out["runs"]) == 2 and plan.color:
        print(LEGEND)


def colored(encoder, ids, origins, color):
    """The text of ids, each character in the color of the token that completes it: a character
    whose UTF-8 bytes span several tokens (an emoji, a CJK character) is shown whole, not as one
    replacement character per token."""
    text = encoder.decode(ids)
    if not color:
        return text
    out, done, start, base = [], 0, 0, 0  # ids[start:] decode to text[base:]; done: chars shown
    for i, origin in enumerate(origins):
        piece = encoder.decode(ids[start:i + 1])
        n = next((j for j, (a, b) in enumerate(zip(piece, text[base:])) if a != b),
                 min(len(piece), len(text) - base))  # a partial character is no match
        if base + n > done:
            out.append(COLORS.get(origin, "") + text[done:base + n]
                       + ("\033[0m" if origin in COLORS else ""))
            done = base + n
        if n == len(piece) and not piece.endswith("\ufffd"):  # a clean cut: start afresh
            start, base = i + 1, base + n
    return "".join(out) + text[done:]


def show_prompt(out, plan, encoder):
    for run in out["runs"]:
        print(f"── {run['method']} " + "─" * 40)
        print(out["prompts"][0] + colored(encoder, run["output_ids"][0], run["origins"][0],
                                          plan.color))
        rounds = f"median of {run['rounds']} runs" if run["rounds"] > 1 else "1 run"
        line = (f"{count(len(run['output_ids'][0]), 'token')} in {run['time_s']:.3f} s ({rounds}, "
                f"{run['tokens_per_s']:.1f} tokens/s), {count(run['target_calls'], 'target call')} "
                f"({run['tokens_per_target_call']:.2f} tokens per target call)")
        if run["draft_calls"]:  # none where the drafts come from no model (a lookup, heads)
            line += f", {count(run['draft_calls'], 'draft call')}"
        if run["acceptance_rate"] is not None:
            line += f", acceptance {run['acceptance_rate']:.0%}"
        print(line + "\n")
    if len(out["runs"]) == 2:
        rounds = "1 round"
        if out["speedup_range"] is not None:
            low, high = out["speedup_range"]
            # the rounds' own ratios: their median need not be the ratio of the median times
            rounds = (f"median of {out['rounds']} interleaved rounds' ratios, range "
                      f"{low:.2f}-{high:.2f}x")
        print(f"speedup {out['speedup']:.2f}x over autoregressive ({rounds}); texts "
              f"{'identical' if out['same_output'][0] else 'different'}{texts_note(plan)}")
        base, mine = out["runs"]
        if (mine["acceptance_rate"] is None and not mine["draft_calls"]
                and mine["target_calls"] == base["target_calls"]):  # nothing drafted
            print(f"the same work: {count(base['target_calls'], 'target call')} each and no "
                  f"draft, so the speedup is the clock's noise (ask for more --n_tokens)")
        print(cost_line(out["cost_model"], out["speedup"]))
        print(out["cost_model"]["limit"])


def show_batch(out, plan):
    run = out["runs"][-1]
    for row, (name, prompt, text, tpc) in enumerate(zip(plan.names, out["prompts"], run["texts"],
                                                        run["tokens_per_target_call_by_row"]), 1):
        print(f"── row {row} ({name.removeprefix('the prompt on ')}): {tpc:.2f} tokens per target "
              f"call " + "─" * 10)
        print(prompt + text + "\n")
    groups = out["groups"]
    in_groups = f" in {len(groups)} groups of up to {count(groups[0], 'row')}" * (len(groups) > 1)
    rounds = f" (median of {out['rounds']} rounds)" * (out["rounds"] > 1)
    print(f"{out['method']}: {count(len(out['prompts']), 'prompt')} x "
          f"{count(plan.n_tokens, 'token')}{in_groups} in {run['time_s']:.3f} s{rounds}, "
          f"{count(run['target_calls'], 'batched target call')}")
    if len(out["runs"]) == 2:
        base, same = out["runs"][0], sum(out["same_output"])
        print(f"autoregressive, batched the same way: {base['time_s']:.3f} s{rounds}, "
              f"{count(base['target_calls'], 'batched target call')}")
        spread = ""  # the median of the rounds' ratios, not the ratio of the median times
        if out["speedup_range"] is not None:
            low, high = out["speedup_range"]
            spread = (f" (median of {out['rounds']} interleaved rounds' ratios, range "
                      f"{low:.2f}-{high:.2f}x)")
        print(f"speedup {out['speedup']:.2f}x over batched autoregressive{spread}; "
              f"{same}/{len(out['prompts'])} texts identical{texts_note(plan)}")


def count(n, thing):
    """count(1, "run") -> "1 run", count(3, "run") -> "3 runs"."""
    return f"{n} {thing}{'s' * (n != 1)}"


def texts_note(plan):
    if plan.sampling["temperature"] == 0:
        return " (temperature 0: they must be identical)"
    return " (sampling: texts may differ)"


def cost_line(costs, measured):
    """E, c, each drafter's c_d, the rest of a step and of an autoregressive token, and the
    speedup they give beside the measured one (the run's own costs: they account for it, up to
    the medians), in equation_digits' decimals."""
    drafts, n = costs["drafts"], equation_digits(costs)
    # each drafter's symbols: k c_d for --draft, k_2 c_d2 for --draft2 (cascade's smaller one)
    symbols = {name: ("k", "c_d") if name == "draft" else ("k_2", "c_d2") for name in drafts}
    calls = "".join(f", a {name} call {symbols[name][1]} = {d['c_d']:.{n + 1}f} "
                    f"({d['per_target_call']:.{n}f} per target call)" for name, d in drafts.items())
    sums = "".join(f" + {d['per_target_call']:.{n}f} x {d['c_d']:.{n + 1}f}"
                   for d in drafts.values())
    k_c_d = "".join(f" + {k} {c}" for k, c in symbols.values())
    rest_base = shown(costs["rest_base"], n)  # 1 + r_0 printed as 1 + the r_0 printed
    return (f"why: {costs['E']:.2f} tokens per target call; a target call costs c = "
            f"{costs['c']:.{n}f} one-token calls{calls}; the rest of a step r = "
            f"{costs['rest']:.{n}f} (sampling, acceptance, Python), of an autoregressive token "
            f"r_0 = {rest_base:.{n}f}; cost model E (1 + r_0) / (c{k_c_d} + r) = "
            f"{costs['E']:.{n}f} x {1 + rest_base:.{n}f} / ({costs['c']:.{n}f}{sums} + "
            f"{costs['rest']:.{n}f}) = {costs['predicted']:.2f}x from this run's own costs, "
            f"{measured:.2f}x measured")


def shown(value, digits):
    # a figure as printed: shown(0.0349, 2) -> 0.03
    return float(f"{value:.{digits}f}")


def equation_digits(costs, most=8):
    """The fewest decimals, from 2, at which the printed figures give the prediction printed."""
    # to its two decimals, no tie a reader may round either way, and within 0.005 (c_d one
    # decimal more). Example: E = 1, r_0 = 0.0349, c = 0.5549, r = 0.0449 predict 1.73, but
    # 1.00 x 1.03 / (0.55 + 0.04) = 1.75 and 1.000 x 1.035 / (0.555 + 0.045) = 1.725: 4 decimals
    predicted = f"{costs['predicted']:.2f}"
    for n in range(2, most):
        drafting = sum(shown(d["per_target_call"], n) * shown(d["c_d"], n + 1)
                       for d in costs["drafts"].values())
        step = shown(costs["c"], n) + drafting + shown(costs["rest"], n)
        tokens = shown(costs["E"], n) * (1 + shown(costs["rest_base"], n))
        if step > 0 and f"{tokens / step - 1e-9:.2f}" == f"{tokens / step + 1e-9:.2f}" \
                == predicted and abs(tokens / step - costs["predicted"]) <= 0.005:
            return n
    return most
