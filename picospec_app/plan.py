"""The plan of one run of the picospec command: the command line read once, every check that needs
no model made in one place, and what the run then reads (Plan); after loading, the checks that
need the models (lengths against the context window, --batch's rows against memory).

    argv -> read_plan -> Plan -> (load) -> check_loaded -> (run, report)
"""
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from gpt2.backend import DEVICE_WORDS, DEVICES
from gpt2.fast.policy import usable_cpus
from gpt2.hub import BUILTIN, is_local
from picospec.methods import (ALSO, METHODS, TABLE, batch_refusal, check_temperature,
                              medusa_posterior)
from picospec.options import ranks_past
from picospec_app.load import batch_row_bytes, check_cache_dir, check_needs, check_target
from picospec_app.machine import free_memory
from picospec_app.settings import engine_choices, read_settings
from picospec_cli import Option, UsageError, convert, read, settle, usage

DEFAULT_PROMPT = "def read_lines(path):\n"
# characters read at most from --prompt_file or --batch: thousands of times a prompt (GPT-2 reads
# 1,024 tokens, about 4 characters each), so a file past it holds no prompt, and an endless input
# (/dev/zero) is refused in a moment, not read until memory runs out
MOST_TEXT = 16_000_000
# what --help says the command does (this module's docstring is about the plan, not the command)
ABOUT = ("Decode a prompt with a speculative method and with plain autoregressive decoding, side "
         "by side:\nthe texts, the times, tokens per target call, acceptance and the speedup.")

SHARED = [
    Option("method", str, "speculative", "the method (see the list below)", choices=tuple(TABLE),
           means=ALSO),
    Option("prompt", str, DEFAULT_PROMPT, "the prompt, taken verbatim"),
    Option("prompt_file", "path", None, "read the prompt from this file (- for standard input)"),
    Option("escapes", bool, False,
           r"decode \n, \t and \\ in the prompt (--prompt, --prompt_file) and in --batch lines"),
    Option("n_tokens", int, 40, "new tokens to generate", low=1,
           also=("max_new_tokens", "max_tokens", "max_length")),
    Option("temperature", float, 0.0, "0 is greedy decoding; > 0 samples", low=0,
           also=("do_sample",)),
    Option("top_k", int, None, "sample from the k most likely tokens only", low=1),
    Option("top_p", float, None, "sample from the smallest set of tokens with this much mass",
           above=0, high=1),
    Option("seed", int, 123, "seed of the numpy.random.Generator", low=0),
    Option("target", str, "tiny-target",
           "target model: tiny-target, gpt2, gpt2-medium/large/xl, a Hugging Face "
           "repo id, or a folder", also=("model",)),
    Option("draft", str, "tiny-draft",
           "draft model (methods that need one): tiny-draft, ngram, gpt2, ...",
           also=("draft_model", "assistant_model")),
    Option("device", str, "cpu", "cpu, or gpu (CuPy)", choices=DEVICES, means=DEVICE_WORDS),
    Option("offline", bool, None, "never touch the network (--no-offline: allow it; unset: "
           "PICOSPEC_OFFLINE, else allowed)"),
    Option("threads", int, None,
           "BLAS threads (default: 1 for small models, else the free cores; also "
           "PICOSPEC_THREADS)", low=1, high=256),
    Option("runs", int, None, "timed rounds of autoregressive decoding and the method, interleaved "
           "(default: about a second of measurement, at least 3; one round of a --batch)", low=1,
           high=1000),
    Option("json", bool, False, "print one JSON object instead of text"),
    Option("batch", "path", None, "decode every line of FILE as one batch (- for standard input; "
           "blank lines, or lines of spaces alone, skipped; methods with a batched form)"),
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
        listed = f"the method ({program()} -h lists them)"  # no list below a method's own help
        print(usage(f"{program()} --method {method.name}", f"{method.help}. {method.paper}.",
                    [o._replace(help=listed) if o.name == "method" else o
                     for o in options_for(method)]))
    elif given.get("help"):
        epilog = "methods (--method NAME --help shows a method's options):\n" + method_list()
        print(usage(program(), ABOUT, SHARED, epilog=epilog))
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
    if path != "-" and not os.path.isdir(path):  # the door's checks of an existing file (a
        convert(Option("batch", "file"), path)  # folder: read_text says so, as --prompt_file's)
    text = read_text("--batch", path, "the prompts", newline="")
    # lines end at "\n" or "\r\n" only (str.splitlines also cuts at a form feed or U+2028)
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    numbers = [n for n, line in enumerate(lines, 1) if line.strip()]  # blank lines skipped
    if not numbers:
        raise UsageError(f"--batch {path}: no prompts (one per line)")
    return ([unescape(lines[n - 1]) if values["escapes"] else lines[n - 1] for n in numbers],
            [f"the prompt on line {n} of {'standard input' if path == '-' else path}"
             for n in numbers])


def read_text(flag, path, what, newline=None):
    """The UTF-8 text of the file at `path`, or of standard input for "-"; past MOST_TEXT
    characters (an endless input: /dev/zero, `yes |`) refused, not read until memory runs out."""
    if path == "-" and sys.stdin is None:
        raise UsageError(f"{flag} -: standard input is closed; pipe {what} in or name a file")
    try:
        if path == "-":
            text = sys.stdin.read(MOST_TEXT + 1)
        else:
            with open(path, encoding="utf-8-sig", newline=newline) as f:  # -sig: a BOM is no text
                text = f.read(MOST_TEXT + 1)
    except IsADirectoryError:
        raise UsageError(f"{flag} {path}: it is a folder; name a file") from None
    except FileNotFoundError:
        raise UsageError(f"{flag} {path}: no such file") from None
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{flag} {path}: cannot read it as UTF-8 text ({e}); save it as "
                         f"UTF-8") from None
    if len(text) > MOST_TEXT:
        raise UsageError(f"{flag} {path}: more than {MOST_TEXT:,} characters (is it endless?); "
                         f"a prompt is a few thousand at most (GPT-2 reads 1,024 tokens): name "
                         f"the file of {what}")
    if path == "-" and (text := as_utf8(text, sys.stdin.encoding)) is None:
        raise UsageError(f"{flag} {path}: standard input is not UTF-8 text; pipe UTF-8 text in, "
                         f"or save {what} as UTF-8 and pass its file")
    return text


def as_utf8(text, encoding):
    # text read in a locale that is not UTF-8 (LC_ALL=C: the bytes it cannot read arrive as lone
    # surrogates) -> those bytes read as UTF-8, or None where they are not UTF-8 text either
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode(encoding or "ascii", "surrogateescape").decode("utf-8")
    except (UnicodeError, LookupError):
        return None


def read_prompt(values, given):
    if values["prompt_file"] is not None:
        if "prompt" in given:
            raise UsageError("--prompt and --prompt_file are both given: keep one")
        path = values["prompt_file"]
        prompt = read_text("--prompt_file", path, "the prompt")
        if not prompt:
            raise UsageError(f"--prompt_file {path}: it is empty; put the prompt in it")
    else:
        prompt = as_utf8(values["prompt"], sys.getfilesystemencoding())  # argv's own decoding
        if prompt is None:
            raise UsageError("--prompt is not UTF-8 text (the terminal sent other bytes): set a "
                             "UTF-8 locale, or save the prompt as UTF-8 and pass --prompt_file")
    prompt = unescape(prompt) if values["escapes"] else prompt
    if not prompt:
        raise UsageError("the prompt is empty: pass some text with --prompt")
    return prompt


@dataclass(frozen=True)
class Plan:
    """What one run does, settled before any model loads."""
    method: object  # the row of picospec/methods.py
    options: dict  # the method's own options
    sampling: dict  # temperature, top_k, top_p: applied alike to every model
    prompts: list  # the prompt, or --batch's lines
    names: list  # a name for each prompt, for messages
    order: tuple  # the decoders timed in turns: autoregressive, then the method
    n_tokens: int
    seed: int
    target: str
    draft: str | None  # the draft model's name, where the method uses one
    device: str
    offline: str | bool  # what asked for no network ("--offline", "PICOSPEC_OFFLINE"), or False
    threads: int | None  # --threads
    runs: int | None  # timed rounds (None: about a second's worth)
    json: bool
    batch: str | None  # --batch's file
    batch_memory: int | None  # MB
    progress: bool  # bars on stderr
    color: bool  # the text's colors: stdout a terminal, and NO_COLOR unset
    notes: tuple  # lines for stderr: what the run will not do as the user may think
    given: frozenset  # the options the command line named
    engine: dict  # how every engine of the run is built (threads, panels, static step, ...)


def read_plan(argv):
    """argv -> the Plan, every check that needs no model made; None after printing help."""
    parsed = parse_command_line(argv)
    if parsed is None:
        return None
    method, values, given = parsed
    prompts, names = read_prompts(values, given)
    options = {o.name: values[o.name] for o in method.options}
    if values["batch"] is not None and (refusal := batch_refusal(method)):
        raise UsageError(refusal)
    if values["batch_memory"] is not None and values["batch"] is None:
        raise UsageError("--batch_memory sets the memory of --batch's rows: add --batch FILE, or "
                         "drop it")
    check_temperature(method, options, values["temperature"])
    check_needs(method, options)
    settings = read_settings()  # a bad PICOSPEC_* setting is named, even under --offline
    check_target(values["target"])
    for name in ("target", "draft", "draft2"):  # a model's name, before any model loads
        if name in values and values[name] is not None and not str(values[name]).strip():
            raise UsageError(f"--{name} is empty: name a model (tiny-target, tiny-draft, ngram, "
                             f"gpt2, a Hugging Face repo id or a folder)")
    if "draft2" in method.needs and values.get("draft2") is not None:
        if same_model(values["draft2"], values["target"]):
            raise UsageError(f"--draft2 {values['draft2']} is the target itself: the second "
                             "drafter must be another, cheaper model (ngram, tiny-draft, ...)")
    if "datastore" in method.needs and values.get("datastore") is None:
        # before a datastore build into the cache (a download checks the Hugging Face cache itself)
        check_cache_dir("rest")
    # the command line wins over the setting; the loads pass on what asked for no network
    if values["offline"] is None:
        offline = "PICOSPEC_OFFLINE" if settings.offline else False
    else:
        offline = "--offline" if values["offline"] else False
    return Plan(method=method, options=options,
                sampling={k: values[k] for k in ("temperature", "top_k", "top_p")},
                prompts=prompts, names=names,
                order=tuple(dict.fromkeys(["autoregressive", method.name])),
                n_tokens=values["n_tokens"], seed=values["seed"], target=values["target"],
                draft=values["draft"] if "draft" in method.needs else None,
                device=values["device"], offline=offline, threads=values["threads"],
                runs=values["runs"], json=values["json"], batch=values["batch"],
                batch_memory=values["batch_memory"], progress=progress_wanted(values),
                color=sys.stdout.isatty() and settings.color,
                notes=notes(values, values["threads"] or settings.threads, given, method),
                given=frozenset(given),
                engine=engine_choices(settings, threads=values["threads"]))


def notes(values, threads, given, method):
    """Lines for stderr: a seed, filters and posteriors that do nothing at temperature 0, a
    posterior's thresholds given where it is not used, more threads than CPUs."""
    found = []
    filters = [f"--{k}" for k in ("top_k", "top_p") if values[k] is not None]
    if values["temperature"] == 0 and filters:  # the run means something, the option not
        has, applies = ("have", "they apply") if len(filters) == 2 else ("has", "it applies")
        found.append(f"note: {' and '.join(filters)} {has} no effect at --temperature 0 (greedy "
                     f"decoding takes the argmax); {applies} when sampling, at --temperature > 0")
    elif values["top_p"] == 1:  # sampling: the nucleus of mass 1 is the whole law
        found.append("note: --top_p 1 keeps the whole law (to float64's rounding): it has no "
                     "effect (a nucleus below 1 cuts the law's tail)")
    elif values["top_k"] == 1 and values["top_p"] is not None:
        found.append("note: --top_p has no effect with --top_k 1: the one token left is the whole "
                     "nucleus (sampling from a single token is greedy decoding)")
    if values["temperature"] == 0 and "seed" in given and method.seeded:  # drafts drawn at T = 0
        found.append(f"note: --seed changes no token at --temperature 0 (greedy decoding); it "
                     f"draws {method.name}'s {method.seeded}, so its calls and acceptance move "
                     f"with it")
    elif values["temperature"] == 0 and "seed" in given:  # the others draw nothing at T = 0
        found.append("note: --seed has no effect at --temperature 0 (greedy decoding draws "
                     "nothing); it seeds the sampling, at --temperature > 0")
    if "posterior" in values:  # Medusa's: the posterior the run decodes with
        used = medusa_posterior(values, values["temperature"])
        if (posterior := values["posterior"]) in ("typical", "nucleus") and used == "greedy":
            found.append(f"note: --posterior {posterior} has no effect at --temperature 0 (every "
                         f"posterior but lossless takes the argmax); it applies at --temperature "
                         f"> 0")
    for option in method.options:  # an option of the method given where the others void it
        if option.name in given and option.unused and (why := option.unused(values)):
            found.append(f"note: {why}" if why.startswith(f"--{option.name} ") else
                         f"note: --{option.name} has no effect here: {why}")
    if "draft" in method.needs and same_model(values["draft"], values["target"]):
        smaller = [n for n in ("tiny-draft", "ngram") if not same_model(n, values["target"])]
        found.append(f"note: --draft {values['draft']} is the target itself: every draft is "
                     f"accepted, but each costs a target call, so the run is slower than "
                     f"autoregressive decoding; give a smaller draft ({', '.join(smaller)})")
    cpus = usable_cpus()[1]  # its affinity, within a cgroup CPU quota
    if values["device"] == "cpu" and threads is not None and threads > (cpus or 1):
        fewer = f"{cpus} or fewer" if cpus > 1 else "1"
        found.append(f"note: {threads} BLAS threads oversubscribe the {cpus} "
                     f"CPU{'s' if cpus != 1 else ''} this process may use: each forward waits on "
                     f"threads that share a core (slower, often many times); give --threads "
                     f"{fewer}")
    return tuple(found)


def progress_wanted(values):
    """--progress as given; else bars on a terminal, none for --json to a pipe."""
    if values["progress"] is not None:
        return values["progress"]
    return sys.stderr.isatty() and not (values["json"] and not sys.stdout.isatty())


def same_model(a, b):
    """Whether two model names are one checkpoint (same name, or same folder)."""
    def folder(name):
        if name in BUILTIN:
            return BUILTIN[name].resolve()
        try:  # ~nouser, a name too long for a path: the loader names them, not a note
            path = Path(name).expanduser()
            return path.resolve() if is_local(name) and path.exists() else name
        except (RuntimeError, OSError):
            return name

    return a == b or folder(a) == folder(b)


# ---- after loading: what needs the models ----

class Groups(NamedTuple):
    """--batch's rows in groups that fit the memory budget."""
    rows: list  # [[row index, ...], ...]
    row_bytes: int  # what one row takes (KV caches and activations)


def check_loaded(plan, xs, loaded):
    """The checks that need the loaded models: every prompt's tokens plus --n_tokens fit each
    model's context window; --batch's rows fit memory -> their Groups (None for one prompt).
    Once they pass, the notes that need the models go to stderr: --top_k past the vocabulary,
    Medusa's --topk past the ranks of the heads' own tree (--tree sparse, read as they load)."""
    models = {k: v for k, v in loaded.items() if k in ("target", "draft")}
    names = {"target": plan.target, "draft": plan.draft}
    for x, name in zip(xs, plan.names):  # the methods stop drafting at the context window's end
        check_length(x, plan.n_tokens, models, names, name)
    groups = row_groups(plan, xs, loaded) if plan.batch is not None else None
    V, top_k, heads = getattr(models["target"], "n_vocab", 0), plan.sampling["top_k"], \
        loaded.get("heads")
    if top_k is not None and V and top_k >= V and plan.sampling["temperature"] != 0:
        print(f"note: --top_k {top_k} keeps every token of the target's {V:,}: it has no effect",
              file=sys.stderr)
    if ("topk" in plan.given and plan.options.get("tree") == "sparse" and isinstance(heads, dict)
            and heads.get("sparse")):
        if why := ranks_past(plan.options["topk"], heads["sparse"], "the heads' own tree "
                             "(--tree sparse)"):
            print(f"note: {why}", file=sys.stderr)
    return groups


def check_length(x, n_tokens, models, names, which="the prompt"):
    if not x:
        raise UsageError("the prompt is empty: pass some text with --prompt")
    for role, model in models.items():
        n_ctx = getattr(model, "n_ctx", None)
        if n_ctx is not None and len(x) + n_tokens > n_ctx:
            raise UsageError(f"{which} ({len(x)} tokens) plus --n_tokens {n_tokens} exceeds the "
                             f"context window of the {role} {names[role]!r}, {n_ctx} tokens: "
                             f"shorten the prompt or lower --n_tokens")


def row_groups(plan, xs, loaded):
    """--batch's rows in groups that fit --batch_memory, else half the free memory -> Groups."""
    if plan.batch_memory is not None:
        budget = plan.batch_memory * 2**20
        what = f"the {plan.batch_memory} MB of --batch_memory"
    else:
        free = free_memory(plan.device)
        budget = free // 2 if free is not None else 4 * 2**30
        what = (f"half the free memory ({budget / 2**20:.0f} MB)" if free is not None else
                "the default of 4096 MB (the free memory cannot be read here)")
    row = batch_row_bytes(loaded, max(len(x) for x in xs) + plan.n_tokens)
    size = min(len(xs), budget // row) if row else len(xs)
    if size < 1:
        need = -(-row // 2**20)
        raise UsageError(f"--batch: one row needs about {need} MB (KV caches and activations of "
                         f"the longest prompt plus --n_tokens {plan.n_tokens}), more than "
                         f"{what}: pass --batch_memory {need} or more, or lower --n_tokens")
    return Groups([list(range(i, min(i + size, len(xs)))) for i in range(0, len(xs), size)], row)
