"""picospec's front door: decode a prompt with a speculative method and with plain autoregressive decoding, side by side.

    python main.py --method speculative --K 4          # the built-in tiny pair, offline, in seconds
    python main.py --method greedy --target gpt2-xl --draft gpt2 --prompt "Alan Turing theorized that"
    python main.py --method autoregressive --json

Speculative methods are run after autoregressive decoding of the same prompt with the same seed, so the printout shows
both texts, both times, the speedup, tokens per target call, acceptance, and (on a terminal) each token coloured by
where it came from.
"""
import json
import sys
import time

import numpy as np

METHODS = ("autoregressive", "speculative", "greedy", "prompt_lookup")
COLORS = {"draft": "\033[32m", "resample": "\033[33m", "bonus": "\033[34m"}  # green, yellow, blue
LEGEND = "green: draft token accepted, yellow: target's correction, blue: bonus token from the target"
DEFAULT_PROMPT = "def read_lines(path):\n"


def check_options(prompt_ids, n_tokens, n_ctx, K, temperature, top_k, top_p, method):
    if method not in METHODS:
        raise ValueError(f"unknown --method {method!r}: choose one of {', '.join(METHODS)}")
    if not prompt_ids:
        raise ValueError("the prompt is empty: pass some text with --prompt")
    if int(n_tokens) != n_tokens or n_tokens < 1:
        raise ValueError(f"--n_tokens must be a positive integer; got {n_tokens}")
    if len(prompt_ids) + n_tokens > n_ctx:
        raise ValueError(f"the prompt ({len(prompt_ids)} tokens) plus --n_tokens {n_tokens} exceeds the model's context "
                         f"window of {n_ctx} tokens: shorten the prompt or lower --n_tokens")
    if int(K) != K or K < 1:
        raise ValueError(f"--K must be a positive integer; got {K}")
    if temperature < 0:
        raise ValueError(f"--temperature must be >= 0 (0 means greedy); got {temperature}")
    if top_k is not None and (int(top_k) != top_k or top_k < 1):
        raise ValueError(f"--top_k must be a positive integer; got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"--top_p must be in (0, 1]; got {top_p}")


def report(method, x, run):
    stats, n_new = run["stats"], len(run["output"]) - len(x)
    drafted, accepted = sum(s["K"] for s in stats), sum(s["accepted"] for s in stats)
    return {"method": method, "output_ids": [int(t) for t in run["output"][len(x):]], "time_s": run["seconds"],
            "tokens_per_s": n_new / run["seconds"], "target_calls": run["target_calls"],
            "draft_calls": run["draft_calls"], "tokens_per_target_call": n_new / run["target_calls"],
            "acceptance_rate": accepted / drafted if drafted else None,
            "origins": [o for s in stats for o in s["origins"]]}


def colored(encoder, ids, origins, color):
    if not color:
        return encoder.decode(ids)
    return "".join(COLORS.get(o, "") + encoder.decode([t]) + ("\033[0m" if o in COLORS else "")
                   for t, o in zip(ids, origins))


def show(run, encoder, prompt, color):
    print(f"── {run['method']} " + "─" * 40)
    print(prompt + colored(encoder, run["output_ids"], run["origins"], color))
    line = (f"{len(run['output_ids'])} tokens in {run['time_s']:.3f} s ({run['tokens_per_s']:.1f} tokens/s), "
            f"{run['target_calls']} target calls ({run['tokens_per_target_call']:.2f} tokens per target call)")
    if run["acceptance_rate"] is not None:
        line += f", {run['draft_calls']} draft calls, acceptance {run['acceptance_rate']:.0%}"
    print(line + "\n")


def main(method: str = "speculative", prompt: str = DEFAULT_PROMPT, n_tokens: int = 40, K: int = 4,
         temperature: float = 0.0, top_k: int = None, top_p: float = None, seed: int = 123,
         target: str = "tiny-target", draft: str = "tiny-draft", device: str = "cpu", offline: bool = None,
         schedule: str = "constant", confidence: float = None, max_ngram_size: int = 3, num_pred_tokens: int = 10,
         batch: str = None, json_output: bool = False):
    """Decode `prompt` with `method` (and autoregressively, to compare). --json prints one JSON object instead.

    --batch FILE decodes every line of FILE (\\n escapes allowed) together with batched speculative sampling.
    --schedule heuristic / --confidence C choose K per step for --method greedy.
    --max_ngram_size / --num_pred_tokens set prompt lookup's matching (it needs no draft model).
    """
    from gpt2.load import load_model
    from picospec.bench import run_method

    if batch is not None:
        return main_batch(batch, n_tokens, K, temperature, top_k, top_p, seed, target, draft, device, offline,
                          json_output)

    target_model, encoder = load_model(str(target), device, offline)
    no_draft = method in ("autoregressive", "prompt_lookup")
    draft_model = None if no_draft else load_model(str(draft), device, offline)[0]
    if draft_model is not None and draft_model.n_vocab != target_model.n_vocab:
        raise ValueError(f"draft {draft!r} has {draft_model.n_vocab} tokens but target {target!r} has "
                         f"{target_model.n_vocab}: speculative decoding needs one vocabulary; pick a matching pair")
    prompt = str(prompt)
    x = encoder.encode(prompt)
    check_options(x, n_tokens, target_model.n_ctx, K, temperature, top_k, top_p, method)
    if draft_model is not None and len(x) + n_tokens > getattr(draft_model, "n_ctx", 10**9):
        raise ValueError(f"the prompt plus --n_tokens does not fit the draft's context window of {draft_model.n_ctx}")
    options = {"temperature": temperature, "top_k": top_k, "top_p": top_p}

    method_options = {"greedy": {"schedule": schedule, "confidence": confidence},
                      "prompt_lookup": {"max_ngram_size": max_ngram_size, "num_pred_tokens": num_pred_tokens}}
    runs = [report(m, x, run_method(m, x, draft_model, target_model, n_tokens, K, seed, options,
                                    **method_options.get(m, {})))
            for m in dict.fromkeys(["autoregressive", method])]
    result = {"prompt": prompt, "prompt_ids": [int(t) for t in x], "target": str(target),
              "draft": None if no_draft else str(draft), "K": K, "seed": seed, **options,
              "runs": [{**r, "text": encoder.decode(r["output_ids"])} for r in runs]}
    if len(runs) == 2:
        result["speedup"] = runs[0]["time_s"] / runs[1]["time_s"]
        result["same_output"] = runs[0]["output_ids"] == runs[1]["output_ids"]

    if json_output:
        print(json.dumps(result))
        return
    color = sys.stdout.isatty()
    for run in runs:
        show(run, encoder, prompt, color)
    if len(runs) == 2:
        same = "identical" if result["same_output"] else "different"
        note = " (temperature 0: they must be identical)" if temperature == 0 else " (sampling: texts may differ)"
        print(f"speedup {result['speedup']:.2f}x over autoregressive; texts {same}{note}")
        if color:
            print(LEGEND)


def main_batch(path, n_tokens, K, temperature, top_k, top_p, seed, target, draft, device, offline, json_output):
    """Batched speculative sampling of the prompts in a file, one engine (and KV cache) per row."""
    from pathlib import Path

    from gpt2.load import load_model
    from picospec.batch import batch_speculative_sampling, batched

    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ValueError(f"--batch {path}: cannot read it ({e.strerror})") from None
    prompts = [line.replace("\\n", "\n") for line in lines if line.strip()]
    if not prompts:
        raise ValueError(f"--batch {path}: no prompts (one per line)")
    rows = [load_model(str(target), device, offline) for _ in prompts]
    drafts = [load_model(str(draft), device, offline)[0] for _ in prompts]
    encoder, n_ctx = rows[0][1], rows[0][0].n_ctx
    xs = [encoder.encode(p) for p in prompts]
    for x in xs:
        check_options(x, n_tokens + K, n_ctx, K, temperature, top_k, top_p, "speculative")
    options = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
    stats, start = [], time.perf_counter()
    out = batch_speculative_sampling(xs, batched([d for d in drafts]), batched([m for m, _ in rows]), n_tokens, K,
                                     np.random.default_rng(seed), stats=stats, **options)
    seconds = time.perf_counter() - start
    texts = [encoder.decode(o[len(x):]) for o, x in zip(out, xs)]
    steps = len(stats)
    result = {"prompts": prompts, "texts": texts, "time_s": seconds, "target_calls": steps,
              "tokens_per_target_call": [n_tokens / sum(1 for s in stats if s["accepted"][b] >= 0)
                                         for b in range(len(xs))]}
    if json_output:
        print(json.dumps(result))
        return
    for prompt, text, tpc in zip(prompts, texts, result["tokens_per_target_call"]):
        print(f"── {tpc:.2f} tokens per target call " + "─" * 30)
        print(prompt + text + "\n")
    print(f"{len(xs)} prompts x {n_tokens} tokens in {seconds:.3f} s, {steps} batched target calls")


def cli(argv=None):
    import fire

    argv = sys.argv[1:] if argv is None else argv
    argv = ["--json_output" if a == "--json" else a for a in argv]
    try:
        fire.Fire(main, command=argv)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    cli()
