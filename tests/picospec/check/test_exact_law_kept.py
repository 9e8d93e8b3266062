"""The kept test (picospec/check/exact_law.py: kept_p_value), which each chain and rejection law
case runs beside its G-test: the calls that kept all K drafts against the token rule's chance of
that, prod_t min(1, q_t(x_t) / p_t(x_t)), given each call's inputs. It is one-sided: block
verification (Sun et al. 2024, arXiv:2403.10444, Alg. 2), lossless too, keeps all K drafts with
chance w_K >= that product, so it must pass; a sampler that drops its bonus token, or keeps drafts
less often than the rule, must fail, though the law of what it emits is the target's.

Sizes: 2,000 draws of 5,000 calls whose rule chances are those of the battery's first chain law
case. Measured shares of p-values below 0.01, 0.05 and 0.1: 0, 0.0015 and 0.003 (the bound is
Ville's, conservative); the broken variant, a two-sided test, rejects block verification's calls
(p = 7e-290 at 4,000 sequences of the battery's case 4).
"""
import numpy as np
from scipy import stats

from picospec.check.battery import check_case, check_sampler
from picospec.check.cases import CASES
from picospec.check.drivers import run
from picospec.check.exact_law import KEPT_ALPHA, kept_p_value
from picospec.sampling import sample
from picospec.verify import verify_chain

from tests.support import broken_samplers

SAMPLES, DRAWS, CALLS, LEVEL = 4_000, 2_000, 5_000, 1e-3  # LEVEL: of the tests themselves
CASE = CASES["chain"][1]  # V=3 K=1


def block_verification(drafts, P, Q, rng):
    """Sun et al. 2024, Alg. 2 (p = draft, q = target; their M_s, M_b): the K drafts judged as a
    block, the stop tried from i = K down to 0."""
    K = len(drafts)
    w = [1.0]  # w_i: the weight of drafts[:i]
    for t, x in enumerate(drafts):
        w.append(min(1.0, w[-1] * Q[t][x] / P[t][x]))
    for i in range(K, -1, -1):
        if i == K:
            h = w[K]  # stop at K: all K kept, the bonus from Q[K]
        else:
            r = np.maximum(w[i] * Q[i] - P[i], 0)  # [V]: the residual after drafts[:i]
            h = r.sum() / (r.sum() + 1 - w[i]) if w[i] < 1 else 1.0
        if rng.random() < h:
            break
    return i, sample(Q[K] if i == K else r / r.sum(), rng)


def kept_calls(fn, case, n, seed):
    """(whether each call kept all K drafts [calls], the rule's chance of that [calls])."""
    kept = []
    run(fn, "chain", case, n, seed, kept)
    return np.concatenate([f for _, f in kept]), np.concatenate([r for r, _ in kept])


def two_sided(full, rule):
    """The broken variant: the kept test doubled on both sides (keeping more fails too)."""
    return min(1.0, 2 * min(kept_p_value(full, rule), kept_p_value(1 - full, 1 - rule)))


def test_block_verification_is_lossless_and_passes_every_case():
    report = check_sampler(block_verification, "chain", samples=SAMPLES, controls=False)
    assert report.verdict == "pass", report


def test_block_verification_keeps_more_and_the_two_sided_variant_fails_it():
    """Case 4 (K = 4): block verification keeps all drafts in 3,300 calls where the rule expects
    2,052 (38 standard deviations above); at K = 1 (CASE) the two rules are one."""
    full, rule = kept_calls(block_verification, CASES["chain"][3], SAMPLES, (0, 4))
    assert full.sum() > rule.sum() + 5 * np.sqrt((rule * (1 - rule)).sum())
    assert kept_p_value(full, rule) == 1.0
    assert two_sided(full, rule) < KEPT_ALPHA
    same, rule = kept_calls(verify_chain, CASES["chain"][3], SAMPLES, (0, 4))  # the rule: both pass
    assert min(kept_p_value(same, rule), two_sided(same, rule)) > 1e-3


def test_the_rule_s_own_calls_are_rejected_at_most_at_alpha():
    """Calls kept with exactly the rule's chance: the share of p-values below alpha is at most
    alpha (one-sided binomial tests at LEVEL), for alpha 0.01, 0.05 and 0.1."""
    _, rule = kept_calls(verify_chain, CASE, SAMPLES, (0, 2))
    rule = np.resize(rule, CALLS)  # [CALLS]
    rng = np.random.default_rng(0)
    pvalues = np.array([kept_p_value(rng.random(CALLS) < rule, rule) for _ in range(DRAWS)])
    for alpha in (0.01, 0.05, 0.1):
        below = int((pvalues < alpha).sum())
        assert stats.binomtest(below, DRAWS, alpha, "greater").pvalue > LEVEL, (alpha, below)


def test_a_call_the_rule_keeps_whole_must_be_kept_whole():
    assert kept_p_value([1, 1, 0], [1.0, 0.5, 1.0]) == 0.0
    assert kept_p_value([1, 1, 0], [1.0, 0.5, 0.5]) == 1.0
    assert kept_p_value([], []) == 1.0


def test_keeping_a_tenth_less_often_than_the_rule_is_caught():
    _, rule = kept_calls(verify_chain, CASE, SAMPLES, (0, 2))
    rng = np.random.default_rng(1)
    assert all(kept_p_value(rng.random(len(rule)) < 0.9 * rule, rule) < KEPT_ALPHA
               for _ in range(20))


def test_samplers_that_keep_fewer_drafts_fail_with_the_reason():
    """Each emits the target's law (the G-test passes it) and keeps fewer drafts than the rule:
    the bonus token dropped (chain, rejection), drafts kept half as often. The same case passes
    picospec's own."""
    for name, contract in [("bonus_dropped", "chain"), ("accepts_half", "chain"),
                           ("batched_bonus_dropped", "rejection")]:
        result = check_case(getattr(broken_samplers, name), contract, CASES[contract][1], SAMPLES,
                            (0, 2), tv=False)
        assert result.verdict == "FAIL", (name, result)
        K, calls = ("k", "rows") if contract == "rejection" else ("K", "calls")  # its letters
        assert result.detail.startswith(f"keeps fewer drafts than the rule: n = {K} in "), result
        assert f" {calls} where the rule expects about " in result.detail, result
    assert check_case(verify_chain, "chain", CASE, SAMPLES, (0, 2), tv=False).verdict == "pass"


def test_the_kept_p_value_is_judged_at_its_own_level(monkeypatch):
    """A case's p-value takes the kept test's on alpha's scale (times ALPHA / KEPT_ALPHA): a kept
    p-value between KEPT_ALPHA and ALPHA passes the case, one below KEPT_ALPHA fails it."""
    from picospec.check import battery
    for short, verdict in [(KEPT_ALPHA * 10, "pass"), (KEPT_ALPHA / 10, "FAIL")]:
        monkeypatch.setattr(battery, "kept_p_value", lambda full, rule, short=short: short)
        result = check_case(verify_chain, "chain", CASE, SAMPLES, (0, 2), tv=False)
        assert result.verdict == verdict, (short, result)
        assert result.p_value <= short * battery.ALPHA / KEPT_ALPHA
