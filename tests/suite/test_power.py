"""The power list (tests/suite/power.py) is well formed, so `python -m tests.suite.power` runs to
its end: every sized test's module has the constant it names and every broken variant it plants
(a renamed function in a test module must fail here, in seconds, not halfway through the
measurement). Nothing is sampled here."""
import importlib

import pytest

from tests.suite.power import FILES, Case, Sized, patch


def problems(files=FILES):
    """What of the list does not resolve, one line each."""
    found = []
    for sizes in files.values():
        for sized in sizes():
            module = importlib.import_module(sized.test.split("::")[0][:-3].replace("/", "."))
            try:
                eval(sized.constant, {"name": sized.test.split("[")[-1].rstrip("]")}, vars(module))
            except Exception as e:  # noqa: BLE001 (any failure is a fault of the list)
                found.append(f"{sized.test}: its constant {sized.constant}: {e!r}")
            for case in sized.cases:
                with pytest.MonkeyPatch.context() as mp:
                    try:
                        case.plant(module, mp)
                    except Exception as e:  # noqa: BLE001
                        found.append(f"{sized.test} {case.label}: its broken variant: {e!r}")
    return found


def test_every_sized_test_resolves():
    assert problems() == []


def test_a_rotten_entry_is_reported():
    test = "tests/picospec/test_rest.py::test_joint_law_equals_target"
    gone = Sized(test, "NO_SUCH_CONSTANT", "x",
                 (Case("", patch("rest.verify_tree", "no_such_variant"), None, None),))
    found = problems({"rotten": lambda: [gone]})
    assert len(found) == 2 and "NO_SUCH_CONSTANT" in found[0] and "no_such_variant" in found[1]
