"""Speculative speedup on a quiet machine and with one busy core, under the BLAS thread policy and
under the BLAS default, all in one process: the policy's goal is a loaded-machine speedup within 15%
of the quiet one.

    python -m bench.load                        # the built-in pair, 8 held-out prompts x 2 seeds
    # also GPT-2 shapes with random weights (draft: a 2-layer model)
    python -m bench.load --shapes 124M,355M

The busy core is a process this benchmark starts (a spinning loop) and stops itself. For each
setting (threads x load) speculative sampling and autoregressive decoding run back to back on every
prompt and seed (bench.harness .compare); the table reports the median speedup and the ratio loaded
/ quiet. The policy chooses its thread count afresh under each load, once the busy core is running,
as a user's run does when it starts. With random weights (the GPT-2 shapes) acceptance comes from
two near-uniform models at temperature 1: the point is the cost of the calls, not the text. Shapes:
none; this file only times things.
"""
import contextlib
import multiprocessing
import os
import time
from tools.page import header, measured_command, write_page


def spin():  # one busy core, like a browser tab or a compile beside the user's run
    while True:
        pass


class BusyCore:
    def __enter__(self):
        self.process = multiprocessing.get_context("spawn").Process(target=spin, daemon=True)
        self.process.start()
        time.sleep(0.5)  # let it reach full speed
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.join()


def random_pair(shape, rng):
    """A target of a GPT-2 shape and a 2-layer draft of the same width and vocabulary, random
    weights."""
    from bench.engine import SHAPES
    from gpt2.engine import GPT2
    from gpt2.train.gpt2 import init_params

    hparams = {**SHAPES[shape], "n_vocab": 50257, "n_ctx": 1024}
    small = {**hparams, "n_layer": 2}
    return GPT2(hparams, init_params(hparams, rng)), GPT2(small, init_params(small, rng))


def verification_cost(model, threads, repeats=8, prompt=128):
    """-> {(M, threads): median wall ms} of an M-token forward (M = 1, 5) after a `prompt`-token
    cache."""
    import numpy as np

    x = np.random.default_rng(0).integers(0, model.n_vocab, prompt + 5).tolist()
    model.reset()
    model(x[:prompt])
    out = {}
    for n in threads:
        model.plan.threads.choose(n)  # n threads for every product of the engine
        for M in (1, 5):
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                model.logits(x[:prompt + M], M)
                times.append(time.perf_counter() - start)
            out[(M, n)] = float(np.median(times)) * 1e3
    return out


def main(shapes=(), K=4, n_prompts=8, prompt_tokens=48, n_tokens=48, seeds=2, shape_prompts=2,
         out=None):
    """Speculative speedup: policy threads vs the BLAS default, quiet vs one busy core, side by
    side."""
    import numpy as np

    from picospec_app.compare import compare
    from gpt2.fast.policy import blas_threads, free_cores
    from picospec_app.machine import policy as policy_of, thread_policy
    from gpt2.train.corpus import heldout_prompts
    from gpt2.load import load_model
    from picospec_app.settings import engine_choices

    default = blas_threads() or os.cpu_count()
    target, encoder = load_model("tiny-target", **engine_choices())
    pairs = [("tiny pair (T=0)", target, load_model("tiny-draft", **engine_choices())[0],
              heldout_prompts(encoder, n_prompts, prompt_tokens), range(seeds), 0.0)]
    rng = np.random.default_rng(0)
    for shape in shapes:
        t, d = random_pair(shape, rng)
        xs = [rng.integers(0, t.n_vocab, prompt_tokens).tolist() for _ in range(shape_prompts)]
        pairs.append((f"{shape} shape, random weights (T=1)", t, d, xs, range(1), 1.0))
    lines = [header(thread_policy(target.n_params)) + f"; BLAS default {default} threads", "",
             f"`{measured_command()}`", "",
             "| models | BLAS threads, quiet and loaded | speedup, quiet (median, IQR) | speedup, "
             "one busy core (median, IQR) "
             "| loaded / quiet | autoregressive ms/token quiet, loaded |",
             "|---|---|---|---|---|---|"]
    for label, t, d, xs, seed_range, T in pairs:
        for way in ("policy", "default"):
            results, used = [], []
            for busy in (False, True):
                with BusyCore() if busy else contextlib.nullcontext():
                    # the policy (its wide count too) chooses again under each load, as a user's run
                    # would when it starts; the default is every product on the BLAS's own count
                    free = free_cores()  # the cores idle under this load
                    for m in (t, d):
                        m.plan.threads.choose(None if way == "policy" else default, free)
                    policy = policy_of(t)
                    n, wide = policy["blas"] or policy["threads"], policy["wide"]["threads"]
                    used.append(f"{n}" + (f" (wide {wide})" if wide != n else ""))
                    results.append(compare("speculative", xs, {"target": t, "draft": d}, n_tokens,
                                           seed_range, {"temperature": T}, K=K))
            quiet, loaded = results
            lines.append(f"| {label} | {way}: {used[0]}, {used[1]} | {quiet['speedup']:.2f}x "
                         f"({quiet['speedup_iqr'][0]:.2f}-{quiet['speedup_iqr'][1]:.2f}) | "
                         f"{loaded['speedup']:.2f}x "
                         f"({loaded['speedup_iqr'][0]:.2f}-{loaded['speedup_iqr'][1]:.2f}) | "
                         f"{loaded['speedup'] / quiet['speedup']:.2f} "
                         f"| {quiet['ms_per_token_base']:.1f}, {loaded['ms_per_token_base']:.1f} |")
            print(lines[-1], flush=True)
    # why the ratio falls for the GPT-2 shapes: c(5) at the threads each load leaves
    if len(pairs) > 1:
        lines += ["",
                  "Cost of verification, c(5) = a 5-token forward / a 1-token forward (median wall "
                  "ms of 8, the target alone), by BLAS threads:", "",
                  "| target | load | 1 token, 1 thread | 5 tokens, 1 thread | c(5), 1 thread | 1 "
                  "token, 2 threads "
                  "| 5 tokens, 2 threads | c(5), 2 threads |", "|---|---|---|---|---|---|---|---|"]
        for label, t, *_ in pairs[1:]:
            for busy in (False, True):
                with BusyCore() if busy else contextlib.nullcontext():
                    c = verification_cost(t, (1, 2))
                lines.append(f"| {label.split(',')[0]} | {'one busy core' if busy else 'quiet'} | "
                             f"{c[1, 1]:.1f} | {c[5, 1]:.1f} | {c[5, 1] / c[1, 1]:.2f} | "
                             f"{c[1, 2]:.1f} | {c[5, 2]:.1f} | {c[5, 2] / c[1, 2]:.2f} |")
                print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if out:
        write_page(out, text)


if __name__ == "__main__":
    from picospec_cli import Option, command

    command(main,
            [Option("shapes", "strs", (), "GPT-2 shapes to add (random weights)",
                    choices=("124M", "355M")),
                   Option("K", int, 4, "draft tokens per step", low=1, high=64),
                   Option("n_prompts", int, 8, "held-out prompts (tiny pair)", low=1),
                   Option("prompt_tokens", int, 48, "tokens per prompt", low=1),
                   Option("n_tokens", int, 48, "new tokens per run", low=1),
                   Option("seeds", int, 2, "seeds per prompt (tiny pair)", low=1),
                   Option("shape_prompts", int, 2, "random prompts per GPT-2 shape", low=1),
                   Option("out", "out", None, "also write the table to this file")])
