"""Self-drafting engines side by side in one process: the current one, the batched engine of another
revision, and each with its LM head forced back to the transposed view wte.T, so that each change
between the revisions is measured alone (the batched reuse below the cut; the LM head through the
target engine's copy and panels).

    # OLD: an empty folder; REV: a revision whose batched engine reran the
    git archive REV | tar -x -C OLD
                                        # sublayers below the cut
    python -m bench.self_draft_engines --old OLD --settings OLD/gpt2/assets/tiny-target

Ways, for layer_skip and early_exit (the skip set, exit layer, adapter, K and threshold in
--settings):
  single        the single engine (it always reused the draft's work below the cut), head wte.T,
  then as main.py
                loads it (the target engine's head copy and weight panels)
  batch R       the batched engine of OLD (its gpt2/batch_self_draft.py run on the current gpt2
  otherwise) with
                head wte.T; the current one with head wte.T; the current one as main.py loads it
8 held-out prompts x --n_tokens, temperature --temperature, decoding's wall time (each prompt's
prefill apart), the median of --repeats interleaved runs. Every way must give the same tokens; the
last line says whether they did. Shapes: none; this file only times things.
"""
import importlib.util
import os
import time
from pathlib import Path

import numpy as np


def old_batch_engine(old):  # OLD/gpt2/batch_self_draft.py as a module of its own
    spec = importlib.util.spec_from_file_location("old_batch_self_draft",
                                                  Path(old) / "gpt2" / "batch_self_draft.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(old, settings=None, n_tokens=48, temperature=0.0, repeats=5):
    import gpt2.self_draft as this
    from bench.batch import load_pair
    from bench.harness import header
    from picospec_app.load import load_self_draft
    from gpt2.backend import thread_policy
    from gpt2.self_draft import SelfDraft
    from picospec.methods import TABLE, call

    if not (Path(old) / "gpt2" / "batch_self_draft.py").exists():
        raise ValueError(f"--old {old}: no gpt2/batch_self_draft.py there; make it with `git "
                         f"archive REV | tar -x -C {old}`")
    before = old_batch_engine(old)
    target, _, prompts = load_pair("tiny")
    print(header(thread_policy(target.n_params)), flush=True)
    sampling, same = {"temperature": temperature}, True
    for method in ("layer_skip", "early_exit"):
        # self_draft.json, exit adapter
        loaded = load_self_draft(method, {}, target, settings or "tiny-target")
        engine = loaded["target"].engine  # as main.py loads it
        view = SelfDraft(engine.hparams, engine.params, engine.skip, engine.adapter,
                         head=engine.params["wte"].T)
        ways = {("single", "head wte.T"): (view, None),
                ("single", "as main.py loads it"): (engine, None)}
        for rows in (1, 8):
            ways[f"batch {rows}", "old engine, head wte.T"] = (before.BatchSelfDraft(view, rows),
                                                               rows)
            ways[f"batch {rows}", "reuse, head wte.T"] = (this.BatchSelfDraft(view, rows), rows)
            ways[f"batch {rows}",
                 "reuse, as main.py loads it"] = (this.BatchSelfDraft(engine, rows), rows)
        times, outputs = {}, {}
        for _ in range(repeats):
            for way, (model, rows) in ways.items():
                seconds, out = 0.0, []
                for i in range(0, len(prompts), rows or 1):
                    xs = prompts[i:i + (rows or 1)]
                    model.reset()
                    model.target(xs if rows else xs[0])  # the prefill, not timed
                    sides = dict(loaded, target=model.target, draft=model.draft)
                    start = time.perf_counter()
                    got = call(TABLE[method], xs if rows else xs[0], n_tokens,
                               np.random.default_rng(i), sides, sampling, {}, batch=bool(rows))
                    seconds += time.perf_counter() - start
                    out += got if rows else [got]
                times.setdefault(way, []).append(seconds)
                outputs[way] = out
        same &= len({str(o) for o in outputs.values()}) == 1
        median = {way: float(np.median(t)) for way, t in times.items()}
        print(f"\n{method} (sublayers skipped: {','.join(map(str, engine.skip))}; adapter: "
              f"{engine.adapter is not None}):\n")
        print("| way | engine | decode tokens/s (wall) | x the first line of its way "
              "|\n|---|---|---|---|")
        first = {}
        for (name, kind), t in median.items():
            first.setdefault(name, t)
            print(f"| {name} | {kind} | {len(prompts) * n_tokens / t:.0f} | {first[name] / t:.2f}x "
                  f"|")
    print(f"\n`python -m bench.self_draft_engines --old "
          f"{old}{f' --settings {settings}' if settings else ''} "
          f"--n_tokens {n_tokens} --temperature {temperature} "
          f"--repeats {repeats}` (1-minute load {os.getloadavg()[0]:.1f} at the end); every way "
          f"gave the same tokens: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    from picospec_cli import Option, command

    command(main, [
        Option("old", "dir", None,
               "a checkout of an older commit (git archive REV | tar -x -C DIR)", required=True),
        Option("settings", "dir", None,
               "the folder whose self_draft.json and early_exit/ adapter to use (default: "
               "tiny-target's shipped ones; OLD/gpt2/assets/tiny-target: the sets shipped then)"),
        Option("n_tokens", int, 48, "new tokens per prompt", low=2),
        Option("temperature", float, 0.0, "sampling temperature", low=0),
        Option("repeats", int, 5, "interleaved repeats of every way (the median is reported)",
               low=1),
    ])
