"""The door at the level of argv: what `read` and `parse` make of each word, and the one line a
mistake gets, pinned so that the door can rest on argparse's public interface alone (no private
name of argparse, a test reads the source) whatever the Python version does with words that start
with -."""
import ast
from pathlib import Path

import pytest

import picospec_cli
from picospec_cli import (Option, UsageError, check_value, convert, out_folder, parse, read, settle,
                          usage)

OPTIONS = [Option("K", int, 4, "drafts", low=1), Option("temperature", float, 0.0, "T", low=0),
           Option("prompt", str, "hi", "text"), Option("json", bool, False, "JSON")]


@pytest.mark.parametrize("argv, given", [
    (["--K", "-3"], {"K": "-3"}),
    (["--temperature", "-1e-3"], {"temperature": "-1e-3"}),
    (["--temperature", "-inf"], {"temperature": "-inf"}),
    (["--temperature", "-.5"], {"temperature": "-.5"}),
    (["--K=-3"], {"K": "-3"}),
    (["--prompt", "--"], {"prompt": "--"}),
    (["--prompt=--"], {"prompt": "--"}),
    (["--prompt=-x"], {"prompt": "-x"}),
    (["--prompt=--x=y"], {"prompt": "--x=y"}),
    (["--prompt", "-1e5", "--json"], {"prompt": "-1e5", "json": True}),
    (["--no-json", "--K", "2"], {"json": False, "K": "2"}),
    (["--prompt", "x=-1"], {"prompt": "x=-1"}),  # an = inside a value, not --name=VALUE
])
def test_values_that_start_with_a_dash_arrive_verbatim(argv, given):
    assert read(argv, OPTIONS) == given


@pytest.mark.parametrize("argv, line", [
    (["--K", "-3"], "--K must be >= 1; got -3"),
    (["--temperature", "-1e-3"], "--temperature must be >= 0; got -0.001"),
    (["--temperature", "-inf"], "--temperature must be a finite number; got '-inf'"),
    (["--prompt", "-x"], "--prompt needs a value (text); one that starts with - is written "
                         "--prompt=VALUE"),
    (["--K"], "--K needs a value (an integer); one that starts with - is written --K=VALUE"),
    (["--temperatur", "1"],
     "unknown option --temperatur: did you mean --temperature? (see --help)"),
    (["--help=yes"], "--help takes no value: write --help (or -h) alone"),
    (["--json=yes"], "--json is a switch: write --json or --no-json, with no value"),
    (["--json", "3"], "--json is a switch and takes no value; got '3' after it"),
    (["--json", "-3"], "--json is a switch and takes no value; got '-3' after it"),
    (["--K", "2", "--K", "3"], "--K is given twice: keep one"),
    (["words"], "unexpected argument 'words': options are written --name value; quote text with "
                "spaces (see --help)"),
    (["--pro", "x"], "unknown option --pro: did you mean --prompt? (see --help)"),
    (["--no-j"], "unknown option --no-j: did you mean --no-json? (see --help)"),  # typed so
    # the first word: no option before it, so a number or -- stays as typed
    (["-3"], "unexpected argument '-3': options are written --name value; quote text with "
             "spaces (see --help)"),
    (["--"], "unexpected argument '--': options are written --name value; quote text with "
             "spaces (see --help)"),
    # after a value (that ends in an option's name): a number is a word of its own again
    (["--prompt", "a K", "-3"], "unexpected argument '-3': options are written --name value; "
                                "quote text with spaces (see --help)"),
    # a word of one dash and a letter is an option mistyped, not a word
    (["-k", "4"], "unknown option -k: did you mean --K? (see --help)"),
    (["-k3"], "unknown option -k3 (see --help)"),
    # --name=VALUE: the name is what was mistyped, not the value
    (["--temperatur=1"], "unknown option --temperatur: did you mean --temperature? (see --help)"),
    # "no" is a whole part of no-json, but a switch's no- form is named only when typed so
    (["--no"], "unknown option --no (see --help)"),
])
def test_each_mistake_is_one_line(argv, line):
    with pytest.raises(UsageError) as e:
        parse(argv, OPTIONS)
    assert str(e.value) == line


def test_bare_words_and_values_of_a_command_that_takes_words():
    given = read(["mod:f", "--K", "-3", "--prompt", "--"], OPTIONS, words="SAMPLER")
    assert given == {"words": ["mod:f"], "K": "-3", "prompt": "--"}
    # words on both sides of an option are all the command's words
    given = read(["a", "--K", "2", "b"], OPTIONS, words="SAMPLER")
    assert given == {"words": ["a", "b"], "K": "2"}


def test_a_command_that_takes_words_gets_a_list_even_of_none():
    assert read([], OPTIONS, words="SAMPLER") == {"words": []}
    assert read(["--K", "2"], OPTIONS, words="SAMPLER") == {"words": [], "K": "2"}


def test_help_names_the_words_in_its_usage_line_only():
    """The bare words are shown as the usage line's placeholder, not as an argument named
    "words" in a section of their own; -h says what it does."""
    text = usage("prog", "doc", OPTIONS, words="SAMPLER")
    assert text.splitlines()[0] == "usage: prog SAMPLER ... [--option value ...]"
    assert "words" not in text and "positional" not in text
    assert [line.split(None, 2) for line in text.splitlines() if "--help" in line] == [
        ["-h,", "--help", "show this help and exit"]]


def test_another_word_for_a_choice_is_named_as_that_choice():
    """means: {word: choice}: a user who types --method assisted is told the choice's name."""
    option = Option("method", str, choices=("autoregressive", "speculative"),
                    means={"assisted": "speculative"})
    with pytest.raises(UsageError) as e:
        convert(option, "assisted")
    assert str(e.value) == ("unknown --method 'assisted' (did you mean speculative?): choose one "
                            "of autoregressive, speculative")


def test_no_prefix_matching_and_help_alone():
    assert parse(["-h"], OPTIONS)[0] == {"help": True}
    with pytest.raises(UsageError, match="unknown option --temp"):
        parse(["--temp", "1"], OPTIONS)


# namedtuple's documented methods, named with a leading underscore to stay out of the fields' way
PUBLIC = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def private_names(source):
    """Names of the form _x (not __x__) that a source reaches through an attribute, defines as a
    method, or imports: argparse's privates, which the next Python release may change."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([node.attr] if isinstance(node, ast.Attribute) else
                 [node.name] if isinstance(node, ast.FunctionDef) else
                 [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else [])
        found += [n for n in names if n.startswith("_") and not n.endswith("__")
                  and n not in PUBLIC]
    return found


def test_the_door_uses_no_private_name_of_argparse():
    assert private_names(Path(picospec_cli.__file__).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("code", [
    "class P(argparse.ArgumentParser):\n    def _get_values(self, a, s):\n        pass\n",
    "p._actions\n", "from argparse import _SubParsersAction\n",
    "super()._parse_optional(word)\n"])
def test_a_private_name_is_caught(code):
    assert private_names(code)


@pytest.mark.parametrize("kind, check", [("out", None), ("path", out_folder), ("file", None),
                                         ("dir", None)])
def test_a_loop_of_links_or_a_name_too_long_is_one_line_naming_the_option(kind, check,
                                                                           tmp_path):
    """pathlib raises on these (RuntimeError for a loop in resolve(), OSError for a long name):
    the door turns each into the option's one line."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    option = Option("out", kind, check=check)
    for text, why in ((str(tmp_path / "a" / "x.npz"), "a loop of symbolic links"),
                      (str(tmp_path / ("x" * 300) / "x.npz"), "File name too long")):
        if kind in ("file", "dir") and why.startswith("a loop"):
            why = "no such " + ("file" if kind == "file" else "folder")  # exists() says no
        with pytest.raises(UsageError) as refused:
            convert(option, text)
        assert str(refused.value) == f"--out {text}: {why}"


@pytest.mark.parametrize("word, hint", [
    ("--target", ": did you mean --backbone?"),  # another command's name for it
    ("--stag", ": did you mean --stage?"),  # the option it begins
    ("--tagret", ": did you mean --backbone?"),  # a misspelling of a name it is also called by
    ("--targe", ": did you mean --backbone?"),
    ("--targ", ": did you mean --backbone?"),
    ("--seed", ""),  # near no name
    ("--sgate", ""),
])
def test_did_you_mean_names_only_what_was_likely_meant(word, hint):
    options = [Option("backbone", str, "tiny-target", "the model", also=("target",)),
               Option("stage", str, "one", "the stage")]
    with pytest.raises(UsageError) as e:
        read([word, "x"], options)
    assert str(e.value) == f"unknown option {word}{hint} (see --help)"


@pytest.mark.parametrize("option, text, like", [
    (Option("Ks", "ints", choices=(1, 2, 4, 8)), "1,,2", "1,2"),  # the first two choices
    (Option("Ks", "ints"), "1,", "1,2,4"),
    (Option("Ks", "floats"), ",1", "0.5,1.5"),
    (Option("Ks", "strs"), "a, ,b", "a,b"),
])
def test_an_empty_item_of_a_list_is_one_line_with_an_example(option, text, like):
    kind = {"ints": "integers", "floats": "numbers", "strs": "names"}[option.type]
    with pytest.raises(UsageError) as e:
        convert(option, text)
    assert str(e.value) == f"--Ks must be {kind}, comma-separated like {like}; got {text!r}"


def test_help_shows_each_option_with_a_placeholder_of_its_kind():
    """-h: `--name PLACEHOLDER` (N an integer, X a number, TEXT, N,N a list, FILE), a switch as
    both its forms, then its help and default."""
    options = [*OPTIONS, Option("Ks", "ints", [1, 2], "list"),
               Option("out", "out", None, "where", required=True)]
    lines = [line.split() for line in usage("prog", "doc", options).splitlines()]
    assert [line[:2] for line in lines if line[:1] and line[0].startswith("--")] == [
        ["--K", "N"], ["--temperature", "X"], ["--prompt", "TEXT"], ["--json,", "--no-json"],
        ["--Ks", "N,N"], ["--out", "FILE"]]


def test_help_keeps_the_command_s_own_line_breaks():
    """A command's docstring is its help's description as written: an example command line on
    its own indented line stays there, not run into the sentence before it."""
    doc = "Draft with a small model.\n\n    python main.py --K 4\n    python main.py --K 8"
    assert doc in usage("prog", doc, OPTIONS)


@pytest.mark.parametrize("names, word, hint", [
    (["n_tokens", "json"], "--n", "--n_tokens"),  # --no-json only when typed so
    (["top", "top_k"], "--top_k_x", "--top_k"),  # the longest one it begins with, then a _
    (["top_a", "top_b", "top_c"], "--top", "--top_a or --top_b or --top_c"),  # three it begins
    (["topx", "topbb", "topccc", "topdddd"], "--top", "--topx"),  # four: the closest spelling
    (["a_top", "b_top_c", "x"], "--top", "--a_top or --b_top_c"),  # a whole part of a few
    (["temperature", "temperatures"], "--tempratures", "--temperatures"),  # the closest alone
    (["topa", "topb", "topc"], "--top", "--topa or --topb or --topc"),  # three it begins, no _
    (["n_tokens", "json"], "--n_tokens_per_step", "--n_tokens"),  # the one it begins with
    (["a", "a_b", "a_b_c"], "--a_b_c_d", "--a_b_c"),  # of three it begins with, the longest
    (["a_top", "b_top", "c_top"], "--top", "--a_top or --b_top or --c_top"),  # a part of three
    (["n", "N_k"], "--n_k_x", "--N_k"),  # the longest it begins with, not the last by letters
])
def test_did_you_mean_by_the_rule(names, word, hint):
    options = [Option(n, bool if n == "json" else int, 1, "x") for n in names]
    with pytest.raises(UsageError) as e:
        read([word], options)
    assert str(e.value) == f"unknown option {word}: did you mean {hint}? (see --help)"


def test_a_required_option_must_be_given():
    options = [Option("name", str, None, "the run's name", required=True)]
    with pytest.raises(UsageError) as e:
        parse([], options)
    assert str(e.value) == "--name is required: the run's name"
    assert parse(["--name", "x"], options) == ({"name": "x"}, {"name"})


def test_a_list_check_sees_every_item_and_refuses_in_one_line():
    """check_list reads the whole list once its items are checked (a_k that must sum to at most
    1): its message follows the flag and the text as typed."""
    def at_most_one(values):
        return f"it sums to {sum(values):g}, more than 1" if sum(values) > 1 else None

    option = Option("a", "floats", check_list=at_most_one)
    assert convert(option, "0.25, 0.5") == [0.25, 0.5]
    with pytest.raises(UsageError) as e:
        convert(option, "0.5,0.75")
    assert str(e.value) == "--a 0.5,0.75: it sums to 1.25, more than 1"


@pytest.mark.parametrize("kind", ["file", "dir", "out", "path"])
def test_an_empty_path_is_refused_but_empty_text_is_text(kind):
    """--data '' is no path (pathlib would read it as the current folder); --prompt '' is text."""
    with pytest.raises(UsageError) as e:
        convert(Option("data", kind), "")
    assert str(e.value) == "--data needs a path; got an empty string"
    assert convert(Option("prompt", str), "") == ""


@pytest.mark.parametrize("option, text, value", [
    (Option("K", int), "19", 19),  # base 10
    (Option("K", int), "08", 8),  # a leading 0 is decimal (not Python's octal mistake)
    (Option("K", int), "1_000", 1000),  # as Python writes it
    (Option("x", float), "-1.5", -1.5),  # no bound unless the option sets one
    (Option("Ks", "ints"), "1, 2,4", [1, 2, 4]),  # a list with no check_list of its own
    (Option("names", "strs"), "a,b", ["a", "b"]),
])
def test_each_kind_of_value_is_converted(option, text, value):
    assert convert(option, text) == value


@pytest.mark.parametrize("kind, text, line", [
    (int, "abc", "--K must be an integer; got 'abc'"),
    (int, "4.0", "--K must be an integer; got '4.0'"),
    (float, "x", "--K must be a number; got 'x'"),
])
def test_a_value_not_of_its_kind_is_one_line(kind, text, line):
    with pytest.raises(UsageError) as e:
        convert(Option("K", kind), text)
    assert str(e.value) == line


def test_an_option_of_no_default_is_none_when_not_given():
    assert parse([], [Option("seed", int, help="the seed")]) == ({"seed": None}, set())


def test_help_says_each_default_as_typed_or_that_it_is_required():
    """A default of 0 is shown, no default is not shown as None, text keeps its case, a switch's
    default is written as its word, a required option says so instead."""
    options = [Option("seed", int, 0, "the seed"), Option("name", str, None, "the name"),
               Option("prompt", str, "Hi", "text"), Option("json", bool, False, "JSON"),
               Option("out", "out", "x.npz", "where", required=True)]
    lines = [" ".join(line.split()) for line in usage("prog", "doc", options).splitlines()
             if line.startswith("  --")]
    assert lines == ["--seed N the seed (default: 0)", "--name TEXT the name",
                     "--prompt TEXT text (default: Hi)", "--json, --no-json JSON (default: false)",
                     "--out FILE where (required)"]


def test_a_part_of_more_than_three_names_is_no_hint():
    options = [Option(n, int, 1, "x") for n in ("xx_top", "yy_top", "zz_top", "ww_top")]
    with pytest.raises(UsageError) as e:
        read(["--top"], options)
    assert str(e.value) == "unknown option --top (see --help)"


def test_an_option_of_another_method_is_refused_with_its_line():
    with pytest.raises(UsageError) as e:
        settle({"merged": False}, [Option("K", int, 4, "drafts")],
               {"merged": "--merged is an option of blockwise"})
    assert str(e.value) == "--merged is an option of blockwise"


def test_an_output_file_is_refused_with_the_reason(tmp_path, monkeypatch):
    """--out FILE: a file in a folder that exists, takes files and is a folder."""
    tmp_path = tmp_path.resolve()
    (tmp_path / "f").write_text("")
    option = Option("out", "out")
    assert convert(option, str(tmp_path / "x.npz")) == str(tmp_path / "x.npz")
    for path, why in ((tmp_path, " is a folder: give a file name"),
                      (tmp_path / "f" / "x.npz", f": {tmp_path / 'f'} is a file, not a folder"),
                      (tmp_path / "a" / "x.npz",
                       f": the folder {tmp_path / 'a'} does not exist; create it first")):
        with pytest.raises(UsageError) as e:
            convert(option, str(path))
        assert str(e.value) == f"--out {path}{why}"
    monkeypatch.setattr(picospec_cli, "cannot_write_in", lambda folder: "Permission denied")
    with pytest.raises(UsageError) as e:
        convert(option, str(tmp_path / "x.npz"))
    assert str(e.value) == (f"--out {tmp_path / 'x.npz'}: cannot write in {tmp_path} "
                            f"(Permission denied): give a folder you can write to")


def test_bounds_are_of_numbers_only():
    """check_value takes a value of the option's type: a list's bounds are of each item, which
    convert checks one by one, so a whole list (a default) passes them as it is."""
    assert check_value(Option("Ks", "ints", [4, 4], low=1), [4, 4]) is None
    with pytest.raises(UsageError, match="--Ks must be >= 1; got 0"):
        convert(Option("Ks", "ints", low=1), "4,0")
