"""The paper's Figure 1 (Chen et al. 2023, arXiv:2302.01318; speedup against K) on each OpenBLAS
kernel family this CPU runs, beside the cost model (picospec.theory.cost_model_speedup), on the
built-in pair loaded as main.py loads it:

    c(M) = t(M) / t(1)   the target's M-token call after a prompt's cache, in one-token calls, each
                         timed where decoding makes it: t(1) among one-token calls back to back (as
                         autoregressive decoding makes them), t(M) right after a draft call (as a
                         speculative step makes it); beside it, every M in turn (t(1) right after
                         the largest call and a draft call: the caches hold other weights)
    c_d                  the draft's one-token call, in one-token target calls
    E                    tokens per target call of speculative sampling at temperature 0
    r, r_0               the rest of a step, and of an autoregressive token, outside the calls

The cost model from the step's own costs, as the runs spent them, is E (1 + r_0) / (c + K c_d + r);
beside it, what the c(M) curve alone predicts, E / (c(K + 1) + K c_d).

    python -m bench.figure1                    # every family, each in its own process: tables
    python -m bench.figure1 --json_line        # the same as one JSON line (the first notebook)
    python -m bench.figure1 --families Haswell --Ks 1,2,4 --out docs/results/figure1.md

The family is fixed when the BLAS loads, so each runs in a child process with OPENBLAS_CORETYPE set
(as tools/families.py does). PICOSPEC_QUICK on: fewer K, prompts, tokens and rounds. Shapes: none.
"""
import json
import subprocess
import sys
import time
from pathlib import Path

from picospec_cli import Option, env_flag
from tools.families import FAMILIES, families_here, family_env
from tools.page import header, page_of_output

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ("def read_lines(path):\n",  # main.py's default prompt
           "class Stack:\n    def __init__(self):\n        ")
AHEAD = "    with open(path) as f:\n        return [line.rstrip() for line in f]\n"  # M-token calls


def defaults(quick=None):
    """The run's size, full or quick (PICOSPEC_QUICK) -> {"Ks", "n_prompts", "n_tokens",
    "repeats", "rounds"}."""
    quick = env_flag("PICOSPEC_QUICK", False) if quick is None else quick
    if quick:
        return {"Ks": [1, 2, 4], "n_prompts": 1, "n_tokens": 16, "repeats": 1, "rounds": 9}
    return {"Ks": list(range(1, 9)), "n_prompts": 2, "n_tokens": 48, "repeats": 7, "rounds": 31}


def call_costs(target, draft, x, ahead, M_max, rounds):
    """c(M), M = 1..M_max, and c_d after a cache of prompt x, each call's fastest of `rounds` rounds
    (load only adds time) over the fastest one-token target call, the calls in decoding's order
    (the module's docstring) -> ({M: c}, c_d, t(1) ms, {M: c} with every M in turn)."""
    target(x)
    draft(x)

    def timed(model, M):
        start = time.perf_counter()
        model.logits(x + ahead[:M], M)
        return time.perf_counter() - start

    times, draft_times = {M: [] for M in range(1, M_max + 1)}, []
    turn = {M: [] for M in times}
    for _ in range(rounds):
        timed(target, 1)  # autoregressive decoding: one-token calls back to back
        times[1].append(timed(target, 1))
        for M in range(2, M_max + 1):  # a speculative step: the drafts, then the verification
            draft_times.append(timed(draft, 1))
            times[M].append(timed(target, M))
        for M in turn:  # every M in turn, then a draft call
            turn[M].append(timed(target, M))
        timed(draft, 1)
    one = min(times[1])
    return ({M: min(t) / one for M, t in times.items()}, min(draft_times) / one, one * 1e3,
            {M: min(t) / min(turn[1]) for M, t in turn.items()})


def measure(Ks, n_prompts, n_tokens, repeats, rounds):
    """In this process (its BLAS as loaded): c(M), c_d and each K's run -> a JSON-ready dict."""
    from gpt2.fast.policy import blas_kernels
    from gpt2.load import load_model
    from picospec.theory import cost_model_speedup
    from gpt2.load import load_draft
    from picospec_app.machine import blas_line, policy
    from picospec_app.compare import compare
    from picospec_app.settings import engine_choices, read_settings

    offline = read_settings().offline  # PICOSPEC_OFFLINE, as main.py reads it
    target, encoder = load_model("tiny-target", offline=offline, **engine_choices())
    draft = load_draft("tiny-draft", target, "tiny-target", offline=offline)
    prompts = [encoder.encode(p) for p in PROMPTS[:n_prompts]]
    ahead = encoder.encode(AHEAD)
    M_max = max(8, max(Ks) + 1)
    assert len(ahead) >= M_max, "AHEAD is too short for the largest M"
    c, c_d, t1, c_turn = call_costs(target, draft, prompts[0], ahead, M_max, rounds)
    runs = []
    for K in Ks:
        r = compare("speculative", prompts, {"target": target, "draft": draft}, n_tokens,
                    range(1), {"temperature": 0}, repeats=repeats, K=K)
        runs.append({"K": K, "E": r["tokens_per_call"], "acceptance": r["acceptance"],
                     "speedup": r["speedup"], "speedup_iqr": r["speedup_iqr"],
                     "predicted": r["predicted"], "c_run": r["c"], "drafting_run": r["drafting"],
                     "rest_run": r["rest"], "rest_base_run": r["rest_base"],
                     "predicted_curve": cost_model_speedup(r["tokens_per_call"], c[K + 1],
                                                           [(K, c_d)])})
    return {"kernels": blas_kernels()[1], "blas": blas_line(policy(target)),
            "n_params": target.n_params, "n_prompts": n_prompts, "n_tokens": n_tokens,
            "c": {str(M): v for M, v in c.items()}, "c_d": c_d, "t1_ms": t1,
            "c_in_turn": {str(M): v for M, v in c_turn.items()}, "runs": runs}


def run(families, size):
    """Each family in a child process with OPENBLAS_CORETYPE set -> {family: measure's dict}; the
    families this CPU cannot run are left out."""
    out, here = {}, families_here()
    for family in (f for f in families if f in here):
        args = [sys.executable, "-m", "bench.figure1", "--child",
                "--Ks", ",".join(map(str, size["Ks"])), "--n_prompts", str(size["n_prompts"]),
                "--n_tokens", str(size["n_tokens"]), "--repeats", str(size["repeats"]),
                "--rounds", str(size["rounds"])]
        done = subprocess.run(args, env=family_env(family), cwd=ROOT, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise ValueError(f"the {family} child failed: {done.stderr.strip()[-2000:]}")
        out[family] = json.loads(done.stdout.splitlines()[-1])
    return out


def tables(results):
    """run's dict -> Markdown lines: c(M) per family, then each family's K sweep."""
    lines = []
    for family, r in results.items():
        Ms = list(r["c"])
        lines += ["", f"### {family} kernels (OPENBLAS_CORETYPE={family}; the library reports "
                      f"{r['kernels']})", "", r["blas"], "",
                  f"One-token target call {r['t1_ms']:.2f} ms; c_d = {r['c_d']:.3f}.", "",
                  "| M | " + " | ".join(Ms) + " |", "|---|" + "---|" * len(Ms),
                  "| c(M) | " + " | ".join(f"{r['c'][M]:.2f}" for M in Ms) + " |",
                  "| c(M), every M in turn | " + " | ".join(
                      f"{r['c_in_turn'][M]:.2f}" for M in Ms) + " |", "",
                  "| K | E (tokens per target call) | acceptance | speedup (median, IQR) | "
                  "c, K c_d, r, r_0 in the run | cost model from the run | E / (c(K+1) + K c_d) |",
                  "|---|---|---|---|---|---|---|"]
        for k in r["runs"]:
            lo, hi = k["speedup_iqr"]
            lines.append(f"| {k['K']} | {k['E']:.2f} | {k['acceptance']:.2f} | "
                         f"{k['speedup']:.2f}x ({lo:.2f}-{hi:.2f}) | {k['c_run']:.2f}, "
                         f"{k['drafting_run']:.2f}, {k['rest_run']:.2f}, "
                         f"{k['rest_base_run']:.2f} | {k['predicted']:.2f}x | "
                         f"{k['predicted_curve']:.2f}x |")
    return lines


def main(families=FAMILIES, Ks=None, n_prompts=None, n_tokens=None, repeats=None, rounds=None,
         child=False, json_line=False, out=None):
    """c(M), E and speedup against K on each kernel family, beside the cost model."""
    given = {"Ks": Ks, "n_prompts": n_prompts, "n_tokens": n_tokens, "repeats": repeats,
             "rounds": rounds}
    size = {**defaults(), **{k: v for k, v in given.items() if v is not None}}
    if child:
        return print(json.dumps(measure(**size)))
    results = run(families, size)
    if json_line:
        return print(json.dumps(results))
    from picospec_app.machine import thread_policy

    n_params = next(iter(results.values()))["n_params"] if results else 0
    with page_of_output(out):
        print(header(thread_policy(n_params)), flush=True)
        print(f"\n{size['n_prompts']} prompt(s), {size['n_tokens']} tokens, {size['repeats']} "
              f"interleaved rounds per K; c(M) over {size['rounds']} rounds after a cache of "
              f"main.py's default prompt")
        skipped = [f for f in families if f not in results]
        if skipped:
            print(f"\n{', '.join(skipped)}: this CPU cannot run these kernels (no AVX-512)")
        print("\n".join(tables(results)))


OPTIONS = [
    Option("families", "strs", list(FAMILIES), "OpenBLAS kernel families to measure, each in its "
           "own process", choices=FAMILIES),
    Option("Ks", "ints", None, "draft lengths K (default 1..8; quick: 1, 2, 4)", low=1, high=32),
    Option("n_prompts", int, None, f"prompts, at most {len(PROMPTS)} (default 2; quick: 1)",
           low=1, high=len(PROMPTS)),
    Option("n_tokens", int, None, "new tokens per run (default 48; quick: 16)", low=1, high=128),
    Option("repeats", int, None, "interleaved rounds per K and prompt (default 7; quick: 1)",
           low=1),
    Option("rounds", int, None, "rounds of the c(M) measurement (default 31; quick: 9)", low=1),
    Option("child", bool, False, "measure in this process only (what each family's process runs)"),
    Option("json_line", bool, False, "print the families' measurements as one JSON line"),
    Option("out", "out", None, "also write what it prints as a results page (docs/results/)"),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
