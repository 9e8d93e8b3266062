"""python -m picospec.exercises list | show NAME | template | grade PATH | handout NOTEBOOK --out
FILE (the commands: DOC below)."""
import csv
import io
import json
import sys
from pathlib import Path

from picospec.exercises import EXERCISES
from picospec.exercises.answers import Unreadable, handout, handout_problem, is_device
from picospec.exercises.runner import grade_in_process, near_names
from picospec_cli import Option, UsageError, guarded, nearest, parse, usage

PROG = "python -m picospec.exercises"
OPTIONS = [
    Option("exercise", str, None, "grade only this exercise", choices=tuple(EXERCISES)),
    Option("samples", int, 20_000, "sequences per case of the law-graded exercises (fewer: faster, "
           "less power)", low=100, high=10_000_000),
    Option("seed", int, 0, "seed of the grading (cases and samples)", low=0),
    Option("timeout", float, 300.0, "seconds one answer file may take to grade (each file in its "
           "own process)", above=0),
    Option("json", bool, False, "grade FOLDER: the table as JSON"),
    Option("csv", bool, False, "grade FOLDER: the table as CSV"),
    Option("out", "out", None, "handout: the learner's copy to write"),
]
DOC = """Exercises on speculative decoding, graded by their law (the exact-law checker) or against
picospec's own functions.

commands:
  list                               the exercises
  show NAME                          one exercise's statement and the signature to write
  template [NAME]                    a FILE.py of every exercise's statement and stub (or one's)
  grade FILE.py                      every exercise, each verdict in full (a notebook: the
                                     functions its answer cells define); a missing one fails
  grade FOLDER                       each .py and .ipynb in it, a learner each: a table, one row
                                     per learner, one column per exercise (--json, --csv)
  handout NOTEBOOK --out FILE.ipynb  the notebook with its answer cells back to stubs

Each answer file is graded in its own process, at most --timeout seconds; what it prints is
captured and shown cut short.

exit status of grade: 0 every exercise graded passes, 1 some fail, 2 a usage error"""
WORDS = {"list": (0, 0), "show": (1, 1), "template": (0, 1), "grade": (1, 1), "handout": (1, 1)}
# the options each command reads; any other is refused, never ignored
USES = {"list": set(), "show": set(), "template": set(), "handout": {"out"},
        "grade": {"exercise", "samples", "seed", "timeout", "json", "csv"}}


def parse_command(argv):
    """argv -> (command, its word or None, {option: value}); UsageError for a mistake."""
    values, given = parse(argv, OPTIONS, words="COMMAND")
    if values.get("help"):
        print(usage(PROG, DOC, OPTIONS, words="COMMAND"))
        raise SystemExit(0)
    words = values.pop("words")
    if not words or words[0] not in WORDS:
        near = words and nearest(words[0], list(WORDS))
        got = f"; got {words[0]!r}" + (f" (did you mean {near}?)" if near else "") if words else ""
        raise UsageError(f"give a command: {', '.join(WORDS)} (see --help){got}")
    command, rest = words[0], words[1:]
    low, high = WORDS[command]
    if not low <= len(rest) <= high:
        what = {"show": "the exercise's NAME", "grade": "one FILE.py, FILE.ipynb or folder",
                "handout": "the NOTEBOOK to copy", "template": "at most one exercise's NAME"
                }.get(command, "nothing more")
        got = (f"{len(rest)} words: {' '.join(rest)}" if len(rest) > 1 else
               f"the word {rest[0]}" if rest else "none")
        raise UsageError(f"{command} takes {what}; got {got}")
    for name in sorted(given - USES[command] - {"words"}):
        raise UsageError(f"{command} does not read --{name}: drop it (see --help)")
    word = rest[0] if rest else None
    if command in ("show", "template") and word is not None and word not in EXERCISES:
        near = nearest(word, list(EXERCISES))
        raise UsageError(f"no exercise {word!r}" + (f" (did you mean {near}?)" if near else "")
                         + f": choose one of {', '.join(EXERCISES)}")
    if command == "grade":
        check_path(word)
        if values["json"] and values["csv"]:
            raise UsageError("--json and --csv are both given: keep one")
        if (values["json"] or values["csv"]) and not Path(word).is_dir():
            raise UsageError(f"--{'json' if values['json'] else 'csv'} writes a class's table: "
                             f"grade a FOLDER, or drop it")
    if command == "handout":
        check_handout(word, values["out"])
    return command, word, values


def check_handout(notebook, out):
    if not Path(notebook).exists():
        raise UsageError(f"{notebook}: no such file; give the teacher's notebook (.ipynb)")
    if not Path(notebook).is_file() or Path(notebook).suffix != ".ipynb":
        raise UsageError(f"{notebook}: not a notebook file (.ipynb)")
    if out is None:
        raise UsageError("handout needs --out FILE.ipynb: where to write the learner's copy")
    if Path(out).exists() and Path(out).resolve() == Path(notebook).resolve():
        raise UsageError(f"--out {out} is the notebook itself: the handout would overwrite its "
                         f"answers; give another file")
    try:
        problem = handout_problem(notebook)
    except Unreadable as e:
        raise UsageError(str(e)) from None
    if problem:
        raise UsageError(problem)


def check_path(path):
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file or folder")
    if p.is_file() and p.suffix not in (".py", ".ipynb"):
        raise UsageError(f"{path}: give a .py file of answers, a notebook or a folder of them")
    if p.is_dir() and not files_in(p):
        raise UsageError(f"{path}: the folder holds no .py or .ipynb file to grade")


def files_in(folder):
    return sorted(p for p in Path(folder).iterdir() if p.is_file()
                  and p.suffix in (".py", ".ipynb"))


def verdicts(path, values, say=print):
    """{exercise: (mark, line, text)} for every exercise asked, and the file's own notes."""
    names = [values["exercise"]] if values["exercise"] else list(EXERCISES)
    result = grade_in_process(path, names, values["samples"], values["seed"],
                              values["timeout"], say)
    notes = []
    if "why" in result:
        notes.append(f"{Path(path).name}: {result['why']}")
    if result.get("stopped"):
        notes.append(f"{Path(path).name}: {result['stopped']}")
    near = near_names(result.get("defined", []))
    out = {}
    for name in names:
        got = result["verdicts"].get(name)
        if got is not None:  # a stub that still raises NotImplementedError is not answered
            mark = "pass" if got["passed"] else "FAIL" if got.get("answered", True) else "-"
            out[name] = (mark, got["line"], got["text"])
        elif "loaded" in result and name not in result["loaded"]:
            why = f"not answered: the file defines no function {name}"
            if name in near:
                why += f" (did you mean {near[name]}? rename it {name})"
            elif name in result.get("untagged", []):
                why += (f" in an answer cell ({name} is defined in a cell without the "
                        f"'answer' tag: tag that cell)")
            out[name] = ("-", why, f"{name}: FAIL\n  {why}")
        else:  # not reached: the file could not be read, or the run stopped before it
            why = "not graded: " + ("the file could not be read" if "why" in result else
                                    "the run stopped before it")
            out[name] = ("x", why, f"{name}: FAIL\n  {why}")
    # printed: what print wrote; head: its first characters, then those written past print
    # (os.write, a C library), which may come alone, as the last words of a process that died
    printed, head = result.get("printed", 0), result.get("head", "").rstrip()
    if printed or head:
        said = f"printed {printed:,} characters" if printed else "wrote to its output"
        notes.append(f"{Path(path).name} {said} while graded"
                     + ("; the first:\n    " + head.replace("\n", "\n    ") if head else ""))
    return out, notes


def grade_file(path, values):
    """Every exercise asked, each verdict in full -> exit status."""
    out, notes = verdicts(path, values)
    for note in notes:
        print(note, flush=True)
    for _, _, text in out.values():
        print(f"{text}\n", flush=True)
    passed = sum(mark == "pass" for mark, _, _ in out.values())
    print(f"{passed} of {len(out)} exercises pass"
          + ("" if passed == len(out) else " (see above)"))
    return 0 if passed == len(out) else 1


def grade_folder(folder, values):
    """A table: one row per learner, one column per exercise, k of n -> exit status."""
    names = [values["exercise"]] if values["exercise"] else list(EXERCISES)
    quiet = values["json"] or values["csv"]
    files, rows = files_in(folder), []
    width = max(len(p.name) for p in files)
    if not quiet:
        print(f"{'learner':<{width}}  " + "  ".join(f"{i:>4}" for i in range(1, len(names) + 1)),
              flush=True)
    for path in files:
        out, notes = verdicts(path, values, say=(lambda *a, **k: None) if quiet else print)
        rows.append((path.name, out, notes))
        if not quiet:
            print(row_line(path.name, out, names, width), flush=True)
    failing = sum(any(mark != "pass" for mark, _, _ in out.values()) for _, out, _ in rows)
    if values["json"]:
        print(json.dumps({"exercises": names, "learners": [
            {"file": name, "passed": sum(m == "pass" for m, _, _ in out.values()),
             "of": len(names), "verdicts": {n: out[n][1] for n in names}, "notes": notes}
            for name, out, notes in rows]}, indent=1))
    elif values["csv"]:
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["learner", *names, "passed", "of", "notes"])
        for name, out, notes in rows:  # notes: why a file was not graded, what it printed
            writer.writerow([name, *(out[n][1] for n in names),
                             sum(m == "pass" for m, _, _ in out.values()), len(names),
                             "; ".join(notes)])
        print(text.getvalue(), end="")
    else:
        print("\n".join(["", "columns: " + ", ".join(f"{i} {n}" for i, n in
                                                    enumerate(names, 1)),
                         "marks: pass, FAIL, - not answered, x not graded (see below)", ""]))
        for name, out, notes in rows:
            for note in notes:
                print(note)
            for n in names:
                if out[n][0] == "FAIL" or out[n][0] == "-" and "(" in out[n][1]:  # a hint
                    print(f"{name} {n}: {out[n][1]}")
            missing = [n for n in names if out[n][0] == "-"]
            if missing:
                print(f"{name}: not answered: {', '.join(missing)}")
        print(f"\n{len(rows) - failing} of {len(rows)} learners pass every exercise graded")
    return 1 if failing else 0


def row_line(name, out, names, w):
    marks = "  ".join(f"{out[n][0]:>4}" for n in names)
    passed = sum(out[n][0] == "pass" for n in names)
    return f"{name:<{w}}  {marks}  {passed} of {len(names)}"


def template(word):
    """The stubs with their statements as comments: every exercise's, or one's."""
    parts = []
    for name, m in EXERCISES.items():
        if word in (None, name):
            statement = "\n".join(f"# {line}".rstrip() for line in m.STATEMENT.splitlines())
            parts.append(f"{statement}\n{m.STUB}")
    return "import numpy as np\n\n\n" + "\n\n\n".join(parts)


def main(argv=None):
    """The command; returns its exit status."""
    # SIGTERM (the door raises it where the grader is, so its `finally` ends the answer's process)
    # ends the command as Ctrl-C does: one line, exit 128 + 15 (Ctrl-C: 128 + 2)
    try:
        command, word, values = parse_command(sys.argv[1:] if argv is None else argv)
        if command == "list":
            width = max(map(len, EXERCISES))
            for name, m in EXERCISES.items():
                how = "its law (picospec.check)" if hasattr(m, "CONTRACT") else "its outputs"
                print(f"{name:<{width}}  {m.FAMILY}; graded by {how}")
        elif command == "show":
            print(f"{EXERCISES[word].STATEMENT}\n\n{EXERCISES[word].STUB}")
        elif command == "template":
            print(template(word))
        elif command == "handout":
            out = values["out"]
            then = (": give another --out" if is_device(out) else
                    "; the file is as it was: free space on its disk, or give another --out"
                    if Path(out).is_file() else
                    "; no file was made: free space on the disk, or give another --out")
            try:
                n = handout(word, out)
            except OSError as e:  # a full disk, a file-size limit, a device that refuses
                raise UsageError(f"--out {out}: cannot write the handout ({e.strerror or e})"
                                 f"{then}") from None
            print(f"wrote {values['out']}: {n} answer cells back to stubs, outputs cleared")
        elif Path(word).is_dir():
            return grade_folder(word, values)
        else:
            return grade_file(word, values)
        return 0
    except UsageError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(guarded(main))  # Ctrl-C: one line and exit status 130; a closed pipe: quiet
