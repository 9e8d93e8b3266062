"""The one door every command goes through: parse, check and convert the command line BEFORE any
work starts.

    from picospec_cli import Option, command
    command(main, [Option("data", "dir", None, "folder of train.bin / val.bin"),
                   Option("steps", int, 100, "training steps", low=1)])

The `picospec` command, the benchmarks, the trainers and the checker (`python -m picospec.check`)
all parse here, and so does the method table's option record: this module imports the standard
library only, so picospec, gpt2, the app and the benchmarks each import it without an arrow running
back up (docs/architecture.md).

It replaces fire, which picospec used before: fire turns `--prompt 1e5` into 100000.0 and `--prompt
"Hello, world"` into a tuple, runs a function with an unknown option until it is about to return,
and maps `-h` to the first option that starts with h. argparse would need its messages, its prefix
matching and its exit paths overridden one by one to say the same. Here every value arrives as the
type its option declares (text stays text, verbatim), and a mistake is one line:

    error: unknown option --temprature: did you mean --temperature?
    error: --n_tokens must be an integer; got 'nan'

Option types: int, float, str (verbatim text), bool (a flag: --json, --nojson, --json=false), "ints"
/ "floats" / "strs" (comma-separated lists), "file" (an existing file), "dir" (an existing folder),
"out" (a path whose parent folder exists), "path" (any path, checked by the command). `low`/`high`
bound numbers (inclusive), `above` is an exclusive lower bound, `choices` lists the allowed values,
`check(value) -> message or None` does the rest. An option with default None is optional;
`required=True` makes the command refuse to start without it. A command that takes bare words (the
checker's MODULE:FUNCTION ...) names their list: parse(argv, options, positional=name).

`run(fn, argv, options, ...)` then calls fn(**values). Inside, a user's mistake found later (a file
that does not parse, a model that does not fit) is raised as ValueError with a message that says
what to do: it is printed as `error: ...` and the command exits 2. Ctrl-C exits 130 and a closed
pipe (`| head`) exits quietly, without a traceback; anything else is a bug and keeps its traceback.
"""
import contextlib
import difflib
import inspect
import math
import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple


class Option(NamedTuple):
    name: str
    type: object  # int, float, str, bool, "ints", "floats", "strs", "file", "dir", "out", "path"
    default: object = None
    help: str = ""
    low: float = None
    high: float = None
    above: float = None
    choices: tuple = None
    check: object = None  # check(value) -> message or None; for a list type, of each item
    required: bool = False
    # a method's option read by the app's loader, not passed to the method (picospec.methods)
    load: bool = False
    # for a list type: check(values) -> message or None, of the whole list
    check_list: object = None


class UsageError(ValueError):
    """A command line that cannot run: printed as one line, exit status 2."""


TYPE_NAMES = {int: "an integer", float: "a number", str: "text", bool: "true or false",
              "ints": "integers, comma-separated",
              "floats": "numbers, comma-separated", "strs": "names, comma-separated",
              "file": "an existing file",
              "dir": "an existing folder", "out": "a path in an existing folder", "path": "a path"}


METAVARS = {int: "N", float: "X", str: "TEXT", "ints": "N,N", "floats": "X,X", "strs": "A,B",
            "file": "FILE", "dir": "DIR", "out": "FILE", "path": "PATH"}


def convert(option, text):
    """The value of `--name text` as the option's type, checked; UsageError naming the option
    otherwise.

    Example: convert(Option("K", int, low=1), "4") -> 4; "4.0", "nan", "four" and "0" are each a
    one-line error.
    """
    flag, kind = f"--{option.name}", option.type
    if kind in ("ints", "floats", "strs"):
        parts = [p.strip() for p in text.split(",")]
        if not all(parts):
            raise UsageError(f"{flag} must be {TYPE_NAMES[kind]} like 1,2,4; got {text!r}")
        item = {"ints": int, "floats": float, "strs": str}[kind]
        values = [convert(option._replace(type=item), p) for p in parts]
        if option.check_list is not None and (message := option.check_list(values)):
            raise UsageError(f"{flag} {text}: {message}")
        return values
    if kind is bool:
        low = text.lower()
        if low not in ("true", "false", "1", "0", "yes", "no"):
            raise UsageError(f"{flag} is a switch: write {flag} or --no{option.name}; got "
                             f"{flag}={text}")
        return low in ("true", "1", "yes")
    if kind is int:
        try:
            value = int(text.replace("_", ""), 10)
        except ValueError:
            raise UsageError(f"{flag} must be an integer; got {text!r}") from None
    elif kind is float:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{flag} must be a number; got {text!r}") from None
        if not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number; got {text!r}")
    else:
        value = text  # text and paths arrive verbatim
        if kind is not str and not text:
            raise UsageError(f"{flag} needs a path; got an empty string")
        if kind == "file" and not Path(text).is_file():
            raise UsageError(f"{flag} {text}: no such file"
                             + (" (it is a folder)" if Path(text).is_dir() else ""))
        if kind == "dir" and not Path(text).is_dir():
            raise UsageError(f"{flag} {text}: no such folder")
        if kind == "out":
            if Path(text).is_dir():
                raise UsageError(f"{flag} {text} is a folder: give a file name")
            if not Path(text).resolve().parent.is_dir():
                raise UsageError(f"{flag} {text}: the folder {Path(text).resolve().parent} does "
                                 f"not exist; create it first")
            if (why := cannot_write_in(Path(text).resolve().parent)) is not None:
                raise UsageError(f"{flag} {text}: cannot write in {Path(text).resolve().parent} "
                                 f"({why}): give a folder you can write to")
    check_value(option, value)
    return value


def check_value(option, value):
    """Bounds, choices and the option's own check, for a value already of the right type."""
    flag = f"--{option.name}"
    if option.choices is not None and value not in option.choices:
        near = difflib.get_close_matches(str(value), [str(c) for c in option.choices], 1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise UsageError(f"unknown {flag} {value!r}{hint}: choose one of "
                         f"{', '.join(map(str, option.choices))}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if option.low is not None and value < option.low:
            raise UsageError(f"{flag} must be >= {option.low}; got {value}")
        if option.high is not None and value > option.high:
            raise UsageError(f"{flag} must be <= {option.high}; got {value}")
        if option.above is not None and value <= option.above:
            raise UsageError(f"{flag} must be > {option.above}; got {value}")
    if option.check is not None and (message := option.check(value)):
        raise UsageError(f"{flag} {value}: {message}" if not message.startswith("--") else message)


FLAG_VALUES = {"1": True, "true": True, "yes": True, "on": True,
               "0": False, "false": False, "no": False, "off": False, "": None}


def env_flag(name, default=None, environ=None):
    """An on/off environment variable (of `environ`, default this process's): 1, true, yes, on ->
    True; 0, false, no, off -> False (any case); unset or empty -> default; anything else is a
    ValueError naming it. Example: PICOSPEC_OFFLINE=maybe -> error."""
    value = (os.environ if environ is None else environ).get(name, "")
    setting = FLAG_VALUES.get(value.strip().lower(), "bad")
    if setting == "bad":
        raise ValueError(f"{name}={value!r}: set it to 1 (on) or 0 (off), or unset it")
    return default if setting is None else setting


def cannot_write_in(folder):
    """Why no file can be made in `folder`, or None: a file is made and removed at once, before any
    work (permission bits say nothing for root, nor for /proc or a full disk)."""
    import os
    import tempfile

    try:
        fd, path = tempfile.mkstemp(dir=folder, prefix=".picospec-write-check-")
        os.close(fd)
        os.remove(path)
    except OSError as e:
        return e.strerror or str(e)
    return None


# -> None, or why `path` cannot be an output folder (made if missing, in an existing folder)
def out_folder(path):
    if Path(path).is_file():
        return "is a file: give a folder"
    if not Path(path).resolve().parent.is_dir():
        return f"the folder {Path(path).resolve().parent} does not exist; create it first"
    folder = Path(path) if Path(path).is_dir() else Path(path).resolve().parent
    if (why := cannot_write_in(folder)) is not None:  # found now, not after the work
        return f"cannot write in {folder} ({why}): give a folder you can write to"


@contextlib.contextmanager
def output_folder(path):
    """`with output_folder(out): write files` makes `out` if missing and, if it made it, removes it
    when the writing fails: a failed run leaves no empty or half-written folder (each file itself is
    written atomically)."""
    path = Path(path)
    made = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    except BaseException:
        if made:
            shutil.rmtree(path, ignore_errors=True)
        raise


def split(argv, switches=None):
    """argv -> [(name, text or None, as written)]: --name value, --name=value, --flag; -h/--help as
    ("help", None).

    switches: for a command that takes bare words, the names its switches are written with (json,
    nojson); a bare word after one of them, or after an option's value, is ("", word, word). Without
    it a bare word is refused.
    """
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            out.append(("help", None, arg))
        elif arg.startswith("--") and len(arg) > 2:
            name, eq, text = arg[2:].partition("=")
            out.append((name.replace("-", "_"), text if eq else None, arg))
        elif arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit():
            raise UsageError(f"unknown option {arg}: options are written --name value (see --help)")
        elif switches is not None:
            out.append(("", arg, arg))
        else:
            raise UsageError(f"unexpected argument {arg!r}: options are written --name value; "
                             f"quote text with spaces (see --help)")
        i += 1
        takes_value = out[-1][0] not in ("help", "") and out[-1][0] not in (switches or ())
        if out[-1][1] is None and takes_value and i < len(argv) and not argv[i].startswith("--"):
            out[-1] = (out[-1][0], argv[i], out[-1][2])  # the next word is this option's value
            i += 1
    return out


def parse(argv, options, elsewhere=None, positional=None):
    """Command line -> {name: value} over `options` (defaults filled in), or UsageError. "help" ->
    {"help": True}.

    elsewhere: {name: message} for options this command does not take but a user may try (another
    method's). positional: the name under which the bare words are listed, for a command that takes
    them (else refused).
    """
    known = {o.name: o for o in options}
    switches = None if positional is None else {p + o.name for o in options if o.type is bool
                                                for p in ("", "no")}
    values, seen = {} if positional is None else {positional: []}, set()
    for name, text, written in split(argv, switches):
        if name == "help":
            return {"help": True}
        if name == "":
            values[positional].append(text)
            continue
        option = known.get(name)
        if option is None and name.startswith("no") and known.get(name[2:],
                                                                  Option("", None)).type is bool:
            if text is not None:
                raise UsageError(f"--{name} is a switch and takes no value; got {written}")
            option, text = known[name[2:]], "false"
        if option is None:
            for other in (name, name[2:] if name.startswith("no") else None):
                if elsewhere and other in elsewhere:
                    raise UsageError(elsewhere[other])
            near = difflib.get_close_matches(name, list(known), 1, 0.6)
            hint = f": did you mean --{near[0]}?" if near else ""
            raise UsageError(f"unknown option --{name}{hint} (see --help)")
        if option.name in seen:
            raise UsageError(f"--{option.name} is given twice: keep one")
        seen.add(option.name)
        if option.type is bool:
            if text is not None and "=" not in written and text.lower() not in ("true", "false"):
                raise UsageError(f"--{option.name} is a switch and takes no value; got {text!r} "
                                 f"after it")
            text = "true" if text is None else text
        elif text is None:
            raise UsageError(f"--{option.name} needs a value "
                             f"({TYPE_NAMES.get(option.type, 'a value')})")
        values[option.name] = convert(option, text)
    for option in options:
        if option.name not in values:
            if option.required:
                raise UsageError(f"--{option.name} is required: {option.help}")
            values[option.name] = option.default
    return values


def usage(prog, doc, options, positional=None):
    """The help text: the command's description, then one line per option. positional: how the bare
    words the command takes are written, e.g. "MODULE:FUNCTION"."""
    words = f"{positional} [{positional} ...] " if positional else ""
    lines = [f"usage: {prog} {words}[--option value ...]",
             ""] + ([inspect.cleandoc(doc), ""] if doc else []) + ["options:"]
    for o in options:
        kind = "" if o.type is bool else " " + METAVARS.get(o.type, "VALUE")
        shown = ",".join(map(str, o.default)) if isinstance(o.default,
                                                            (list, tuple)) else repr(o.default)
        default = "" if o.default is None or o.type is bool and not o.default else (f" (default "
                                                                                    f"{shown})")
        lines.append(f"  --{o.name}{kind}{'  [required]' if o.required else ''}  {o.help}{default}")
    return "\n".join(lines)


def options_of(fn, **overrides):
    """Options from a function's signature: type from the annotation (or the default), help from
    `overrides`.

    overrides maps a parameter name to an Option (used as it is) or to a dict of Option fields.
    """
    out = []
    for name, p in inspect.signature(fn).parameters.items():
        given = overrides.get(name, {})
        if isinstance(given, Option):
            out.append(given)
            continue
        default = None if p.default is inspect.Parameter.empty else p.default
        kind = (p.annotation if p.annotation is not inspect.Parameter.empty else type(default)
                if default is not None else str)
        out.append(Option(name, kind, default, required=p.default is inspect.Parameter.empty,
                          **given))
    return out


def run(fn, argv=None, options=None, prog=None, doc=None, elsewhere=None):
    """Parse argv against `options` (default: from fn's signature), then fn(**values), with one-line
    errors."""
    argv = sys.argv[1:] if argv is None else list(argv)
    options = options_of(fn) if options is None else options
    prog = prog or Path(sys.argv[0]).name
    return guarded(lambda: _run(fn, argv, options, prog, doc or fn.__doc__, elsewhere))


def _run(fn, argv, options, prog, doc, elsewhere):
    values = parse(argv, options, elsewhere)
    if values.get("help"):
        print(usage(prog, doc, options))
        return None
    return fn(**values)


def guarded(work):
    """Run work(); a ValueError is a user's mistake (one line, exit 2), Ctrl-C exits 130, a closed
    pipe exits 141."""
    try:
        result = work()
        sys.stdout.flush()  # a closed pipe shows here, inside the guard, not at exit
        return result
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # no second error when Python flushes stdout
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except ValueError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # a file the user named cannot be read or written
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        sys.exit(2)


def command(fn, options=None, **overrides):
    """`if __name__ == "__main__": command(main)`: run fn from sys.argv through the door."""
    module = inspect.getmodule(fn)
    prog = f"python -m {module.__spec__.name}" if module and module.__spec__ else None
    return run(fn, options=options if options is not None else options_of(fn, **overrides),
               prog=prog)

