"""The negative controls (picospec/check/controls.py): broken samplers that keep their contract, so
that a case can catch them only by the law of what they emit. A control that broke its contract
would be "caught" by an error at any --samples, and its run would give a verdict it has no power
for. Sizes: 300 sequences a case, where each control passes some cases and fails others.
"""
import pytest

from picospec.check.battery import check_case
from picospec.check.cases import CASES
from picospec.check.controls import CONTROLS

SAMPLES = 300


@pytest.mark.parametrize("contract, control", [(contract, control) for contract in CONTROLS
                                               for control in CONTROLS[contract]],
                         ids=lambda x: getattr(x, "__name__", x))
def test_each_control_keeps_its_contract_on_every_law_case(contract, control):
    """Every law case runs it to a verdict of its law, pass or FAIL, never an error."""
    results = [check_case(control, contract, case, SAMPLES, (0, i), tv=False)
               for i, case in enumerate(CASES[contract], 1) if not case.support]
    assert all(r.verdict in ("pass", "FAIL") for r in results), [
        (r.name, r.verdict, r.detail) for r in results if r.verdict not in ("pass", "FAIL")]
    assert any(r.verdict == "FAIL" for r in results), results
