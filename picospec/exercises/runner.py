"""Each answer file graded in its own process, under a time limit, its output captured: the
child runs `child` and writes each step as a JSON line to a file the parent reads."""
import codecs
import difflib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from picospec.exercises import EXERCISES
from picospec.exercises import grading
from picospec.exercises.grading import own_objects

SHOWN = 600  # characters of an answer's own output shown
TRIAL = 100  # sequences per case of the first timed run of a law-graded exercise (then 3x)


class Capped(io.RawIOBase):
    """What an answer prints, as bytes of UTF-8: its first SHOWN characters kept, all counted.
    fileno() is the grader's pipe, a real descriptor (faulthandler.enable() writes there)."""

    name = "<stdout>"

    def __init__(self, fd=1):
        self.kept, self.total, self.fd = [], 0, fd
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character may be cut

    def writable(self):
        return True

    def write(self, data):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        text = self.decoder.decode(bytes(data))
        if self.total < SHOWN:  # what is kept is what came first
            self.kept.append(text[:SHOWN - self.total])
        self.total += len(text)
        return len(data)

    def fileno(self):
        return self.fd


def captured(capped):
    """sys.stdout for an answer: a text stream as a file's (isatty() False, encoding, buffer,
    reconfigure, close), each write passed on to `capped` at once."""
    return io.TextIOWrapper(capped, encoding="utf-8", errors="backslashreplace",
                            write_through=True)


def uses_own(name, namespace):
    """The picospec object of the answer that a learner's file holds, by any name, or None."""
    own = {id(v): label for v, label in own_objects(name).items()}
    values = list(namespace.values())
    # a module of picospec held whole (import picospec.verify as v) hands out its functions too
    values += [v for m in namespace.values() if type(m) is type(os)
               and m.__name__.startswith("picospec") for v in vars(m).values()]
    return next((own[id(v)] for v in values if id(v) in own), None)


def child(path, events, samples, seed, names):
    """Load and grade in this process, each step an event (a JSON line) in the file `events`."""
    from picospec.exercises.answers import Unreadable, read_answers

    out = open(events, "a", encoding="utf-8", buffering=1)
    capped = Capped(1)  # fd 1: the pipe the grader reads, fd 2's too
    printed = captured(capped)
    grading.FORBID_OWN = True  # a learner's file: no call of picospec's own answer

    lock = threading.Lock()  # the case watcher writes events too

    def event(**fields):
        with lock:
            out.write(json.dumps(fields) + "\n")

    sys.stdout = sys.stderr = printed
    try:
        namespace = read_answers(path)
    except Unreadable as e:
        event(loaded=None, why=e.why)  # the line that says it names the file
        return
    except BaseException as e:  # the learner's file: SystemExit and KeyboardInterrupt too
        event(loaded=None, why=f"reading it raised {raised(e, path)}")
        return
    defined = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_")
                     and getattr(v, "__module__", None) == namespace["__name__"])
    event(loaded=[n for n in EXERCISES if callable(namespace.get(n))], defined=defined,
          untagged=namespace.get("__untagged__", []))
    threading.Thread(target=watch_cases, args=(event,), daemon=True).start()
    for name in names:
        fn = namespace.get(name)
        if not callable(fn):
            continue
        if (own := uses_own(name, namespace)) is not None:
            event(name=name, passed=False, line="FAIL: uses picospec's own answer",
                  text=f"{name}: FAIL\n  your file uses picospec's own answer, {own}: the "
                       f"exercise is to write it yourself")
            continue
        event(start=name)
        module = EXERCISES[name]
        try:
            if hasattr(module, "CONTRACT") and samples > 3 * TRIAL:  # time the first calls
                event(estimate=name, seconds=estimate(module, fn, samples, seed))
            verdict = module.grade(fn, samples=samples, seed=seed)
        except MemoryError:
            event(name=name, passed=False, line="not graded: out of memory", memory=True,
                  text=f"{name}: not graded\n  --samples {samples:,} needs more memory than "
                       f"this machine has: lower --samples")
            continue
        except BaseException as e:  # sys.exit or Ctrl-C inside the learner's function
            event(name=name, passed=False, line=f"FAIL: raised {type(e).__name__}",
                  text=f"{name}: FAIL\n  your function raised {raised(e, path)}")
            continue
        event(name=name, passed=verdict.passed, line=verdict.line(), text=str(verdict),
              answered=verdict.answered)
    if not printed.closed:  # the answer may have turned write_through off
        printed.flush()
    event(printed=capped.total, head="".join(capped.kept))


def raised(e, path):
    """`Type: message (at FILE:LINE)`: the learner's line nearest the raise."""
    tb, where = e.__traceback__, ""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename  # a notebook's: "FILE cell N"
        if name == str(path) or name.startswith(f"{path} cell "):
            where = f" (at {Path(path).name}{name[len(str(path)):]}, line {tb.tb_lineno})"
        tb = tb.tb_next
    if isinstance(e, SystemExit):
        return (f"SystemExit({e.code!r}){where}: sys.exit() ends a program; an answer returns "
                f"its value")
    return f"{type(e).__name__}: {' '.join(str(e).split())}{where}"


def grade_in_process(path, names, samples, seed, limit, say=print):
    """Grade `path` in a child process, at most `limit` seconds -> {"loaded", "defined", "verdicts"
    {name: event}, "why" (not loaded), "stopped" (a line), "printed" (chars), "head"}."""
    with tempfile.TemporaryDirectory() as folder:
        events = Path(folder) / "events"
        events.touch()
        here = str(Path(__file__).resolve().parents[2])  # the folder picospec is imported from
        start_child = (f"import sys; sys.path.insert(0, {here!r}); "
                       f"from picospec.exercises.runner import child; "
                       f"child(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), "
                       f"sys.argv[5:])")
        args = [sys.executable, "-c", start_child, str(Path(path).resolve()), str(events),
                str(samples), str(seed), *names]
        # apart from the terminal and the grader's group (start_new_session): the learner's code
        # cannot signal the grader (os.killpg(0, ..)), Ctrl-C reaches the grader alone (the child
        # would take it for its function's KeyboardInterrupt), and the child's group dies whole
        child_process = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        # what bypasses print (os.write(1, ..), a C library) read as it comes, its first bytes
        # kept: a full pipe would block the child until the time limit
        raw = bytearray()
        reader = threading.Thread(target=drain, args=(child_process.stdout, raw), daemon=True)
        reader.start()
        result, start, pending = {"verdicts": {}}, time.monotonic(), ""
        try:
            with open(events, encoding="utf-8") as stream:
                while True:
                    try:
                        child_process.wait(timeout=0.1)
                        done = True
                    except subprocess.TimeoutExpired:
                        done = False
                    *lines, pending = (pending + stream.read()).split("\n")  # whole lines only
                    for line in lines:
                        take(json.loads(line), result, limit - (time.monotonic() - start), say)
                    if done:
                        break
                    spent = time.monotonic() - start
                    if spent > limit or result.get("stopped"):
                        result.setdefault("stopped", f"stopped after {spent:.0f} s, past the time "
                                          f"limit of {limit:g} s (--timeout), {doing(result)}")
                        break
        finally:  # however the wait ends (its end, the limit, Ctrl-C, SIGTERM, an error)
            stop(child_process)
        reader.join(timeout=1)  # a descendant that left the group may hold the pipe open
        tail = bytes(raw).decode(errors="replace")
        # it never reached its end (a file that could not be read ends early, and says why)
        if "stopped" not in result and "printed" not in result and "why" not in result:
            result["stopped"] = (f"the answer ended the grading process (exit status "
                                 f"{child_process.returncode}), {doing(result)}")
        result["head"] = result.get("head", "") + tail[:SHOWN]
        return result


def drain(stream, kept):
    # reads `stream` to its end, keeping its first 4 * SHOWN bytes (SHOWN characters of UTF-8)
    for chunk in iter(lambda: stream.read1(1 << 16), b""):
        kept += chunk[:max(0, 4 * SHOWN - len(kept))]


def stop(process):
    # the process group of `process` killed, what the answer started with it; `process` reaped
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group has ended already
        pass
    process.wait()


def estimate(module, fn, samples, seed):
    """Seconds module.grade(fn, samples) would take: graded at TRIAL and 3 TRIAL sequences, the
    second run's time plus the rest at the cost per sequence between the two. A grading's fixed
    costs (the controls, the calls past the battery) are counted once, not once per TRIAL; each
    case's first calls are checked one by one, so it errs high for a quick answer."""
    seconds = []
    for n in (TRIAL, 3 * TRIAL):
        start = time.perf_counter()
        module.grade(fn, samples=n, seed=seed)
        seconds.append(time.perf_counter() - start)
    per_sequence = max(seconds[1] - seconds[0], 0.0) / (2 * TRIAL)
    return seconds[1] + (samples - 3 * TRIAL) * per_sequence


def watch_cases(event, every=1.0):
    """Each second, the case grading.grade_cases is on in the main thread, as an event when it
    changes: a stop at the time limit names the case a slow answer had not finished."""
    main, said = threading.main_thread().ident, None
    while True:
        time.sleep(every)
        frame = sys._current_frames().get(main)
        while frame is not None and frame.f_code is not grading.grade_cases.__code__:
            frame = frame.f_back
        seen = frame.f_locals if frame is not None else {}
        # before the loop, the stub check calls the first case
        label = seen.get("label") or (seen["cases"][0][0] if seen.get("cases") else None)
        if label != said:
            said = label
            event(case=label)


def doing(result):
    """What the child was doing when it stopped."""
    if result.get("running") and result.get("case"):
        case = result["case"] if len(result["case"]) <= 300 else result["case"][:300] + "..."
        return f"while grading {result['running']}, on its case {case}"
    if result.get("running"):
        return f"while grading {result['running']}"
    if "loaded" in result:
        return f"after grading {result['after']}" if result.get("after") else "after reading it"
    return "while reading the file (does it loop or exit at import?)"


def take(event, result, left, say):
    """One event of the child into `result`; an estimate past the time left stops the run."""
    if "loaded" in event:
        if event["loaded"] is None:
            result["why"] = event["why"]
        else:
            result.update(loaded=event["loaded"], defined=event["defined"],
                          untagged=event["untagged"])
    elif "start" in event:
        result["running"], result["case"] = event["start"], None
    elif "case" in event:
        result["case"] = event["case"]
    elif "estimate" in event:
        seconds = event["seconds"]
        if seconds > left:
            result["stopped"] = (f"{event['estimate']} would take about {seconds:.0f} s at these "
                                 f"--samples, more than the {max(left, 0):.0f} s left of the "
                                 f"time limit: lower --samples or raise --timeout")
        elif seconds > 10:
            say(f"grading {event['estimate']}: about {seconds:.0f} s", flush=True)
    elif "name" in event:
        result["verdicts"][event["name"]] = event
        result["after"] = result.pop("running", event["name"])
    elif "printed" in event:
        result["printed"], result["head"] = event["printed"], event["head"]


def near_names(defined):
    """{exercise: a function of the file whose name is close to it}."""
    out = {}
    for name in defined:
        if name not in EXERCISES:
            for match in difflib.get_close_matches(name, EXERCISES, 1, 0.75):
                out.setdefault(match, name)
    return out

