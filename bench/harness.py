"""One benchmark harness for every method of the table (picospec.methods): tokens per target call
and wall-clock speedup against autoregressive decoding measured in the same run, beside the theory's
prediction, on the app's protocol (picospec_app.compare); header, check_room and write_text
serve every benchmark.

    python -m bench.harness                       # the built-in models, held-out prompts
    # the seeds' Figure 1: time per token, acceptance vs K
    python -m bench.harness --sweep_K 1,2,3,4,6,8

For every prompt and seed, autoregressive decoding and the method run back to back, each from a cold
cache, so the speedup is a ratio of two measurements taken side by side; tables report the median
over prompts and seeds and the spread (25th-75th percentile). alpha (acceptance of one draft token)
is measured on the same prompts with picospec.theory.estimate_alpha, and c (draft call time / target
call time) from the runs themselves. Shapes: none; this file only times things.
"""
from pathlib import Path


from picospec.theory import expected_tokens_per_call
from gpt2.load import load_draft
from picospec_app.load import check_target
from picospec_app.compare import compare, copy_prompts, measure_alpha
from tools.families import command
from tools.page import header, measured_command, write_page


def main(drafts=("tiny-draft", "ngram"), target="tiny-target", K=4, temperatures=(0.0, 1.0),
         n_prompts=8,
         prompt_tokens=64, n_tokens=64, seeds=2, sweep_K=None, prompt_lookup=False, out=None):
    """Speculative sampling and greedy drafting against autoregressive decoding on held-out
    prompts."""
    check_target(target)
    from gpt2.train.corpus import heldout_prompts
    from gpt2.load import load_model
    from picospec_app.settings import engine_choices

    from picospec_app.machine import thread_policy

    from picospec_app.settings import read_settings

    offline = read_settings().offline  # PICOSPEC_OFFLINE, as main.py reads it
    target_model, encoder = load_model(target, offline=offline, **engine_choices())
    # every model loads before any run
    drafts = {name: load_draft(name, target_model, target, offline=offline) for name in drafts}
    check_room(target_model.n_ctx, prompt_tokens, n_tokens, encoder if prompt_lookup else None)
    top = header(thread_policy(target_model.n_params))
    print(top, flush=True)
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    temps = list(temperatures)
    lines = [f"`{measured_command()}`", "",
             "| draft | T | method | alpha | tokens/target call (theory) | tokens/target call "
             "(measured, median) | per-position acceptance | c_d = draft/target call | (K+1)-token "
             "verify / 1-token call | speedup vs autoregressive (median, IQR) | theory speedup "
             "E[tokens] / (K c_d + v) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, draft in drafts.items():
        for T in temps:
            options = {"temperature": T}
            alpha = measure_alpha(draft, target_model, prompts, n_tokens, options)
            for method in ["speculative"] + (["greedy"] if T == 0 else []):
                r = compare(method, prompts, {"target": target_model, "draft": draft}, n_tokens,
                            range(seeds), options, K=K)
                theory_tpc = expected_tokens_per_call(alpha, K)
                lines.append(
                    f"| {name} | {T:g} | {method} | {alpha:.3f} | {theory_tpc:.2f} | "
                    f"{r['tokens_per_call']:.2f} "
                    f"| {' '.join(f'{a:.2f}' for a in r['per_position'])} | {r['c_d']:.3f} | "
                    f"{r['c']:.2f} "
                    f"| {r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) "
                    f"| {theory_tpc / (K * r['c_d'] + r['c']):.2f}x |")
                print(lines[-1], flush=True)
    if prompt_lookup:
        lines += prompt_lookup_table(target_model, encoder, prompts, n_tokens, seeds)
    if sweep_K:
        first = next(iter(drafts))
        lines += sweep(sweep_K, first, draft_model=drafts[first], target=target_model,
                       prompts=prompts,
                       n_tokens=n_tokens, seeds=seeds,
                       plot_path=out and Path(out).with_name(Path(out).stem + "_K.png"))
    text = "\n".join(lines)
    print(text)
    if out:
        write_page(out, text, top)


def check_room(n_ctx, prompt_tokens, n_tokens, encoder=None, n_copy=12, fixed=False):
    """Before any run: held-out prompts of prompt_tokens (with encoder: also the copy-heavy ones,
    copy_prompts' blank line and n_copy tokens longer) and n_tokens new tokens fit the context
    window; else one line naming the options (fixed: the prompts' length is no option). Example:
    check_room(256, 64, 200) -> error (264 tokens)."""
    extra = len(encoder.encode("\n\n")) + n_copy if encoder is not None else 0
    need = prompt_tokens + extra + n_tokens
    if need > n_ctx:
        prompts = f"the longest prompt's {prompt_tokens} tokens" if fixed else (f"--prompt_tokens "
                                                                                f"{prompt_tokens}")
        copies = f" + {extra} for the copy-heavy prompts" if extra else ""
        raise ValueError(f"{prompts}{copies} + --n_tokens {n_tokens} = {need} tokens, more than "
                         f"the model's context window of {n_ctx}: lower "
                         f"{'' if fixed else '--prompt_tokens or '}--n_tokens")


def prompt_lookup_table(target, encoder, prompts, n_tokens, seeds):
    lines = ["", "Prompt lookup decoding (max_ngram_size 3, num_pred_tokens 10), temperature 0:",
             "",
             "| prompts | tokens/target call (median) | acceptance | speedup vs autoregressive "
             "(median, IQR) |",
             "|---|---|---|---|"]
    for label, xs in (("copy-heavy (chunk, blank line, chunk start)",
                       copy_prompts(encoder, prompts)),
                      ("ordinary continuation", prompts)):
        r = compare("prompt_lookup", xs, {"target": target}, n_tokens, range(seeds),
                    {"temperature": 0}, num_pred_tokens=10)
        lines.append(f"| {label} | {r['tokens_per_call']:.2f} | {r['acceptance']:.2f} | "
                     f"{r['speedup']:.2f}x ({r['speedup_iqr'][0]:.2f}-{r['speedup_iqr'][1]:.2f}) |")
        print(lines[-1], flush=True)
    return lines


def sweep(Ks, name, draft_model, target, prompts, n_tokens, seeds, plot_path=None):
    """The seeds' Figure 1 at temperature 0: time per generated token, acceptance and time per loop
    against K (and as a figure at plot_path, when matplotlib is installed)."""
    lines = ["", f"K sweep, draft {name}, temperature 0:", "",
             "| K | ms per token (speculative) | ms per token (autoregressive) | acceptance | ms "
             "per loop | speedup |",
             "|---|---|---|---|---|---|"]
    curves = []
    for K in Ks:
        r = compare("speculative", prompts, {"target": target, "draft": draft_model}, n_tokens,
                    range(seeds), {"temperature": 0}, K=K)
        ms_tok, ms_base, ms_loop = r["ms_per_token"], r["ms_per_token_base"], r["ms_per_loop"]
        curves.append((K, ms_tok, ms_base, r["acceptance"], ms_loop))
        lines.append(f"| {K} | {ms_tok:.2f} | {ms_base:.2f} | {r['acceptance']:.2f} | "
                     f"{ms_loop:.2f} | {ms_base / ms_tok:.2f}x |")
        print(lines[-1], flush=True)
    if plot_path is not None:
        plot(curves, name, plot_path)
    return lines


def plot(curves, name, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    K, ms_tok, ms_base, acc, ms_loop = zip(*curves)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    axes[0].plot(K, ms_tok, "o-", label="speculative")
    axes[0].plot(K, ms_base, "--", label="autoregressive")
    axes[0].set(xlabel="K", ylabel="ms per token")
    axes[0].legend()
    axes[1].plot(K, acc, "o-")
    axes[1].set(xlabel="K", ylabel="acceptance rate")
    axes[2].plot(K, ms_loop, "o-")
    axes[2].set(xlabel="K", ylabel="ms per loop")
    fig.suptitle(f"draft {name}, temperature 0")
    fig.tight_layout()
    # written whole, then renamed: no half a figure
    tmp = Path(path).with_name(Path(path).name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    tmp.replace(path)
    print(f"K sweep figure: {path}", flush=True)


if __name__ == "__main__":
    from picospec_cli import Option

    command(main, [
        Option("drafts", "strs", ("tiny-draft", "ngram"),
               "draft models, a row each: tiny-draft, ngram, gpt2, a folder"),
        Option("target", str, "tiny-target", "the target model"),
        Option("K", int, 4, "draft tokens per step", low=1, high=64),
        Option("temperatures", "floats", (0.0, 1.0), "temperatures, a row each", low=0),
        Option("n_prompts", int, 8, "held-out prompts", low=1),
        Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
        Option("n_tokens", int, 64, "new tokens per run", low=1),
        Option("seeds", int, 2, "seeds per prompt", low=1),
        Option("sweep_K", "ints", None, "K values of the K sweep (the seeds' Figure 1; with --out, "
               "also as a figure beside it: OUT's name + _K.png, when matplotlib is installed)",
               low=1, high=64),
        Option("prompt_lookup", bool, False, "add the prompt lookup table"),
        Option("out", "out", None, "also write the tables to this file")])
