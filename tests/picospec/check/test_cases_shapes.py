"""Shapes of call the battery makes beyond K drafts on a tree numbered level by level
(picospec/check/cases.py, drivers.py): chain calls with no drafts (K = 0, as prompt lookup or REST
call a verifier when nothing matched), trees numbered depth first (siblings apart), and the kept
test on a tree that is one chain (every right tree verifier is a chain verifier there). Each
broken sampler here passes the same case with the shape taken out (no_drafts = 0, the kept test
off) and fails it as it is; picospec's own verifiers pass it. Sizes: 4,000 sequences a case
(tests/picospec/test_check.py runs the battery at that size too).
"""
import numpy as np
import pytest

from picospec.batched.rejection import rejection_sample
from picospec.check.battery import check_case
from picospec.check.cases import CASES, SUPPORT, swapped
from picospec.check.exact_law import Toy
from picospec.check.drivers import run
from picospec.verify import verify_chain, verify_tree, verify_without_replacement

from tests.support import broken_samplers

SAMPLES = 4000
RIGHT = {"chain": verify_chain, "tree": verify_tree,
         "tree_without_replacement": verify_without_replacement}


def numbered(contract, name):
    """(number from 1, Case) of the case of that name."""
    [(i, case)] = [(i, c) for i, c in enumerate(CASES[contract], 1) if c.name == name]
    return i, case


def test_the_chain_battery_calls_with_no_drafts():
    """A share of the calls of the cases with no_drafts are given drafts [], P [0, V] and Q [1, V];
    the support cases among them (a K = 0 bug at u = 0 or near 1); the other cases never."""
    with_none = [c.name for c in CASES["chain"] if c.no_drafts]
    assert {"uniforms at 0: support", "uniforms near 1: support"} < set(with_none)
    assert len(with_none) >= 4
    for i, case in enumerate(CASES["chain"], 1):
        shapes = []

        def spy(drafts, P, Q, rng):
            shapes.append((len(drafts), P.shape, Q.shape))
            return verify_chain(drafts, P, Q, rng)[:2]

        run(spy, "chain", case, 300, (0, i))
        empty = [s for s in shapes if s[0] == 0]
        V = case.wide or case.V  # the vocabulary the sampler is handed
        assert all(s == (0, (0, V), (1, V)) for s in empty), case.name
        assert all(s == (case.K, (case.K, V), (case.K + 1, V)) for s in shapes if s[0]), case.name
        if case.no_drafts:  # about a quarter of the calls
            assert 0.15 < len(empty) / len(shapes) < 0.35, (case.name, len(empty), len(shapes))
        else:
            assert not empty, case.name


def test_calls_with_no_drafts_keep_the_law_and_the_kept_test():
    """The rule keeps all 0 drafts with chance 1: each K = 0 call counts as kept whole with rule
    1 (n = 0 is the only n the contract allows), and picospec's own passes every such case."""
    for i, case in enumerate(CASES["chain"], 1):
        if not case.no_drafts:
            continue
        kept = []
        run(verify_chain, "chain", case, SAMPLES, (0, i), kept)
        full = np.concatenate([f for _, f in kept])
        rule = np.concatenate([r for r, _ in kept])
        assert full[rule == 1].all() and (rule == 1).sum() >= 0.15 * len(rule), case.name
        assert check_case(verify_chain, "chain", case, SAMPLES, (0, i), tv=False).verdict == "pass"


@pytest.mark.parametrize("name, verdict, detail", [
    ("no_drafts_argmax", "FAIL", "observed"),
    ("no_drafts_searchsorted_left", "FAIL", "sequences the target forbids"),
    ("first_rejection_by_argmax", "error", "ValueError: attempt to get argmax of an empty"),
    ("no_drafts_n_minus_one", "error", "n_accepted = -1 with K = 0 drafts")])
def test_a_sampler_wrong_only_without_drafts_fails_where_calls_have_none(name, verdict, detail):
    """Each is right whenever it has drafts: the cases with no_drafts = 0 pass it, the same cases
    with their calls without drafts fail it (the first of them that does, the search ending
    there)."""
    fn = getattr(broken_samplers, name)
    results = []
    for i, case in [(i, c) for i, c in enumerate(CASES["chain"], 1) if c.no_drafts]:
        assert check_case(fn, "chain", case._replace(no_drafts=0.0), SAMPLES, (0, i),
                          tv=False).verdict == "pass", (name, case.name)
        results.append(check_case(fn, "chain", case, SAMPLES, (0, i), tv=False))
        if results[-1].verdict != "pass":
            break
    bad = results[-1]
    assert bad.verdict == verdict and detail in bad.detail, results


def test_a_sampler_drawing_elsewhere_without_drafts_leaves_the_support_cases_untested():
    """no_drafts_own_generator draws its K = 0 token from NumPy's global generator: the support
    cases say "untested" (some draws come from elsewhere), where without the K = 0 calls they
    passed it. 2,000 sequences: at 300, about one state of the global generator in 70 sends every
    repeated call without drafts to a context whose law is one token, where no draw tells."""
    fn = broken_samplers.no_drafts_own_generator
    for i, case in [(i, c) for i, c in enumerate(CASES["chain"], 1) if c.support]:
        result = check_case(fn, "chain", case, 2_000, (0, i))
        assert result.verdict == "untested" and "come from elsewhere" in result.detail, result
        assert check_case(fn, "chain", case._replace(no_drafts=0.0), 300,
                          (0, i)).verdict == "pass"
        assert check_case(verify_chain, "chain", case, 300, (0, i)).verdict == "pass"


def level_order(parents):
    """Whether every node's children are numbered next to each other (a run of indices)."""
    return all(np.ptp(kids) == len(kids) - 1 for kids in
               [np.flatnonzero(np.array(parents) == p) for p in set(parents)])


@pytest.mark.parametrize("contract, name", [
    ("tree", "tree_children_as_a_run"),
    ("tree_without_replacement", "without_replacement_siblings_as_a_run")])
def test_a_tree_numbered_depth_first_fails_a_sampler_that_reads_siblings_as_a_run(contract, name):
    """Every other tree of the battery has each node's children numbered together; the depth-first
    case's do not. The sampler that reads them as a run fails it and passes the same case with its
    tree numbered level by level (the same tree); picospec's own passes both."""
    trees = [c.parents for c in CASES[contract] if not c.name.endswith("numbered depth first")]
    assert all(level_order(p) for p in trees)
    i, case = [(i, c) for i, c in enumerate(CASES[contract], 1)
               if c.name.endswith("numbered depth first")][0]
    assert not level_order(case.parents)
    assert all(all(np.diff(np.flatnonzero(np.array(case.parents) == p)) > 1)
               for p in set(case.parents) if list(case.parents).count(p) > 1)  # siblings apart
    # the same tree, level by level: root -> a, b; a -> c, d; c -> e; b -> f
    levels = case._replace(parents=(-1, -1, 0, 0, 1, 2))
    fn = getattr(broken_samplers, name)
    assert check_case(fn, contract, levels, SAMPLES, (0, i), tv=False).verdict == "pass"
    result = check_case(fn, contract, case, SAMPLES, (0, i), tv=False)
    assert result.verdict == "FAIL" and "observed" in result.detail, result
    for tree in (case, levels):
        assert check_case(RIGHT[contract], contract, tree, SAMPLES, (0, i),
                          tv=False).verdict == "pass"


def chain_cases(contract):
    """[(number from 1, Case)]: the law cases whose tree is one chain."""
    return [(i, c) for i, c in enumerate(CASES[contract], 1)
            if not c.support and len(set(c.parents)) == len(c.parents)]


def test_each_tree_battery_has_a_tree_that_is_one_chain_whose_leaf_is_reached():
    """A chain case whose leaf is never reached tests nothing (the T = 0 chain of
    tree_without_replacement: the draft's top token is never the target's there); each battery
    has one where picospec's own reaches it, and on each chain it does as often as the rule says
    (within 5 standard deviations: the rule's chance is the verifier's own on a chain)."""
    for contract in ("tree", "tree_without_replacement"):
        reached = 0
        for i, case in chain_cases(contract):
            kept = []
            run(RIGHT[contract], contract, case, SAMPLES, (0, i), kept)
            full = np.concatenate([f for _, f in kept])
            rule = np.concatenate([r for r, _ in kept])
            assert len(full) > SAMPLES, (contract, case.name)
            assert abs(full.sum() - rule.sum()) <= 5 * np.sqrt((rule * (1 - rule)).sum()) + 1e-9
            reached += int(full.sum())
        assert reached >= SAMPLES / 10, contract


def test_a_chain_of_top_tokens_is_kept_whole_with_the_product_of_q_at_its_tokens():
    """On a tree that is one chain of "top" siblings (each node the draft's top token, so
    p_i(x_i) = 1), the rule's chance run() records for each call is prod_i q_i(x_i): node i's
    token read in the call's own Q[i], the target's law after its parent's path."""
    i, case = numbered("tree", "V=3 top tokens T=0.7")
    chain, products, kept = case._replace(parents=(-1, 0, 1)), [], []

    def spy(tokens, parents, Q, rng, P=None):
        products.append(np.prod([Q[j][t] for j, t in enumerate(tokens)]))
        return verify_tree(tokens, parents, Q, rng, P=P)

    run(spy, "tree", chain, 100, (0, i), kept)
    rule = np.concatenate([r for r, _ in kept])
    assert len(rule) == len(products) and 0 < rule.max() < 1
    assert np.allclose(rule, products, rtol=1e-12, atol=0), (rule[:5], products[:5])


@pytest.mark.parametrize("contract, name", [("tree", "tree_leaf_dropped"),
                                            ("tree_without_replacement",
                                             "without_replacement_leaf_dropped")])
def test_a_tree_sampler_that_drops_the_leaf_fails_a_tree_that_is_one_chain(contract, name):
    """Lossless (its law passes every case), one token short when it reaches a leaf: the kept
    test of a chain-shaped tree whose leaf is reached fails it; on a tree with a node of two
    children no kept test runs and it passes. picospec's own passes every chain."""
    fn = getattr(broken_samplers, name)
    failed = []
    for i, case in chain_cases(contract):
        result = check_case(fn, contract, case, SAMPLES, (0, i), tv=False)
        failed += [result] if result.verdict != "pass" else []
        assert check_case(RIGHT[contract], contract, case, SAMPLES, (0, i),
                          tv=False).verdict == "pass"
    assert failed and all(r.verdict == "FAIL" for r in failed), failed
    assert failed[0].detail.startswith("keeps fewer drafts than the rule: the whole chain"), failed
    i, case = numbered(contract, [c.name for c in CASES[contract]
                                  if c.name.endswith("numbered depth first")][0])
    assert check_case(fn, contract, case, SAMPLES, (0, i), tv=False).verdict == "pass"


def test_each_battery_has_a_greedy_case_whose_laws_are_one_hot():
    """Temperature 0 (greedy decoding, where speculative decoding is most used): target and draft
    one-hot in every context, so every draft the target does not pick is rejected with certainty
    and the residual is the target itself. Each contract's battery holds such a law case."""
    for contract in CASES:
        greedy = [c for c in CASES[contract]
                  if not c.support and c.sampling.get("temperature") == 0]
        assert greedy, contract
        for case in greedy:
            for law in case.laws():  # [V, V, V] each
                assert ((law == 0) | (law == 1)).all() and (law.sum(-1) == 1).all(), case.name


def test_each_draft_equal_to_the_target_is_kept_whole_every_call():
    """The "draft = target" cases: p == q exactly, so min(1, q/p) = 1 and a right chain or
    rejection sampler keeps every draft at every call (the residual max(0, q - p) is never
    reached); each battery has one."""
    for contract in CASES:
        same = [c for c in CASES[contract] if c.draft[0] == "same"]
        assert same, contract
        for case in same:
            q, p = case.laws()  # [V, V, V] each
            assert np.array_equal(q, p), case.name
    for contract, fn in (("chain", verify_chain), ("rejection", rejection_sample)):
        [(i, case)] = [(i, c) for i, c in enumerate(CASES[contract], 1) if c.draft[0] == "same"]
        kept = []
        run(fn, contract, case, 300, (0, i), kept)
        assert all(f.all() for _, f in kept) and all((r == 1).all() for r, _ in kept), case.name


def test_the_one_hot_draft_case_drafts_token_0_where_the_target_may_forbid_it():
    """The chain's "one-hot draft" cases (each case so named, and only those): the draft gives
    token 0 probability 1 in every context, and its target (a toy with zeros) gives it 0 in some,
    where that draft is rejected for sure."""
    named = [c for c in CASES["chain"] if "one-hot draft" in c.name]
    assert len(named) >= 2 and named == [c for c in CASES["chain"] if c.draft[0] == "one-hot"]
    for case in named:
        q, p = case.laws()  # [V, V, V] each
        assert (p[..., 0] == 1).all() and (q[..., 0] == 0).any() and (q[..., 0] > 0).any()


def test_each_battery_has_ties_in_every_row_and_even_rows_before_its_wide_case():
    """The case before each battery's wide one: target and draft rows of whole weights 1 or 2, so
    every row holds two equal entries; several of the target's rows are even (all entries equal),
    and the draft differs from the target there (an even row taken for padding moves the law)."""
    for contract, cases in CASES.items():
        case = cases[next(i for i, c in enumerate(cases) if c.wide) - 1]
        q, p = case.laws()  # [V, V, V] each
        assert case.ties and not case.support, contract
        for law in (q, p):
            assert all(len(set(row.tolist())) < len(row) for row in law.reshape(-1, case.V))
        even = q.max(-1) == q.min(-1)  # [V, V]
        assert even.sum() >= case.V and (np.abs(q - p).sum(-1)[even] > 0.2).any(), contract


def test_the_swap_draft_moves_mass_to_the_next_id_as_its_docstring_says():
    """swapped(): q = [0.1, 0.6, 0.3], d = 0.04 -> p = [0.1, 0.56, 0.34] (the top token gives d to
    the next id); a top token at the last id gives it to id 0, of two tied tops the first gives;
    d above the top's mass moves it all."""
    table = np.array([[[0.1, 0.6, 0.3], [0.2, 0.1, 0.7]], [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]])
    p = swapped(Toy(table), 0.04).table  # [2, 2, 3]
    assert np.allclose(p, [[[0.1, 0.56, 0.34], [0.24, 0.1, 0.66]],
                           [[0.46, 0.54, 0.0], [0.04, 0.0, 0.96]]])
    assert np.allclose(swapped(Toy(table[:1, :1]), 0.7).table, [[[0.1, 0.0, 0.9]]])


@pytest.mark.parametrize("contract", list(CASES))
def test_each_battery_has_one_support_case_at_0_and_one_near_1(contract):
    """Every contract's battery checks the support on the target that forbids every token
    (SUPPORT) after the far draft: uniforms all 0.0 (lowest; first, and a second such case of more
    drafts, levels or siblings) and all the largest below 1 (highest); no other case sets
    either."""
    lowest = [c.name for c in CASES[contract] if c.lowest]
    highest = [c.name for c in CASES[contract] if c.highest]
    assert lowest[0] == "uniforms at 0: support" and highest == ["uniforms near 1: support"]
    assert len(lowest) == 2, lowest
    assert CASES[contract][0].lowest
    for case in [c for c in CASES[contract] if c.support]:
        assert case.target == SUPPORT and case.draft == ("far",) and case.lowest != case.highest


@pytest.mark.parametrize("contract", list(CASES))
def test_each_case_is_what_its_name_in_the_verdict_table_says(contract):
    """A case's name is the row the user reads: V=, K= (k=), T=, top_k=, top_p=, float32, "or 0"
    (calls with no drafts; "or no nodes": trees of none), top tokens, two drafts, far draft, draft
    with zeros, draft = target (in half its rows) name its fields, and those fields set are named
    (a far draft may go unnamed, and the support cases' names say neither their draft nor their
    calls with no drafts)."""
    for case in CASES[contract]:
        name, sampling = case.name, case.sampling
        words = dict(w.split("=") for w in name.replace(" = ", " ").split() if "=" in w)
        assert words.get("V", str(case.V)) == str(case.V), name
        assert int(words.get("K", words.get("k", case.K))) == case.K, name
        for key, field in (("T", "temperature"), ("top_k", "top_k"), ("top_p", "top_p")):
            assert (key in words) == (field in sampling), name
            assert key not in words or float(words[key]) == sampling[field], name
        assert ("float32" in name) == (case.dtype == "float32"), name
        assert ("or 0" in name or "or no nodes" in name) == (case.no_drafts > 0
                                                             and not case.support), name
        assert ("top tokens" in name) == (case.siblings == "top"), name
        assert ("two drafts" in name) == (case.siblings == "two drafts"), name
        assert "far draft" not in name or case.draft[0] == "far", name
        assert ("draft with zeros" in name) == (case.draft[0] == "zeros"), name
        assert ("draft = target" in name) == (case.draft[0] in ("same", "swap", "part")), name
        assert ("in half its rows" in name) == (case.draft[0] == "part"), name


@pytest.mark.parametrize("contract", list(CASES))
def test_each_draft_with_zeros_and_each_draft_but_2_tokens_is_what_its_name_says(contract):
    """"draft with zeros": the draft's toy has a share of zeros, and forbids some tokens the target
    allows (where a sampler must reject them for sure); "draft = target but 2 tokens": in every
    context the draft differs from the target at exactly two tokens, by the same mass, one up,
    one down."""
    named = 0
    for case in CASES[contract]:
        q, p = case.laws()  # [V, V, V] each
        if "draft with zeros" in case.name:
            named += 1
            # its share of zeros, before any top_k or top_p adds zeros of its own
            assert case.draft[0] == "zeros" and 0 < case.draft[1] < 1, case.name
            assert ((p == 0) & (q > 0)).any(), case.name
        if "but 2 tokens" in case.name:
            named += 1
            differ = ~np.isclose(p, q, rtol=0, atol=1e-12)  # [V, V, V]
            assert (differ.sum(-1) == 2).all(), case.name
            assert np.allclose((p - q).sum(-1), 0) and (np.abs(p - q).max(-1) > 0.01).all()
    assert named, contract


@pytest.mark.parametrize("contract", list(CASES))
def test_each_battery_has_a_law_case_whose_residuals_are_wide(contract):
    """A residual cut to its likeliest few tokens is right wherever residuals hold few: every
    battery has a law case (V = 12) whose residual norm(max(0, q - p)) holds 8 tokens or more in
    at least two contexts in five."""
    wide = []
    for case in [c for c in CASES[contract] if not c.support]:
        q, p = case.laws()  # [V, V, V] each
        tokens = (np.maximum(q - p, 0) > 0).sum(-1)  # [V, V]: the residual's tokens per context
        wide.append(((tokens >= 8).mean(), case.name))
    assert max(wide)[0] >= 0.4, wide
