"""picospec's front door: decode a prompt with a speculative method and with plain autoregressive
decoding, side by side.

Methods and their options come from the table in picospec/methods.py (`python main.py --method
medusa --help`); every option is checked before any model loads.
"""
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from picospec_app.machine import blas_line, policy
from picospec.methods import METHODS, TABLE, batch_refusal, check_temperature, law
from picospec_cli import Option, UsageError, convert, guarded, read, settle, usage

COLORS = {"draft": "\033[32m", "resample": "\033[33m", "bonus": "\033[34m"}  # green, yellow, blue
LEGEND = ("green: draft token accepted, yellow: target's correction, blue: bonus token from the "
          "target")
DEFAULT_PROMPT = "def read_lines(path):\n"

SHARED = [
    Option("method", str, "speculative", "the method (see the list below)", choices=tuple(TABLE)),
    Option("prompt", str, DEFAULT_PROMPT, "the prompt, taken verbatim"),
    Option("prompt_file", "path", None, "read the prompt from this file (- for standard input)"),
    Option("escapes", bool, False, r"decode \n, \t and \\ in --prompt and in --batch lines"),
    Option("n_tokens", int, 40, "new tokens to generate", low=1),
    Option("temperature", float, 0.0, "0 is greedy decoding; > 0 samples", low=0),
    Option("top_k", int, None, "sample from the k most likely tokens only", low=1),
    Option("top_p", float, None, "sample from the smallest set of tokens with this much mass",
           above=0, high=1),
    Option("seed", int, 123, "seed of the numpy.random.Generator", low=0),
    Option("target", str, "tiny-target",
           "target model: tiny-target, gpt2, gpt2-medium/large/xl, a Hugging Face "
           "repo id, or a folder"),
    Option("draft", str, "tiny-draft",
           "draft model (methods that need one): tiny-draft, ngram, gpt2, ..."),
    Option("device", str, "cpu", "cpu, or gpu (CuPy)", choices=("cpu", "gpu")),
    Option("offline", bool, None, "never touch the network (--no-offline: allow it; unset: "
           "PICOSPEC_OFFLINE, else allowed)"),
    Option("threads", int, None,
           "BLAS threads (default: 1 for small models, else the free cores; also "
           "PICOSPEC_THREADS)", low=1, high=256),
    Option("runs", int, None, "timed rounds of autoregressive decoding and the method, interleaved "
           "(default: about a second of measurement, at least 3; one round of a --batch)", low=1),
    Option("json", bool, False, "print one JSON object instead of text"),
    Option("batch", "file", None,
           "decode every line of FILE as one batch (methods with a batched form)"),
    Option("batch_memory", int, None, "MB the --batch rows may take at once (KV caches, "
           "activations): rows run in groups that fit (default: half the free memory)", low=1),
    Option("progress", bool, None, "progress bars on stderr (default: when stderr is a terminal, "
           "and not for --json to a pipe)"),
]


def options_for(method):
    """The shared options plus the method's own (--draft only where a draft is used)."""
    shared = [o for o in SHARED if o.name != "draft" or "draft" in method.needs]
    return shared + list(method.options)


def elsewhere(method):
    """{option: message} for options of other methods."""
    own = {o.name for o in options_for(method)}
    takes = ", ".join(f"--{o.name}" for o in method.options) or "no options of its own"
    messages = {}
    for other in METHODS:
        for o in other.options:
            if o.name not in own:
                users = [m.name for m in METHODS if o.name in {p.name for p in m.options}]
                messages[o.name] = (f"--{o.name} is an option of {', '.join(users)}, not of "
                                    f"--method {method.name} (which takes {takes})")
    if "draft" not in own:
        users = ", ".join(m.name for m in METHODS if "draft" in m.needs)
        messages["draft"] = (f"--method {method.name} uses no draft model, so --draft does not "
                             f"apply (it is for {users})")
    return messages


def method_list():
    width = max(len(m.name) for m in METHODS)
    kinds = {"lossless": "", "greedy": " [greedy-only]", "lossy": " [lossy]"}
    return "\n".join(f"  {m.name:<{width}}  "
                     f"{m.help}{kinds.get(m.law, '') if isinstance(m.law, str) else ''}"
                     for m in METHODS)


def parse_command_line(argv):
    """argv -> (method row, {option: value}, names given); None after printing help."""
    every = {o.name: o for o in [*(o for m in METHODS for o in m.options), *SHARED]}
    given = read(argv, list(every.values()))
    name = convert(SHARED[0], given["method"]) if "method" in given else "speculative"
    method = TABLE[name]
    if given.get("help") and "method" in given:
        print(usage(f"{program()} --method {method.name}", f"{method.help}. {method.paper}.",
                    options_for(method)))
    elif given.get("help"):
        epilog = "methods (--method NAME --help shows a method's options):\n" + method_list()
        print(usage(program(), __doc__.split("\n\n")[0], SHARED, epilog=epilog))
    else:
        return method, settle(given, options_for(method), elsewhere(method)), set(given)


def program():
    """The usage line's name: "python main.py" as typed, else the command's (picospec)."""
    invoked = sys.argv[0] if sys.argv and sys.argv[0] else "main.py"
    if invoked.endswith(".py"):
        return f"python {invoked}"
    return Path(invoked).name.removesuffix(".exe")


def unescape(text):
    r"""--escapes: \n newline, \t tab, \\ backslash.
    Example: r"a\nb\\n" -> "a" + newline + "b\\n"."""
    return re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)


def read_prompts(values, given):
    """-> (prompts, a name for each): the one prompt, or --batch's lines."""
    if values["batch"] is not None:
        for name in ("prompt", "prompt_file"):
            if name in given:
                raise UsageError(f"--batch reads its prompts from {values['batch']} (one per "
                                 f"line): drop --{name}")
        return batch_prompts(values)
    return [read_prompt(values, given)], ["the prompt"]


def batch_prompts(values):
    """--batch FILE's prompts, one per line, blank lines skipped."""
    path = values["batch"]
    try:
        text = open(path, encoding="utf-8-sig", newline="").read()  # -sig: a BOM is no text
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--batch {path}: cannot read it as UTF-8 text "
                         f"({getattr(e, 'strerror', e)})") from None
    # lines end at "\n" or "\r\n" only (str.splitlines also cuts at a form feed or U+2028)
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    numbers = [n for n, line in enumerate(lines, 1) if line.strip()]  # blank lines skipped
    if not numbers:
        raise UsageError(f"--batch {path}: no prompts (one per line)")
    return ([unescape(lines[n - 1]) if values["escapes"] else lines[n - 1] for n in numbers],
            [f"the prompt on line {n} of {path}" for n in numbers])


def read_prompt(values, given):
    if values["prompt_file"] is not None:
        if "prompt" in given:
            raise UsageError("--prompt and --prompt_file are both given: keep one")
        path = values["prompt_file"]
        if path == "-" and sys.stdin is None:
            raise UsageError("--prompt_file -: standard input is closed; pipe the prompt in or "
                             "name a file")
        try:
            prompt = (sys.stdin.read() if path == "-" else
                      open(path, encoding="utf-8-sig").read())  # -sig: a BOM is no text
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--prompt_file {path}: cannot read it as UTF-8 text "
                             f"({getattr(e, 'strerror', e)})") from None
        if not prompt:
            raise UsageError(f"--prompt_file {path}: it is empty; put the prompt in it")
    else:
        prompt = values["prompt"]
        try:
            # bytes that were not UTF-8 arrive from the shell as lone surrogates
            prompt.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError("--prompt is not UTF-8 text (the terminal sent other bytes): set a "
                             "UTF-8 locale, or save the prompt as UTF-8 and pass --prompt_file"
                             ) from None
    prompt = unescape(prompt) if values["escapes"] else prompt
    if not prompt:
        raise UsageError("the prompt is empty: pass some text with --prompt")
    return prompt


def method_options(method, values):
    return {o.name: values[o.name] for o in method.options}


def check_before_loading(method, values):
    """What can be checked without a model: laws, files, the cache folder."""
    from picospec_app.load import check_needs

    if values["batch"] is not None and (refusal := batch_refusal(method)):
        raise UsageError(refusal)
    if values["batch_memory"] is not None and values["batch"] is None:
        raise UsageError("--batch_memory sets the memory of --batch's rows: add --batch FILE, or "
                         "drop it")
    check_temperature(method, method_options(method, values), values["temperature"])
    check_needs(method, method_options(method, values))
    from picospec_app.load import check_cache_dir, check_target
    from picospec_app.settings import read_settings

    offline = read_settings().offline  # a bad PICOSPEC_OFFLINE is named, even under --offline
    # the command line wins over the setting; the loads below pass on what asked for offline
    if values["offline"] is None:
        values["offline"] = "PICOSPEC_OFFLINE" if offline else False
    elif values["offline"]:
        values["offline"] = "--offline"
    check_target(values["target"])
    if "draft2" in method.needs and values.get("draft2") is not None:
        if same_model(values["draft2"], values["target"]):
            raise UsageError(f"--draft2 {values['draft2']} is the target itself: the second "
                             "drafter must be another, cheaper model (ngram, tiny-draft, ...)")
    filters = [f"--{k}" for k in ("top_k", "top_p") if values[k] is not None]
    if values["temperature"] == 0 and filters:  # a note: the run means something, the option not
        has, applies = ("have", "they apply") if len(filters) == 2 else ("has", "it applies")
        print(f"note: {' and '.join(filters)} {has} no effect at --temperature 0 (greedy decoding "
              f"takes the argmax); {applies} when sampling, at --temperature > 0", file=sys.stderr)

    if "datastore" in method.needs and values.get("datastore") is None:
        # before a datastore build into the cache (a download checks the Hugging Face cache itself)
        check_cache_dir()


def same_model(a, b):
    """Whether two model names are one checkpoint (same name, or same folder)."""
    from gpt2.hub import BUILTIN, is_local

    def folder(name):
        if name in BUILTIN:
            return BUILTIN[name].resolve()
        path = Path(name).expanduser()
        return path.resolve() if is_local(name) and path.exists() else name

    return a == b or folder(a) == folder(b)


def check_length(x, n_tokens, models, names, which="the prompt"):
    if not x:
        raise UsageError("the prompt is empty: pass some text with --prompt")
    for role, model in models.items():
        n_ctx = getattr(model, "n_ctx", None)
        if n_ctx is not None and len(x) + n_tokens > n_ctx:
            raise UsageError(f"{which} ({len(x)} tokens) plus --n_tokens {n_tokens} exceeds the "
                             f"{role} {names[role]!r}'s context window of {n_ctx} tokens: shorten "
                             f"the prompt or lower --n_tokens")


def report(method, x, run):
    from picospec_app.run import summary

    n_new = len(run["output"]) - len(x)
    return {"method": method, "output_ids": [int(t) for t in run["output"][len(x):]],
            "time_s": run["seconds"],
            "tokens_per_s": n_new / run["seconds"], "target_calls": run["target_calls"],
            "draft_calls": run["draft_calls"],
            "tokens_per_target_call": n_new / run["target_calls"],
            "acceptance_rate": summary(run["stats"])["acceptance"],
            "accepted_per_node": summary(run["stats"])["accepted_per_node"],
            "origins": [o for s in run["stats"] for o in s["origins"]]}


def colored(encoder, ids, origins, color):
    if not color:
        return encoder.decode(ids)
    return "".join(COLORS.get(o, "") + encoder.decode([t]) + ("\033[0m" if o in COLORS else "")
                   for t, o in zip(ids, origins))


def show(run, encoder, prompt, color):
    print(f"── {run['method']} " + "─" * 40)
    print(prompt + colored(encoder, run["output_ids"], run["origins"], color))
    line = (f"{len(run['output_ids'])} tokens in {run['time_s']:.3f} s (median of {run['rounds']} "
            f"runs, {run['tokens_per_s']:.1f} tokens/s), {run['target_calls']} target calls "
            f"({run['tokens_per_target_call']:.2f} tokens per target call)")
    if run["acceptance_rate"] is not None:
        line += f", {run['draft_calls']} draft calls, acceptance {run['acceptance_rate']:.0%}"
    print(line + "\n")


def main(argv=None):
    """Read the command line, check, load, run both decoders in rounds, report."""
    parsed = parse_command_line(sys.argv[1:] if argv is None else argv)
    if parsed is None:
        return
    method, values, given = parsed
    prompts, names = read_prompts(values, given)
    check_before_loading(method, values)
    target, loaded, encoder, threads = load(method, values)
    xs = [encoder.encode(p) for p in prompts]
    for x, name in zip(xs, names):  # the methods stop drafting at the context window's end
        check_length(x, values["n_tokens"],
                     {k: v for k, v in loaded.items() if k in ("target", "draft")},
                     {"target": values["target"], "draft": values.get("draft")}, name)
    batch = values["batch"] is not None
    rounds = run_rounds(method, values, xs, target, loaded, progress_wanted(values))
    make = batch_result if batch else single_result
    result = make(method, values, prompts, xs, rounds, encoder)
    result.update(threads=threads, blas=blas_line(threads))
    if values["json"]:
        print(json.dumps(result))
    else:
        (show_batch if batch else show_single)(result, values, encoder, names)


def load(method, values):
    """-> (target, loaded needs, encoder, thread policy)."""
    from picospec_app.load import load_needs
    from gpt2.load import load_model

    device, offline = values["device"], values["offline"] or None
    target, encoder = load_model(values["target"], device, offline, **engine_choices(values))
    threads = policy(target)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if device == "cpu" and threads["threads"] > (cpus or 1):
        print(f"note: {threads['threads']} BLAS threads oversubscribe the {cpus} CPUs this process "
              f"may use: each forward waits on threads that share a core (slower, often many "
              f"times); give --threads {cpus} or fewer", file=sys.stderr)
    loaded = load_needs(method, method_options(method, values), target, values["target"],
                        encoder, values.get("draft"), device, offline, progress_wanted(values))
    return target, loaded, encoder, threads


def progress_wanted(values):
    """--progress as given; else bars on a terminal, none for --json to a pipe."""
    if values["progress"] is not None:
        return values["progress"]
    return sys.stderr.isatty() and not (values["json"] and not sys.stdout.isatty())


def run_rounds(method, values, xs, target, loaded, progress):
    """Both decoders in turns, cold caches, one seed -> [baseline runs, method runs]."""
    from tqdm import tqdm

    from picospec_app import run

    order = list(dict.fromkeys(["autoregressive", method.name]))
    options, n, seed = method_options(method, values), values["n_tokens"], values["seed"]
    sampling = {k: values[k] for k in ("temperature", "top_k", "top_p")}
    batch = values["batch"] is not None
    groups = row_groups(xs, values, loaded, values["device"]) if batch else None

    def timed(m):
        mine = m == method.name
        needs = loaded if mine else {"target": target}  # the plain target's baseline
        if batch:
            return run.run_batch(method if mine else TABLE[m], xs, needs, groups, n, seed,
                                 sampling, options if mine else {}, progress)
        return run.run_method(m, xs[0], needs, n, seed, sampling, **(options if mine else {}))

    # CuPy compiles each kernel at its first use: warm up on the timed run itself, unclocked
    if values["device"] == "gpu":
        for m in order:
            timed(m)
    rounds = values["runs"] or (1 if batch else None)
    bar = tqdm(total=rounds and rounds * len(order), desc="timed runs", unit="run", leave=False,
               disable=not progress or batch, file=sys.stderr)

    def counted(m):
        out = timed(m)
        bar.update()
        return out

    with bar:
        return run.interleaved([lambda m=m: counted(m) for m in order], rounds)


def single_result(method, values, prompts, xs, rounds, encoder):
    """One prompt's runs -> the JSON object: texts, median times, speedup, costs."""
    from picospec_app.run import call_costs, limit_line, median_run, speedup_of

    x, options = xs[0], method_options(method, values)
    sampling = {k: values[k] for k in ("temperature", "top_k", "top_p")}
    order = list(dict.fromkeys(["autoregressive", method.name]))
    runs = [{**report(m, x, median_run(r)), "rounds": len(r), "times_s": [t["seconds"] for t in r]}
            for m, r in zip(order, rounds)]
    result = {"prompt": prompts[0], "prompt_ids": [int(t) for t in x], "method": method.name,
              "law": law(method, options, values["temperature"]), "target": values["target"],
              "draft": values.get("draft") if "draft" in method.needs else None,
              "seed": values["seed"], **sampling,
              "options": {k: v for k, v in options.items()
                          if isinstance(v, (int, float, str, bool, type(None)))},
              "runs": [{**r, "text": encoder.decode(r["output_ids"])} for r in runs]}
    if len(runs) == 2:
        speedup = speedup_of(*rounds)  # the median of the rounds' ratios, and their range
        costs = call_costs(*rounds)
        result.update(speedup=speedup["median"], speedup_range=speedup["range"],
                      rounds=speedup["rounds"],
                      cost_model={**costs, "limit": limit_line(costs, speedup["median"])},
                      same_output=runs[0]["output_ids"] == runs[1]["output_ids"])
    return result


def batch_result(method, values, prompts, xs, rounds, encoder):
    """--batch's runs -> the JSON object: each row's text, median times, calls."""
    from picospec_app.run import speedup_of

    def texts(run):
        return [o[len(x):] for o, x in zip(run["outputs"], xs)]

    mine, base = rounds[-1], rounds[0]
    ids, base_ids = texts(mine[0]), texts(base[0])
    seconds = [float(np.median([r["seconds"] for r in runs])) for runs in (mine, base)]
    return {"method": method.name, "prompts": prompts, "texts": [encoder.decode(i) for i in ids],
            "time_s": seconds[0], "target_calls": mine[0]["target_calls"], "rounds": len(mine),
            "groups": mine[0]["groups"],
            "tokens_per_target_call": mine[0]["tokens_per_target_call"],
            "autoregressive": {"texts": [encoder.decode(i) for i in base_ids],
                               "time_s": seconds[1], "target_calls": base[0]["target_calls"]},
            "speedup": speedup_of(base, mine)["median"],
            "same_output": [a == b for a, b in zip(ids, base_ids)]}


def show_single(result, values, encoder, names):
    color = sys.stdout.isatty()
    runs = result["runs"]
    for run in runs:
        show(run, encoder, result["prompt"], color)
    if len(runs) == 2:
        same = "identical" if result["same_output"] else "different"
        note = " (temperature 0: they must be identical)" if values["temperature"] == 0 else (
            " (sampling: texts may differ)")
        low, high = result["speedup_range"]
        print(f"speedup {result['speedup']:.2f}x over autoregressive (median of {result['rounds']} "
              f"interleaved rounds, range {low:.2f}-{high:.2f}x); texts {same}{note}")
        print(cost_line(result["cost_model"], result["speedup"]))
        print(result["cost_model"]["limit"])
    print(f"{result['blas']}; timings on a busy machine vary")
    if len(runs) == 2 and color:
        print(LEGEND)


def show_batch(result, values, encoder, names):
    for row, (name, prompt, text, tpc) in enumerate(zip(names, result["prompts"], result["texts"],
                                                        result["tokens_per_target_call"]), 1):
        print(f"── row {row} ({name.removeprefix('the prompt on ')}): {tpc:.2f} tokens per target "
              f"call " + "─" * 10)
        print(prompt + text + "\n")
    groups, n = result["groups"], values["n_tokens"]
    in_groups = f" in {len(groups)} groups of up to {groups[0]} rows" * (len(groups) > 1)
    rounds = f" (median of {result['rounds']} rounds)" * (result["rounds"] > 1)
    print(f"{result['method']}: {len(result['prompts'])} prompts x {n} tokens{in_groups} in "
          f"{result['time_s']:.3f} s{rounds}, {result['target_calls']} batched target calls")
    if result["method"] != "autoregressive":
        base, same = result["autoregressive"], sum(result["same_output"])
        note = " (temperature 0: they must be identical)" if values["temperature"] == 0 else (
            " (sampling: texts may differ)")
        print(f"autoregressive, batched the same way: {base['time_s']:.3f} s, "
              f"{base['target_calls']} batched target calls")
        print(f"speedup {result['speedup']:.2f}x over batched autoregressive; "
              f"{same}/{len(result['prompts'])} texts identical{note}")
    print(f"{result['blas']}; timings on a busy machine vary")


def cost_line(costs, measured):
    """E, c, each drafter's c_d and the predicted speedup beside the measured one."""
    drafts = costs["drafts"]
    calls = "".join(f", a {name} call c_d = {d['c_d']:.3f} ({d['per_target_call']:.2f} per target "
                    f"call)" for name, d in drafts.items())
    sums = "".join(f" + {d['per_target_call']:.2f} x {d['c_d']:.3f}" for d in drafts.values())
    formula = f"E / (c + k c_d) = {costs['E']:.2f} / ({costs['c']:.2f}{sums})" if drafts else (
        f"E / c = {costs['E']:.2f} / {costs['c']:.2f}")
    return (f"why: {costs['E']:.2f} tokens per target call; a target call costs c = "
            f"{costs['c']:.2f} one-token calls{calls}; cost model {formula} = "
            f"{costs['predicted']:.2f}x predicted, {measured:.2f}x measured")


def engine_choices(values):
    """The engines' build keywords from --threads and the environment."""
    from picospec_app.settings import engine_choices

    return engine_choices(threads=values["threads"])


def row_groups(xs, values, loaded, device):
    """--batch's rows in groups that fit the memory budget -> (groups of row indices, row bytes)."""
    from picospec_app.load import batch_row_bytes
    from picospec_app.machine import free_memory

    row = batch_row_bytes(loaded, max(len(x) for x in xs) + values["n_tokens"])
    if values["batch_memory"] is not None:
        budget = values["batch_memory"] * 2**20
        what = f"the {values['batch_memory']} MB of --batch_memory"
    else:
        free = free_memory(device)
        budget = free // 2 if free is not None else 4 * 2**30
        what = (f"half the free memory ({budget / 2**20:.0f} MB)" if free is not None else
                "the default of 4096 MB (the free memory cannot be read here)")
    size = min(len(xs), budget // row) if row else len(xs)
    if size < 1:
        need = -(-row // 2**20)
        raise UsageError(f"--batch: one row needs about {need} MB (KV caches and activations of "
                         f"the longest prompt plus --n_tokens {values['n_tokens']}), more than "
                         f"{what}: pass --batch_memory {need} or more, or lower --n_tokens")
    return [list(range(i, min(i + size, len(xs)))) for i in range(0, len(xs), size)], row


def cli(argv=None):
    """`python main.py` and the installed `picospec` command."""
    guarded(lambda: main(argv))

