"""The door of every command: argparse reads the command line once; each value is then checked
against its `Option` (fields below) before any work. A mistake is one `error:` line and exit 2.

    command(main, [Option("steps", int, 100, "training steps", low=1)])
"""
import argparse
import difflib
import errno
import math
import os
import signal
import sys
import tempfile
import threading
from collections import namedtuple
from pathlib import Path


# An Option's fields beyond name, default and help:
#   type        int, float, str, bool, "ints", "floats", "strs", "file", "dir", "out", "path"
#   low, high   inclusive bounds; above: an exclusive lower bound; choices: the allowed values
#   check       check(value) -> a message or None (each item, for a list)
#   check_list  check_list(values) -> a message or None
#   required    the command line must give it
#   load        a method's option that the app's loader reads, not passed to the method
#   also        names a user may type for it, answered with "did you mean --name?" (a trainer's
#               --backbone is the app's --target)
#   means       {word: choice}: other words a user may type for a choice (--method assisted)
#   unused      unused(values) -> why a value given has no effect with the others, or None
FIELDS = ("name type default help low high above choices check required load check_list also "
          "means unused")
Option = namedtuple("Option", FIELDS, defaults=(None, "", None, None, None, None, None, False,
                                                False, None, (), None, None))


class UsageError(ValueError):  # a command line that cannot run: one line, exit status 2
    pass


TYPES = {int: ("an integer", "N"), float: ("a number", "X"), str: ("text", "TEXT"),  # verbatim
         "ints": ("integers, comma-separated", "N,N"), "strs": ("names, comma-separated", "A,B"),
         "floats": ("numbers, comma-separated", "X,X"), "file": ("an existing file", "FILE"),
         "dir": ("an existing folder", "DIR"), "out": ("a file in a folder", "FILE"),
         "path": ("a path", "PATH")}  # and bool: a switch, --json / --no-json


def convert(option, text):
    """`--name text` -> the option's value, checked. Example: Option("K", int, low=1): "4" -> 4;
    "4.0", "nan" and "0" are each a UsageError."""
    flag, kind = f"--{option.name}", option.type
    if kind in ("ints", "floats", "strs"):
        parts = [p.strip() for p in text.split(",")]
        if not all(parts):
            like = (",".join(map(str, option.choices[:2])) if option.choices else
                    {"ints": "1,2,4", "floats": "0.5,1.5", "strs": "a,b"}[kind])
            raise UsageError(f"{flag} must be {TYPES[kind][0]} like {like}; got {text!r}")
        item = option._replace(type={"ints": int, "floats": float}.get(kind, str))
        values = [convert(item, p) for p in parts]
        if option.check_list is not None and (message := option.check_list(values)):
            raise UsageError(f"{flag} {text}: {message}")
        return values
    try:
        value = {int: lambda t: int(t.replace("_", ""), 10), float: float}.get(kind, str)(text)
    except ValueError:
        raise UsageError(f"{flag} must be {TYPES[kind][0]}; got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number; got {text!r}")
    if kind in ("file", "dir", "out", "path") and not text:
        raise UsageError(f"{flag} needs a path; got an empty string")
    try:
        why = path_problem(kind, Path(text))
    except (OSError, RuntimeError) as e:
        why = f": {path_error(e)}"
    if why:
        raise UsageError(f"{flag} {text}{why}")
    check_value(option, value)
    return value


# why a path cannot be looked at: a name too long for the file system, a loop of links (pathlib's
# resolve() raises RuntimeError for a loop before Python 3.13)
def path_error(e):
    return "a loop of symbolic links" if isinstance(e, RuntimeError) else e.strerror or str(e)


def path_problem(kind, path):  # -> why path cannot be the option's "file", "dir" or "out", or None
    why = None
    if kind == "file" and (not path.exists() or path.is_dir()):  # a pipe (/dev/stdin) is a file
        why = ": no such file" + " (it is a folder)" * path.is_dir()
    elif kind == "dir" and not path.is_dir():
        why = ": no such folder" + " (it is a file)" * path.exists()
    elif kind == "out":
        where = path.resolve().parent
        above = next((p for p in path.absolute().parents if p.exists()), None)  # what exists
        why = (" is a folder: give a file name" if path.is_dir() else
               f": {above} is a file, not a folder" if above is not None and above.is_file() else
               f": the folder {where} does not exist; create it first" if not where.is_dir()
               else out_folder(where))
        why = f": {why}" if why and why[0] not in " :" else why
    return why


def check_value(option, value):
    """Bounds, choices and the option's own check, for a value already of the right type."""
    flag = f"--{option.name}"
    if option.choices is not None and value not in option.choices:
        near = nearest(str(value), [str(c) for c in option.choices], also=option.means)
        raise UsageError(f"unknown {flag} {value!r}" + (f" (did you mean {near}?)" if near
                         else "") + f": choose one of {', '.join(map(str, option.choices))}")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    for bound, sign, ok in ((option.low, ">=", float.__ge__), (option.high, "<=", float.__le__),
                            (option.above, ">", float.__gt__)):
        if number and bound is not None and not ok(float(value), bound):
            raise UsageError(f"{flag} must be {sign} {bound}; got {value}")
    if option.check is not None and (message := option.check(value)):
        # a long text (a JSON tree) cut short; a path is shown whole
        shown = f"{value[:60]}..." if option.type is str and len(value) > 80 else value
        raise UsageError(message if message.startswith("--") else f"{flag} {shown}: {message}")


MARK = "\0"  # argv never holds it: it marks a value argparse would take for an option


def number(word):
    try:
        float(word)
    except ValueError:
        return False
    return True


# argv with each value argparse would read as an option or as the end of options (-3, -1e-3, -inf,
# --) marked, after a `--name` in `valued` or in `--name=VALUE`: --K -1e-3 -> --K MARK-1e-3; a value
# that is no number (--prompt -x) stays as it is
def marked(argv, valued):
    out, after = [], False
    for word in argv:
        name, equals, value = word.partition("=")
        if after and (word == "--" or word[:1] == "-" and number(word)):
            word = MARK + word
        elif word[:2] == "--" and equals and value[:1] == "-":
            word = f"{name}={MARK}{value}"
        after = word[:2] == "--" and not equals and word[2:] in valued
        out.append(word)
    return out


class Parser(argparse.ArgumentParser):  # each mistake one UsageError line
    def __init__(self, kinds, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kinds = kinds  # {option name: its type}

    def error(self, message):
        flags = message.removeprefix("argument ").split(":")[0].split("/")  # -h/--help
        name = next((f for f in flags if f.startswith("--")), flags[0]).lstrip("-")
        if name == "help" and "ignored explicit argument" in message:
            message = "--help takes no value: write --help (or -h) alone"
        elif "expected one argument" in message:
            message = (f"--{name} needs a value ({TYPES[self.kinds[name]][0]}); one that starts "
                       f"with - is written --{name}=VALUE")
        elif "ignored explicit argument" in message:
            message = f"--{name} is a switch: write --{name} or --no-{name}, with no value"
        raise UsageError(message)


class Once(argparse.Action):
    def __call__(self, parser, namespace, value, flag=None):
        if hasattr(namespace, self.dest):
            raise UsageError(f"--{self.dest} is given twice: keep one")
        setattr(namespace, self.dest, not flag.startswith("--no-") if self.nargs == 0 else value)


def parser(options, prog=None, doc=None, words=None, epilog=None):
    """The parser of `options` (and bare words, named `words`); -h lists each with its default."""
    p = Parser({o.name: o.type for o in options}, prog,
               f"{prog} {words + ' ... ' if words else ''}[--option value ...]", doc, epilog,
               formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
               argument_default=argparse.SUPPRESS, add_help=False)
    p.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    if words:
        p.add_argument("words", nargs="*", default=[], help=argparse.SUPPRESS)
    for o in options:
        # a list or tuple as the command line writes it (A,B), none for an empty one
        shown = (",".join(map(str, o.default)) or "none" if isinstance(o.default, (list, tuple))
                 else o.default)
        shown = (str(shown).lower() if o.type is bool else repr(shown) if isinstance(shown, str)
                 and not shown.isprintable() else shown)  # a newline shown as \n
        p.add_argument(f"--{o.name}", *[f"--no-{o.name}"] * (o.type is bool), action=Once,
                       nargs=0 if o.type is bool else None, metavar=TYPES.get(o.type, (0, None))[1],
                       help=o.help + (" (required)" if o.required else f" (default: {shown})"
                                      * (o.default is not None)))
    return p


def read(argv, options, words=None):
    """argparse's one pass -> {name: text, or True / False for a switch} of the options given
    ("help": True for -h; "words": the bare words of a command that takes them)."""
    p = parser(options, words=words)
    argv = list(argv)
    marks = marked(argv, {o.name for o in options if o.type is not bool})
    given, rest = p.parse_known_intermixed_args(marks) if words else p.parse_known_args(marks)
    for word in rest:
        if not (word[:2] == "--" and len(word) > 2 or word[:1] == "-" and word[1:2].isalpha()):
            before = argv[marks.index(word) - 1] if marks.index(word) else ""
            if p.kinds.get(before.lstrip("-").removeprefix("no-")) is bool:
                raise UsageError(f"{before} is a switch and takes no value; got {word!r} after it")
            raise UsageError(f"unexpected argument {word!r}: options are written --name value; "
                             f"quote text with spaces (see --help)")
        names = [*p.kinds, *(f"no-{o.name}" for o in options if o.type is bool)]
        near = nearest(word.split("=")[0].lstrip("-"), names, "--",
                       {a: o.name for o in options for a in o.also})
        raise UsageError(f"unknown option {word.split('=')[0]}"
                         + (f": did you mean {near}?" if near else "") + " (see --help)")
    return {k: v.removeprefix(MARK) if isinstance(v, str) else v for k, v in vars(given).items()}


def nearest(typed, names, dash="", also=None):
    """What a mistyped name may have meant, or None; also: {another name for one: its name}."""
    # the name in another case or with - for _ (--k, --top-k), the few it begins (--top: "--top_k
    # or --top_p"; a switch's no- form only when typed so), the one it begins with and goes on
    # after a _ (lookahead_decoding), the few it is a whole part of (speedup: predicted_speedup),
    # else the closest spelling; another name (--target for --backbone) as that one
    also, key = also or {}, lambda name: name.lower().replace("-", "_")
    pool = [*names, *also]
    begun = list(dict.fromkeys(also.get(n, n) for n in pool if key(n).startswith(key(typed))
                               and (key(typed)[:3] == "no_" or key(n)[:3] != "no_")))
    longer = sorted((n for n in pool if key(typed).startswith(key(n) + "_")), key=len)[-1:]
    part = list(dict.fromkeys(also.get(n, n) for n in pool
                              if f"_{key(typed)}_" in f"_{key(n)}_" and key(n)[:3] != "no_"))
    near = ([n for n in pool if key(n) == key(typed)]
            or (begun if len(begun) <= 3 else [])
            or longer or (part if len(part) <= 3 else [])
            or difflib.get_close_matches(typed, pool, 1, 0.75))
    return " or ".join(dash + n for n in dict.fromkeys(also.get(n, n) for n in near)) or None


def settle(given, options, elsewhere=None):
    """{name: value} over `options` (defaults filled in, each checked) from what `read` found; a
    name read that is not among them is refused with elsewhere[name] (another method's option)."""
    for name in set(given) - {o.name for o in options} - {"help", "words"}:
        raise UsageError(elsewhere[name])
    values = {"words": given["words"]} if "words" in given else {}
    for o in options:
        if o.required and o.name not in given:
            raise UsageError(f"--{o.name} is required: {o.help}")
        values[o.name] = (o.default if o.name not in given else given[o.name] if o.type is bool
                          else convert(o, given[o.name]))
    return values


def parse(argv, options, words=None):
    """Command line -> ({name: value}, the names given), or ({"help": True}, ...) for -h."""
    given = read(argv, options, words)
    return ({"help": True} if given.get("help") else settle(given, options)), set(given)


def usage(prog, doc, options, words=None, epilog=None):
    return parser(options, prog, doc, words, epilog).format_help().rstrip()


def env_flag(name, default=None, environ=None):
    """An on/off variable: 1, true, yes, on / 0, false, no, off; unset: default; else ValueError."""
    value = (os.environ if environ is None else environ).get(name, "")
    setting = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False,
               "no": False, "off": False, "": default}.get(value.strip().lower(), ValueError)
    if setting is ValueError:
        raise ValueError(f"{name}={value!r}: set it to 1 (on) or 0 (off), or unset it")
    return setting


def replace_file(path, data):
    """Write `data` (chunks of bytes, or write(f) for a binary file f) into a fresh temporary file
    beside `path`, then rename it over `path`: an interrupted write leaves the old file (or none),
    and no other file is touched (the temporary name is one no file had)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the file gets the usual permissions
        with os.fdopen(fd, "wb") as f:
            data(f) if callable(data) else f.writelines(data)
        os.replace(tmp, path)
    except BaseException:  # Ctrl-C may land after os.replace: then tmp is already gone
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def cannot_write_in(folder):  # -> why no file can be made in folder (one is tried), or None
    try:
        fd, path = tempfile.mkstemp(dir=folder, prefix=".picospec-write-check-")
        os.close(fd)
        os.remove(path)
    except OSError as e:  # ENOENT in a folder that is there: one that holds no new file (/proc)
        return ("it takes no new files" if e.errno == errno.ENOENT and os.path.isdir(folder)
                else e.strerror or str(e))


def cannot_make(folder):  # -> (nearest existing part, "a file" or why not writable), or None
    folder = Path(folder)
    existing = next(p for p in (folder, *folder.parents) if p.exists() or p == Path(p.anchor)
                    or p == Path("."))
    if not existing.is_dir():
        return existing, "a file"
    why = cannot_write_in(existing)
    return None if why is None else (existing, why)


def out_folder(path):  # -> why path cannot be an output folder (made if missing), or None
    try:
        folder = Path(path) if Path(path).is_dir() else Path(path).resolve().parent
    except (OSError, RuntimeError) as e:
        return path_error(e)
    if Path(path).is_file() or not folder.is_dir():
        return "is a file: give a folder" if Path(path).is_file() else (
            f"the folder {folder} does not exist; create it first")
    if (why := cannot_write_in(folder)) is not None:  # found now, not after the work
        return f"cannot write in {folder} ({why}): give a folder you can write to"


# SIGTERM (`kill`, a scheduler's time limit), raised where the work is, so that what cleans up
# after Ctrl-C (a temporary file, a half-written folder) runs for it too
class Terminated(KeyboardInterrupt):
    pass


def terminate(signum, frame):
    # one is enough: a second SIGTERM (a supervisor repeating it) must not cut the cleanup short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


class Unwritten(OSError):  # a standard stream's failed write, naming the stream
    def __init__(self, stream, *args):
        super().__init__(*args)
        self.stream = stream


def tell(line):  # the guard's last word on stderr; a stderr that cannot take it is left be
    try:
        print(line, file=sys.stderr)
    except OSError:
        pass


def to_devnull(stream):  # what Python flushes at exit goes nowhere: no second error
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError):  # a stream with no file descriptor holds nothing for the exit
        pass


class Said:
    """A standard stream whose failed write names it ("the standard output: No space left on
    device"), and whose text its encoding cannot write is written escaped (a `\\u2603`), not
    lost with the work done before."""

    def __init__(self, stream, name):
        self.stream, self.name = stream, name

    def write(self, text):
        try:
            return self.said(self.stream.write, text)
        except UnicodeEncodeError:  # PYTHONIOENCODING=ascii, a latin-1 terminal
            encoding = self.stream.encoding or "ascii"
            return self.said(self.stream.write,
                             text.encode(encoding, "backslashreplace").decode(encoding))

    def flush(self):
        return self.said(self.stream.flush)

    def said(self, fn, *args):
        try:
            return fn(*args)
        except BrokenPipeError:  # a reader gone: quiet, exit 141
            raise
        except OSError as e:
            raise Unwritten(self.stream, e.errno,
                            f"cannot write the {self.name} ({e.strerror or e})") from None

    def __getattr__(self, name):  # fileno, isatty, encoding, buffer: the stream's own
        return getattr(self.stream, name)


def guarded(work):
    """work(); a ValueError or OSError: one `error:` line, exit 2; Ctrl-C: 130; SIGTERM: 143;
    closed pipe: 141; a standard output closed before the start (`>&-`): one line, exit 2; a
    standard error closed (`2>&-`): the work runs, its notes and errors go nowhere."""
    if sys.stdout is None:  # Python's stand-in for a closed stream
        if sys.stderr is not None:
            print("error: the standard output is closed: send it to a file or a terminal",
                  file=sys.stderr)
        sys.exit(2)
    streams = sys.stdout, sys.stderr
    # print(file=None) writes to stdout: a closed stderr's notes would land in the output
    null = open(os.devnull, "w") if sys.stderr is None else None
    sys.stderr = Said(null or sys.stderr, "standard error")
    sys.stdout = Said(sys.stdout, "standard output")
    # SIGTERM as Ctrl-C, unless ignored or handled already (or off the main thread)
    mine = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    if mine:
        ctrl_c = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGTERM, terminate)
    try:
        result = work()
        sys.stdout.flush()  # a closed pipe shows here, inside the guard, not at exit
        return result
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM as Terminated
        if mine:  # a signal while saying so would be a traceback from here
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        tell("\nterminated" if isinstance(e, Terminated) else "\ninterrupted")
        sys.exit(143 if isinstance(e, Terminated) else 130)
    except BrokenPipeError:
        to_devnull(streams[0])
        sys.exit(141)
    except MemoryError:  # a model, a batch or a cache larger than the memory free
        tell("error: out of memory: close other programs, or ask for less (a smaller model, "
             "fewer tokens, --batch_memory for --batch)")
        sys.exit(2)
    except (ValueError, OSError) as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        tell(f"error: {where}{' '.join(text.split())}")
        if isinstance(e, Unwritten) and e.stream is streams[0]:
            to_devnull(streams[0])
        sys.exit(2)
    finally:
        sys.stdout, sys.stderr = streams
        if null is not None:
            null.close()
        if mine:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if ctrl_c is not None:  # None: set outside Python, cannot be put back
                signal.signal(signal.SIGINT, ctrl_c)


def command(fn, options, argv=None, check=None):
    """`command(main, OPTIONS)` under `if __name__ == "__main__"`: fn(**values) of the command line,
    guarded; -h prints the help. check(values, names given): a command's own rule across options,
    before fn."""
    spec = getattr(sys.modules.get(fn.__module__), "__spec__", None)
    prog = f"python -m {spec.name}" if spec else Path(sys.argv[0]).name

    def work():
        values, given = parse(sys.argv[1:] if argv is None else list(argv), options)
        if "help" in values:
            return print(usage(prog, fn.__doc__, options))
        if check is not None:
            check(values, given)
        return fn(**values)
    return guarded(work)
