"""repeated() (picospec/check/drivers.py): a support case makes calls again on copies of their
inputs, so that a sampler drawing some of its random numbers elsewhere is told "untested", not
"pass", even in the command's smallest run."""
import numpy as np

from picospec.check.battery import check_case
from picospec.check.cases import CASES

from tests.support import broken_samplers


def test_a_draw_elsewhere_only_without_drafts_is_seen_at_the_smallest_samples():
    """no_drafts_own_generator draws from NumPy's global generator only in calls with no drafts
    (a quarter of them), many of them at a law of one token, where no draw tells. At --samples 100
    (the least the command takes), each of 10 global states still makes both support cases say
    "untested"; with only the first 10 calls and every 20th repeated, about 7 states in 10 had
    the case of uniforms near 1 say "pass"."""
    saved = np.random.get_state()
    try:
        for i, case in [(i, c) for i, c in enumerate(CASES["chain"], 1) if c.support]:
            for state in range(10):
                np.random.seed(state)
                result = check_case(broken_samplers.no_drafts_own_generator, "chain", case, 100,
                                    (0, i))
                assert result.verdict == "untested", (case.name, state, result)
    finally:
        np.random.set_state(saved)
