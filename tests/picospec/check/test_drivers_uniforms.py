"""The support cases' extreme Generators (picospec/check/drivers.py: LowestUniforms,
HighestUniforms) through every way a sampler may ask for a uniform: each draw is counted (a run
with none says "untested", the uniforms came from elsewhere) and each value is the extreme its
case promises, whatever the bounds given to uniform().
"""
import itertools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from picospec.batched.rejection import rejection_sample
from picospec.check.battery import check_case
from picospec.check.cases import CASES
from picospec.check.drivers import MEDIUM, HighestUniforms, LowestUniforms, repeated, run
from picospec.verify import verify_chain

from tests.support import broken_samplers


def by_uniform(p, rng):
    """One token id from p [V] by inverse CDF against rng.uniform(): the first id whose cdf is
    above u * cdf[-1] (u = 0 -> the first id of positive probability)."""
    cdf = np.cumsum(p)  # [V]
    return int(np.searchsorted(cdf, rng.uniform() * cdf[-1], side="right"))


def chain_by_uniform(drafts, P, Q, rng):
    """Chen et al.'s rule with every uniform from rng.uniform(), never rng.random(). Right."""
    return broken_samplers.chain(drafts, P, Q, rng, uniform=lambda rng: rng.uniform(),
                                 draw=by_uniform)


def test_a_right_sampler_drawing_by_uniform_alone_passes_both_support_cases():
    """Its draws are counted (uniform() does not call random()): both chain support cases pass
    rather than say "untested"; the same sampler's tie bug fails the case at u = 0."""
    for number, case in enumerate(CASES["chain"], 1):
        if case.support:
            result = check_case(chain_by_uniform, "chain", case, 300, (0, number))
            assert result.verdict == "pass", (case.name, result)
    result = check_case(broken_samplers.ties_toward_draft_by_uniform, "chain", CASES["chain"][0],
                        300, (0, 1))
    assert result.verdict == "FAIL", result


def test_the_near_one_uniform_stays_below_high_for_any_bounds():
    """uniform(low, high) is the largest double below high that rounding reaches from low: below
    high, and within 1e-12 of it, for a range below the default low, one across 0, and the
    default [0, 1)."""
    rng = HighestUniforms(np.random.PCG64(0))
    for low, high in [(0.0, 0.05), (-1.0, 1.0), (-3.0, -2.0), (0.0, 1.0)]:
        u = rng.uniform(low, high)
        assert high - 1e-12 < u < high, (low, high, u)
    u = rng.uniform(high=0.05)
    assert 0.05 - 1e-12 < u < 0.05, u


def test_the_zero_uniform_is_low_for_any_bounds():
    """uniform(low, high) of LowestUniforms is low, of high's shape where high is an array."""
    rng = LowestUniforms(np.random.PCG64(0))
    assert rng.uniform(-1.0, 1.0) == -1.0 and rng.uniform(high=0.05) == 0.0
    assert rng.uniform(2.0, np.array([3.0, 4.0])).tolist() == [2.0, 2.0]


def test_both_extreme_generators_take_bounds_given_as_lists():
    """uniform() takes its bounds as any array-like, lists too, as np.random.Generator.uniform
    does: the zero uniform is each low, the near-one uniform just below each high."""
    low, high = [0.0, 2.0], [1.0, 5.0]
    assert np.random.default_rng(0).uniform(low, high).shape == (2,)  # numpy's own Generator
    assert LowestUniforms(np.random.PCG64(0)).uniform(low, high).tolist() == low
    u = HighestUniforms(np.random.PCG64(0)).uniform(low, high)
    assert u.shape == (2,) and all(h - 1e-12 < x < h for x, h in zip(u.tolist(), high)), u


def test_each_extreme_generator_draws_in_a_fresh_process_before_any_run():
    """The counts start at 0 with the class, not at run(): a fresh process may draw from either
    Generator (both ways) before any case has run, and counts its draws."""
    code = ("import numpy as np\n"
            "from picospec.check.drivers import HighestUniforms, LowestUniforms\n"
            "for extreme in (LowestUniforms, HighestUniforms):\n"
            "    rng = extreme(np.random.PCG64(0))\n"
            "    rng.random(), rng.uniform()\n"
            "    print(extreme.draws, extreme.varied)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split("\n") == ["2 0", "2 0", ""], r.stderr


DOCS = Path(__file__).resolve().parents[3] / "docs" / "checker.md"


def stated_schedule():
    """(the first calls, the period) of a support case's repeated calls, as docs/checker.md states
    them ("makes its first 500 calls, every 20th")."""
    text = " ".join(DOCS.read_text().split())
    first, every = re.search(r"makes its first ([\d,]+) calls, every (\d+)th", text).groups()
    return int(first.replace(",", "")), int(every)


def repeats_after_each_call(calls):
    """[(rows, rng)] of every invocation -> [(rows, the invocations after it on other
    Generators)] for each call made with the run's own Generator (the first call's)."""
    own = calls[0][1]
    starts = [i for i, (_, rng) in enumerate(calls) if rng is own] + [len(calls)]
    return [(calls[a][0], b - a - 1) for a, b in zip(starts, starts[1:])]


def test_a_support_case_makes_its_first_calls_and_every_20th_twice_more():
    """repeated(): a chain support case's calls numbered 1 to the first ones the docs state and
    each multiple of their period after them are made twice more on fresh extreme Generators (a
    right sampler answers the same, so both run), the others once."""
    first, every = stated_schedule()
    calls = []

    def spy(drafts, P, Q, rng):
        calls.append((1, rng))
        return verify_chain(drafts, P, Q, rng)[:2]

    run(spy, "chain", CASES["chain"][0], 2 * first + 100, (0, 1))
    counts = [again for _, again in repeats_after_each_call(calls)]
    assert len(counts) > first + 2 * every and set(counts) <= {0, 2}
    assert [c for c, again in enumerate(counts, 1) if again] == \
        [c for c in range(1, len(counts) + 1) if c <= first or c % every == 0]


def test_a_rejection_support_case_repeats_every_batch_and_the_rows_alone_by_number():
    """In the rejection contract every batch of 2 rows or more is made twice more (the calls of
    three rows too); the calls of one row (a tenth of the sequences, a call each: the first step
    calls them before the rest) as the chain's: the first ones the docs state, then each multiple
    of their period."""
    first, every = stated_schedule()
    calls = []

    def spy(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
        calls.append((len(draft_token_ids), rng))
        return rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                draft_token_ids, rng=rng)

    n = 10 * first + 1000
    run(spy, "rejection", CASES["rejection"][0], n, (0, 1))
    made = repeats_after_each_call(calls)
    tenth = n // 10  # rows drawn alone, then as many two and three a call in turn
    small = [2, 3] * (tenth // 5)
    assert sum(small) == tenth
    medium, left = [], n // 5  # then a fifth in batches of MEDIUM's sizes in turn
    for size in itertools.cycle(MEDIUM):
        if not left:
            break
        medium.append(min(size, left))
        left -= medium[-1]
    assert 4 in medium and 511 in medium and 512 not in medium  # 1,200 rows: 511, 4, 383, ...
    calls = tenth + len(small) + len(medium) + 1
    assert [rows for rows, _ in made[:calls]] == (
        [1] * tenth + small + medium + [n - 2 * tenth - n // 5])
    assert sum(rows == 1 for rows, _ in made) > first + 2 * every
    assert sum(rows > 1 for rows, _ in made) >= 2
    for c, (rows, again) in enumerate(made, 1):
        assert again == (2 if rows > 1 or c <= first or c % every == 0 else 0), (c, rows, again)


def test_a_rejection_batch_of_exactly_two_rows_is_made_again():
    """"every batch of two rows or more" (docs/checker.md): past the first calls and off the
    period, a batch of 2 rows is made twice more, a row alone once."""
    first, every = stated_schedule()
    fn_rng = LowestUniforms(np.random.PCG64([0, 1]))
    made = []

    def spy(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
        made.append(len(draft_token_ids))
        return rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                draft_token_ids, rng=rng)

    call = repeated(spy, "rejection", fn_rng, (0, 1))

    def rows(B):  # [B, 2, 2], [B, 1], [B, 1, 2], [B, 1]: one draft over 2 tokens
        return (np.full((B, 2, 2), 0.5), np.zeros((B, 1), dtype=np.int64), np.full((B, 1, 2), 0.5),
                np.zeros((B, 1), dtype=np.int64))

    for _ in range(first):
        call(*rows(1), rng=fn_rng)
    assert (first + 1) % every and (first + 2) % every
    made.clear()
    call(*rows(2), rng=fn_rng)
    call(*rows(1), rng=fn_rng)
    assert made == [2, 2, 2, 1]
