"""python -m picospec.exercises list | show NAME | template | grade PATH | handout NOTEBOOK --out
FILE (the commands: DOC below)."""
import sys
from pathlib import Path

from picospec.exercises import EXERCISES
from picospec.exercises.answers import answer_cells, handout, load
from picospec_cli import Option, UsageError, guarded, parse, usage

PROG = "python -m picospec.exercises"
OPTIONS = [
    Option("exercise", str, None, "grade only this exercise", choices=tuple(EXERCISES)),
    Option("samples", int, 20_000, "sequences per case of the law-graded exercises (fewer: faster, "
           "less power)", low=100),
    Option("seed", int, 0, "seed of the grading (cases and samples)", low=0),
    Option("out", "out", None, "handout: the learner's copy to write"),
]
DOC = """Exercises on speculative decoding, graded by their law (the exact-law checker) or against
picospec's own functions.

commands:
  list                               the exercises
  show NAME                          one exercise's statement and the signature to write
  template                           a FILE.py of every exercise's stub, to hand out
  grade FILE.py                      every exercise the file defines, each verdict in full (a
                                     notebook: the functions its answer cells define)
  grade FOLDER                       each .py and .ipynb in it: one line per learner and exercise
  handout NOTEBOOK --out FILE.ipynb  the notebook with its answer cells back to stubs

exit status of grade: 0 every answer graded passes, 1 some fail, 2 a usage error"""
WORDS = {"list": 0, "show": 1, "template": 0, "grade": 1, "handout": 1}


def parse_command(argv):
    """argv -> (command, its word or None, {option: value}); UsageError for a mistake."""
    values, _ = parse(argv, OPTIONS, words="COMMAND")
    if values.get("help"):
        print(usage(PROG, DOC, OPTIONS, words="COMMAND"))
        raise SystemExit(0)
    words = values.pop("words")
    if not words or words[0] not in WORDS:
        got = f"; got {words[0]!r}" if words else ""
        raise UsageError(f"give a command: {', '.join(WORDS)} (see --help){got}")
    command, rest = words[0], words[1:]
    if len(rest) != WORDS[command]:
        what = {"show": "the exercise's NAME", "grade": "one FILE.py, FILE.ipynb or folder",
                "handout": "the NOTEBOOK to copy"}.get(command, "nothing more")
        raise UsageError(f"{command} takes {what}; got {len(rest)} words: {' '.join(rest)}")
    word = rest[0] if rest else None
    if command == "show" and word not in EXERCISES:
        raise UsageError(f"no exercise {word!r}: choose one of {', '.join(EXERCISES)}")
    if command == "grade":
        check_path(word)
    if command == "handout":
        if not Path(word).is_file() or Path(word).suffix != ".ipynb":
            raise UsageError(f"{word}: not a notebook file (.ipynb)")
        if values["out"] is None:
            raise UsageError("handout needs --out FILE.ipynb: where to write the learner's copy")
        if not answer_cells(word):
            raise UsageError(f"{word} has no answer cells (code cells tagged 'answer')")
    return command, word, values


def check_path(path):
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file or folder")
    if p.is_file() and p.suffix not in (".py", ".ipynb"):
        raise UsageError(f"{path}: give a .py file of answers, a notebook or a folder of them")
    if p.is_dir() and not files_in(p):
        raise UsageError(f"{path}: the folder holds no .py or .ipynb file to grade")


def files_in(folder):
    return sorted(p for p in Path(folder).iterdir() if p.suffix in (".py", ".ipynb"))


def grade_file(path, values):
    """Every exercise the file answers, each verdict in full -> exit status."""
    found = load(path)
    if isinstance(found, str):
        print(f"FAIL {found}")
        return 1
    names = [values["exercise"]] if values["exercise"] else list(found)
    if not found or values["exercise"] and values["exercise"] not in found:
        wanted = values["exercise"] or "any exercise's"
        raise UsageError(f"{path} defines no function named {wanted} (the exercises: "
                         f"{', '.join(EXERCISES)}; see {PROG} list)")
    passed = True
    for name in names:
        verdict = EXERCISES[name].grade(found[name], samples=values["samples"],
                                        seed=values["seed"])
        print(f"{verdict}\n", flush=True)
        passed &= verdict.passed
    print(f"{len(names)} exercises graded: "
          + ("all pass" if passed else "some FAIL (see above)"))
    return 0 if passed else 1


def grade_folder(folder, values):
    """One line per learner and exercise -> exit status."""
    files, failed = files_in(folder), 0
    width = max(len(p.name) for p in files)
    for path in files:
        found = load(path)
        if isinstance(found, str) or not found:
            why = found if isinstance(found, str) else "no function named after an exercise"
            print(f"{path.name:<{width}}  {'-':<26}  FAIL: {why}", flush=True)
            failed += 1
            continue
        names = [values["exercise"]] if values["exercise"] else list(found)
        ok = True
        for name in names:
            line = ("FAIL: not answered" if name not in found else EXERCISES[name].grade(
                found[name], samples=values["samples"], seed=values["seed"]).line())
            print(f"{path.name:<{width}}  {name:<26}  {line}", flush=True)
            ok &= line == "pass"
        failed += not ok
    print(f"{len(files) - failed} of {len(files)} learners pass every exercise graded")
    return 1 if failed else 0


def main(argv=None):
    """The command; returns its exit status."""
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
            print("import numpy as np\n\n\n" + "\n\n\n".join(m.STUB for m in EXERCISES.values()))
        elif command == "handout":
            n = handout(word, values["out"])
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
