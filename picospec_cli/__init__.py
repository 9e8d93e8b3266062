"""The one door every command goes through: argparse reads the command line once, then each value
is checked against its `Option` before any work starts.

    from picospec_cli import Option, command
    command(main, [Option("data", "dir", None, "folder of train.bin / val.bin"),
                   Option("steps", int, 100, "training steps", low=1)])

Standard library only, so every layer imports it (docs/architecture.md). Text stays text, verbatim
(`--prompt 123`, `--prompt "a, b"`); no prefix matching; a mistake is one line and exit status 2:

    error: unknown option --temprature: did you mean --temperature?

Option types: int, float, str, bool (a switch: --json, --no-json), "ints" / "floats" / "strs"
(comma-separated), "file" / "dir" (existing), "out" (a file in an existing folder), "path". `low` /
`high` bound numbers (inclusive), `above` is an exclusive lower bound, `choices` the allowed values,
`check(value) -> message or None` the rest (`check_list` of a whole list); default None is optional.
A ValueError raised later by the command is printed the same way; Ctrl-C exits 130, a closed pipe
quietly.
"""
import argparse
import contextlib
import difflib
import math
import os
import shutil
import sys
import tempfile
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
    load: bool = False  # a method's option read by the app's loader, not passed to the method
    check_list: object = None  # for a list type: check(values) -> message or None


class UsageError(ValueError):
    """A command line that cannot run: printed as one line, exit status 2."""


KINDS = {int: ("an integer", "N"), float: ("a number", "X"), str: ("text", "TEXT"),
         "ints": ("integers, comma-separated", "N,N"), "floats": ("numbers, comma-separated", "X,X"),
         "strs": ("names, comma-separated", "A,B"), "file": ("an existing file", "FILE"),
         "dir": ("an existing folder", "DIR"), "out": ("a path in an existing folder", "FILE"),
         "path": ("a path", "PATH")}


def convert(option, text):
    """`--name text` as the option's type, checked. Example: Option("K", int, low=1): "4" -> 4;
    "4.0", "nan" and "0" are each a one-line UsageError."""
    flag, kind = f"--{option.name}", option.type
    if kind in ("ints", "floats", "strs"):
        parts = [p.strip() for p in text.split(",")]
        if not all(parts):
            raise UsageError(f"{flag} must be {KINDS[kind][0]} like 1,2,4; got {text!r}")
        values = [convert(option._replace(type={"ints": int, "floats": float}.get(kind, str)), p)
                  for p in parts]
        if option.check_list is not None and (message := option.check_list(values)):
            raise UsageError(f"{flag} {text}: {message}")
        return values
    try:
        value = {int: lambda t: int(t.replace("_", ""), 10), float: float}.get(kind, str)(text)
    except ValueError:
        raise UsageError(f"{flag} must be {KINDS[kind][0]}; got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number; got {text!r}")
    if kind in ("file", "dir", "out", "path") and not text:
        raise UsageError(f"{flag} needs a path; got an empty string")
    why = {"file": not Path(text).is_file() and "no such file" + " (it is a folder)" * Path(text)
           .is_dir(), "dir": not Path(text).is_dir() and "no such folder"}.get(kind)
    if kind == "out":
        where = Path(text).resolve().parent
        why = (Path(text).is_dir() and "is a folder: give a file name" or not where.is_dir() and
               f"the folder {where} does not exist; create it first" or out_folder(where))
    if why:
        raise UsageError(f"{flag} {text}: {why}" if not why.startswith("is") else f"{flag} {text} "
                         f"{why}")
    check_value(option, value)
    return value


def check_value(option, value):
    """Bounds, choices and the option's own check, for a value already of the right type."""
    flag = f"--{option.name}"
    if option.choices is not None and value not in option.choices:
        near = difflib.get_close_matches(str(value), [str(c) for c in option.choices], 1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise UsageError(f"unknown {flag} {value!r}{hint}: "
                         f"choose one of {', '.join(map(str, option.choices))}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for bound, wrong, sign in ((option.low, value < (option.low or 0), ">="),
                                   (option.high, value > (option.high or 0), "<="),
                                   (option.above, value <= (option.above or 0), ">")):
            if bound is not None and wrong:
                raise UsageError(f"{flag} must be {sign} {bound}; got {value}")
    if option.check is not None and (message := option.check(value)):
        raise UsageError(message if message.startswith("--") else f"{flag} {value}: {message}")


class Parser(argparse.ArgumentParser):
    """argparse with every mistake raised as one UsageError line and values kept verbatim."""

    def _get_values(self, action, strings):  # argparse drops a value of "--"; keep it
        return strings[0] if action.option_strings and action.nargs is None else super()._get_values(
            action, strings)

    def _parse_optional(self, word):  # -1e-3 and -inf are values, as -3 is
        try:
            return float(word) and None or None
        except ValueError:
            return super()._parse_optional(word)

    def error(self, message):
        name = message.partition(": ")[0].removeprefix("argument ").split("/")[0].lstrip("-")
        if "expected one argument" in message:
            message = (f"--{name} needs a value ({KINDS[self.types[name]][0]}); one that starts "
                       f"with - is written --{name}=VALUE")
        elif "ignored explicit argument" in message:
            message = f"--{name} is a switch: write --{name} or --no-{name}, with no value"
        raise UsageError(message)


class Once(argparse.Action):
    """An option's text (True / False for a switch), refused when given twice."""

    def __call__(self, parser, namespace, value, flag=None):
        if hasattr(namespace, self.dest):
            raise UsageError(f"--{self.dest} is given twice: keep one")
        setattr(namespace, self.dest, not flag.startswith("--no-") if self.nargs == 0 else value)


def parser(options, prog=None, doc="", positional=None, epilog=None):
    """The argparse parser of `options`, its help listing every option with its default."""
    p = Parser(prog=prog, description=doc, epilog=epilog, allow_abbrev=False, add_help=False,
               usage=f"{prog} {positional + ' ... ' if positional else ''}[--option value ...]",
               argument_default=argparse.SUPPRESS, formatter_class=argparse.RawTextHelpFormatter)
    p.types = {o.name: o.type for o in options}
    p.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    if positional:
        p.add_argument("words", nargs="*", default=[], help=argparse.SUPPRESS)
    for o in options:
        shown = ",".join(map(str, o.default)) if isinstance(o.default, list) else o.default
        text = o.help + (" (required)" if o.required else f" (default: {str(shown).lower()})"
                         if o.type is bool else f" (default: {shown})" * (o.default is not None))
        p.add_argument(f"--{o.name}", *[f"--no-{o.name}"] * (o.type is bool), action=Once,
                       nargs=0 if o.type is bool else None, help=text,
                       metavar=None if o.type is bool else KINDS[o.type][1])
    return p


def read(argv, options, positional=None):
    """argparse's one pass over argv -> {name: text, or True / False for a switch} of the options
    the user gave ("help": True for -h; "words": the bare words of a command that takes them)."""
    p = parser(options, positional=positional)
    given, rest = p.parse_known_intermixed_args(argv) if positional else p.parse_known_args(argv)
    for word in rest:
        if not (word[:2] == "--" and len(word) > 2 or word[:1] == "-" and word[1:2].isalpha()):
            before = argv[argv.index(word) - 1] if argv.index(word) else ""
            if p.types.get(before.lstrip("-").removeprefix("no-")) is bool:
                raise UsageError(f"{before} is a switch and takes no value; got {word!r} after it")
            raise UsageError(f"unexpected argument {word!r}: options are written --name value; "
                             f"quote text with spaces (see --help)")
        names = [n for o in options for n in (o.name, f"no-{o.name}"[:len(o.name) + 3 * (o.type
                                                                                        is bool)])]
        near = difflib.get_close_matches(word.split("=")[0].lstrip("-"), names, 1, 0.6)
        hint = f": did you mean --{near[0]}?" if near else ""
        raise UsageError(f"unknown option {word.split('=')[0]}{hint} (see --help)")
    return vars(given)


def settle(given, options, elsewhere=None):
    """The values of `options` (defaults filled in, each checked) from what `read` found; a name
    read but not among them is refused with elsewhere[name] (an option of another method)."""
    for name in set(given) - {o.name for o in options} - {"help", "words"}:
        raise UsageError(elsewhere[name])
    values = {"words": given["words"]} if "words" in given else {}
    for o in options:
        if o.name in given:
            values[o.name] = given[o.name] if o.type is bool else convert(o, given[o.name])
        elif o.required:
            raise UsageError(f"--{o.name} is required: {o.help}")
        else:
            values[o.name] = o.default
    return values


def parse(argv, options, positional=None):
    """Command line -> ({name: value}, the names the user gave); ({"help": True}, ...) for -h."""
    given = read(argv, options, positional)
    return ({"help": True} if given.get("help") else settle(given, options)), set(given)


def usage(prog, doc, options, positional=None, epilog=None):
    """The help text: the command's description, then each option with its default."""
    return parser(options, prog, doc, positional, epilog).format_help().rstrip()


def env_flag(name, default=None, environ=None):
    """An on/off environment variable (of `environ`, default this process's): 1, true, yes, on ->
    True; 0, false, no, off -> False (any case); unset or empty -> default; anything else is a
    ValueError naming it. Example: PICOSPEC_OFFLINE=maybe -> error."""
    value = (os.environ if environ is None else environ).get(name, "")
    setting = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False,
               "no": False, "off": False, "": None}.get(value.strip().lower(), "bad")
    if setting == "bad":
        raise ValueError(f"{name}={value!r}: set it to 1 (on) or 0 (off), or unset it")
    return default if setting is None else setting


def cannot_write_in(folder):
    """Why no file can be made in `folder`, or None: a file is made and removed at once, before any
    work (permission bits say nothing for root, nor for /proc or a full disk)."""
    try:
        fd, path = tempfile.mkstemp(dir=folder, prefix=".picospec-write-check-")
        os.close(fd)
        os.remove(path)
    except OSError as e:
        return e.strerror or str(e)


def out_folder(path):
    """None, or why `path` cannot be an output folder (made if missing, in an existing folder)."""
    folder = Path(path) if Path(path).is_dir() else Path(path).resolve().parent
    if Path(path).is_file() or not folder.is_dir():
        return "is a file: give a folder" if Path(path).is_file() else (
            f"the folder {folder} does not exist; create it first")
    if (why := cannot_write_in(folder)) is not None:  # found now, not after the work
        return f"cannot write in {folder} ({why}): give a folder you can write to"


@contextlib.contextmanager
def output_folder(path):
    """`with output_folder(out): write files` makes `out` if missing and removes it again when the
    writing fails: a failed run leaves no empty or half-written folder."""
    path, made = Path(path), not Path(path).exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    except BaseException:
        if made:
            shutil.rmtree(path, ignore_errors=True)
        raise


def guarded(work):
    """work(), with a ValueError or an OSError as one `error:` line and exit 2, Ctrl-C as exit 130
    and a closed pipe quiet (exit 141)."""
    try:
        result = work()
        sys.stdout.flush()  # a closed pipe shows here, inside the guard, not at exit
        return result
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # no second error when Python flushes stdout
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except (ValueError, OSError) as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        print(f"error: {where}{' '.join(text.split())}", file=sys.stderr)
        sys.exit(2)


def run(fn, argv=None, options=(), prog=None, doc=None):
    """Parse argv against `options`, then fn(**values), with one-line errors."""
    def work():
        values, _ = parse(sys.argv[1:] if argv is None else list(argv), options)
        if "help" in values:
            return print(usage(prog or Path(sys.argv[0]).name, doc or fn.__doc__, options))
        return fn(**values)
    return guarded(work)


def command(fn, options):
    """`if __name__ == "__main__": command(main, OPTIONS)`: run fn from sys.argv through the door."""
    module = sys.modules.get(fn.__module__)
    spec = getattr(module, "__spec__", None)
    return run(fn, options=options, prog=f"python -m {spec.name}" if spec else None)
