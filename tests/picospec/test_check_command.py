"""The command (picospec/check/__main__.py) against the library calls it stands for: --seed reaches
the controls and the cases, a battery runs every selected case unless --first_failure, and --cases
takes each contract's own numbers. Sizes: 300 sequences a case, 2,000 where a sampler must fail.
"""
import json
import os
import re
import sys

import pytest

import picospec.check.__main__ as command
from picospec.check.__main__ import help_text, load, main, number, parse_command, table
from picospec.check.battery import CaseResult, Report, check_sampler, run_controls
from picospec.check.cases import CASES
from picospec.check.exact_law import SHAPES
from picospec.verify import verify_chain
from picospec_cli import UsageError

from tests.support import broken_samplers


def test_the_seed_reaches_the_controls_and_every_case(capsys):
    """--seed 1 gives what run_controls and check_sampler give at seed 1; at these cases and size
    the first case to catch a control is another at seed 0, so a seed dropped on the way shows."""
    cases, samples = [2, 3, 4], 300
    assert main(["picospec.verify:verify_chain", "--cases", "2,3,4", "--samples", str(samples),
                 "--seed", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    controls = run_controls("chain", samples, 1, cases)
    assert run_controls("chain", samples, 0, cases) != controls  # the seed matters here
    assert [(c["name"], c["caught_by"]) for c in report["controls"]] == controls
    want = check_sampler(verify_chain, "chain", samples, 1, cases, controls=False)
    other = check_sampler(verify_chain, "chain", samples, 0, cases, controls=False)
    assert [c.p_value for c in want.cases] != [c.p_value for c in other.cases]
    assert [c["p_value"] for c in report["results"][0]["cases"]] == [c.p_value
                                                                     for c in want.cases]


@pytest.mark.parametrize("first_failure", [False, True])
def test_a_failing_battery_runs_on_unless_first_failure(capsys, first_failure):
    """ratio_inverted fails case 2; case 3 is still run and reported, unless --first_failure."""
    argv = ["tests.support.broken_samplers:ratio_inverted", "--cases", "2,3", "--samples", "2000",
            "--json"] + (["--first_failure"] if first_failure else [])
    assert main(argv) == 1
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["verdict"] == "fail" and result["cases"][0]["verdict"] == "FAIL", result
    assert [c["number"] for c in result["cases"]] == ([2] if first_failure else [2, 3])
    assert check_sampler(broken_samplers.ratio_inverted, "chain", 2000, cases=[2],
                         controls=False).verdict == "fail"


@pytest.mark.parametrize("contract", list(CASES))
def test_cases_takes_every_number_of_its_contract_s_battery_and_no_other(contract):
    last = len(CASES[contract])
    spec = "picospec.verify:verify_chain"
    numbers = ",".join(map(str, range(1, last + 1)))
    _, values = parse_command([spec, "--contract", contract, "--cases", numbers])
    assert values["cases"] == list(range(1, last + 1))
    with pytest.raises(UsageError, match=f"the {contract} battery has cases 1 to {last}$"):
        parse_command([spec, "--contract", contract, "--cases", str(last + 1)])


def test_the_seed_may_be_0_the_default_and_no_lower():
    """--seed takes 0, its default (the seed the docs' tables were run at), and refuses -1."""
    spec = "picospec.verify:verify_chain"
    assert parse_command([spec])[1]["seed"] == 0
    assert parse_command([spec, "--seed", "0"])[1]["seed"] == 0
    with pytest.raises(UsageError, match="--seed must be >= 0; got -1"):
        parse_command([spec, "--seed", "-1"])


def test_help_states_each_option_s_default_once():
    """--samples names its default, 20,000, in its own words; a second "(default: ...)" after it
    would be an untrue line; --seed's is 0 and --cases' all."""
    blocks = re.split(r"\n  (?=--)", help_text().split("\n\nbatteries:")[0])[1:]
    helps = {b.split()[0]: " ".join(b.split()) for b in blocks}
    assert helps["--samples"] == "--samples N sequences per case (default 20,000; more: more power)"
    assert helps["--seed"].endswith("(default: 0)")
    assert helps["--cases"].endswith("(default: all)")
    for flag, text in helps.items():
        assert text.count("default") == 1, (flag, text)


@pytest.mark.parametrize("samples, refused", [(5000, False), (5001, True)])
def test_samples_are_refused_only_beyond_1024_bytes_each_of_free_memory(monkeypatch, samples,
                                                                      refused):
    """Free memory of 1,250 pages of 4,096 bytes holds 5,000 sequences of 1,024 bytes exactly:
    5,000 pass, 5,001 are refused with the largest count that fits."""
    pages = {"SC_AVPHYS_PAGES": 1250, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(os, "sysconf", pages.__getitem__)
    argv = ["picospec.verify:verify_chain", "--samples", str(samples)]
    if not refused:
        assert parse_command(argv)[1]["samples"] == samples
        return
    with pytest.raises(UsageError, match=r"give --samples 5,000 or fewer"):
        parse_command(argv)


@pytest.mark.parametrize("error", [ValueError, OSError, AttributeError])
def test_samples_are_not_checked_against_memory_where_the_system_has_no_count(monkeypatch, error):
    """A system without the count of free pages (os.sysconf raises, as on macOS): no check, and
    any --samples is taken."""
    def sysconf(name):
        raise error(name)

    monkeypatch.setattr(os, "sysconf", sysconf)
    argv = ["picospec.verify:verify_chain", "--samples", "2000000000"]
    assert parse_command(argv)[1]["samples"] == 2_000_000_000


@pytest.mark.parametrize("spec", [":verify_chain", "picospec.verify:", "verify_chain"])
def test_a_sampler_named_without_module_or_function_is_a_usage_error(spec):
    """Either side of the colon empty, or no colon: the line shows the form to give."""
    with pytest.raises(UsageError, match="give the sampler as MODULE:FUNCTION or FILE.py:FUNCTION"):
        load(spec)


def test_a_sampler_file_imports_its_own_neighbour_before_one_of_the_same_name_elsewhere(
        tmp_path, monkeypatch):
    """FILE.py:FUNCTION puts the file's folder first on the import path: the module it imports
    is the one beside it, not a module of that name in a folder already on the path."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir()
    other.mkdir()
    (mine / "sampler_nb.py").write_text("from neighbour_nb import f\n")
    (mine / "neighbour_nb.py").write_text("def f(drafts, P, Q, rng):\n    return 'mine'\n")
    (other / "neighbour_nb.py").write_text("def f(drafts, P, Q, rng):\n    return 'other'\n")
    monkeypatch.setattr(sys, "path", [str(other)] + sys.path)
    for name in ("sampler_nb", "neighbour_nb"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        fn = load(f"{mine / 'sampler_nb.py'}:f")
    finally:
        for name in ("sampler_nb", "neighbour_nb"):
            sys.modules.pop(name, None)
    assert fn(None, None, None, None) == "mine"


def test_a_sampler_file_may_hold_a_dataclass_with_postponed_annotations(tmp_path, monkeypatch):
    """FILE.py:FUNCTION imports the file as a module known by its name while it runs: a dataclass
    with `from __future__ import annotations` looks its module up by that name, and would make a
    right sampler a usage error."""
    (tmp_path / "step_dc.py").write_text(
        "from __future__ import annotations\n\nfrom dataclasses import dataclass\n\n\n"
        "@dataclass\nclass Step:\n    n: int\n\n\n"
        "def f(drafts, P, Q, rng):\n    return Step(0).n, 1\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "step_dc", raising=False)
    try:
        fn = load(f"{tmp_path / 'step_dc.py'}:f")
    finally:
        sys.modules.pop("step_dc", None)
    assert fn([], None, None, None) == (0, 1)


def test_ctrl_c_while_a_sampler_file_imports_is_passed_on(tmp_path, monkeypatch):
    """Ctrl-C during the import of the sampler's file reaches the caller as KeyboardInterrupt (the
    command's one line and exit status 130), not as a usage error nor a traceback of its own."""
    (tmp_path / "stops_nb.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "stops_nb", raising=False)
    try:
        with pytest.raises(KeyboardInterrupt):
            load(f"{tmp_path / 'stops_nb.py'}:f")
    finally:
        sys.modules.pop("stops_nb", None)


@pytest.mark.parametrize("x, shown", [(0.5, "0.500"), (0.001, "0.001"), (0.000999, "1.0e-03"),
                                      (1.0, "1.000"), (float("nan"), "-")])
def test_a_p_value_is_printed_to_3_places_or_in_e_notation_below_0_001(x, shown):
    """The table's numbers: 3 decimals from 0.001 up, one digit of e-notation below, "-" for a
    value that is not a number (the support case's tv90)."""
    assert number(x) == shown


def test_two_samplers_share_one_line_of_controls_and_the_support_case_has_no_numbers(capsys):
    """The negative controls run once, so their line is printed once, above the first sampler's
    table; the support case has no p-value nor tv90: "-" in the table, null in the JSON."""
    spec = "picospec.verify:verify_chain"
    argv = [spec, spec, "--cases", "1,2", "--samples", "300"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("negative controls") == 1
    assert out.index("negative controls") < out.index(f"{spec}: contract", 1)
    support = [line.split() for line in out.splitlines() if "uniforms at 0" in line]
    assert [row[-4:] for row in support] == [["300", "-", "-", "pass"]] * 2
    assert main(argv[1:] + ["--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["cases"][0]["p_value"] is None and result["cases"][0]["tv90"] is None


def test_the_power_table_prints_each_size_s_own_row(monkeypatch, capsys):
    """--power at two sizes: each row holds the tv90 of its own size, one per shape, in the order
    of the shapes, under a header that names them; "-" where no error of the shape is caught."""
    shapes = SHAPES
    nan = float("nan")
    rows = [(100, shapes[0], 0.5), (100, shapes[1], nan), (100, shapes[2], 0.25),
            (400, shapes[0], 0.125), (400, shapes[1], 0.75), (400, shapes[2], 0.0625)]
    monkeypatch.setattr(command, "power_table", lambda sizes: rows)
    command.print_power({"samples": None, "json": False})
    lines = capsys.readouterr().out.splitlines()
    table = [line.split() for line in lines if line.strip()[:1].isdigit()]
    assert table == [["100", "0.5000", "-", "0.2500"], ["400", "0.1250", "0.7500", "0.0625"]]
    # a header names the columns: each shape right-aligned over its column, as the numbers are
    [header] = [line for line in lines if line.split()[:1] == ["samples"]]
    row = next(line for line in lines if line.strip().startswith("400"))
    ends = [m.end() for m in re.finditer(r"\S+", row)][1:]
    assert [header.index(how) + len(how) for how in shapes] == ends, (header, row)


@pytest.mark.parametrize("missing", [True, False])
def test_the_power_table_explains_a_dash_only_where_one_is_printed(monkeypatch, capsys, missing):
    """The note under --power's table says what "-" means; a table without a "-" has no note."""
    rows = [(100, how, float("nan") if missing and i == 1 else 0.5) for i, how in enumerate(SHAPES)]
    monkeypatch.setattr(command, "power_table", lambda sizes: rows)
    command.print_power({"samples": 100, "json": False})
    out = capsys.readouterr().out
    assert ("\n-: no error of that shape" in out) == missing


def test_a_tv90_past_1_is_no_error_s_and_the_verdict_promises_none():
    """A case's tv90 of 1 or more (few samples, the pooled mass added) is no total variation an
    error can have: the table shows >1 and the verdict says the samples are too few, with no
    figure; one case below 1 beside it does not make the run's promise."""
    cases = [CaseResult("V=3", 100, 0.5, 0.8, "pass"), CaseResult("V=4", 100, 0.4, 1.25, "pass")]
    values = {"samples": 100, "seed": 0, "cases": [1, 2]}
    text = table("m:f", "chain", values, Report("pass", cases, []))
    rows = [line.split() for line in text.splitlines() if line.startswith((" 1", " 2"))]
    assert [row[-2] for row in rows] == ["0.800", ">1"], text
    assert text.splitlines()[-1] == ("verdict: pass (2 of 2 cases passed; too few samples for "
                                     "every law case to catch even the largest error with "
                                     "probability 0.9 (more --samples: a power stated))"), text


def test_the_table_lines_its_columns_up_under_the_longest_name_and_sums_up_the_cases():
    """Names of three lengths: every row's columns start where the header's do; only a case with a
    detail has a line under it; the verdict line counts the passes and the untested case and
    quotes the largest tv90 of the law cases (the support case's NaN left out)."""
    nan = float("nan")
    cases = [CaseResult("uniforms at 0: support", 300, nan, nan, "untested"),
             CaseResult("V=3", 300, 0.5, 0.125, "pass"),
             CaseResult("V=4 K=3 or 0 top_p=0.8 draft with zeros", 300, 0.0004, 0.25, "FAIL",
                        "observed 7 sequences the target forbids")]
    values = {"samples": 300, "seed": 0, "cases": [1, 2, 3]}
    text = table("m:f", "chain", values, Report("fail", cases, []))
    lines = text.splitlines()
    header = lines.index(next(line for line in lines if line.startswith(" #  case")))
    rows = lines[header + 1:]
    assert [row[:2] for row in rows] == [" 1", " 2", " 3", "  ", "ve"], text
    width = len(cases[2].name)
    # the start of each column after the name: two spaces, then samples (8), p-value (8), tv90 (6)
    starts = [4 + width + 2, 4 + width + 12, 4 + width + 22, 4 + width + 30]
    for row, case in zip([rows[0], rows[1], rows[2]], cases):
        assert row[4:4 + width].rstrip() == case.name, text
        assert [row[a - 2:a] for a in starts] == ["  "] * 4, text
        assert row[starts[3]:] == case.verdict, text
    assert lines[header][starts[3]:] == "verdict", text
    assert rows[3] == "      observed 7 sequences the target forbids", text
    assert rows[4] == ("verdict: fail (1 of 3 cases passed, 1 untested: the sampler's uniforms "
                       "are not all the rng's, so ties at u = q/p and the ends of its laws went "
                       "unchecked; each law case catches any error of TV >= 0.250 with "
                       "probability 0.9)"), text
