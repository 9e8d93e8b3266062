"""Run a function as a command line (fire), with a user's mistake shown as one line instead of a traceback.

Functions raise ValueError with a message that says what is wrong and what to do; `fire_cli` prints it as
`error: ...` on stderr and exits with status 2. Any other exception is a bug and keeps its traceback.
"""
import sys


def fire_cli(fn, argv=None):
    import fire

    try:
        fire.Fire(fn, command=sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
