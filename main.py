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

METHODS = ("autoregressive", "speculative", "greedy", "prompt_lookup", "medusa", "blockwise", "rest", "lookahead")
NO_DRAFT = ("autoregressive", "prompt_lookup", "medusa", "blockwise", "rest", "lookahead")  # no draft model needed
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
         heads: str = None, tree: str = "sparse", topk: int = 10, posterior: str = "greedy",
         posterior_threshold: float = 0.09, posterior_alpha: float = 0.3, merged: bool = True,
         datastore: str = None, num_draft_nodes: int = 7, max_matches: int = 100, draft_len: int = 10,
         window: int = 4, ngram: int = 3, guesses: int = 4, batch: str = None, json_output: bool = False):
    """Decode `prompt` with `method` (and autoregressively, to compare). --json prints one JSON object instead.

    --batch FILE decodes every line of FILE (\\n escapes allowed) together with batched speculative sampling.
    --schedule heuristic / --confidence C choose K per step for --method greedy.
    --max_ngram_size / --num_pred_tokens set prompt lookup's matching (it needs no draft model).
    --method medusa: --heads DIR (default: the backbone's medusa/ folder), --tree sparse|chain|cartesian|'[[0],[0,0]]',
      --topk, --posterior greedy|typical|nucleus|lossless, --posterior_threshold (epsilon), --posterior_alpha (delta).
    --method blockwise: --K is the block size k (heads from the backbone's blockwise/ folder); --merged/--nomerged.
    --method rest: --datastore FILE.npz (default: built once from the standard library's train split, cached),
      --num_draft_nodes, --max_matches, --draft_len.  --method lookahead: --window W, --ngram N, --guesses G.
    """
    from gpt2.load import load_model
    from picospec.bench import run_method

    if batch is not None:
        return main_batch(batch, n_tokens, K, temperature, top_k, top_p, seed, target, draft, device, offline,
                          json_output)

    target_model, encoder = load_model(str(target), device, offline)
    no_draft = method in NO_DRAFT
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
                      "prompt_lookup": {"max_ngram_size": max_ngram_size, "num_pred_tokens": num_pred_tokens},
                      "lookahead": {"window": window, "ngram": ngram, "guesses": guesses}}
    if method == "medusa":
        method_options["medusa"] = medusa_options(str(target), target_model, heads, tree, topk, posterior,
                                                  posterior_threshold, posterior_alpha, offline)
    elif method == "blockwise":
        from gpt2.load import heads_folder, heads_function

        fn, config = heads_function(heads_folder(str(target), "blockwise", heads, offline), target_model)
        if K > config["n_heads"] + 1:
            raise ValueError(f"--K {K} is more than the {config['n_heads']} blockwise heads + 1 allow; use --K <= "
                             f"{config['n_heads'] + 1}")
        method_options["blockwise"] = {"heads": lambda h: fn(h)[:K - 1], "merged": merged}  # p_2..p_K
    elif method == "rest":
        method_options["rest"] = {"datastore": rest_datastore(datastore, str(target), encoder),
                                  "num_draft_nodes": num_draft_nodes, "max_matches": max_matches,
                                  "draft_len": draft_len}
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


def medusa_options(target, model, heads, tree, topk, posterior, threshold, alpha, offline):
    """The heads function, the tree (medusa_choices) and the posterior for --method medusa."""
    from gpt2.load import heads_folder, heads_function
    from picospec.medusa import POSTERIORS, cartesian_choices, chain_choices

    if posterior not in POSTERIORS:
        raise ValueError(f"unknown --posterior {posterior!r}: choose one of {', '.join(POSTERIORS)}")
    folder = heads_folder(target, "medusa", heads, offline)
    fn, config = heads_function(folder, model)
    n = config["n_heads"]
    if tree == "sparse":
        if not (folder / "medusa_choices.json").exists():
            raise ValueError(f"no sparse tree in {folder} (medusa_choices.json): build one with `python -m "
                             f"picospec.bench_trees --build DIR --budgets 7` or pass --tree chain, cartesian or a list of paths")
        choices = json.loads((folder / "medusa_choices.json").read_text())["medusa_choices"]
    elif tree == "chain":
        choices = chain_choices(n)
    elif tree == "cartesian":
        choices = cartesian_choices(min(n, 3), 2)
    else:
        try:
            choices = json.loads(tree) if isinstance(tree, str) else [list(c) for c in tree]
        except json.JSONDecodeError:
            raise ValueError(f"--tree {tree!r}: use sparse, chain, cartesian or a JSON list like '[[0],[0,0],[1]]'")
    return {"heads": fn, "medusa_choices": choices, "topk": topk, "posterior": posterior, "epsilon": threshold,
            "delta": alpha}


def rest_datastore(path, target, encoder):
    """Load --datastore FILE, or build it (once) from the standard library's train split with the model's tokenizer."""
    from pathlib import Path

    from picospec.rest import Datastore

    if path is not None and Path(path).exists():
        return Datastore.load(path)
    from tqdm import tqdm

    from gpt2.corpus import split_files, stdlib_files, tokenize
    from gpt2.hub import cache_dir

    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in target)
    path = Path(path) if path is not None else cache_dir() / "rest" / f"{safe}-stdlib-train.npz"
    if path.exists():
        return Datastore.load(path)
    print(f"building the REST datastore {path} (once) from the standard library's train split", file=sys.stderr)
    files = split_files(stdlib_files())["train"]
    ids = [t for f in tqdm(files, desc="tokenize", unit="file") for t in tokenize([f], encoder)]
    store = Datastore.build(np.array(ids, dtype=np.uint16 if encoder.n_vocab <= 65536 else np.int64), progress=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    store.save(path)
    return store


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
    from gpt2.cli import fire_cli

    argv = sys.argv[1:] if argv is None else argv
    fire_cli(main, ["--json_output" if a == "--json" else a for a in argv])


if __name__ == "__main__":
    cli()
