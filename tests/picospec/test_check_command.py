"""The command (picospec/check/__main__.py) against the library calls it stands for: --seed reaches
the controls and the cases, a battery runs every selected case unless --first_failure, and --cases
takes each contract's own numbers. Sizes: 300 sequences a case, 2,000 where a sampler must fail.
"""
import json

import pytest

from picospec.check.__main__ import main, parse_command
from picospec.check.battery import check_sampler, run_controls
from picospec.check.cases import CASES
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
