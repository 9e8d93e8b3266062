"""Regenerate the README's method tables from the table in picospec/methods.py, so the two cannot drift.

    python -m bench.readme            # rewrite the section between the markers of README.md
    python -m bench.readme --check    # exit 2 if README.md is out of date (tests/test_methods.py does the same)
"""
from pathlib import Path

from picospec.methods import markdown

BEGIN, END = "<!-- methods:begin (python -m bench.readme) -->", "<!-- methods:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"


def section(text):
    """The generated part of the README text, markers excluded."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{README} has no {BEGIN} ... {END} section: add the two markers where the tables go")
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def main(check=False):
    """Write (or with --check only compare) the README's method tables."""
    text = README.read_text(encoding="utf-8")
    fresh = "\n" + markdown() + "\n"
    if section(text) == fresh:
        print(f"{README.name} is up to date")
        return
    if check:
        raise ValueError(f"{README.name}'s method tables differ from picospec/methods.py: run python -m bench.readme")
    head, rest = text.split(BEGIN, 1)
    tmp = README.with_suffix(".md.tmp")
    tmp.write_text(head + BEGIN + fresh + END + rest.split(END, 1)[1], encoding="utf-8")
    tmp.replace(README)
    print(f"wrote {README.name}'s method tables")


if __name__ == "__main__":
    from gpt2.cli import Option, command

    command(main, [Option("check", bool, False, "only compare; exit 2 when the README is out of date")])
