"""Time a method against autoregressive decoding (same prompt and seed, interleaved rounds) and read
the runs: E tokens per target call, acceptance, the median speedup, the cost model's prediction.
"""
import sys
import time

import numpy as np
from tqdm import tqdm

from picospec.methods import call, find
from picospec.theory import GPU_VERIFY_COST, cost_model_speedup
from picospec_app.load import batched_models


class Timed:
    """A model with a call counter and a stopwatch (clock: seconds now)."""

    def __init__(self, model, clock=time.perf_counter):
        self.model, self.calls, self.seconds, self.clock = model, 0, 0.0, clock
        self.n_vocab = getattr(model, "n_vocab", None)

    def __call__(self, x, n=1):
        return self._timed(self.model, x, n)

    def logits(self, x, n=1, **kw):  # the richer interface of tree methods, timed and counted alike
        return self._timed(self.model.logits, x, n, **kw)

    def tree(self, x, tokens, parents, **kw):
        return self._timed(self.model.tree, x, tokens, parents, **kw)

    def accept(self, path):
        start = self.clock()
        self.model.accept(path)
        self.seconds += self.clock() - start

    def _timed(self, f, *args, **kw):
        start = self.clock()
        out = f(*args, **kw)
        self.seconds += self.clock() - start
        self.calls += 1
        return out


class TimedHead(Timed):
    """A head timed as the draft (EAGLE's head, Medusa's or Blockwise's heads function), called as
    given; other attributes are the head's."""

    def __call__(self, *args, **kw):  # head(x, F, tokens, parents)
        return self._timed(self.model, *args, **kw)

    def __getattr__(self, name):
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)


def run_method(method, x, loaded, N, seed, sampling=None, clock=time.perf_counter, **options):
    """One timed run of a table row (or its name) from cold caches -> {"output", "seconds", calls
    and seconds per model, "stats": the step records}."""
    method = find(method) if isinstance(method, str) else method
    for model in loaded.values():
        getattr(model, "reset", lambda: None)()  # neither run may reuse the other's cached work
    timed = {k: Timed(v, clock) if k in ("target", "draft", "draft2") else v
             for k, v in loaded.items()}
    heads = loaded.get("heads")
    if any(need.startswith("heads:eagle") for need in method.needs):  # EAGLE's, EAGLE-3's
        timed["heads"] = head = TimedHead(heads, clock)
    elif isinstance(heads, dict):  # Medusa's, Blockwise's heads: their function is the drafter
        head = TimedHead(heads["fn"], clock)
        timed["heads"] = {**heads, "fn": head}
    stats, rng = [], np.random.default_rng(seed)
    start = clock()
    out = call(method, x, N, rng, timed, sampling, options, stats=stats)
    seconds = clock() - start
    t, d2 = timed["target"], timed.get("draft2", Timed(None))
    d = timed.get("draft") or (head if heads is not None else Timed(None))
    return {"output": out, "seconds": seconds, "target_calls": t.calls, "draft_calls": d.calls,
            "tokens_per_call": N / t.calls, "target_s": t.seconds, "draft_s": d.seconds,
            "stats": stats, "draft2_calls": d2.calls, "draft2_s": d2.seconds}


def run_batch(method, xs, loaded, groups, n, seed, sampling, options, progress):
    """One timed run of the batched form over xs in Groups (picospec_app.plan) -> {"outputs",
    "seconds", "target_calls", "groups", "target_calls_by_row", "tokens_per_target_call" per
    row}."""
    out, seconds, stats = [], 0.0, []
    rng = np.random.default_rng(seed)  # one generator through the groups
    sampling = {k: v for k, v in sampling.items() if v is not None}
    with tqdm(total=len(xs), desc=method.name, unit="row", leave=False, disable=not progress,
              file=sys.stderr) as bar:  # rows done, and the group on its way
        for g, group in enumerate(groups.rows):
            bar.set_postfix_str(f"group {g + 1} of {len(groups.rows)}")
            try:
                needs = batched_models(loaded, len(group))  # the group's caches: allocated here
                for model in needs.values():
                    getattr(model, "reset", lambda: None)()
                records = []  # the group's step records
                stats.append(records)
                start = time.perf_counter()
                out += call(method, [xs[i] for i in group], n, rng, needs, sampling, options,
                            stats=records, batch=True)
            except MemoryError:  # the bound fell short (memory taken meanwhile; CuPy's error too)
                size = len(groups.rows[0])
                mb = -(-size * groups.row_bytes // 2**20)
                raise ValueError(f"--batch: out of memory with groups of {size} rows: pass a "
                                 f"smaller --batch_memory than {mb}") from None
            seconds += time.perf_counter() - start
            del needs  # the group's caches go before the next group's are made
            bar.update(len(group))
    calls = [sum(s.get("calls", 1) for s in records) for records in stats]
    # the calls each row took part in (a batched call scores every active row)
    by_row = [sum(s.get("calls", 1) for s in stats[g] if s["accepted"][b] >= 0)
              for g, group in enumerate(groups.rows) for b in range(len(group))]
    return {"outputs": out, "seconds": seconds, "target_calls": sum(calls),
            "groups": [len(g) for g in groups.rows], "target_calls_by_row": by_row,
            "tokens_per_target_call": [n / c for c in by_row]}


def interleaved(runs, rounds=None, seconds=1.0, least=3, most=50):
    """Call run functions in turns, the order turned each round (A B, B A, A B ...: the one run
    second gains from the first's warm caches), `rounds` times or until `seconds` are spent -> a
    list of run dicts per function."""
    out = [[] for _ in runs]
    while True:
        turn = list(zip(runs, out))
        for f, done in turn[::-1] if len(out[0]) % 2 else turn:
            done.append(f())
        n, spent = len(out[0]), sum(r["seconds"] for done in out for r in done)
        if rounds is not None:
            if n >= rounds:
                return out
        elif n >= most or (n >= least and spent >= seconds):
            return out


def speedup_of(base_runs, runs):
    """Per-round ratios base / method -> {"median", "range" [min, max], "rounds"}.
    Example: base [1.0, 1.2, 0.9] s, method [0.5, 0.5, 0.6] s -> ratios 2.0, 2.4, 1.5, median 2."""
    ratios = [b["seconds"] / r["seconds"] for b, r in zip(base_runs, runs)]
    return {"median": float(np.median(ratios)), "range": [min(ratios), max(ratios)],
            "rounds": len(ratios)}


def call_costs(base_runs, runs):
    """Medians over rounds -> {"E", "E_full" (every draft accepted), "c", "drafts": {name:
    {"per_target_call", "c_d"}}, "rest" (r, a step's time outside the calls), "rest_base" (r_0,
    an autoregressive token's), "predicted", "predicted_gpu"}: costs in one-token target calls,
    as the runs spent them."""
    def median(values):
        return float(np.median(list(values)))

    one = median(b["target_s"] / b["target_calls"] for b in base_runs)  # a one-token target call
    rest_base = median(max(b["seconds"] - b["target_s"], 0.0) / b["target_calls"]
                       for b in base_runs) / one
    rest = median(max(r["seconds"] - r["target_s"] - r["draft_s"] - r["draft2_s"], 0.0)
                  / r["target_calls"] for r in runs) / one
    E = median(r["tokens_per_call"] for r in runs)
    c = median(r["target_s"] / r["target_calls"] for r in runs) / one
    drafts = {}
    for name in ("draft", "draft2"):
        if runs[0][f"{name}_calls"]:
            drafts[name] = {"per_target_call": runs[0][f"{name}_calls"] / runs[0]["target_calls"],
                            "c_d": median(r[f"{name}_s"] / r[f"{name}_calls"] for r in runs) / one}
    pairs = [(d["per_target_call"], d["c_d"]) for d in drafts.values()]
    return {"E": E, "E_full": every_draft_accepted(runs[0].get("stats"), E), "c": c,
            "drafts": drafts, "rest": rest, "rest_base": rest_base,
            "predicted": cost_model_speedup(E, c, pairs, rest, rest_base),
            "predicted_gpu": cost_model_speedup(E, GPU_VERIFY_COST, pairs, rest, rest_base)}


def drafting(costs):
    """call_costs' dict -> the drafts' cost of one step, in one-token target calls: sum of k c_d."""
    return sum(d["per_target_call"] * d["c_d"] for d in costs["drafts"].values())


def every_draft_accepted(stats, E):
    """Tokens per target call had every draft been accepted (E without stats)."""
    # each step's drafts and the target's token, over the steps' calls (blockwise's first: two)
    if not stats:
        return E
    return sum(s["drafted"] + 1 for s in stats) / sum(s.get("calls", 1) for s in stats)


def limit(E, E_full, c, d, rest, rest_base):
    """What holds the speedup down -> (name, the cost model's speedup without it): every draft
    accepted, verification at one call's cost, no drafting, no rest of the step."""
    step, tokens = c + d + rest, 1 + rest_base  # a token of autoregressive decoding costs 1 + r_0
    without = {"acceptance": E_full * tokens / step,
               "verification": E * tokens / (step - max(c - 1, 0.0)),
               "drafting": E * tokens / (step - d), "the rest of the step": E * tokens / (c + d)}
    worst = max(without, key=without.get)
    return worst, without[worst]


def limit_line(costs):
    """The `limit here:` line; a GPU's c is offered only where it is below this run's."""
    c, d, E, E_full, rest = (costs["c"], drafting(costs), costs["E"], costs["E_full"],
                             costs["rest"])
    worst, gain = limit(E, E_full, c, d, rest, costs["rest_base"])
    why = {"acceptance": f"{E:.2f} tokens per target call, {E_full:.2f} had every draft been "
                         f"accepted: the cost model gives {gain:.2f}x then",
           "verification": f"a target call of this method costs c = {c:.2f} one-token calls",
           "drafting": f"the draft calls of one step cost {d:.2f} one-token target calls",
           "the rest of the step": f"sampling, acceptance and Python cost {rest:.2f} one-token "
                                   "target calls a step"}
    gpu = (f"; with c = {GPU_VERIFY_COST} (verification nearly free, as on a GPU) the cost model "
           f"gives {costs['predicted_gpu']:.2f}x") if GPU_VERIFY_COST < c else ""
    return f"limit here: {worst} ({why[worst]}){gpu}"


def summary(stats):
    """Step records -> counts, acceptance = accepted / drafted, and accepted / nodes (trees)."""
    drafted, nodes = sum(s["drafted"] for s in stats), sum(s["nodes"] for s in stats)
    accepted = sum(s["accepted"] for s in stats)
    return {"drafted": drafted, "nodes": nodes, "accepted": accepted,
            "acceptance": accepted / drafted if drafted else None,
            "accepted_per_node": accepted / nodes if nodes else None}


def median_run(runs):
    """Repeats of a run -> the first's output and counts, the median of each time."""
    times = ("seconds", "target_s", "draft_s", "draft2_s")
    return {**runs[0], **{k: float(np.median([r[k] for r in runs])) for k in times}}
