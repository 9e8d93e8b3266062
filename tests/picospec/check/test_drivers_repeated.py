"""repeated() (picospec/check/drivers.py): a support case makes calls again on copies of their
inputs, so that a sampler drawing some of its random numbers elsewhere is told "untested", not
"pass", even in the command's smallest run."""
from collections import Counter

import numpy as np

from picospec.check.battery import check_case
from picospec.check.cases import CASES
from picospec.check.drivers import repeated

from tests.support import broken_samplers


def test_a_draw_elsewhere_only_without_drafts_is_seen_at_the_smallest_samples():
    """no_drafts_own_generator draws from NumPy's global generator only in calls with no drafts
    (a quarter of them), many of them at a law of one token, where no draw tells. At --samples 100
    (the least the command takes), each of 10 global states still makes every support case say
    "untested"."""
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


def test_a_small_run_repeats_every_call_and_a_long_one_every_20th():
    """Each of a support case's first 500 calls is made twice more on copies, past them every
    20th: a draw elsewhere in a few calls of a small run is seen, whichever calls they are."""
    made = []

    def fn(drafts, P, Q, rng):
        made.append(drafts[0])
        return 0, 0
    rng = np.random.default_rng(0)
    call = repeated(fn, "chain", rng, (0, 1))
    for k in range(1, 1_201):
        call([k], None, None, rng)
    times = Counter(made)  # call k -> how often fn was called with its inputs
    assert [times[k] for k in (1, 2, 499, 500, 501, 519, 520, 521, 540, 1_199, 1_200)] == [
        3, 3, 3, 3, 1, 1, 3, 1, 3, 1, 3]
