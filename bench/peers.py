"""picospec beside Hugging Face transformers on the same checkpoint, the same prompts and the same
thread count: greedy decoding, assisted generation (a fixed K: num_assistant_tokens_schedule
"constant" and assistant_confidence_threshold 0) and prompt lookup, each side timed back to back on
every prompt.

    # the built-in pair, 8 held-out prompts
    pip install -r requirements-reference.txt && python -m bench.peers

Reports both wall times (median over prompts), their ratio, tokens per target call (transformers'
target forwards counted with a hook) and whether the tokens are identical. Shapes: none; this file
only times things.
"""
import time

import numpy as np
from tools.families import command
from tools.page import header, measured_command, write_page


def hf_model(folder, torch):
    """GPT2LMHeadModel from a picospec checkpoint folder (config.json + model.safetensors, HF
    layout), float32."""
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(str(folder), torch_dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # run exactly N tokens, as picospec does
    model.generation_config.pad_token_id = model.config.vocab_size - 1
    return model


class CallCounter:
    """Counts forward passes of a torch module (one per target call of generate)."""

    def __init__(self, module):
        self.calls = 0
        module.register_forward_pre_hook(lambda *_: setattr(self, "calls", self.calls + 1))


def hf_generate(model, counter, x, N, torch, **kw):
    ids = torch.tensor([x])
    counter.calls = 0
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=N,
                             min_new_tokens=N, do_sample=False, **kw)
    seconds = time.perf_counter() - start
    return [int(t) for t in out[0, len(x):]], seconds, counter.calls


ROWS = {  # label -> (picospec method and options, transformers' generate arguments)
    "greedy decoding": (("autoregressive", {}), {}),
    "assisted generation, K = {K}": (("greedy", {"K": "K"}),
                                     {"assistant": True, "num_assistant_tokens": "K",
                                      "num_assistant_tokens_schedule": "constant",
                                      "assistant_confidence_threshold": 0.0}),
    "prompt lookup (3, 10)": (("prompt_lookup", {"max_ngram_size": 3, "num_pred_tokens": 10}),
                              {"prompt_lookup_num_tokens": 10, "max_matching_ngram_size": 3}),
}


def main(target="tiny-target", draft="tiny-draft", K=4, n_prompts=8, prompt_tokens=64, n_tokens=64,
         out=None):
    """picospec vs transformers side by side (needs torch and transformers:
    requirements-reference.txt)."""
    if draft == "ngram":  # the command line first: refused before torch loads
        raise ValueError("--draft ngram: transformers runs the same checkpoints as picospec, and "
                         "the n-gram has none; give a GPT-2 draft such as tiny-draft")
    from gpt2.hub import resolve
    from picospec_app.load import check_target
    from picospec_app.settings import read_settings

    check_target(target)
    offline = read_settings().offline  # PICOSPEC_OFFLINE, as main.py reads it
    folders = [resolve(name, offline=offline) for name in (target, draft)]  # before torch loads
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise ValueError(f"the peer benchmark needs torch and transformers ({e}): pip install -r "
                         "requirements-reference.txt") from None
    from bench.harness import check_room
    from picospec_app.compare import copy_prompts
    from picospec_app.run import run_method
    from picospec_app.machine import thread_policy
    from gpt2.train.corpus import heldout_prompts
    from gpt2.load import load_model
    from picospec_app.settings import engine_choices

    ours_target, encoder = load_model(target, offline=offline, **engine_choices())
    # the prompt lookup rows run copy-heavy prompts
    check_room(ours_target.n_ctx, prompt_tokens, n_tokens, encoder)
    ours_draft = load_model(draft, offline=offline, **engine_choices())[0]
    # both sides on the same number of threads: the policy's count for every product (no wide count
    # for picospec's long forwards, which torch could not match call by call)
    threads = thread_policy(ours_target.n_params,
                            requested=thread_policy(ours_target.n_params)["threads"])
    torch.set_num_threads(threads["threads"])
    hf_target, hf_draft = (hf_model(folder, torch) for folder in folders)
    counter = CallCounter(hf_target)
    prompts = heldout_prompts(encoder, n_prompts, prompt_tokens)
    lines = [header(threads) + f"; torch threads {torch.get_num_threads()}", "",
             f"`{measured_command()}`", "",
             "| row | prompts | picospec s (median) | transformers s (median) | picospec / "
             "transformers time "
             "| tokens per target call (picospec, transformers) | identical tokens |",
             "|---|---|---|---|---|---|---|"]
    for label, ((method, options), hf_kw) in ROWS.items():
        options = {k: K if v == "K" else v for k, v in options.items()}
        hf_kw = {k: K if v == "K" else v for k, v in hf_kw.items()}
        # transformers reads K and its schedule from the assistant's config
        if hf_kw.pop("assistant", False):
            for key in ("num_assistant_tokens", "num_assistant_tokens_schedule",
                        "assistant_confidence_threshold"):
                setattr(hf_draft.generation_config, key, hf_kw.pop(key))
            hf_kw["assistant_model"] = hf_draft
        sets = (("copy-heavy", copy_prompts(encoder, prompts)),
                ("ordinary", prompts)) if "lookup" in label else (
            ("ordinary", prompts),)
        for kind, xs in sets:
            ours_s, hf_s, ours_tpc, hf_tpc, same = [], [], [], [], []
            for x in xs:
                loaded = {"target": ours_target, "draft": ours_draft}
                run = run_method(method, x, loaded, n_tokens, 0, {"temperature": 0}, **options)
                ids, seconds, calls = hf_generate(hf_target, counter, x, n_tokens, torch, **hf_kw)
                ours_s.append(run["seconds"]), hf_s.append(seconds)
                ours_tpc.append(n_tokens / run["target_calls"]), hf_tpc.append(n_tokens / calls)
                same.append(run["output"][len(x):] == ids)
            lines.append(f"| {label.format(K=K)} | {kind} | {np.median(ours_s):.3f} | "
                         f"{np.median(hf_s):.3f} "
                         f"| {np.median(np.array(ours_s) / np.array(hf_s)):.2f}x | "
                         f"{np.median(ours_tpc):.2f}, "
                         f"{np.median(hf_tpc):.2f} | {sum(same)} of {len(same)} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if out:
        write_page(out, text)


if __name__ == "__main__":
    from picospec_cli import Option

    command(main,
            [Option("target", str, "tiny-target",
                    "target checkpoint (a name or a folder in HF layout)"),
                   Option("draft", str, "tiny-draft", "draft checkpoint for assisted generation"),
                   Option("K", int, 4, "draft tokens per step", low=1, high=64),
                   Option("n_prompts", int, 8, "held-out prompts", low=1),
                   Option("prompt_tokens", int, 64, "tokens per prompt", low=1),
                   Option("n_tokens", int, 64, "new tokens per run", low=1),
                   Option("out", "out", None, "also write the table to this file")])
