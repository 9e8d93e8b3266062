"""Answers to every exercise written as students write them, without picospec: WRONG[name] holds
mistakes (each docstring says which) that the exercise's grader must reject, naming the case or the
call; RIGHT[name] holds right answers written otherwise than the project's and than
tests/support/learner_answers.py, which it must pass. p = draft, q = target."""
import functools

import numpy as np


def draw(law, rng):
    """A token from law by inverse CDF on one uniform (scaled by the law's total)."""
    cdf = np.asarray(law).cumsum(dtype=float)  # u scaled by its last entry: none runs past it
    return int(cdf.searchsorted(rng.random() * cdf[-1], side="right"))


def clipped(q, p):
    r = np.maximum(np.asarray(q) - np.asarray(p), 0)
    return r / r.sum()


# residual(q, p)

def residual_absolute(q, p):
    """|q - p| normalised: tokens with q < p get mass."""
    r = np.abs(q - p)
    return r / r.sum()


def residual_over_target_mass(q, p):
    """max(0, q - p) divided by q's mass on those tokens, not by its own sum."""
    return np.maximum(q - p, 0) / q[q > p].sum()


def residual_over_euclidean_norm(q, p):
    """"norm" read as np.linalg.norm: the law does not sum to 1."""
    r = np.maximum(q - p, 0)
    return r / np.linalg.norm(r)


def residual_floor(q, p):
    """max(q - p, 1e-10): a floor "for stability" gives forbidden tokens mass."""
    r = np.maximum(q - p, 1e-10)
    return r / r.sum()


def residual_in_place_on_p(q, p):
    """Computed in p's memory: the caller's p is changed."""
    p -= q
    p *= -1
    np.maximum(p, 0, out=p)
    return p / p.sum()


def residual_float32(q, p):
    """float32 out of float64 in: about 7 digits, not the 1e-9 asked."""
    return clipped(q, p).astype(np.float32)


def residual_normalised_first(q, p):
    """Normalised by sum(q - p) (which is 0) before clipping."""
    return np.maximum((q - p) / (q - p).sum(), 0)


def residual_as_row(q, p):
    """A [1, V] row, not a [V] vector."""
    return clipped(q, p)[None, :]


def residual_as_list(q, p):
    """A Python list of the right numbers: no array to divide, index or sample with."""
    return clipped(q, p).tolist()


def residual_as_text(q, p):
    """The right numbers as text (.astype(str)): no law to sample from."""
    return clipped(q, p).astype(str)


def residual_with_tolerance(q, p):
    """q - p > 1e-12 counted as q > p "to ignore rounding": a token ahead by less loses its
    mass."""
    r = np.where(q - p > 1e-12, q - p, 0.0)
    return r / r.sum()


RESIDUALS = {}  # (id(q), id(p)) -> (q, p, the residual): a cache kept across calls


def residual_cached_by_id(q, p):
    """Each residual kept by its arrays' id() (q and p kept with it) "to save work": stale once
    the caller refills q and p in place."""
    key = (id(q), id(p))
    if key not in RESIDUALS:
        RESIDUALS[key] = q, p, clipped(q, p)
    return RESIDUALS[key][-1].copy()


def residual_below_eps_is_q(q, p):
    """A residual of mass below machine epsilon taken for rounding and q returned: the law
    [1, 0, 0] of a residual of mass 1e-20 becomes q."""
    r = np.maximum(q - p, 0)
    return q.copy() if r.sum() < np.finfo(float).eps else r / r.sum()


def residual_in_long_double(q, p):
    """Computed and returned in np.longdouble "for accuracy": not the float64 array asked."""
    r = np.maximum(np.asarray(q, np.longdouble) - np.asarray(p, np.longdouble), 0)
    return r / r.sum()


def residual_rounded_to_10(q, p):
    """Rounded to 10 decimals "to clean float noise", not renormalised: each entry within 1e-9,
    the whole no longer summing to 1."""
    r = np.maximum(q - p, 0)
    return np.round(r / r.sum(), 10)


def residual_rounded_to_10_support_kept(q, p):
    """The same, a share rounded to 0 kept as it was ("never drop a token"): the support whole,
    each entry within 1e-9, the whole not summing to 1."""
    r = clipped(q, p)
    rounded = np.round(r, 10)
    return np.where((rounded == 0) & (r > 0), r, rounded)


OUT = {}


def residual_into_one_buffer(q, p):
    """One output array per V kept between calls "to save allocations": each call overwrites the
    law the call before returned."""
    out = OUT.setdefault(len(q), np.empty(len(q)))
    np.maximum(q - p, 0, out=out)
    out /= out.sum()
    return out


def residual_top_64(q, p):
    """The residual cut to its 64 likeliest tokens (a top-k residual "for speed"): right while it
    has 64 tokens or fewer."""
    r = np.maximum(q - p, 0)
    r[np.argsort(r)[:-64]] = 0
    return r / r.sum()


def residual_mass_from_sums(q, p):
    """Divided by sum(q) - sum(p) over the tokens where q > p: two sums near 1 subtracted, and
    a small mass cancels."""
    up = q > p
    return np.where(up, q - p, 0.0) / (q[up].sum() - p[up].sum())


def residual_as_ratio(q, p):
    """q (1 - p / q) for q - p: the same on paper, digits lost where p is close to q."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.nan_to_num(q * np.maximum(1 - p / q, 0))
    return r / r.sum()


def residual_laws_renormalised(q, p):
    """q and p divided by their own sums first "to be safe": where they are equal, and their
    sums differ in the last bit, a token q does not favour gets mass."""
    r = np.maximum(q / q.sum() - p / p.sum(), 0)
    return r / r.sum()


def residual_plus_tiny(q, p):
    """The smallest normal float added to the mass "against 0 / 0": a subnormal mass is lost."""
    r = np.maximum(q - p, 0)
    return r / (r.sum() + np.finfo(float).tiny)


# verify_chain(drafts, P, Q, rng)

def chain_one_uniform(drafts, P, Q, rng):
    """One uniform for the whole chain, drawn before the loop."""
    u = rng.random()
    for t, x in enumerate(drafts):
        if u >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_bonus_off_by_one(drafts, P, Q, rng):
    """Every draft kept: the extra token drawn from Q[K - 1], not Q[K]."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts) - 1], rng)


def chain_no_bonus(drafts, P, Q, rng):
    """The bonus token forgotten: every draft kept is reported as K - 1 kept and the last draft."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts) - 1, drafts[-1]


def chain_residual_next_row(drafts, P, Q, rng):
    """The residual from the next row of Q: norm(max(0, Q[t + 1] - P[t]))."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t + 1], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_accept_below_q(drafts, P, Q, rng):
    """Kept when u < q(x): the division by p(x) forgotten."""
    for t, x in enumerate(drafts):
        if rng.random() >= Q[t][x]:
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_counts_the_rejected(drafts, P, Q, rng):
    """Off by one: the rejected draft counted among the accepted (t + 1)."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t + 1, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_argmax_residual(drafts, P, Q, rng):
    """The replacement is the residual's most likely token, not a draw from it."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, int(np.argmax(np.maximum(Q[t] - P[t], 0)))
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_residual_unclipped(drafts, P, Q, rng):
    """The residual q - p drawn unclipped (its negative entries lower the CDF)."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            cdf = np.cumsum(Q[t] - P[t])
            return t, int(min(np.searchsorted(cdf, rng.random() * cdf.max()), len(cdf) - 1))
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_wrong_axis(drafts, P, Q, rng):
    """P and Q indexed [token, position]: the wrong axis."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[x][t] / P[x][t]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_mutates_q(drafts, P, Q, rng):
    """The residual computed in Q's own row: the caller's Q is changed."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            q = Q[t]
            q -= P[t]
            np.maximum(q, 0, out=q)
            return t, draw(q, rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_ties_by_random(drafts, P, Q, rng):
    """Ties (u == q/p) broken toward the draft, with Python's random for the uniforms."""
    import random

    for t, x in enumerate(drafts):
        if random.random() > min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


OWN = np.random.default_rng(0)  # a generator of the student's own, made once


def chain_own_generator(drafts, P, Q, rng):
    """The right rule, every uniform from a generator of its own made once, rng ignored."""
    for t, x in enumerate(drafts):
        if OWN.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), OWN)
    return len(drafts), draw(Q[len(drafts)], OWN)


def chain_bonus_after_the_loop(drafts, P, Q, rng):
    """Every draft kept: (t + 1, a token of Q[t + 1]) from the loop's last t, which no draft
    (K = 0, prompt lookup when nothing matched) leaves unset."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return t + 1, draw(Q[t + 1], rng)  # noqa: B007 (the bug: t unset when drafts is empty)


def chain_seeded_inside(drafts, P, Q, rng):
    """rng = np.random.default_rng(0) at the top "for reproducibility": the argument ignored,
    every call drawing the same uniforms."""
    rng = np.random.default_rng(0)
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_greedy_without_drafts(drafts, P, Q, rng):
    """No drafts (K = 0) taken as nothing to verify: Q[0]'s most likely token, not a draw."""
    if not drafts:
        return 0, int(np.argmax(Q[0]))
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_numpy_without_drafts(drafts, P, Q, rng):
    """No drafts (K = 0) as a case of its own, its token drawn by NumPy's global generator."""
    if not drafts:
        return 0, int(np.random.choice(Q.shape[-1], p=Q[0]))
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_keeps_nine_tenths(drafts, P, Q, rng):
    """A draft the target likes less than the draft kept with probability 0.9 q/p, "to be safe",
    the residual mended to match (q - p beta): the target's law, but fewer drafts kept."""
    for t, x in enumerate(drafts):
        q, p = np.asarray(Q[t], float), np.asarray(P[t], float)
        beta = np.where(q >= p, 1.0, 0.9 * q / np.maximum(p, 1e-300))  # [V]
        if rng.random() >= beta[x]:
            return t, draw(np.maximum(q - p * beta, 0), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_six_drafts_at_most(drafts, P, Q, rng):
    """At most 6 drafts verified (the longest chain tried while writing it), the bonus drawn
    after the sixth: lossless, but a seventh draft is never kept."""
    drafts = drafts[:6]
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_tie_kept_unless_forbidden(drafts, P, Q, rng):
    """Kept when u <= q/p, guarded by q > 0 so that u = 0 keeps no forbidden token: the tie
    u == q/p is kept, which the rule rejects."""
    for t, x in enumerate(drafts):
        if not (Q[t][x] > 0 and rng.random() <= min(1, Q[t][x] / P[t][x])):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_tokens_in_a_byte(drafts, P, Q, rng):
    """Every token returned as np.uint8: token 256 and up cannot be one (V = 50,257)."""
    for t, x in enumerate(drafts):
        if not rng.random() < min(1, Q[t][x] / P[t][x]):
            return t, np.uint8(draw(clipped(Q[t], P[t]), rng))
    return len(drafts), np.uint8(draw(Q[len(drafts)], rng))


def chain_inputs_frozen(drafts, P, Q, rng):
    """P and Q made read-only "to be safe": the caller can no longer write into its arrays."""
    P.flags.writeable = Q.flags.writeable = False
    for t, x in enumerate(drafts):
        if not rng.random() < min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_kept_when_close(drafts, P, Q, rng):
    """A draft kept untested where the draft's row np.allclose's the target's ("the same law")."""
    for t, x in enumerate(drafts):
        if not np.allclose(P[t], Q[t]) and rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_tie_within_isclose(drafts, P, Q, rng):
    """Kept when u < q/p and not np.isclose(u, q/p): a tolerance where the rule compares
    exactly."""
    for t, x in enumerate(drafts):
        ratio, u = Q[t][x] / P[t][x], rng.random()
        if not (ratio >= 1 or (u < ratio and not np.isclose(u, ratio))):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_small_residual_from_q(drafts, P, Q, rng):
    """A residual of mass below 1e-12 taken for rounding: the replacement drawn from Q[t]."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            r = np.maximum(Q[t] - P[t], 0)
            return t, draw(Q[t] if r.sum() < 1e-12 else r / r.sum(), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_confident_argmax(drafts, P, Q, rng):
    """A law whose largest mass is above 0.999 taken as certain ("nearly greedy"): its argmax,
    not a draw."""
    def pick(law):
        return int(np.argmax(law)) if np.max(law) > 0.999 else draw(law, rng)
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, pick(clipped(Q[t], P[t]))
    return len(drafts), pick(Q[len(drafts)])


def chain_hopeless_dropped(drafts, P, Q, rng):
    """A draft with q / p below 1/100 rejected without a uniform ("hopeless anyway")."""
    for t, x in enumerate(drafts):
        a = Q[t][x] / P[t][x]
        if a < 0.01 or rng.random() >= min(1, a):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_epsilon_under_p(drafts, P, Q, rng):
    """q / (p + 1e-10) "against division by zero": where p is tiny a draft the target likes
    more is rejected."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / (P[t][x] + 1e-10)):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def top(law, k):
    """law cut to its k largest entries, renormalised."""
    law = np.array(law, dtype=float)
    law[np.argsort(law)[:-k]] = 0
    return law / law.sum()


def chain_residual_top_16(drafts, P, Q, rng):
    """The residual cut to its 16 largest entries "for speed"."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(top(clipped(Q[t], P[t]), 16), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_bonus_top_50(drafts, P, Q, rng):
    """The extra token drawn top-k (k = 50), as text generation draws."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(top(Q[len(drafts)], 50), rng)


def chain_tiny_zeroed_in_place(drafts, P, Q, rng):
    """Entries of P and Q below 1e-12 set to 0 in place "to clean the rounding"."""
    P[P < 1e-12], Q[Q < 1e-12] = 0, 0
    for t, x in enumerate(drafts):
        with np.errstate(divide="ignore", invalid="ignore"):
            if not rng.random() < min(1, Q[t][x] / P[t][x]):
                return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_certain_within_1e5(drafts, P, Q, rng):
    """A law within 1e-5 of certain taken as certain: its argmax, not a draw."""
    def pick(law):
        return int(np.argmax(law)) if np.max(law) > 1 - 1e-5 else draw(law, rng)
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, pick(clipped(Q[t], P[t]))
    return len(drafts), pick(Q[len(drafts)])


def chain_drafts_in_int16(drafts, P, Q, rng):
    """Drafts made an int16 array "to index fast": ids past 32,767 wrap to negative indices."""
    d = np.array(drafts, dtype=np.int64).astype(np.int16)
    for t, x in enumerate(d):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(d), draw(Q[len(d)], rng)

# verify_without_replacement(tokens, parents, Q, P, rng)

def tree_walk(tokens, parents, Q, P, rng, law=None, update=None, row=lambda c: c + 1,
              order=lambda cs: cs, accept=lambda u, a: u < a, down=True, final=None, coin=None):
    """Sequoia's walk written out, each step replaceable (the defaults are right); coin(rng, a),
    where given, decides a test in place of a uniform."""
    law = law or (lambda P, c, tried: removed_from(P[c], [tokens[s] for s in tried]))
    update = update or (lambda q, p: clipped(q, p))
    node, path, q = -1, [], np.asarray(Q[0], dtype=float)
    while True:
        tried, kept = [], None
        for c in order([i for i, parent in enumerate(parents) if parent == node]):
            p = law(P, c, tried)
            x = tokens[c]
            a = min(1, q[x] / p[x])
            if coin(rng, a) if coin else accept(rng.random(), a):
                kept = c
                break
            q = update(q, p)
            tried.append(c)
        if kept is None or not down:
            if kept is not None:
                path.append(kept)
                q = np.asarray(Q[row(kept)], dtype=float)
            return path, (final or draw)(q, rng)
        path.append(kept)
        node, q = kept, np.asarray(Q[row(kept)], dtype=float)


def removed_from(p, tokens):
    p = np.array(p, dtype=float)
    p[tokens] = 0
    return p / p.sum()


def wr_not_renormalised(tokens, parents, Q, P, rng):
    """Earlier siblings' tokens removed from P, the rest not renormalised."""
    def law(P, c, tried):
        p = np.array(P[c], dtype=float)
        p[[tokens[s] for s in tried]] = 0
        return p
    return tree_walk(tokens, parents, Q, P, rng, law=law)


def wr_residual_against_p(tokens, parents, Q, P, rng):
    """The residual taken against P itself, not the law the sibling was drawn from."""
    raw = {}

    def law(P, c, tried):
        raw["p"] = np.asarray(P[c], dtype=float)
        return removed_from(P[c], [tokens[s] for s in tried])
    return tree_walk(tokens, parents, Q, P, rng, law=law, update=lambda q, p: clipped(q, raw["p"]))


def wr_reversed_siblings(tokens, parents, Q, P, rng):
    """Siblings tried last drawn first."""
    return tree_walk(tokens, parents, Q, P, rng, order=lambda cs: cs[::-1])


def wr_row_off_by_one(tokens, parents, Q, P, rng):
    """Below a kept node, Q's row of its parent (row c, not c + 1)."""
    return tree_walk(tokens, parents, Q, P, rng, row=lambda c: c)


def wr_ties_toward_draft(tokens, parents, Q, P, rng):
    """Kept when u <= q(x) / p_i(x): u = 0 keeps a token the target forbids."""
    return tree_walk(tokens, parents, Q, P, rng, accept=lambda u, a: u <= a)


def wr_stops_at_first_kept(tokens, parents, Q, P, rng):
    """One level only: the first kept child ends the walk, its own children never tried."""
    return tree_walk(tokens, parents, Q, P, rng, down=False)


def wr_residual_swapped(tokens, parents, Q, P, rng):
    """The residual norm(max(0, p_i - q)), the letters swapped."""
    return tree_walk(tokens, parents, Q, P, rng, update=lambda q, p: clipped(p, q))


def wr_mutates_p(tokens, parents, Q, P, rng):
    """Earlier siblings' tokens zeroed in P's own rows: the caller's P is changed."""
    def law(P, c, tried):
        p = P[c]
        p[[tokens[s] for s in tried]] = 0
        p /= p.sum()
        return p
    return tree_walk(tokens, parents, Q, P, rng, law=law)


def wr_siblings_in_a_run(tokens, parents, Q, P, rng):
    """A node's children read as one run of indices from its first child on: with the tree
    numbered depth first, a sibling after another's subtree is never tried."""
    def run(node):
        i = parents.index(node) if node in parents else len(parents)
        while i < len(parents) and parents[i] == node:
            yield i
            i += 1
    node, path, q = -1, [], np.asarray(Q[0], dtype=float)
    while True:
        kept, tried = None, []
        for c in run(node):
            p = removed_from(P[c], tried)
            if rng.random() < min(1, q[tokens[c]] / p[tokens[c]]):
                kept = c
                break
            q, _ = clipped(q, p), tried.append(tokens[c])
        if kept is None:
            return path, draw(q, rng)
        path.append(kept)
        node, q = kept, np.asarray(Q[kept + 1], dtype=float)


def wr_numpy_global(tokens, parents, Q, P, rng):
    """The uniforms from NumPy's global generator, not rng."""
    return tree_walk(tokens, parents, Q, P, np.random)


def wr_three_siblings_at_most(tokens, parents, Q, P, rng):
    """At most 3 children of a node tried (the widest tree tried while writing it), then the
    residual: a fourth sibling is never kept."""
    return tree_walk(tokens, parents, Q, P, rng, order=lambda cs: cs[:3])


def wr_three_levels_at_most(tokens, parents, Q, P, rng, levels=3):
    """The walk stopped 3 levels down (the deepest tree tried while writing it), the next token
    from the law there: a fourth level is never reached."""
    node, path, q = -1, [], np.asarray(Q[0], dtype=float)
    while len(path) < levels:
        kept, tried = None, []
        for c in [i for i, parent in enumerate(parents) if parent == node]:
            p = removed_from(P[c], [tokens[s] for s in tried])
            if rng.random() < min(1, q[tokens[c]] / p[tokens[c]]):
                kept = c
                break
            q, _ = clipped(q, p), tried.append(c)
        if kept is None:
            return path, draw(q, rng)
        path.append(kept)
        node, q = kept, np.asarray(Q[kept + 1], dtype=float)
    return path, draw(q, rng)


def wr_four_levels_at_most(tokens, parents, Q, P, rng):
    """The walk stopped 4 levels down (as deep as the battery's trees): a fifth level is never
    reached."""
    return wr_three_levels_at_most(tokens, parents, Q, P, rng, levels=4)


def wr_tie_kept_unless_forbidden(tokens, parents, Q, P, rng):
    """Kept when u <= q/p, guarded by q > 0: the tie u == q/p is kept."""
    return tree_walk(tokens, parents, Q, P, rng, accept=lambda u, a: a > 0 and u <= a)


def wr_confident_argmax(tokens, parents, Q, P, rng):
    """Sequoia's walk, a law whose largest mass is above 0.999 taken as certain (its argmax)."""
    node, path, q = -1, [], np.asarray(Q[0], dtype=float)
    while True:
        tried = []
        for c in [i for i, parent in enumerate(parents) if parent == node]:
            p = removed_from(P[c], [tokens[s] for s in tried])
            if rng.random() < min(1, q[tokens[c]] / p[tokens[c]]):
                path.append(c)
                node, q = c, np.asarray(Q[c + 1], dtype=float)
                break
            q = clipped(q, p)
            tried.append(c)
        else:
            return path, int(np.argmax(q)) if q.max() > 0.999 else draw(q, rng)


def wr_last_three_removed(tokens, parents, Q, P, rng):
    """Only the last three earlier siblings' tokens removed from P (a window "wide enough")."""
    return tree_walk(tokens, parents, Q, P, rng,
                     law=lambda P, c, tried: removed_from(P[c], [tokens[s] for s in tried[-3:]]))


def wr_epsilon_under_p(tokens, parents, Q, P, rng):
    """p_i + 1e-10 "against division by zero": where p_i is tiny a sibling the target likes
    more is rejected."""
    return tree_walk(tokens, parents, Q, P, rng, law=lambda P, c, tried: removed_from(
        P[c], [tokens[s] for s in tried]) + 1e-10)


def wr_hopeless_dropped(tokens, parents, Q, P, rng):
    """A sibling with q / p_i below 1/100 rejected whatever its uniform."""
    return tree_walk(tokens, parents, Q, P, rng, accept=lambda u, a: a >= 0.01 and u < a)


def wr_residual_top_16(tokens, parents, Q, P, rng):
    """Each residual cut to its 16 largest entries "for speed"."""
    return tree_walk(tokens, parents, Q, P, rng, update=lambda q, p: top(clipped(q, p), 16))


def wr_next_top_50(tokens, parents, Q, P, rng):
    """The next token drawn top-k (k = 50), as text generation draws."""
    return tree_walk(tokens, parents, Q, P, rng, final=lambda q, rng: draw(top(q, 50), rng))


def wr_certain_within_1e5(tokens, parents, Q, P, rng):
    """A next-token law within 1e-5 of certain taken as certain: its argmax, not a draw."""
    return tree_walk(tokens, parents, Q, P, rng, final=lambda q, rng: int(np.argmax(q))
                     if q.max() > 1 - 1e-5 else draw(q, rng))


def wr_tie_within_isclose(tokens, parents, Q, P, rng):
    """Kept when u < q/p_i and not np.isclose(u, q/p_i): a tolerance where the rule compares
    exactly."""
    return tree_walk(tokens, parents, Q, P, rng,
                     accept=lambda u, a: a >= 1 or (u < a and not np.isclose(u, a)))


def wr_small_residual_is_q(tokens, parents, Q, P, rng):
    """A residual of mass below 1e-12 taken for rounding: q kept as it was."""
    return tree_walk(tokens, parents, Q, P, rng, update=lambda q, p: (
        q if np.maximum(q - p, 0).sum() < 1e-12 else clipped(q, p)))


# medusa_buffers(choices)

def medusa_parts(choices, depth_from=0, pad=-1, leaves_only=True, leaf_to_root=False):
    paths = [()] + [tuple(c) for c in choices]
    row = {path: i for i, path in enumerate(paths)}
    n, D = len(paths), max(len(p) for p in paths)
    mask = np.zeros((n, n), dtype=bool)
    for i, path in enumerate(paths):
        for k in range(len(path) + 1):
            mask[i, row[path[:k]]] = True
    leaves = [p for p in paths if not leaves_only or not any(
        len(o) > len(p) and o[:len(p)] == p for o in paths)]
    retrieve = []
    for leaf in leaves:
        rows = [row[leaf[:k]] for k in range(len(leaf) + 1)]
        retrieve.append((rows[::-1] if leaf_to_root else rows) + [pad] * (D - len(leaf)))
    return {"attn_mask": mask, "position_ids": np.array([len(p) + depth_from for p in paths]),
            "retrieve_indices": np.array(retrieve)}


def medusa_keyed(choices, key):
    """medusa_parts with each node's row found by key(path): nodes whose keys meet share one."""
    paths = [()] + [tuple(c) for c in choices]
    row = {key(path): i for i, path in enumerate(paths)}
    out = medusa_parts(choices)
    n = len(paths)
    mask = np.zeros((n, n), dtype=bool)
    for i, path in enumerate(paths):
        mask[i, [row[key(path[:k])] for k in range(len(path) + 1)]] = True
    retrieve = out["retrieve_indices"].copy()
    for r, leaf in enumerate(p for p in paths if not any(
            len(o) > len(p) and o[:len(p)] == p for o in paths)):
        retrieve[r, :len(leaf) + 1] = [row[key(leaf[:k])] for k in range(len(leaf) + 1)]
    return {**out, "attn_mask": mask, "retrieve_indices": retrieve}


def medusa_digits_key(choices):
    """A node found by its depth and its ranks' digits joined: [1, 10] is [11, 0]."""
    return medusa_keyed(choices, lambda path: (len(path), "".join(map(str, path))))


def medusa_base_1024_key(choices):
    """A node found by its depth and its ranks packed in base 1024 ("ranks stay below 1024")."""
    return medusa_keyed(choices, lambda path: (len(path), packed(path, 1024)))

def medusa_mask_transposed(choices):
    """attn_mask[j, i] for "row i sees column j": ancestors see their descendants."""
    out = medusa_parts(choices)
    out["attn_mask"] = out["attn_mask"].T
    return out


def medusa_mask_without_self(choices):
    """A row sees its ancestors but not itself."""
    out = medusa_parts(choices)
    out["attn_mask"] = out["attn_mask"] & ~np.eye(len(out["attn_mask"]), dtype=bool)
    return out


def medusa_padded_with_zero(choices):
    """Retrieve rows padded with 0 (the root's row) instead of -1."""
    return medusa_parts(choices, pad=0)


def medusa_every_node_a_row(choices):
    """A retrieve row for every node, not only the leaves."""
    return medusa_parts(choices, leaves_only=False)


def medusa_float_positions(choices):
    """Position ids as floats (np.array of depths divided out): not an index array."""
    out = medusa_parts(choices)
    out["position_ids"] = out["position_ids"].astype(float)
    return out


def medusa_int_mask(choices):
    """The mask as 0/1 integers: indexing with it picks rows 0 and 1, not the seen columns."""
    out = medusa_parts(choices)
    out["attn_mask"] = out["attn_mask"].astype(np.int64)
    return out


def medusa_deepest_leaves_only(choices):
    """Retrieve rows only for the leaves at the deepest level."""
    out = medusa_parts(choices)
    rows = out["retrieve_indices"]
    out["retrieve_indices"] = rows[rows[:, -1] >= 0]
    return out


def medusa_leaf_to_root(choices):
    """Each retrieve row from its leaf up to the root."""
    return medusa_parts(choices, leaf_to_root=True)


def medusa_as_lists(choices):
    """Each part a nested Python list (.tolist()): no mask to index scores with."""
    return {part: value.tolist() for part, value in medusa_parts(choices).items()}


def medusa_depths_in_int8(choices):
    """position_ids as np.int8: a tree deeper than 127 levels wraps (or raises)."""
    made = medusa_from_parents(choices)
    return {**made, "position_ids": np.array(made["position_ids"].tolist(), dtype=np.int8)}


def medusa_depths_in_uint8(choices):
    """position_ids as np.uint8 ("depths are small and never negative"): past 255 levels they
    wrap."""
    made = medusa_from_parents(choices)
    return {**made, "position_ids": made["position_ids"].astype(np.uint8)}

# typical_accept(tokens, parents, probs, epsilon, delta)

def typical(tokens, parents, probs, epsilon, delta, row=lambda parent, node: parent + 1,
            entropy=None, threshold=None, compare=lambda a, b: a > b):
    def H(q):
        nz = q[q > 0]
        return -float(np.sum(nz * np.log(nz)))
    entropy = entropy or H
    threshold = threshold or (lambda q: min(epsilon, delta * np.exp(-entropy(q))))
    out = []
    for i, (token, parent) in enumerate(zip(tokens, parents)):
        q = np.asarray(probs[row(parent, i)], dtype=float)
        out.append(bool(compare(q[token], threshold(q))))
    return out


def typical_at_least(tokens, parents, probs, epsilon, delta):
    """q(x) >= threshold: a token exactly at the threshold kept."""
    return typical(tokens, parents, probs, epsilon, delta, compare=lambda a, b: a >= b)


def typical_log10(tokens, parents, probs, epsilon, delta):
    """H in decimal digits (log10)."""
    def H(q):
        nz = q[q > 0]
        return -float(np.sum(nz * np.log10(nz)))
    return typical(tokens, parents, probs, epsilon, delta, entropy=H)


def typical_exp_plus_h(tokens, parents, probs, epsilon, delta):
    """delta * exp(H): the minus sign lost."""
    def H(q):
        nz = q[q > 0]
        return float(np.sum(nz * np.log(nz)))
    return typical(tokens, parents, probs, epsilon, delta, entropy=H)


def typical_no_epsilon(tokens, parents, probs, epsilon, delta):
    """Only delta * exp(-H), epsilon forgotten."""
    def H(q):
        nz = q[q > 0]
        return -float(np.sum(nz * np.log(nz)))
    return typical(tokens, parents, probs, epsilon, delta,
                   threshold=lambda q: delta * np.exp(-H(q)))


def typical_root_row(tokens, parents, probs, epsilon, delta):
    """Every node judged by the root's law (row 0)."""
    return typical(tokens, parents, probs, epsilon, delta, row=lambda parent, node: 0)


def typical_parent_row_off_by_one(tokens, parents, probs, epsilon, delta):
    """Row parent, not parent + 1 (the root's children read the last row)."""
    return typical(tokens, parents, probs, epsilon, delta, row=lambda parent, node: parent)


def typical_whole_path(tokens, parents, probs, epsilon, delta):
    """A node kept only when its ancestors are: the path, not the node alone."""
    alone = typical(tokens, parents, probs, epsilon, delta)
    return [alone[i] and (parents[i] < 0 or alone[parents[i]]) for i in range(len(tokens))]


def typical_epsilon_delta_swapped(tokens, parents, probs, epsilon, delta):
    """min(delta, epsilon * exp(-H)): the two constants swapped."""
    return typical(tokens, parents, probs, delta, epsilon)


def typical_guard_in_place(tokens, parents, probs, epsilon, delta):
    """Zeros replaced by 1e-12 in probs itself to dodge log 0: the caller's probs is changed."""
    probs[probs == 0] = 1e-12
    return typical(tokens, parents, probs, epsilon, delta)


def typical_as_array_of_ints(tokens, parents, probs, epsilon, delta):
    """0/1 integers for the booleans, one fewer: the root's sibling forgotten."""
    return [int(k) for k in typical(tokens, parents, probs, epsilon, delta)][:-1]


def typical_log_plus_1e12(tokens, parents, probs, epsilon, delta):
    """H = -sum q log(q + 1e-12) "against log 0": the threshold moves by 2e-12 (V = 2)."""
    def H(q):
        return -float(np.sum(q * np.log(q + 1e-12)))
    return typical(tokens, parents, probs, epsilon, delta, entropy=H)


def typical_as_zero_one(tokens, parents, probs, epsilon, delta):
    """int(q(x) > threshold): 0/1 integers, not booleans (as an index, 0 and 1 pick nodes 0 and
    1)."""
    return [int(k) for k in typical(tokens, parents, probs, epsilon, delta)]


def typical_log_where_without_out(tokens, parents, probs, epsilon, delta):
    """np.log(q, where=q > 0) with no out=: where q == 0 the log holds whatever the memory held,
    and 0 times NaN is NaN."""
    rows = probs[np.asarray(parents, dtype=int) + 1]  # [m, V]
    logs = np.log(rows, where=rows > 0)
    threshold = np.minimum(epsilon, delta * np.exp(np.sum(rows * logs, -1)))  # [m]
    return list(rows[np.arange(len(tokens)), tokens] > threshold)


def typical_log_clipped_at_1e15(tokens, parents, probs, epsilon, delta):
    """log q clipped at 1e-15 "against log 0": masses below it count as 1e-15 in H."""
    rows = probs[np.asarray(parents, dtype=int) + 1]  # [m, V]
    threshold = np.minimum(epsilon, delta * np.exp(np.sum(rows * np.log(np.maximum(rows, 1e-15)),
                                                          -1)))  # [m]
    return list(rows[np.arange(len(tokens)), tokens] > threshold)


def typical_in_log_space(tokens, parents, probs, epsilon, delta):
    """log q(x) > min(log epsilon, log delta - H): the same test on paper, but log maps floats
    an ulp apart to one: a token one ulp above epsilon = 0.05 is dropped."""
    rows = probs[np.asarray(parents, dtype=int) + 1]  # [m, V]
    xlogx = rows * np.log(rows, out=np.zeros_like(rows), where=rows > 0)  # 0 log 0 = 0
    bound = np.minimum(np.log(epsilon), np.log(delta) + xlogx.sum(-1))  # [m]
    with np.errstate(divide="ignore"):
        return list(np.log(rows[np.arange(len(tokens)), tokens]) > bound)


def typical_margin_of_eps(tokens, parents, probs, epsilon, delta):
    """Kept when q(x) exceeds the threshold by more than eps ("float noise"): one ulp above it
    is rejected, where the comparison is exact."""
    return typical(tokens, parents, probs, epsilon, delta,
                   compare=lambda a, b: a - b > np.finfo(float).eps)

def typical_log_plus_eps(tokens, parents, probs, epsilon, delta):
    """H with log(q + eps) "against log 0": 50,000 tiny masses move H by 1e-11."""
    eps = np.finfo(float).eps
    return typical(tokens, parents, probs, epsilon, delta,
                   entropy=lambda q: -float(np.sum(q * np.log(q + eps))))


def typical_threshold_rounded(tokens, parents, probs, epsilon, delta):
    """The threshold rounded to 15 digits "to drop float noise": no longer compared exactly."""
    return typical(tokens, parents, probs, epsilon, delta, threshold=lambda q: round(
        float(min(epsilon, delta * np.exp(typical_H(q)))), 15))


def typical_H(q):
    """sum q log q (minus the entropy) over q > 0."""
    nz = q[q > 0]
    return float(np.sum(nz * np.log(nz)))


# find_candidates(x, max_ngram_size, num_pred_tokens)

def candidates_skip_last_window(x, max_ngram_size=3, num_pred_tokens=10):
    """The scan stops one window early: a match just before the trailing n-gram is missed."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n - 1):
            if x[s:s + n] == x[-n:]:
                return x[s + n:s + n + num_pred_tokens]
    return []


def candidates_one_too_many(x, max_ngram_size=3, num_pred_tokens=10):
    """num_pred_tokens + 1 tokens drafted."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if x[s:s + n] == x[-n:]:
                return x[s + n:s + n + num_pred_tokens + 1]
    return []


def candidates_as_text(x, max_ngram_size=3, num_pred_tokens=10):
    """The n-gram found in the text of the ids: "1 2" is found inside "11 2"."""
    text = " ".join(map(str, x))
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        at = text.find(" ".join(map(str, x[-n:])))
        s = text[:at].count(" ")
        if s + n < len(x):
            return x[s + n:s + n + num_pred_tokens]
    return []


def candidates_none_when_missing(x, max_ngram_size=3, num_pred_tokens=10):
    """None when nothing matches, not []."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if x[s:s + n] == x[-n:]:
                return x[s + n:s + n + num_pred_tokens]
    return None


def candidates_pops_the_tail(x, max_ngram_size=3, num_pred_tokens=10):
    """The trailing n-gram cut off x (`head = x` is no copy) to search the rest: the caller's
    tokens are changed."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        head, tail = x, x[-n:]
        del head[-n:]
        for s in range(len(head) - n + 1):
            if head[s:s + n] == tail:
                return (head + tail)[s + n:s + n + num_pred_tokens]
        head += tail
    return []


def candidates_dict_of_ngrams(x, max_ngram_size=3, num_pred_tokens=10):
    """An index {n-gram: start} filled left to right: a later start overwrites the first."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        index = {tuple(x[s:s + n]): s for s in range(len(x) - n)}
        if (s := index.get(tuple(x[-n:]))) is not None:
            return x[s + n:s + n + num_pred_tokens]
    return []


def candidates_as_array(x, max_ngram_size=3, num_pred_tokens=10):
    """The draft as a NumPy array slice of x: x + draft then adds ids elementwise."""
    ids = np.asarray(x)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if (ids[s:s + n] == ids[-n:]).all():
                return ids[s + n:s + n + num_pred_tokens]
    return ids[:0]


def candidates_ngrams_up_to_3(x, max_ngram_size=3, num_pred_tokens=10):
    """N-grams of at most 3 tokens (prompt lookup's usual max_ngram_size), whatever the argument
    says."""
    for n in range(min(max_ngram_size, 3, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if x[s:s + n] == x[-n:]:
                return x[s + n:s + n + num_pred_tokens]
    return []


def candidates_as_floats(x, max_ngram_size=3, num_pred_tokens=10):
    """The windows compared on a float copy of x: the draft comes back as floats (3.0, no token
    id)."""
    ids = np.asarray(x, dtype=float)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if np.array_equal(ids[s:s + n], ids[-n:]):
                return ids[s + n:s + n + num_pred_tokens].tolist()
    return []


def candidates_ids_in_a_byte(x, max_ngram_size=3, num_pred_tokens=10):
    """The n-gram found by bytes.find on x.astype(np.uint8) "to search fast": ids 256 apart
    (0 and 256) are one byte, so they match."""
    data = np.asarray(x).astype(np.uint8).tobytes()
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        s = data.find(data[-n:])
        if s + n < len(x):
            return list(x[s + n:s + n + num_pred_tokens])
    return []


def candidates_draft_capped_at_5(x, max_ngram_size=3, num_pred_tokens=10):
    """At most 5 tokens drafted (a verifier's usual K), whatever num_pred_tokens says."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if x[s:s + n] == x[-n:]:
                return x[s + n:s + n + min(num_pred_tokens, 5)]
    return []


NGRAM_INDEX = {}  # id(x) -> (x, {n-gram: its first start}), built once per list


def candidates_index_kept_by_id(x, max_ngram_size=3, num_pred_tokens=10):
    """The first start of every n-gram indexed once per token list, keyed by id(x) (x kept with
    it), to save work in the decoding loop: stale once the caller's x changes in place."""
    key = id(x), max_ngram_size
    if key not in NGRAM_INDEX:
        index = {}
        for n in range(1, min(max_ngram_size, len(x) - 1) + 1):
            for s in range(len(x) - n):
                index.setdefault(tuple(x[s:s + n]), s)
        NGRAM_INDEX[key] = x, index
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        if (s := NGRAM_INDEX[key][1].get(tuple(x[-n:]))) is not None:
            return x[s + n:s + n + num_pred_tokens]
    return []


def candidates_last_token_first(x, max_ngram_size=3, num_pred_tokens=10):
    """A quick exit when x's last token occurs nowhere before: x[-1] of no tokens raises."""
    if x[-1] not in x[:-1]:
        return []
    return candidates_by_windows(x, max_ngram_size, num_pred_tokens)


def candidates_zero_means_all(x, max_ngram_size=3, num_pred_tokens=10):
    """num_pred_tokens = 0 read as "no limit" (the slice's end None): every token after the
    match."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if x[s:s + n] == x[-n:]:
                return x[s + n:][:num_pred_tokens or None]
    return []


def candidates_last_1024(x, max_ngram_size=3, num_pred_tokens=10):
    """The scan over the last 1,024 tokens only ("recent text matches best"): an early match in a
    long prompt is missed."""
    y = x[-1024:]
    for n in range(min(max_ngram_size, len(y) - 1), 0, -1):
        for s in range(len(y) - n):
            if y[s:s + n] == y[-n:]:
                return y[s + n:s + n + num_pred_tokens]
    return []


def candidates_at_least_unigram(x, max_ngram_size=3, num_pred_tokens=10):
    """n-grams of one token at least, whatever max_ngram_size: a size of 0 still matches."""
    return candidates_by_windows(x, max(1, max_ngram_size), num_pred_tokens)


def candidates_matched_by(x, max_ngram_size, num_pred_tokens, same):
    """The first window equal to the trailing n-gram by same(window, tail), longest n first."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if same(x[s:s + n], x[-n:]):
                return x[s + n:s + n + num_pred_tokens]
    return []


def packed(ids, base):
    """ids as one number in the given base."""
    key = 0
    for t in ids:
        key = key * base + t
    return key


def candidates_packed_base_50000(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared as one number in base 50,000 "since ids are below 50,000": [1, 256] is
    [0, 50256]."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens,
                                 lambda a, b: packed(a, 50_000) == packed(b, 50_000))


def candidates_digits_joined(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared as their ids' digits joined: [1, 12] is [11, 2]."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens,
                                 lambda a, b: "".join(map(str, a)) == "".join(map(str, b)))


def candidates_float16(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared as float16 arrays: 40000 is 40001."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens, lambda a, b: np.array_equal(
        np.asarray(a, dtype=np.float16), np.asarray(b, dtype=np.float16)))


def candidates_last_4096(x, max_ngram_size=3, num_pred_tokens=10):
    """The scan over the last 4,096 tokens only: an early match in a long prompt is missed."""
    y = x[-4096:]
    return candidates_matched_by(y, max_ngram_size, num_pred_tokens, lambda a, b: a == b)


def candidates_ended_at_eos(x, max_ngram_size=3, num_pred_tokens=10):
    """The draft cut after the first <|endoftext|> (50256) "where the text ends"."""
    d = candidates_matched_by(x, max_ngram_size, num_pred_tokens, lambda a, b: a == b)
    return d[:d.index(50_256) + 1] if 50_256 in d else d


def candidates_cached(x, max_ngram_size=3, num_pred_tokens=10):
    """Drafts kept in a functools.lru_cache for prompts of two tokens or more: a call made again
    hands out the list it handed out before."""
    if len(x) < 2:
        return []
    return candidates_cached_tuple(tuple(x), max_ngram_size, num_pred_tokens)


@functools.lru_cache(maxsize=None)
def candidates_cached_tuple(x, max_ngram_size, num_pred_tokens):
    return list(candidates_matched_by(x, max_ngram_size, num_pred_tokens, lambda a, b: a == b))

# longest_suffix(corpus, context, max_suffix)

def suffix_tokens_anywhere(corpus, context, max_suffix):
    """Each token of the suffix somewhere in the corpus, not consecutive."""
    return next((n for n in range(min(max_suffix, len(context)), 0, -1)
                 if all(t in corpus for t in context[-n:])), 0)


def suffix_one_short(corpus, context, max_suffix):
    """n from min(max_suffix, len(context)) - 1 down: the longest suffix never tried."""
    def found(s):
        return any(corpus[i:i + len(s)] == s for i in range(len(corpus) - len(s) + 1))
    return next((n for n in range(min(max_suffix, len(context)) - 1, 0, -1)
                 if found(context[-n:])), 0)


def suffix_through_bytes(corpus, context, max_suffix):
    """Found with bytes(corpus).find: fails on ids past 255."""
    data = bytes(corpus)
    return next((n for n in range(min(max_suffix, len(context)), 0, -1)
                 if data.find(bytes(context[-n:])) >= 0), 0)


def suffix_reversed_in_place(corpus, context, max_suffix):
    """The context reversed in place to read its suffix as a prefix: the caller's list changed."""
    context.reverse()
    for n in range(min(max_suffix, len(context)), 0, -1):
        s = context[:n][::-1]
        if any(corpus[i:i + n] == s for i in range(len(corpus) - n + 1)):
            return n
    return 0


def suffix_prefix_matched(corpus, context, max_suffix):
    """The context's prefix looked up, not its suffix."""
    for n in range(min(max_suffix, len(context)), 0, -1):
        s = context[:n]
        if any(corpus[i:i + n] == s for i in range(len(corpus) - n + 1)):
            return n
    return 0


def suffix_last_token_as_bool(corpus, context, max_suffix):
    """The one-token case written `return context[-1] in corpus`: True or False, not 1 or 0."""
    for n in range(min(max_suffix, len(context)), 1, -1):
        if any(corpus[i:i + n] == context[-n:] for i in range(len(corpus) - n + 1)):
            return n
    return context[-1] in corpus


def suffix_up_to_3(corpus, context, max_suffix):
    """Suffixes of at most 3 tokens tried, whatever max_suffix says."""
    for n in range(min(max_suffix, 3, len(context)), 0, -1):
        if any(corpus[i:i + n] == context[-n:] for i in range(len(corpus) - n + 1)):
            return n
    return 0


def suffix_through_int32_bytes(corpus, context, max_suffix):
    """Ids matched as the bytes of int32 arrays: a match may start inside an id (the bytes of
    256 then 0 hold those of 1)."""
    corpus = np.asarray(corpus, dtype=np.int32).tobytes()
    for n in range(min(max_suffix, len(context)), 0, -1):
        if np.asarray(context[-n:], dtype=np.int32).tobytes() in corpus:
            return n
    return 0


def suffix_positions_by_id(corpus, context, max_suffix):
    """Positions indexed by a table of max(corpus) + 1 rows: an empty corpus has no max."""
    where = [[] for _ in range(max(corpus) + 1)]
    for i, t in enumerate(corpus):
        where[t].append(i)
    if not context or context[-1] >= len(where):
        return 0
    best = 0
    for end in where[context[-1]]:
        n = 1
        while (n < min(max_suffix, len(context)) and end - n >= 0
               and corpus[end - n] == context[-1 - n]):
            n += 1
        best = max(best, n)
    return best


def suffix_corpus_head(corpus, context, max_suffix):
    """The corpus read up to its first 4,096 tokens ("a datastore's first page")."""
    return suffix_by_set(corpus[:4096], context, max_suffix)


def suffix_packed_base_50000(corpus, context, max_suffix):
    """Suffixes compared as one number in base 50,000: [1, 256] is [0, 50256]."""
    for n in range(min(max_suffix, len(context)), 0, -1):
        keys = {packed(corpus[i:i + n], 50_000) for i in range(len(corpus) - n + 1)}
        if packed(context[-n:], 50_000) in keys:
            return n
    return 0


def suffix_capped_at_16(corpus, context, max_suffix):
    """Suffixes of at most 16 tokens, REST's default, whatever max_suffix."""
    return suffix_by_set(corpus, context, min(max_suffix, 16))


def suffix_corpus_tail(corpus, context, max_suffix):
    """The corpus read from its last 4,096 tokens ("the recent part")."""
    return suffix_by_set(corpus[-4096:], context, max_suffix)


def suffix_first_64_occurrences(corpus, context, max_suffix):
    """Extended leftwards from the first 64 occurrences of the context's last token only."""
    if not context:
        return 0
    ends = [i for i, t in enumerate(corpus) if t == context[-1]][:64]
    best, most = 0, min(max_suffix, len(context))
    for end in ends:
        n = 1
        while n < most and end - n >= 0 and corpus[end - n] == context[-1 - n]:
            n += 1
        best = max(best, n)
    return best if most else 0

# trie(sequences)

def trie_counts_once(sequences):
    """counts[i] = 1 for every node: set when created, never raised."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent = -1
        for k in range(len(seq)):
            key = tuple(seq[:k + 1])
            if key not in node:
                node[key] = len(tokens)
                tokens.append(seq[k])
                parents.append(parent)
                counts.append(1)
            parent = node[key]
    return tokens, parents, counts


def trie_parent_is_position(sequences):
    """parents[i] = the token's position in its sequence minus one, not a node index."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        for k in range(len(seq)):
            key = tuple(seq[:k + 1])
            if key not in node:
                node[key] = len(tokens)
                tokens.append(seq[k])
                parents.append(k - 1)
                counts.append(0)
            counts[node[key]] += 1
    return tokens, parents, counts


def trie_breadth_first(sequences):
    """Nodes numbered level by level, not in the order first met."""
    prefixes = []
    for seq in sequences:
        for k in range(len(seq)):
            if tuple(seq[:k + 1]) not in prefixes:
                prefixes.append(tuple(seq[:k + 1]))
    prefixes.sort(key=len)
    index = {p: i for i, p in enumerate(prefixes)}
    counts = [sum(tuple(s[:len(p)]) == p for s in sequences) for p in prefixes]
    return ([p[-1] for p in prefixes], [index.get(p[:-1], -1) for p in prefixes], counts)


def trie_pops_sequences(sequences):
    """Each sequence emptied with pop(0) while read: the caller's lists are changed."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent, prefix = -1, ()
        while seq:
            t = seq.pop(0)
            prefix += (t,)
            if prefix not in node:
                node[prefix] = len(tokens)
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            counts[node[prefix]] += 1
            parent = node[prefix]
    return tokens, parents, counts


def trie_hashable_in_place(sequences):
    """Each sequence made a tuple in the caller's list, to key a dict by its prefixes: the same
    tokens, but the caller's lists are tuples now."""
    for i, seq in enumerate(sequences):
        sequences[i] = tuple(seq)
    tokens, parents, counts, node = [], [], [], {}
    for prefix in (seq[:k] for seq in sequences for k in range(1, len(seq) + 1)):
        if prefix not in node:
            node[prefix] = len(tokens)
            tokens.append(prefix[-1])
            parents.append(node.get(prefix[:-1], -1))
            counts.append(0)
        counts[node[prefix]] += 1
    return tokens, parents, counts


def trie_string_keys_without_separator(sequences):
    """Prefixes keyed by str(token) joined with "": [1, 23] and [12, 3] are one node."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent, key = -1, ""
        for t in seq:
            key += str(t)
            if key not in node:
                node[key] = len(tokens)
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            counts[node[key]] += 1
            parent = node[key]
    return tokens, parents, counts


def trie_mutable_defaults(sequences, tokens=[], parents=[], counts=[]):  # noqa: B006 (the bug)
    """The lists as default arguments: made once, so each call adds to the last call's nodes."""
    node = {}
    for seq in sequences:
        parent = -1
        for k in range(len(seq)):
            if tuple(seq[:k + 1]) not in node:
                node[tuple(seq[:k + 1])] = len(tokens)
                tokens.append(seq[k])
                parents.append(parent)
                counts.append(0)
            parent = node[tuple(seq[:k + 1])]
            counts[parent] += 1
    return tokens, parents, counts


def trie_nan_padded(sequences):
    """The sequences padded with nan into one float array (their lengths differ): the tokens
    come back as floats."""
    grid = np.full((len(sequences), max(map(len, sequences))), np.nan)  # [sequences, longest]
    for i, seq in enumerate(sequences):
        grid[i, :len(seq)] = seq
    tokens, parents, counts, node = [], [], [], {}
    for row in grid:
        parent, prefix = -1, ()
        for t in row[~np.isnan(row)]:
            prefix += (t,)
            if prefix not in node:
                node[prefix] = len(tokens)
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            parent = node[prefix]
            counts[parent] += 1
    return tokens, parents, counts


def trie_ids_in_a_byte(sequences):
    """Prefixes keyed by their bytes (np.uint8) "as compact keys": ids 256 apart are one node."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent = -1
        for k in range(len(seq)):
            key = np.asarray(seq[:k + 1]).astype(np.uint8).tobytes()
            if key not in node:
                node[key] = len(tokens)
                tokens.append(seq[k])
                parents.append(parent)
                counts.append(0)
            counts[node[key]] += 1
            parent = node[key]
    return tokens, parents, counts


def trie_depth_from_longest(sequences):
    """Walked level by level to the longest sequence's length, max() of the lengths: raises when
    nothing was retrieved (no sequence)."""
    depth = max(len(seq) for seq in sequences)
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent = -1
        for k in range(min(len(seq), depth)):
            if tuple(seq[:k + 1]) not in node:
                node[tuple(seq[:k + 1])] = len(tokens)
                tokens.append(seq[k])
                parents.append(parent)
                counts.append(0)
            parent = node[tuple(seq[:k + 1])]
            counts[parent] += 1
    return tokens, parents, counts


def trie_by_recursion(sequences):
    """One recursive call per token: a sequence longer than Python's recursion limit raises."""
    tokens, parents, counts, child = [], [], [], {}

    def insert(seq, parent):
        if not seq:
            return
        key = (parent, seq[0])
        if key not in child:
            child[key] = len(tokens)
            tokens.append(seq[0])
            parents.append(parent)
            counts.append(0)
        counts[child[key]] += 1
        insert(seq[1:], child[key])

    for seq in sequences:
        insert(list(seq), -1)
    return tokens, parents, counts


def trie_as_arrays(sequences):
    """The right numbers as NumPy arrays, not the lists asked (a caller appends to them)."""
    return tuple(np.array(v, dtype=np.int64) for v in trie_of_dicts(sequences))


def trie_one_sequence_handed_back(sequences):
    """One sequence: its own list returned as the tokens ("already a chain"), the caller's list
    itself."""
    if len(sequences) == 1:
        s = sequences[0]
        return s, list(range(-1, len(s) - 1)), [1] * len(s)
    return trie_of_dicts(sequences)


def trie_keyed(sequences, key):
    """A node for each new key(parent, prefix, token), its count raised on each visit."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent = -1
        for i, t in enumerate(seq):
            k = key(parent, seq[:i + 1], t)
            if k not in node:
                node[k] = len(tokens)
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            counts[node[k]] += 1
            parent = node[k]
    return tokens, parents, counts


def trie_parent_and_token_joined(sequences):
    """A node keyed by str(parent) + str(token): node 1's token 10 is node 11's token 0."""
    return trie_keyed(sequences, lambda parent, prefix, t: str(parent) + str(t))


def trie_shifted_key(sequences):
    """A node keyed by (parent << 15) | token, "ids fit in 15 bits": 32768 is 0."""
    return trie_keyed(sequences, lambda parent, prefix, t: (parent << 15) | t)


def trie_token_major_key(sequences):
    """A node keyed by token * 10000 + parent + 1: past 10,000 nodes two keys meet."""
    return trie_keyed(sequences, lambda parent, prefix, t: t * 10_000 + parent + 1)


def trie_last_four_key(sequences):
    """A node keyed by its depth and the last four tokens of its prefix ("four is enough")."""
    return trie_keyed(sequences, lambda parent, prefix, t: (len(prefix), tuple(prefix[-4:])))


def trie_packed_key(sequences):
    """A node keyed by (parent + 1) * 40000 + token: token 40000 below the root is token 0
    below node 0."""
    return trie_keyed(sequences, lambda parent, prefix, t: (parent + 1) * 40_000 + t)

def trie_float16_key(sequences):
    """A node keyed by its prefix as float16 bytes: 40000 is 40001."""
    return trie_keyed(sequences, lambda parent, prefix, t: np.asarray(
        prefix, dtype=np.float16).tobytes())

# lookahead_mask(W, L)

def lookahead_parts(W, L, row=lambda level, i, W, L: level * W + i):
    mask = np.zeros((W * L, W * L), dtype=bool)
    for level in range(L):
        for i in range(W):
            seen = [(0, j) for j in range(i + 1)] + [(d, i) for d in range(1, level + 1)]
            for d, j in seen:
                mask[row(level, i, W, L), row(d, j, W, L)] = True
    return mask


def lookahead_column_major(W, L):
    """Rows numbered column by column (i * L + l), not level by level."""
    return lookahead_parts(W, L, row=lambda level, i, W, L: i * L + level)


def lookahead_transposed(W, L):
    """mask[b, a] for "a sees b"."""
    return lookahead_parts(W, L).T


def lookahead_without_self(W, L):
    """A token does not see itself."""
    return lookahead_parts(W, L) & ~np.eye(W * L, dtype=bool)


def lookahead_whole_first_level(W, L):
    """Deeper tokens see every first-level token, not (0, 0) .. (0, i) alone."""
    mask = lookahead_parts(W, L)
    mask[W:, :W] = True
    return mask


def lookahead_as_ints(W, L):
    """0/1 integers, not booleans."""
    return lookahead_parts(W, L).astype(np.int64)


def lookahead_as_nested_lists(W, L):
    """Nested Python lists of booleans: ~mask and scores[mask] do not work on them."""
    return lookahead_parts(W, L).tolist()


def lookahead_levels_up_to_4(W, L):
    """The column's deeper levels seen through at most 3 levels above (a loop bound written for
    L <= 4): a fifth level misses its column's level 1."""
    mask = np.zeros((W * L, W * L), dtype=bool)
    for level in range(L):
        for i in range(W):
            mask[level * W + i, :i + 1] = True
            for deeper in range(max(1, level - 2), level + 1):
                mask[level * W + i, deeper * W + i] = True
    return mask


def lookahead_levels_up_to_7(W, L):
    """The column's deeper levels seen through at most 6 levels above: an eighth level misses
    its column's level 1."""
    mask = np.zeros((W * L, W * L), dtype=bool)
    for level in range(L):
        for i in range(W):
            mask[level * W + i, :i + 1] = True
            for deeper in range(max(1, level - 5), level + 1):
                mask[level * W + i, deeper * W + i] = True
    return mask


def lookahead_by_recursion(W, L):
    """What token (level, i) sees built from what (level - 1, i) sees, one call a level: past
    Python's recursion limit at 1,000 levels."""
    def seen(level, i):
        return list(range(i + 1)) if level == 0 else seen(level - 1, i) + [level * W + i]
    mask = np.zeros((W * L, W * L), dtype=bool)
    for level in range(L):
        for i in range(W):
            mask[level * W + i, seen(level, i)] = True
    return mask

def lookahead_rows_in_int8(W, L):
    """Row numbers in np.int8: a window of more than 127 tokens wraps."""
    row = np.arange(W * L, dtype=np.int8)  # [W * L]
    level, column = row // W, row % W
    first = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    own = (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])
    return first | own


def lookahead_rows_in_float16(W, L):
    """Row numbers in np.float16 ("small numbers, half the memory"): whole numbers past 2,048 round
    to even, so a window of 2,050 tokens reads some rows' levels and columns wrong."""
    row = np.arange(W * L, dtype=np.float16)  # [W * L]
    level, column = row // W, row % W
    first = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    own = (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])
    return first | own


def lookahead_columns_as_text(W, L):
    """Columns compared as text ("10" <= "2"): a window of 11 columns or more is wrong."""
    mask = np.zeros((W * L, W * L), dtype=bool)
    for a in range(W * L):
        for b in range(W * L):
            (la, ia), (lb, ib) = divmod(a, W), divmod(b, W)
            mask[a, b] = (lb == 0 and str(ib) <= str(ia)) or (ib == ia and lb <= la)
    return mask


MASKS = {}


def lookahead_one_mask_per_size(W, L):
    """One mask kept per (W, L) and handed out again: a caller that edits it edits every later
    answer."""
    return MASKS.setdefault((W, L), lookahead_parts(W, L))


def lookahead_as_matrix(W, L):
    """The right mask as np.matrix (np.asmatrix): mask[i] keeps two axes, and * multiplies as
    matrices."""
    return np.asmatrix(lookahead_parts(W, L))


def lookahead_columns_in_int8(W, L):
    """Columns held as np.int8: past 127 columns they wrap and compare wrong."""
    column = (np.arange(W * L) % W).astype(np.int8)  # [W * L]
    level = np.arange(W * L) // W
    first = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    return first | (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])

# draft_law(z, d2t, n_vocab)

def placed(s, d2t, n_vocab):
    p = np.zeros(s.shape[:-1] + (n_vocab,))  # [..., V]
    p[..., d2t] = s
    return p


def draft_law_min_subtracted(z, d2t, n_vocab):
    """Each row's min subtracted before exp, not its max: a row whose logits lie 710 or more
    apart overflows."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.min(-1, keepdims=True))
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def draft_law_as_list(z, d2t, n_vocab):
    """The right law as a nested Python list (.tolist()), not a float64 array."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab).tolist()


def draft_law_mean_subtracted(z, d2t, n_vocab):
    """Each row's mean subtracted before exp, not its max: a row 2000 apart overflows (no toy
    head's row spans that much)."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.mean(-1, keepdims=True))
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def draft_law_batch_of_one(z, d2t, n_vocab):
    """z [1, K, V_d] taken as its one row block z[0] "for the batch": a batch of two loses its
    second."""
    z = np.asarray(z, dtype=np.float64)
    rows = z[0] if z.ndim == 3 else z
    e = np.exp(rows - rows.max(-1, keepdims=True))
    law = placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)
    return law[None] if z.ndim == 3 else law


def draft_law_rows_stacked(z, d2t, n_vocab):
    """Row by row, the rows stacked with np.stack: z [0, V_d] has none to stack."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        e = np.exp(z - z.max())
        return placed(e / e.sum(), d2t, n_vocab)
    rows = [draft_law_rows_stacked(r, d2t, n_vocab) for r in z.reshape(-1, z.shape[-1])]
    return np.stack(rows).reshape(z.shape[:-1] + (n_vocab,))


def draft_law_inputs_frozen(z, d2t, n_vocab):
    """z and d2t made read-only "to be safe": the caller can no longer write into them."""
    z.flags.writeable = d2t.flags.writeable = False
    e = np.exp(z - z.max(-1, keepdims=True))
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def draft_law_up_to_3_axes(z, d2t, n_vocab):
    """Written for z [V_d], [K, V_d] or [B, K, V_d]: a z of four axes does not broadcast."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    out = np.zeros((*z.shape[:min(z.ndim - 1, 2)], n_vocab))
    out[..., d2t] = s
    return out


def draft_law_ids_in_uint16(z, d2t, n_vocab):
    """d2t cast to np.uint16 ("ids fit in 16 bits", as GPT-2's do): Llama 3's 128,256 wrap."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return placed(e / e.sum(-1, keepdims=True), np.asarray(d2t).astype(np.uint16), n_vocab)


def draft_law_float32_renormalised(z, d2t, n_vocab):
    """The softmax in z's dtype, cast to float64 and renormalised: rows sum to 1, each value 1e-8
    off for float32 logits."""
    e = np.exp(z - z.max(-1, keepdims=True))
    s = (e / e.sum(-1, keepdims=True)).astype(np.float64)
    return placed(s / s.sum(-1, keepdims=True), d2t, n_vocab)

# expected_tokens(alpha, K)

def expected_linear(alpha, K):
    """1 + K alpha: each draft counted independently of those before it."""
    return 1 + K * alpha


def expected_rounded_down(alpha, K):
    """A whole number of tokens (int())."""
    return int(sum(alpha ** j for j in range(K + 1)))


def expected_float32(alpha, K):
    """Summed in float32: about 7 digits."""
    return np.float32(sum(np.float32(alpha) ** j for j in range(K + 1)))


def expected_sign_flipped(alpha, K):
    """(1 - alpha^(K + 1)) / (1 + alpha)."""
    return (1 - alpha ** (K + 1)) / (1 + alpha)


def expected_guarded_below_1e7(alpha, K):
    """K + 1 once 1 - alpha < 1e-7, "where the closed form is 0 / 0": off by about 1e-5 there."""
    return K + 1.0 if 1 - alpha < 1e-7 else (1 - alpha ** (K + 1)) / (1 - alpha)


def expected_first_order_near_1(alpha, K):
    """Within 1e-6 of alpha = 1, a first-order step from K + 1: off by about (1 - alpha)^2 K^3 / 6,
    1e-8 of E at K = 1000."""
    e = 1 - alpha
    return float(K + 1 - e * K * (K + 1) / 2) if e < 1e-6 else (1 - alpha ** (K + 1)) / e


def expected_guarded_by_isclose(alpha, K):
    """K + 1 where math.isclose(alpha, 1) (within 1e-9): E is K + 1 less about K^2 (1 - alpha)
    / 2 there, 2.5e-7 of it at K = 1000."""
    import math

    return float(K + 1) if math.isclose(alpha, 1) else (1 - alpha ** (K + 1)) / (1 - alpha)


def expected_guarded_below_1e10(alpha, K):
    """K + 1 once 1 - alpha < 1e-10."""
    return float(K + 1) if 1 - alpha < 1e-10 else (1 - alpha ** (K + 1)) / (1 - alpha)


def expected_alpha_capped(alpha, K):
    """alpha capped at 1 - 1e-12 so the closed form never divides by 0: at alpha = 1 with
    100,000 drafts it is short by 0.005."""
    alpha = min(alpha, 1 - 1e-12)
    return (1 - alpha ** (K + 1)) / (1 - alpha)


# predicted_speedup(E, c, K, c_d)

def speedup_no_verify_cost(E, c, K, c_d):
    """E / c: the draft's calls forgotten."""
    return E / c


def speedup_one_draft_call_short(E, c, K, c_d):
    """E / (c + (K - 1) c_d): one draft call too few."""
    return E / (c + (K - 1) * c_d)


def speedup_product(E, c, K, c_d):
    """E / (c K c_d): costs multiplied, not added."""
    return E / (c * K * c_d) if c_d else E / c


def speedup_inverted(E, c, K, c_d):
    """(c + K c_d) / E: the ratio upside down."""
    return (c + K * c_d) / E


def speedup_as_text(E, c, K, c_d):
    """The right speedup formatted "to 1e-9" as text (f"{s:.12f}"), not a float."""
    return f"{E / (c + K * c_d):.12f}"


def residual_by_minimum(q, p):
    """Normalised by 1 - sum min(q, p): the residual's mass in exact arithmetic, off by the
    rounding of q's and p's sums in floats (a relative 1e-4 at a mass of 1e-12)."""
    overlap = np.minimum(q, p)
    return (q - overlap) / (1 - overlap.sum())


def speedup_none_without_drafts(E, c, K, c_d):
    """No drafts taken for no speedup (1.0): with K = 0 a step costs c and yields one token."""
    return 1.0 if K == 0 else E / (c + K * c_d)


def speedup_verification_at_least_one(E, c, K, c_d):
    """c raised to 1 "since a call costs at least one token's": a measured c below 1 is lost."""
    return E / (max(c, 1.0) + K * c_d)


def speedup_nearly_free_draft(E, c, K, c_d):
    """A draft costing under 1e-3 of a token taken as free: its K c_d dropped."""
    return E / c if c_d < 1e-3 else E / (c + K * c_d)

def speedup_one_token_without_drafts(E, c, K, c_d):
    """1 / c with no drafts: one token a call, though prompt lookup's drafts cost no call."""
    return 1.0 / c if K == 0 else E / (c + K * c_d)


def speedup_tokens_capped(E, c, K, c_d):
    """E capped at K + 1 "since a call verifies at most K drafts": a Medusa step or prompt
    lookup yields more tokens than draft calls."""
    return min(E, K + 1) / (c + K * c_d)


def speedup_free_within_isclose(E, c, K, c_d):
    """A draft cost np.isclose to 0 (within 1e-8) taken as free."""
    return E / c if np.isclose(c_d, 0) else E / (c + K * c_d)


def draft_law_cached(z, d2t, n_vocab):
    """Laws kept by z's and d2t's bytes "to save the exp": another n_vocab, or z of another
    shape with the same bytes, gets a law kept before."""
    key = (np.asarray(z).tobytes(), np.asarray(d2t).tobytes())
    if key not in DRAFT_LAWS:
        z = np.asarray(z, dtype=np.float64)
        e = np.exp(z - z.max(-1, keepdims=True))
        DRAFT_LAWS[key] = placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)
    return DRAFT_LAWS[key].copy()


DRAFT_LAWS = {}


def draft_law_squeezed(z, d2t, n_vocab):
    """np.squeeze(z) "to drop the batch axis": with one draft token its last axis goes too."""
    shape, z = np.shape(z), np.squeeze(np.asarray(z, dtype=np.float64))
    e = np.exp(z - z.max(-1, keepdims=True)) if z.ndim else np.ones(())
    s = (e / e.sum(-1, keepdims=True)) if z.ndim else e[None]
    return placed(s, d2t, n_vocab).reshape(shape[:-1] + (n_vocab,))


def draft_law_axis_by_length(z, d2t, n_vocab):
    """The softmax over the first axis as long as d2t: a leading axis of that length is taken."""
    z = np.asarray(z, dtype=np.float64)
    axis = z.shape.index(len(d2t))
    e = np.exp(z - z.max(axis, keepdims=True))
    return placed(np.moveaxis(e / e.sum(axis, keepdims=True), axis, -1), d2t, n_vocab)


def draft_law_empty_as_rows(z, d2t, n_vocab):
    """An empty z answered [0, n_vocab] whatever its leading shape."""
    z = np.asarray(z, dtype=np.float64)
    if z.size == 0:
        return np.zeros((0, n_vocab))
    e = np.exp(z - z.max(-1, keepdims=True))
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def residual_one_token_when_tiny(q, p):
    """A residual of mass below 1e-16 taken as rounding noise, all of it put on its likeliest
    token: a tiny mass over two tokens, [1/3, 2/3], becomes [0, 1]."""
    r = np.maximum(q - p, 0)
    return np.eye(len(q))[np.argmax(r)] if r.sum() < 1e-16 else r / r.sum()


RESIDUALS_BY_Q = {}


def residual_kept_by_q(q, p):
    """Each residual kept by q's bytes ("the target decides"): q met again with another p gets
    the first p's residual."""
    if q.tobytes() not in RESIDUALS_BY_Q:
        RESIDUALS_BY_Q[q.tobytes()] = clipped(q, p)
    return RESIDUALS_BY_Q[q.tobytes()].copy()


def typical_as_bool_array(tokens, parents, probs, epsilon, delta):
    """The right test, returned as a NumPy bool array, not the list asked."""
    return np.array(typical(tokens, parents, probs, epsilon, delta), dtype=bool)


def candidates_draft_capped_at_64(x, max_ngram_size=3, num_pred_tokens=10):
    """At most 64 drafts "nobody asks for more": 300 asked and found come back as 64."""
    return candidates_matched_by(x, max_ngram_size, min(num_pred_tokens, 64), lambda a, b: a == b)


def candidates_ngrams_up_to_8(x, max_ngram_size=3, num_pred_tokens=10):
    """n-grams capped at 8: a longer one's later match is missed for an 8-gram's earlier one."""
    return candidates_matched_by(x, min(max_ngram_size, 8), num_pred_tokens, lambda a, b: a == b)


def candidates_first_4096(x, max_ngram_size=3, num_pred_tokens=10):
    """Matches looked for among the first 4,096 tokens only ("the prompt"): a late one is
    missed."""
    n_max = min(max_ngram_size, len(x) - 1)
    for n in range(n_max, 0, -1):
        tail = x[-n:]
        for s in range(min(len(x) - n, 4096)):
            if x[s:s + n] == tail:
                return x[s + n:s + n + num_pred_tokens]
    return []


def trie_float32_key(sequences):
    """A node keyed by (parent + 1) * 65536 + token held in float32: exact below 2^24 only, so
    tokens 0 and 1 below node 299 are one."""
    return trie_keyed(sequences, lambda parent, prefix, t: float(np.float32(
        (parent + 1) * 65536 + t)))


def medusa_ancestor_by_rank_sum(choices):
    """A node's ancestors found by depth, rank sum and last rank, not by the whole path."""
    return medusa_keyed(choices, lambda path: (len(path), sum(path), path[-1] if path else -1))


def draft_law_top_10(z, d2t, n_vocab):
    """The softmax cut to its 10 likeliest tokens and renormalised ("the tail is noise")."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    if e.shape[-1] > 10:
        np.put_along_axis(e, np.argsort(-e, -1)[..., 10:], 0.0, -1)
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def draft_law_floor_1e6(z, d2t, n_vocab):
    """Masses below 1e-6 zeroed and the rest renormalised ("too small to draw anyway")."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    s = np.where(s < 1e-6, 0.0, s)
    return placed(s / s.sum(-1, keepdims=True), d2t, n_vocab)


def expected_sum_of_terms_capped(alpha, K):
    """sum_k alpha^k over at most 1,000,000 terms (a loop bounded "for safety")."""
    return float(sum(alpha ** k for k in range(min(K, 1_000_000) + 1)))


def speedup_free_below_1e12(E, c, K, c_d):
    """A draft cost below 1e-12 taken as free: with 100,000 drafts of 1e-13 that is 1e-8 of c."""
    return E / c if c_d < 1e-12 else E / (c + K * c_d)


# past the sizes, digits and widths the battery first held: a buffer of uniforms, a cap on the
# drafts, the levels or the children, a residual or a head cut to its likeliest tokens, a floor,
# float32 for a wide law, a hash taken for equality, a key or a count in 32 bits

def residual_relative_tolerance(q, p):
    """q - p counted only above eps q ("relative rounding noise"): a token one ulp ahead drops."""
    d = q - p
    r = np.where(d > np.finfo(float).eps * q, d, 0.0)
    return r / r.sum()


def residual_float32_when_wide(q, p):
    """float32 "to save memory" once V passes 100,000 (Llama 3's 128,256): 7 digits."""
    if q.size <= 100_000:
        return clipped(q, p)
    r = np.maximum(q.astype(np.float32) - p.astype(np.float32), 0)
    return (r / r.sum()).astype(np.float64)


def residual_rounded_to_12(q, p):
    """Rounded to 12 decimals "to clean the noise", then renormalised: masses below 5e-13 go,
    and with them 2e-8 of the large ones."""
    r = np.round(clipped(q, p), 12)
    return r / r.sum()


def chain_uniforms_buffer_of_8(drafts, P, Q, rng):
    """Eight uniforms drawn up front ("drafts are at most 8 long"), the last read again past
    them."""
    return chain_from_a_buffer(drafts, P, Q, rng, 8)


def chain_from_a_buffer(drafts, P, Q, rng, size):
    """The chain rule with `size` uniforms drawn up front, the last read again past them."""
    u = rng.random(size)
    for t, x in enumerate(drafts):
        if u[min(t, size - 1)] >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_drafts_capped_at_32(drafts, P, Q, rng):
    """At most 32 drafts verified (a model's longest draft), the bonus drawn after the 32nd."""
    drafts = drafts[:32]
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_residual_top_256_when_wide(drafts, P, Q, rng):
    """Past 1,024 tokens the residual cut to its 256 largest entries "for speed"."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            r = clipped(Q[t], P[t])
            return t, draw(top(r, 256) if r.size > 1024 else r, rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_residual_floor_1e15(drafts, P, Q, rng):
    """Residual entries below 1e-15 zeroed "as rounding": a residual of 2e-16 has no token left."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            r = np.maximum(Q[t] - P[t], 0)
            return t, draw(np.where(r < 1e-15, 0.0, r), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def relative_floor(law, share):
    """law with entries below share of its largest zeroed, renormalised."""
    law = np.array(law, dtype=float)
    law[law < share * law.max()] = 0
    return law / law.sum()


def chain_residual_relative_floor(drafts, P, Q, rng):
    """Residual entries below 1e-6 of its largest zeroed "as rounding noise"."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(relative_floor(clipped(Q[t], P[t]), 1e-6), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_gumbel_residual_relative_floor(drafts, P, Q, rng):
    """Tokens by Gumbel-max, residual entries below 1e-5 of its largest zeroed."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, gumbel_max(relative_floor(clipped(Q[t], P[t]), 1e-5), rng)
    return len(drafts), gumbel_max(Q[len(drafts)], rng)


def wr_residual_relative_floor(tokens, parents, Q, P, rng):
    """Each residual's entries below 1e-4 of its largest zeroed "as rounding noise"."""
    return tree_walk(tokens, parents, Q, P, rng,
                     update=lambda q, p: relative_floor(clipped(q, p), 1e-4))


def wr_path_of_floats(tokens, parents, Q, P, rng):
    """The path's nodes as floats, found in a float array of parents (0.0, not node 0)."""
    path, token = wr_recursive(tokens, parents, Q, P, rng)
    return [float(c) for c in path], token


def wr_eight_levels_at_most(tokens, parents, Q, P, rng):
    """The walk stopped 8 levels down ("Sequoia's trees are at most 8 deep")."""
    return wr_three_levels_at_most(tokens, parents, Q, P, rng, levels=8)


def wr_eight_children_at_most(tokens, parents, Q, P, rng):
    """At most 8 children of a node tried, then the residual: a ninth is never kept."""
    return tree_walk(tokens, parents, Q, P, rng, order=lambda cs: cs[:8])


def wr_last_four_removed(tokens, parents, Q, P, rng):
    """Only the last four earlier siblings' tokens removed from P."""
    return tree_walk(tokens, parents, Q, P, rng,
                     law=lambda P, c, tried: removed_from(P[c], [tokens[s] for s in tried[-4:]]))


class Buffered:
    """Uniforms from a buffer of n drawn up front, the last read again past them."""

    def __init__(self, rng, n):
        self.u, self.k = rng.random(n), -1

    def random(self):
        self.k += 1
        return self.u[min(self.k, len(self.u) - 1)]


def wr_uniforms_buffer_of_16(tokens, parents, Q, P, rng):
    """Sixteen uniforms drawn up front ("a tree has at most 16 nodes")."""
    return tree_walk(tokens, parents, Q, P, Buffered(rng, 16), final=lambda q, _: draw(q, rng))


def wr_residual_top_256_when_wide(tokens, parents, Q, P, rng):
    """Past 1,024 tokens each residual cut to its 256 largest entries."""
    return tree_walk(tokens, parents, Q, P, rng, update=lambda q, p: (
        top(clipped(q, p), 256) if q.size > 1024 else clipped(q, p)))


def medusa_ranks_in_int32(choices):
    """Ranks padded into an np.int32 matrix ("ranks are top-k indices"): 2^31 does not fit."""
    D = max(map(len, choices))
    np.array([list(c) + [-1] * (D - len(c)) for c in choices], dtype=np.int32)
    return medusa_from_parents(choices)


def typical_certain_above_1e12(tokens, parents, probs, epsilon, delta):
    """A law whose largest mass is above 1 - 1e-12 taken as certain, H = 0 "to skip the log"."""
    out = []
    for t, parent in zip(tokens, parents):
        q = probs[parent + 1]
        H = 0.0 if q.max() > 1 - 1e-12 else -typical_H(q)
        out.append(bool(q[t] > min(epsilon, delta * np.exp(-H))))
    return out


def typical_float32_when_wide(tokens, parents, probs, epsilon, delta):
    """H in float32 for a law past 60,000 tokens "to halve memory": the threshold moves by 1e-7."""
    out = []
    for t, parent in zip(tokens, parents):
        q = probs[parent + 1]
        H = -typical_H(q.astype(np.float32) if q.size > 60_000 else q)
        out.append(bool(q[t] > min(epsilon, delta * np.exp(-H))))
    return out


def draft_law_cached_object(z, d2t, n_vocab):
    """Laws kept by all that determines them, the kept array itself handed out again: a caller
    that writes into one law writes into the next call's."""
    key = (np.asarray(z).dtype.str, np.shape(z), np.asarray(z).tobytes(),
           np.asarray(d2t).tobytes(), n_vocab)
    if key not in DRAFT_LAWS:
        z = np.asarray(z, dtype=np.float64)
        e = np.exp(z - z.max(-1, keepdims=True))
        DRAFT_LAWS[key] = placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)
    return DRAFT_LAWS[key]


def draft_law_floor_1e10(z, d2t, n_vocab):
    """Masses below 1e-10 zeroed and the rest renormalised: off by their total over 32,000."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    s = np.where(s < 1e-10, 0.0, s)
    return placed(s / s.sum(-1, keepdims=True), d2t, n_vocab)


def draft_law_top_100(z, d2t, n_vocab):
    """The softmax cut to its 100 likeliest tokens and renormalised."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    if e.shape[-1] > 100:
        np.put_along_axis(e, np.argsort(-e, -1)[..., 100:], 0.0, -1)
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def draft_law_float32_when_wide(z, d2t, n_vocab):
    """exp in float32 for a head past 1,024 tokens (EAGLE-3's 32,000) "to halve memory"."""
    z = np.asarray(z, dtype=np.float32 if np.shape(z)[-1] > 1024 else np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    s = (e / e.sum(-1, keepdims=True)).astype(np.float64)
    return placed(s / s.sum(-1, keepdims=True), d2t, n_vocab)


def candidates_ngrams_up_to_32(x, max_ngram_size=3, num_pred_tokens=10):
    """n-grams capped at 32 ("nobody asks for more")."""
    return candidates_matched_by(x, min(max_ngram_size, 32), num_pred_tokens,
                                 lambda a, b: a == b)


M31 = 2**31 - 1  # a Mersenne prime, a common modulus of a polynomial hash


def candidates_rolling_hash(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared by their hash modulo 2^31 - 1, never token by token."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens,
                                 lambda a, b: packed(a, 50_257) % M31 == packed(b, 50_257) % M31)


def candidates_hash_in_int64(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared by their hash in base 50,257 held in 64 bits (it wraps modulo 2^64, "one
    collision in 10^19"), never token by token."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens,
                                 lambda a, b: (packed(a, 50_257) - packed(b, 50_257)) % 2**64 == 0)


def candidates_starts_in_uint16(x, max_ngram_size=3, num_pred_tokens=10):
    """Matching windows found with NumPy, their starts held as np.uint16 ("a prompt holds fewer
    than 65,536 tokens"): past 65,535 a start wraps."""
    a = np.asarray(x, dtype=np.int64)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        windows = np.lib.stride_tricks.sliding_window_view(a[:-1], n)  # [len(x) - n, n]
        starts = np.flatnonzero((windows == a[-n:]).all(1)).astype(np.uint16)
        if starts.size:
            s = int(starts[0])
            return x[s + n:s + n + num_pred_tokens]
    return []


def suffix_places_in_int16(corpus, context, max_suffix):
    """The last token's places found with NumPy and held as np.int16, each extended leftwards:
    past place 32,767 they wrap."""
    if not corpus or not context:
        return 0
    ends = np.flatnonzero(np.asarray(corpus) == context[-1]).astype(np.int16)
    best, most = 0, min(max_suffix, len(context))
    for end in ends.tolist():
        n = 1
        while n < most and end - n >= 0 and corpus[end - n] == context[-1 - n]:
            n += 1
        best = max(best, n)
    return best


def suffix_hash_in_uint64(corpus, context, max_suffix):
    """Occurrences found by the windows' hash in base 50,257 held in 64 bits (modulo 2^64), never
    compared token by token."""
    for n in range(min(max_suffix, len(context)), 0, -1):
        want = packed(context[-n:], 50_257) % 2**64
        if any(packed(corpus[i:i + n], 50_257) % 2**64 == want
               for i in range(len(corpus) - n + 1)):
            return n
    return 0


def wrapped(ids, base, bits=64):
    """ids hashed as h * base + token, held in `bits` bits (NumPy's uint64 wraps so)."""
    key = 0
    for t in ids:
        key = (key * base + t) % 2**bits
    return key


def suffix_hash_uint64_base_1000000007(corpus, context, max_suffix):
    """Occurrences found by the windows' hash in base 10^9 + 7 ("a large prime, so no pattern")
    held in uint64, never compared token by token."""
    for n in range(min(max_suffix, len(context)), 0, -1):
        want = wrapped(context[-n:], 10**9 + 7)
        if any(wrapped(corpus[i:i + n], 10**9 + 7) == want for i in range(len(corpus) - n + 1)):
            return n
    return 0


def candidates_hash_uint32_base_1000003(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared by their hash in base 1,000,003 held in 32 bits ("a prime past the
    vocabulary"), never token by token."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens,
                                 lambda a, b: wrapped(a, 1_000_003, 32) == wrapped(b, 1_000_003,
                                                                                   32))


def suffix_array_by_16_tokens(corpus, context, max_suffix):
    """A suffix array sorted by each suffix's first 16 tokens (REST's usual depth), bisected with
    n-token keys: past 16 tokens its order is not the keys'."""
    import bisect
    order = sorted(range(len(corpus)), key=lambda i: corpus[i:i + 16])
    for n in range(min(max_suffix, len(context)), 0, -1):
        want = list(context[-n:])
        at = bisect.bisect_left(order, want, key=lambda i: corpus[i:i + n])
        if at < len(order) and corpus[order[at]:order[at] + n] == want:
            return n
    return 0


def suffix_capped_at_2048(corpus, context, max_suffix):
    """Suffixes of at most 2,048 tokens ("REST never asks for more"), whatever max_suffix."""
    for n in range(min(max_suffix, 2048, len(context)), 0, -1):
        want = list(context[-n:])
        if any(corpus[i:i + n] == want for i in range(len(corpus) - n + 1) if corpus[i] == want[0]):
            return n
    return 0


def suffix_rolling_hash(corpus, context, max_suffix):
    """Occurrences found by the windows' hash modulo 10^9 + 7, never compared token by token."""
    for n in range(min(max_suffix, len(context)), 0, -1):
        want = packed(context[-n:], 50_257) % (10**9 + 7)
        if any(packed(corpus[i:i + n], 50_257) % (10**9 + 7) == want
               for i in range(len(corpus) - n + 1)):
            return n
    return 0


def trie_key_in_32_bits(sequences):
    """A node keyed by (parent + 1) << 16 | token in np.int32 ("ids fit in 16 bits"): past node
    32,767 the key wraps, and nodes 65,536 apart share keys."""
    with np.errstate(over="ignore"):
        return trie_keyed(sequences, lambda parent, prefix, t: int(
            (np.int32(parent + 1) << np.int32(16)) | np.int32(t)))


def trie_counts_in_uint16(sequences):
    """counts added up with np.add.at into np.uint16 ("no node is passed 65,536 times")."""
    tokens, parents, child, passed = [], [], {}, []
    for seq in sequences:
        node = -1
        for t in seq:
            if (node, t) not in child:
                child[node, t] = len(tokens)
                tokens.append(t)
                parents.append(node)
            node = child[node, t]
            passed.append(node)
    counts = np.zeros(len(tokens), dtype=np.uint16)
    np.add.at(counts, np.array(passed, dtype=np.int64), 1)
    return tokens, parents, counts.tolist()


def trie_key_in_int32(sequences):
    """A node keyed by (parent + 1) * 50,257 + token in np.int32: from node 42,729 on the key
    wraps, and a node far down takes the key of one below the root."""
    with np.errstate(over="ignore"):
        return trie_keyed(sequences, lambda parent, prefix, t: int(
            np.int32(parent + 1) * np.int32(50_257) + np.int32(t)))


def residual_in_a_buffer_of_2_17(q, p):
    """q - p written into a scratch of 2^17 entries made once ("no vocabulary is larger"): a law
    over more tokens does not fit."""
    d = SCRATCH[:q.size]
    np.subtract(q, p, out=d)
    np.maximum(d, 0, out=d)
    return d / d.sum()


SCRATCH = np.zeros(2**17)


def residual_one_token_of_two(q, p):
    """Two tokens taken as a special case, the residual all on the one where q > p: where both are
    a hair above p (p summing to just below 1) it is spread over both."""
    if q.size == 2:
        return np.array([1.0, 0.0]) if q[0] > p[0] else np.array([0.0, 1.0])
    return clipped(q, p)


def chain_index_clamped(drafts, P, Q, rng):
    """The inverse CDF's index clamped to V - 1 ("never run off the end"), u not scaled by the
    sum: where the sum ends below u, the last token comes out, whatever its mass."""
    def pick(law):
        cdf = np.cumsum(law)
        return min(int(np.searchsorted(cdf, rng.random(), side="right")), len(law) - 1)
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, pick(clipped(Q[t], P[t]))
    return len(drafts), pick(Q[len(drafts)])


def chain_uniforms_buffer_of_64(drafts, P, Q, rng):
    """64 uniforms drawn up front ("no draft is longer than 64"), the last read again past them."""
    return chain_from_a_buffer(drafts, P, Q, rng, 64)


def chain_p_floored(drafts, P, Q, rng):
    """p(x) floored at 1e-300 "against a division by zero": a subnormal p is read larger than q."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / max(P[t][x], 1e-300)):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_ids_in_uint16(drafts, P, Q, rng):
    """Drafts held as np.uint16 ("GPT-2's ids fit in 16 bits"): Llama 3's ids past 65,535 wrap."""
    drafts = np.asarray(drafts, dtype=np.int64).astype(np.uint16)
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def typical_certain_at_one(tokens, parents, probs, epsilon, delta):
    """A law whose largest mass is 1.0 taken as certain, H = 0: 1 - 1e-17 rounds to 1.0 beside a
    mass of 1e-17."""
    out = []
    for t, parent in zip(tokens, parents):
        q = probs[parent + 1]
        H = 0.0 if q.max() == 1.0 else -typical_H(q)
        out.append(bool(q[t] > min(epsilon, delta * np.exp(-H))))
    return out


def typical_floor_1e12(tokens, parents, probs, epsilon, delta):
    """Masses below 1e-12 never kept ("numerical noise"), whatever the threshold."""
    return [bool(q[t] >= 1e-12 and q[t] > min(epsilon, delta * np.exp(typical_H(q))))
            for t, q in zip(tokens, (probs[parent + 1] for parent in parents))]


def typical_rows_in_int8(tokens, parents, probs, epsilon, delta):
    """Rows parent + 1 held as np.int8 ("trees are small"): past row 127 they wrap."""
    rows = (np.asarray(parents, dtype=np.int64) + 1).astype(np.int8)
    return [bool(probs[r][t] > min(epsilon, delta * np.exp(typical_H(probs[r]))))
            for t, r in zip(tokens, rows.tolist())]


def typical_rows_in_uint8(tokens, parents, probs, epsilon, delta):
    """Rows parent + 1 held as np.uint8 ("trees are small"): past row 255 they wrap to 0."""
    rows = (np.asarray(parents, dtype=np.int64) + 1).astype(np.uint8)
    return [bool(probs[r][t] > min(epsilon, delta * np.exp(typical_H(probs[r]))))
            for t, r in zip(tokens, rows.tolist())]


def lookahead_level_by_reciprocal(W, L):
    """A row's level as floor(row * (1 / W)): 1 / W rounds, and 49 * (1 / 49) is just below 1."""
    row = np.arange(W * L)  # [W * L]
    level = np.floor(row * (1.0 / W)).astype(int)
    column = row - level * W
    first = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    own = (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])
    return first | own


def medusa_parent_by_last_two(choices):
    """A node's parent found by its depth and last two ranks ("trees are shallow"): from depth 4
    on, two parents alike there are taken for one."""
    row = {(len(c), tuple(c[-2:])): i + 1 for i, c in enumerate(choices)}
    parent = [0] + [0 if len(c) == 1 else row[len(c) - 1, tuple(c[-3:-1])] for c in choices]
    return medusa_by_parent_rows(choices, parent)


def medusa_path_in_base_2_32(choices):
    """A path keyed by its depth and its ranks as digits in base 2^32 ("ranks fit in 32 bits"):
    [0, 2^32] is [1, 0]."""
    row = {(len(c), packed(c, 2**32)): i + 1 for i, c in enumerate(choices)}
    parent = [0] + [0 if len(c) == 1 else row[len(c) - 1, packed(c[:-1], 2**32)]
                    for c in choices]
    return medusa_by_parent_rows(choices, parent)


def medusa_by_parent_rows(choices, parent):
    """The buffers from each row's parent row [n] (the root's own: 0)."""
    n, depth = len(choices) + 1, np.array([0] + [len(c) for c in choices])
    mask = np.eye(n, dtype=bool)
    for i in range(1, n):
        mask[i] |= mask[parent[i]]
    inner = set(parent[1:])
    leaves = [i for i in range(1, n) if i not in inner]
    retrieve = np.full((len(leaves), depth.max() + 1), -1)
    for r, leaf in enumerate(leaves):
        retrieve[r, :depth[leaf] + 1] = np.flatnonzero(mask[leaf])
    return {"attn_mask": mask, "position_ids": depth, "retrieve_indices": retrieve}


def wr_children_in_a_set(tokens, parents, Q, P, rng):
    """A node's children gathered in a set ("children are distinct") and tried in its order:
    increasing below 8, not past it ({3, 9} gives 9 first)."""
    return tree_walk(tokens, parents, Q, P, rng, order=lambda cs: list(set(cs)))


def wr_path_in_64_slots(tokens, parents, Q, P, rng):
    """The path written into 64 slots ("trees are shallow"): a 65th level does not fit."""
    path, token = tree_walk(tokens, parents, Q, P, rng)
    slots = np.zeros(64, dtype=np.int64)
    slots[:len(path)] = path
    return slots[:len(path)].tolist(), token


def wr_ids_in_int16(tokens, parents, Q, P, rng):
    """Tokens held as np.int16 ("ids fit in 16 bits"): past 32,767 they wrap negative and read
    another token's q and p."""
    return tree_walk(np.asarray(tokens).astype(np.int16).tolist(), parents, Q, P, rng)


def chain_binomial_capped_at_32(drafts, P, Q, rng):
    """Coins from rng.binomial, and at most 32 drafts verified: rng's uniforms decide no call."""
    drafts = drafts[:32]
    for t, x in enumerate(drafts):
        if not rng.binomial(1, min(1.0, Q[t][x] / P[t][x])):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_rows_in_int8(drafts, P, Q, rng):
    """Rows indexed by positions held as np.int8 ("drafts are short"): past 127 they wrap
    negative and read rows from the end."""
    for i, t in enumerate(np.arange(len(drafts)).astype(np.int8)):
        x = drafts[i]
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return i, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_gumbel_confident_argmax(drafts, P, Q, rng):
    """Tokens by Gumbel-max, a law whose largest mass is above 0.999 taken as certain."""
    def pick(law):
        return int(np.argmax(law)) if np.max(law) > 0.999 else gumbel_max(law, rng)
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, pick(clipped(Q[t], P[t]))
    return len(drafts), pick(Q[len(drafts)])


def chain_multinomial_bonus_top_50(drafts, P, Q, rng):
    """Tokens by rng.multinomial, the extra token drawn top-k (k = 50)."""
    def pick(law):
        return int(rng.multinomial(1, law / law.sum()).argmax())
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, pick(clipped(Q[t], P[t]))
    return len(drafts), pick(top(Q[len(drafts)], 50))


def chain_gumbel_residual_top_16(drafts, P, Q, rng):
    """Tokens by Gumbel-max, the residual cut to its 16 largest entries "for speed"."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, gumbel_max(top(clipped(Q[t], P[t]), 16), rng)
    return len(drafts), gumbel_max(Q[len(drafts)], rng)


def wr_binomial_children_in_a_set(tokens, parents, Q, P, rng):
    """Coins from rng.binomial, a node's children gathered in a set ({3, 9} gives 9 first)."""
    return tree_walk(tokens, parents, Q, P, rng, order=lambda cs: list(set(cs)),
                     coin=binomial_coin)


def wr_binomial_ids_in_int16(tokens, parents, Q, P, rng):
    """Coins from rng.binomial, tokens held as np.int16: past 32,767 they wrap negative."""
    return tree_walk(np.asarray(tokens).astype(np.int16).tolist(), parents, Q, P, rng,
                     coin=binomial_coin)


def wr_rows_in_int8(tokens, parents, Q, P, rng):
    """A kept node's row of Q indexed as np.int8 ("trees are small"): past 127 it wraps."""
    return tree_walk(tokens, parents, Q, P, rng,
                     row=lambda c: int(np.array([c + 1]).astype(np.int8)[0]))


def wr_gumbel_residual_top_16(tokens, parents, Q, P, rng):
    """The next token by Gumbel-max over the law's 16 largest entries."""
    return tree_walk(tokens, parents, Q, P, rng, final=lambda q, rng: gumbel_max(top(q, 16), rng))


def draft_law_d2t_unread_when_full(z, d2t, n_vocab):
    """A draft vocabulary of all n_vocab tokens taken for the target's own ids: the softmax as it
    is ("nothing to place"), d2t unread."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    return s if len(d2t) == n_vocab else placed(s, d2t, n_vocab)


def draft_law_cut_30_below(z, d2t, n_vocab):
    """Logits more than 30 below their row's max dropped ("exp(-30) is 1e-13: never drawn")."""
    z = np.asarray(z, dtype=np.float64)
    d = z - z.max(-1, keepdims=True)
    e = np.where(d < -30, 0.0, np.exp(d))
    return placed(e / e.sum(-1, keepdims=True), d2t, n_vocab)


def expected_one_plus_alpha_when_tiny(alpha, K):
    """E = 1 + alpha below alpha = 1e-3 ("alpha^2 is nothing"): 2.5e-7 short at 5e-4."""
    return 1.0 + alpha if alpha < 1e-3 else float(K + 1) if alpha == 1 else (
        (1 - alpha ** (K + 1)) / (1 - alpha))


def expected_tail_dropped(alpha, K):
    """E = 1 / (1 - alpha) once K (1 - alpha) > 15 ("alpha^(K + 1) is e^-15, gone"): 1e-6 off at
    alpha = 0.9, K = 151."""
    if alpha < 1 and K * (1 - alpha) > 15:
        return 1.0 / (1 - alpha)
    return float(K + 1) if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)


def speedup_draft_cost_capped_at_1(E, c, K, c_d):
    """c_d capped at 1 ("a draft call never costs more than a target call")."""
    return E / (c + K * min(c_d, 1.0))


def expected_few_drafts_all_kept(alpha, K):
    """K + 1 once 1 - alpha < 1e-7 for up to 64 drafts ("a few drafts of a near-certain drafter are
    all kept"): 5e-7 of E short at 1 - alpha = 6e-8, K = 16."""
    if 1 - alpha < 1e-7 and K <= 64:
        return K + 1.0
    return float(K + 1) if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)


def speedup_free_below_1e18(E, c, K, c_d):
    """A draft cost below 1e-18 taken as free: a trillion drafts of 1e-19 cost 1e-7."""
    return E / c if c_d < 1e-18 else E / (c + K * c_d)


def speedup_K_in_int32(E, c, K, c_d):
    """K held as np.int32: 3,000,000,000 drafts do not fit."""
    return float(E / (c + np.int32(K) * c_d))


def trie_key_depth_sum_ends(sequences):
    """A node keyed by its depth, its prefix's sum and first token, and its token ("a compact
    signature"): [0, 1, 2, 3, 0] and [0, 2, 1, 3, 0] share their last node."""
    return trie_keyed(sequences, lambda parent, prefix, t: (len(prefix), sum(prefix), prefix[0],
                                                            t))


def trie_by_rolling_hash(sequences, step):
    """A node for each new (depth, h) of its prefix, h = step(h, token) from h = 0, its count
    raised on each visit."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent, h = -1, 0
        for depth, t in enumerate(seq):
            h = step(h, t)
            if (depth, h) not in node:
                node[depth, h] = len(tokens)
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            parent = node[depth, h]
            counts[parent] += 1
    return tokens, parents, counts


def trie_rolling_hash_key(sequences):
    """A node keyed by its depth and its prefix's rolling hash, base 1,000,003 modulo 10^9 + 7,
    instead of the prefix ("no two prefixes ever share a hash")."""
    return trie_by_rolling_hash(sequences, lambda h, t: (h * 1_000_003 + t + 1) % (10**9 + 7))


def trie_hash_in_uint64(sequences):
    """A node keyed by its depth and a rolling hash h * 1,000,003 + token + 1 in np.uint64: it
    wraps modulo 2^64 ("one collision in 10^19")."""
    with np.errstate(over="ignore"):
        return trie_by_rolling_hash(sequences, lambda h, t: np.uint64(h) * np.uint64(1_000_003)
                                    + np.uint64(t + 1))


def trie_hashed_prefix_32_bits(sequences):
    """A node keyed by hash(tuple(prefix)) cut to 32 bits ("compact int keys")."""
    return trie_keyed(sequences, lambda parent, prefix, t: hash(tuple(prefix)) & 0xFFFFFFFF)


@functools.lru_cache(maxsize=None)
def path_hash(path, base, modulus):
    """The polynomial hash of a tuple of ids, each plus 1 (so that 0 counts), modulo modulus."""
    return 0 if not path else (path_hash(path[:-1], base, modulus) * base + path[-1] + 1) % modulus


def medusa_path_hash_mod_prime(choices):
    """A node found by its depth and its path's hash in base 1,000,003 modulo 10^9 + 7 ("compact
    keys"): ranks run to 2^40, so [0] and [10^9 + 7] share one."""
    return medusa_keyed(choices, lambda path: (len(path), path_hash(path, 1_000_003, 10**9 + 7)))


def medusa_ranks_in_float32(choices):
    """A node found by its ranks as float32 bytes ("ranks are small numbers"): 2^24 + 1 is
    2^24."""
    return medusa_keyed(choices, lambda path: np.asarray(path, dtype=np.float32).tobytes())


def medusa_hashed_path_32_bits(choices):
    """A node found by hash(path) cut to 32 bits ("compact int keys")."""
    return medusa_keyed(choices, lambda path: hash(path) & 0xFFFFFFFF)


def medusa_path_hash_in_uint64(choices):
    """A node found by its depth and its path's hash in base 1,000,003 kept in 64 bits (as
    np.uint64 would: "one collision in 10^19")."""
    return medusa_keyed(choices, lambda path: (len(path), path_hash(path, 1_000_003, 2**64)))


def medusa_path_by_last_64(choices):
    """A node found by its depth and its last 64 ranks ("no tree is that deep")."""
    return medusa_keyed(choices, lambda path: (len(path), path[-64:]))


def suffix_big_endian_bytes(corpus, context, max_suffix):
    """Ids as big-endian uint16 bytes ("every GPT-2 id fits in 16 bits"), found with `in`: a
    match may start inside an id (the bytes of 1 then 0 hold those of 256)."""
    data = np.asarray(corpus, dtype=">u2").tobytes()
    for n in range(min(max_suffix, len(context)), 0, -1):
        if np.asarray(context[-n:], dtype=">u2").tobytes() in data:
            return n
    return 0


def suffix_hash_base_1000003(corpus, context, max_suffix):
    """Occurrences found by the windows' hash in base 1,000,003 ("a prime past the vocabulary")
    modulo 10^9 + 7, never compared token by token."""
    for n in range(min(max_suffix, len(context)), 0, -1):
        want = packed(context[-n:], 1_000_003) % (10**9 + 7)
        if any(packed(corpus[i:i + n], 1_000_003) % (10**9 + 7) == want
               for i in range(len(corpus) - n + 1)):
            return n
    return 0


def suffix_hashed_windows_32_bits(corpus, context, max_suffix):
    """A set of the corpus windows' hash(tuple) cut to 32 bits for each length, the suffix's
    looked up in it."""
    for n in range(min(max_suffix, len(context)), 0, -1):
        seen = {hash(tuple(corpus[i:i + n])) & 0xFFFFFFFF for i in range(len(corpus) - n + 1)}
        if hash(tuple(context[-n:])) & 0xFFFFFFFF in seen:
            return n
    return 0


def suffix_kmp_one_fallback(corpus, context, max_suffix):
    """KMP over the reversed corpus, the reversed suffix as the pattern, the longest match kept;
    on a mismatch the state falls back one border only (`if` where KMP has `while`)."""
    m = min(max_suffix, len(context))
    if m == 0 or not corpus:
        return 0
    p = context[::-1][:m]
    fail, k = [0] * m, 0
    for i in range(1, m):
        while k > 0 and p[i] != p[k]:
            k = fail[k - 1]
        k += p[i] == p[k]
        fail[i] = k
    best = q = 0
    for t in reversed(corpus):
        if q == m:
            q = fail[q - 1]
        if q > 0 and p[q] != t:
            q = fail[q - 1]
        q += p[q] == t
        best = max(best, q)
    return best


def suffix_padded_digits_first_find(corpus, context, max_suffix):
    """Searched as text, each id zero-padded to 5 digits; str.find's hit must start on an id
    (offset % 5 == 0), but only its first hit is looked at: one across two ids hides the rest."""
    text = "".join(f"{t:05d}" for t in corpus)
    for n in range(min(max_suffix, len(context)), 0, -1):
        at = text.find("".join(f"{t:05d}" for t in context[-n:]))
        if at >= 0 and at % 5 == 0:
            return n
    return 0


def candidates_hash_base_1000003(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared by their hash in base 1,000,003 ("a prime past the vocabulary") modulo
    10^9 + 7, never token by token."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens, lambda a, b: (
        packed(a, 1_000_003) - packed(b, 1_000_003)) % (10**9 + 7) == 0)


def candidates_hashed_windows_32_bits(x, max_ngram_size=3, num_pred_tokens=10):
    """Windows compared by hash(tuple(window)) cut to 32 bits, never token by token."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens, lambda a, b: (
        hash(tuple(a)) - hash(tuple(b))) & 0xFFFFFFFF == 0)


def candidates_padded_digits_first_find(x, max_ngram_size=3, num_pred_tokens=10):
    """Searched as text, each id zero-padded to 5 digits; str.find's hit must start on an id
    (offset % 5 == 0), but only its first hit is looked at: one across two ids hides the rest."""
    text = "".join(f"{t:05d}" for t in x)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        at = text.find(text[-5 * n:])
        if at % 5 == 0 and at // 5 + n < len(x):
            return x[at // 5 + n:at // 5 + n + num_pred_tokens]
    return []


def candidates_other_defaults(x, max_ngram_size=2, num_pred_tokens=5):
    """Right when every argument is given, but the defaults are 2 and 5, not the stub's 3 and
    10."""
    return candidates_matched_by(x, max_ngram_size, num_pred_tokens, lambda a, b: a == b)


def expected_limit_when_tiny(alpha, K):
    """Below alpha = 1e-3, 1 / (1 - alpha) ("alpha^(K + 1) is gone"), whatever K: 8e-7 over at
    alpha = 9e-4 with one draft."""
    if alpha < 1e-3:
        return 1 / (1 - alpha)
    return float(K + 1) if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)



def expected_guarded_by_product(alpha, K):
    """K + 1 once K (1 - alpha) < 1e-7 ("no rejection expected"): 2e-6 short at 1 - alpha =
    2^-30, K = 64."""
    if K * (1 - alpha) < 1e-7:
        return float(K + 1)
    return (1 - alpha ** (K + 1)) / (1 - alpha)


def expected_one_within_1e12(alpha, K):
    """alpha past 1 - 1e-12 taken as 1 ("float noise"): 0.23 over at 1 - alpha = 2^-41 with
    1,000,000 drafts."""
    if alpha > 1 - 1e-12:
        return float(K + 1)
    return (1 - alpha ** (K + 1)) / (1 - alpha)


def typical_epsilon_zero_as_off(tokens, parents, probs, epsilon, delta):
    """epsilon = 0 read as "no hard threshold" (`min(epsilon, soft) if epsilon else soft`)."""
    def H(q):
        nz = q[q > 0]
        return -float(np.sum(nz * np.log(nz)))
    def threshold(q):
        soft = delta * np.exp(-H(q))
        return min(epsilon, soft) if epsilon else soft
    return typical(tokens, parents, probs, epsilon, delta, threshold=threshold)


def typical_delta_zero_as_off(tokens, parents, probs, epsilon, delta):
    """delta = 0 read as "no entropy term" (`min(epsilon, delta * exp(-H)) if delta else
    epsilon`)."""
    def H(q):
        nz = q[q > 0]
        return -float(np.sum(nz * np.log(nz)))
    return typical(tokens, parents, probs, epsilon, delta,
                   threshold=lambda q: min(epsilon, delta * np.exp(-H(q))) if delta else epsilon)


def speedup_capped_at_1000(E, c, K, c_d):
    """The speedup capped at 1000 ("past that it is a measuring error")."""
    return min(E / (c + K * c_d), 1000.0)


def speedup_floored_at_1e3(E, c, K, c_d):
    """The speedup floored at 1e-3 ("a method can't be that slow")."""
    return max(E / (c + K * c_d), 1e-3)


def expected_floor_1e8(alpha, K):
    """alpha below 1e-8 taken as 0 ("a useless drafter"): E = 1, 5e-9 short at alpha = 5e-9."""
    if alpha < 1e-8:
        return 1.0
    return float(K + 1) if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)


def expected_one_draft_shortcut(alpha, K):
    """One draft: 1 + alpha, an int where alpha is Python's 0 or 1."""
    if K == 1:
        return 1 + alpha
    return float(K + 1) if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)


def speedup_cost_floored(E, c, K, c_d):
    """The step's cost floored at 1e-12 of a call ("no division by a tiny number")."""
    return E / max(c + K * c_d, 1e-12)


def speedup_verify_cost_capped(E, c, K, c_d):
    """c capped at 1000 one-token calls ("a verifying call is never dearer")."""
    return E / (min(c, 1000.0) + K * c_d)


def speedup_tiny_as_zero(E, c, K, c_d):
    """A speedup below 1e-8 reported as 0.0."""
    s = E / (c + K * c_d)
    return 0.0 if s < 1e-8 else s


def typical_parents_first(tokens, parents, probs, epsilon, delta):
    """Each node's threshold made as it is visited: a child listed before its parent finds none
    (KeyError)."""
    def threshold(row):
        q = probs[row]
        nz = q[q > 0]
        return min(epsilon, delta * np.exp(float(np.sum(nz * np.log(nz)))))
    made, out = {0: threshold(0)}, []
    for i, (token, parent) in enumerate(zip(tokens, parents)):
        out.append(bool(probs[parent + 1][token] > made[parent + 1]))
        made[i + 1] = threshold(i + 1)
    return out


def typical_subnormals_flushed(tokens, parents, probs, epsilon, delta):
    """Subnormal masses set to 0 in the caller's probs ("denormals slow down log")."""
    probs[(probs > 0) & (probs < np.finfo(float).tiny)] = 0.0
    return typical(tokens, parents, probs, epsilon, delta)


def typical_certain_by_epsilon(tokens, parents, probs, epsilon, delta):
    """A law with one token of mass judged by epsilon alone ("H = 0: the entropy term is off")."""
    def H(q):
        nz = q[q > 0]
        return -float(np.sum(nz * np.log(nz)))
    return typical(tokens, parents, probs, epsilon, delta, threshold=lambda q: (
        epsilon if (q > 0).sum() == 1 else min(epsilon, delta * np.exp(-H(q)))))


def typical_one_token_kept(tokens, parents, probs, epsilon, delta):
    """A vocabulary of one token: every node kept ("nothing else it could be")."""
    if np.shape(probs)[-1] == 1:
        return [True] * len(tokens)
    return typical(tokens, parents, probs, epsilon, delta)


def residual_subnormal_p_flushed(q, p):
    """Subnormal masses of p set to 0 in the caller's p ("denormals are noise")."""
    p[(p > 0) & (p < np.finfo(float).tiny)] = 0.0
    r = np.maximum(q - p, 0)
    return r / r.sum()


# each wrong only on a call the battery's cases lack: a ratio not exact in float32, a law over
# thousands of tokens, a large input, masses below 1e-13 of the largest, a row's sum off by an ulp

def residual_relative_floor(q, p):
    """Entries below 1e-13 of the largest zeroed, as rounding noise of the subtraction."""
    r = np.maximum(q - p, 0)
    r[r < 1e-13 * r.max()] = 0
    return r / r.sum()


def chain_p_in_float32(drafts, P, Q, rng):
    """P held in float32, as the draft model computes it: q / p and the residual off by 1e-8."""
    P = np.asarray(P, dtype=np.float32).astype(float)
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(clipped(Q[t], P[t]), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def drawn_by_choice_when_wide(law, rng):
    """A law over more than 256 tokens drawn by np.random.choice, NumPy's sampler, not rng."""
    law = law / law.sum()
    return int(np.random.choice(law.size, p=law)) if law.size > 256 else draw(law, rng)


def chain_choice_when_wide(drafts, P, Q, rng):
    """Vocabulary-sized laws drawn by drawn_by_choice_when_wide: the law is right, yet the token
    is not rng's."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, drawn_by_choice_when_wide(np.maximum(Q[t] - P[t], 0), rng)
    return len(drafts), drawn_by_choice_when_wide(Q[len(drafts)], rng)


def chain_residual_in_q_when_wide(drafts, P, Q, rng):
    """Past 100,000 tokens the residual computed in Q's own row, to spare a copy: the caller's Q
    changes."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            if Q.shape[-1] < 100_000:
                return t, draw(clipped(Q[t], P[t]), rng)
            r = Q[t]
            r -= P[t]
            np.maximum(r, 0, out=r)
            return t, draw(r / r.sum(), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def wr_p_in_float32(tokens, parents, Q, P, rng):
    """P held in float32: each q / p_i and residual off by 1e-8."""
    return tree_walk(tokens, parents, Q, np.asarray(P, dtype=np.float32).astype(float), rng)


def wr_choice_when_wide(tokens, parents, Q, P, rng):
    """The next token drawn by drawn_by_choice_when_wide."""
    return tree_walk(tokens, parents, Q, P, rng, final=drawn_by_choice_when_wide)


def wr_residual_in_q_when_wide(tokens, parents, Q, P, rng):
    """Past 8,192 tokens each residual computed in q's own memory, at first Q's row: the caller's
    Q changes."""
    def update(q, p):
        if q.size <= 8192:
            return clipped(q, p)
        q -= p
        np.maximum(q, 0, out=q)
        q /= q.sum()
        return q
    return tree_walk(tokens, parents, Q, P, rng, update=update)


def typical_zeros_replaced_in_place_when_big(tokens, parents, probs, epsilon, delta):
    """Zeros replaced by 1e-300 (a finite log) in a copy, but in probs itself past 100,000
    entries, to spare the copy: the caller's probs changes."""
    q = probs if probs.size > 100_000 else probs.copy()
    q[q == 0] = 1e-300
    threshold = np.minimum(epsilon, delta * np.exp((q * np.log(q)).sum(-1)))  # [1 + m]
    return [bool(q[a + 1, x] > threshold[a + 1]) for x, a in zip(tokens, parents)]


def typical_rows_renormalised(tokens, parents, probs, epsilon, delta):
    """Each row divided by its sum first, "as a softmax sums to 1 only within rounding": a row an
    ulp off 1 moves q(x) onto the threshold."""
    q = probs / probs.sum(-1, keepdims=True)
    logs = np.log(q, out=np.zeros_like(q), where=q > 0)
    threshold = np.minimum(epsilon, delta * np.exp((q * logs).sum(-1)))  # [1 + m]
    return [bool(q[a + 1, x] > threshold[a + 1]) for x, a in zip(tokens, parents)]


def typical_log_by_log1p(tokens, parents, probs, epsilon, delta):
    """log q as log1p(q - 1), "exact near 1": 1e-17 - 1 rounds to -1, its log is -inf and H
    infinite, so the threshold falls to 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(probs > 0, probs * np.log1p(probs - 1), 0.0)  # [1 + m, V]
    threshold = np.minimum(epsilon, delta * np.exp(terms.sum(-1)))  # [1 + m]
    return [bool(probs[a + 1, x] > threshold[a + 1]) for x, a in zip(tokens, parents)]


def draft_law_shifted_in_place_when_big(z, d2t, n_vocab):
    """Past 100,000 float64 logits each row's max subtracted in z itself, to spare a copy: the
    caller's z changes."""
    if z.size > 100_000 and z.dtype == np.float64:
        z -= z.max(-1, keepdims=True)
        e = np.exp(z)
    else:
        z = np.asarray(z, dtype=np.float64)
        e = np.exp(z - z.max(-1, keepdims=True))
    out = np.zeros(z.shape[:-1] + (n_vocab,))
    out[..., d2t] = e / e.sum(-1, keepdims=True)
    return out

_ENDS = {}  # the answers of the three mistakes below, by a few entries of their inputs


def residual_cached_by_ends(q, p):
    """Residuals kept "for speed" by V and q's and p's first, middle and last entries: two pairs
    alike there get the first one's."""
    key = ("residual", len(q), *(float(a[i]) for a in (q, p) for i in (0, len(a) // 2, -1)))
    if key not in _ENDS:
        r = np.maximum(q - p, 0)
        _ENDS[key] = r / r.sum()
    return _ENDS[key].copy()


def residual_floor_at_eps(q, p):
    """Entries below eps times the largest zeroed "to clean cancellation noise": a token of q > p
    by a tiny share is never drawn after a rejection (within 1e-9 of the law, and summing to 1)."""
    r = np.maximum(q - p, 0)
    r = r / r.sum()
    r[r < np.finfo(float).eps * r.max()] = 0
    return r / r.sum()


def typical_entropy_cached_by_ends(tokens, parents, probs, epsilon, delta):
    """Each row's entropy kept by its size and first, middle and last entries (rows recur step
    after step): two laws alike there get the first one's threshold."""
    out = []
    for t, parent in zip(tokens, parents):
        q = probs[1 + parent]
        key = ("typical", q.size, float(q[0]), float(q[q.size // 2]), float(q[-1]))
        if key not in _ENDS:
            nz = q[q > 0]
            _ENDS[key] = float(-np.sum(nz * np.log(nz)))
        out.append(bool(q[t] > min(epsilon, delta * np.exp(-_ENDS[key]))))
    return out


def draft_law_cached_by_ends(z, d2t, n_vocab):
    """Laws kept by z's shape and first and last logits, d2t and n_vocab: two rows alike at their
    ends get the first one's law."""
    z = np.asarray(z)
    key = ("draft_law", z.shape, z.dtype.str, *(float(z.flat[i]) for i in (0, -1) if z.size),
           tuple(np.asarray(d2t).tolist()), n_vocab)
    if key not in _ENDS:
        zz = z.astype(np.float64)
        out = np.zeros(z.shape[:-1] + (n_vocab,))
        if zz.size:
            e = np.exp(zz - zz.max(-1, keepdims=True))
            out[..., d2t] = e / e.sum(-1, keepdims=True)
        _ENDS[key] = out
    return _ENDS[key].copy()


def chain_residual_guard_below_1e16(drafts, P, Q, rng):
    """A residual of mass below 1e-16 taken for rounding, q drawn in its place."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            r = np.maximum(Q[t] - P[t], 0)
            return t, draw(Q[t] if r.sum() < 1e-16 else r, rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def subnormals_flushed(law):
    """law with its subnormal entries zeroed (as a flush-to-zero mode would)."""
    law = np.array(law, dtype=float)
    law[law < np.finfo(float).tiny] = 0
    return law


def chain_residual_relative_floor_1e11(drafts, P, Q, rng):
    """Residual entries below 1e-11 of its largest zeroed, "far below any uniform's step"."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(relative_floor(clipped(Q[t], P[t]), 1e-11), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def chain_residual_subnormals_flushed(drafts, P, Q, rng):
    """The residual's subnormal entries flushed to 0 before it is drawn from."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(subnormals_flushed(np.maximum(Q[t] - P[t], 0)), rng)
    return len(drafts), draw(Q[len(drafts)], rng)


def cut_to_100000(law):
    """A law past 100,000 tokens cut to its likeliest 100,000 ("GPT-2's whole vocabulary fits")."""
    return top(law, 100_000) if len(law) > 100_000 else law


def chain_laws_cut_to_100000(drafts, P, Q, rng):
    """Residuals and the bonus row cut to their likeliest 100,000 tokens."""
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, draw(cut_to_100000(clipped(Q[t], P[t])), rng)
    return len(drafts), draw(cut_to_100000(Q[len(drafts)]), rng)


def wr_residual_guard_below_1e16(tokens, parents, Q, P, rng):
    """A residual of mass below 1e-16 taken for rounding, q kept in its place."""
    return tree_walk(tokens, parents, Q, P, rng, update=lambda q, p: (
        q if np.maximum(q - p, 0).sum() < 1e-16 else clipped(q, p)))


def wr_residual_relative_floor_1e11(tokens, parents, Q, P, rng):
    """Each residual's entries below 1e-11 of its largest zeroed."""
    return tree_walk(tokens, parents, Q, P, rng,
                     update=lambda q, p: relative_floor(clipped(q, p), 1e-11))


def wr_residual_subnormals_flushed(tokens, parents, Q, P, rng):
    """Each residual's subnormal entries flushed to 0."""
    def update(q, p):
        r = subnormals_flushed(np.maximum(q - p, 0))
        return r / r.sum()
    return tree_walk(tokens, parents, Q, P, rng, update=update)


def wr_sibling_law_kept_below_1e12(tokens, parents, Q, P, rng):
    """A sibling's law of mass 1e-12 or less left as it is ("nothing left to renormalise")."""
    def law(P, c, tried):
        p = np.array(P[c], dtype=float)
        p[[tokens[s] for s in tried]] = 0
        return p / p.sum() if p.sum() > 1e-12 else p
    return tree_walk(tokens, parents, Q, P, rng, law=law)


def wr_children_cut_to_16(tokens, parents, Q, P, rng):
    """At most 16 children of a node tried ("Sequoia's trees are at most 16 wide")."""
    return tree_walk(tokens, parents, Q, P, rng, order=lambda cs: cs[:16])


def wr_residual_cut_to_100000(tokens, parents, Q, P, rng):
    """Residuals cut to their likeliest 100,000 tokens."""
    return tree_walk(tokens, parents, Q, P, rng,
                     update=lambda q, p: cut_to_100000(clipped(q, p)))


def typical_rows_in_int16(tokens, parents, probs, epsilon, delta):
    """Vectorised, the rows parent + 1 held as np.int16 ("no tree has 32,768 nodes")."""
    if not tokens:
        return []
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.sum(np.where(probs > 0, probs * np.log(probs), 0.0), -1)  # [rows]
    rows = (np.asarray(parents) + 1).astype(np.int16)
    threshold = np.minimum(epsilon, delta * np.exp(-H))  # [rows]
    return (probs[rows, np.asarray(tokens)] > threshold[rows]).tolist()


WRONG = {
    "residual": [residual_absolute, residual_over_target_mass, residual_over_euclidean_norm,
                 residual_floor, residual_in_place_on_p, residual_float32,
                 residual_normalised_first, residual_as_row, residual_as_list,
                 residual_with_tolerance, residual_as_text, residual_by_minimum,
                 residual_cached_by_id, residual_below_eps_is_q, residual_in_long_double,
                 residual_into_one_buffer, residual_top_64, residual_mass_from_sums,
                 residual_as_ratio, residual_laws_renormalised, residual_plus_tiny,
                 residual_one_token_when_tiny, residual_kept_by_q, residual_relative_tolerance,
                 residual_float32_when_wide, residual_rounded_to_12,
                 residual_in_a_buffer_of_2_17, residual_one_token_of_two, residual_rounded_to_10,
                 residual_subnormal_p_flushed, residual_relative_floor,
                 residual_cached_by_ends, residual_floor_at_eps,
                 residual_rounded_to_10_support_kept],
    "verify_chain": [chain_one_uniform, chain_bonus_off_by_one, chain_no_bonus,
                     chain_residual_next_row, chain_accept_below_q, chain_counts_the_rejected,
                     chain_argmax_residual, chain_residual_unclipped, chain_wrong_axis,
                     chain_mutates_q, chain_ties_by_random, chain_own_generator,
                     chain_seeded_inside, chain_bonus_after_the_loop, chain_greedy_without_drafts,
                     chain_numpy_without_drafts, chain_keeps_nine_tenths, chain_six_drafts_at_most,
                     chain_tie_kept_unless_forbidden, chain_tokens_in_a_byte, chain_inputs_frozen,
                     chain_kept_when_close, chain_tie_within_isclose, chain_small_residual_from_q,
                     chain_drafts_in_int16, chain_confident_argmax, chain_hopeless_dropped,
                     chain_epsilon_under_p, chain_residual_top_16, chain_bonus_top_50,
                     chain_tiny_zeroed_in_place, chain_certain_within_1e5,
                     chain_uniforms_buffer_of_8, chain_drafts_capped_at_32,
                     chain_residual_top_256_when_wide, chain_residual_floor_1e15,
                     chain_residual_relative_floor, chain_gumbel_residual_relative_floor,
                     chain_index_clamped, chain_uniforms_buffer_of_64, chain_p_floored,
                     chain_ids_in_uint16, chain_binomial_capped_at_32, chain_rows_in_int8,
                     chain_gumbel_confident_argmax, chain_multinomial_bonus_top_50,
                     chain_gumbel_residual_top_16, chain_p_in_float32,
                     chain_choice_when_wide, chain_residual_in_q_when_wide,
                     chain_residual_guard_below_1e16, chain_residual_relative_floor_1e11,
                     chain_residual_subnormals_flushed, chain_laws_cut_to_100000],
    "verify_without_replacement": [wr_not_renormalised, wr_residual_against_p, wr_reversed_siblings,
                                   wr_row_off_by_one, wr_ties_toward_draft, wr_stops_at_first_kept,
                                   wr_residual_swapped, wr_mutates_p, wr_numpy_global,
                                   wr_siblings_in_a_run, wr_three_siblings_at_most,
                                   wr_three_levels_at_most, wr_tie_kept_unless_forbidden,
                                   wr_four_levels_at_most, wr_tie_within_isclose,
                                   wr_small_residual_is_q, wr_confident_argmax,
                                   wr_last_three_removed, wr_epsilon_under_p, wr_hopeless_dropped,
                                   wr_residual_top_16, wr_next_top_50, wr_certain_within_1e5,
                                   wr_eight_levels_at_most, wr_eight_children_at_most,
                                   wr_last_four_removed, wr_uniforms_buffer_of_16,
                                   wr_residual_top_256_when_wide, wr_children_in_a_set,
                                   wr_path_in_64_slots, wr_ids_in_int16,
                                   wr_binomial_children_in_a_set, wr_binomial_ids_in_int16,
                                   wr_rows_in_int8, wr_gumbel_residual_top_16,
                                   wr_p_in_float32, wr_choice_when_wide,
                                   wr_residual_in_q_when_wide, wr_residual_relative_floor,
                                   wr_residual_guard_below_1e16, wr_residual_relative_floor_1e11,
                                   wr_residual_subnormals_flushed, wr_sibling_law_kept_below_1e12,
                                   wr_children_cut_to_16, wr_residual_cut_to_100000],
    "medusa_buffers": [medusa_mask_transposed, medusa_mask_without_self, medusa_padded_with_zero,
                       medusa_every_node_a_row, medusa_float_positions, medusa_int_mask,
                       medusa_deepest_leaves_only, medusa_leaf_to_root, medusa_as_lists,
                       medusa_depths_in_int8, medusa_depths_in_uint8, medusa_digits_key,
                       medusa_base_1024_key, medusa_ancestor_by_rank_sum, medusa_ranks_in_int32,
                       medusa_parent_by_last_two, medusa_path_in_base_2_32,
                       medusa_path_hash_mod_prime, medusa_ranks_in_float32,
                       medusa_hashed_path_32_bits, medusa_path_hash_in_uint64,
                       medusa_path_by_last_64],
    "typical_accept": [typical_at_least, typical_log10, typical_exp_plus_h, typical_no_epsilon,
                       typical_root_row, typical_parent_row_off_by_one, typical_whole_path,
                       typical_epsilon_delta_swapped, typical_guard_in_place,
                       typical_as_array_of_ints, typical_log_plus_1e12, typical_as_zero_one,
                       typical_log_where_without_out, typical_log_clipped_at_1e15,
                       typical_margin_of_eps, typical_in_log_space, typical_log_plus_eps,
                       typical_threshold_rounded, typical_as_bool_array, typical_certain_above_1e12,
                       typical_float32_when_wide, typical_certain_at_one, typical_floor_1e12,
                       typical_rows_in_int8, typical_rows_in_uint8, typical_rows_in_int16,
                       typical_epsilon_zero_as_off, typical_delta_zero_as_off,
                       typical_parents_first, typical_subnormals_flushed,
                       typical_entropy_cached_by_ends,
                       typical_certain_by_epsilon, typical_one_token_kept,
                       typical_zeros_replaced_in_place_when_big, typical_rows_renormalised,
                       typical_log_by_log1p],
    "find_candidates": [candidates_skip_last_window, candidates_one_too_many, candidates_as_text,
                        candidates_none_when_missing, candidates_pops_the_tail,
                        candidates_dict_of_ngrams, candidates_as_array, candidates_ngrams_up_to_3,
                        candidates_as_floats, candidates_ids_in_a_byte,
                        candidates_draft_capped_at_5, candidates_index_kept_by_id,
                        candidates_last_token_first, candidates_zero_means_all,
                        candidates_last_1024, candidates_at_least_unigram,
                        candidates_packed_base_50000, candidates_digits_joined, candidates_float16,
                        candidates_last_4096, candidates_ended_at_eos, candidates_cached,
                        candidates_draft_capped_at_64, candidates_ngrams_up_to_8,
                        candidates_first_4096, candidates_ngrams_up_to_32, candidates_rolling_hash,
                        candidates_hash_in_int64, candidates_starts_in_uint16,
                        candidates_hash_base_1000003, candidates_hashed_windows_32_bits,
                        candidates_padded_digits_first_find, candidates_other_defaults,
                        candidates_hash_uint32_base_1000003],
    "longest_suffix": [suffix_tokens_anywhere, suffix_one_short, suffix_through_bytes,
                       suffix_reversed_in_place, suffix_prefix_matched, suffix_last_token_as_bool,
                       suffix_up_to_3, suffix_through_int32_bytes, suffix_positions_by_id,
                       suffix_corpus_head, suffix_packed_base_50000, suffix_capped_at_16,
                       suffix_corpus_tail, suffix_first_64_occurrences, suffix_capped_at_2048,
                       suffix_rolling_hash, suffix_places_in_int16, suffix_hash_in_uint64,
                       suffix_array_by_16_tokens, suffix_big_endian_bytes,
                       suffix_hash_base_1000003, suffix_hashed_windows_32_bits,
                       suffix_kmp_one_fallback, suffix_padded_digits_first_find,
                       suffix_hash_uint64_base_1000000007],
    "trie": [trie_counts_once, trie_parent_is_position, trie_breadth_first, trie_pops_sequences,
             trie_hashable_in_place, trie_string_keys_without_separator, trie_mutable_defaults,
             trie_nan_padded, trie_ids_in_a_byte, trie_depth_from_longest, trie_by_recursion,
             trie_as_arrays, trie_one_sequence_handed_back, trie_parent_and_token_joined,
             trie_shifted_key, trie_token_major_key, trie_last_four_key, trie_float16_key,
             trie_packed_key, trie_float32_key, trie_key_in_32_bits, trie_counts_in_uint16,
             trie_key_in_int32, trie_key_depth_sum_ends, trie_rolling_hash_key,
             trie_hashed_prefix_32_bits, trie_hash_in_uint64],
    "lookahead_mask": [lookahead_column_major, lookahead_transposed, lookahead_without_self,
                       lookahead_whole_first_level, lookahead_as_ints, lookahead_as_nested_lists,
                       lookahead_levels_up_to_4, lookahead_rows_in_int8, lookahead_columns_as_text,
                       lookahead_one_mask_per_size, lookahead_as_matrix, lookahead_columns_in_int8,
                       lookahead_levels_up_to_7, lookahead_by_recursion, lookahead_rows_in_float16,
                       lookahead_level_by_reciprocal],
    "draft_law": [draft_law_min_subtracted, draft_law_as_list, draft_law_mean_subtracted,
                  draft_law_batch_of_one, draft_law_rows_stacked, draft_law_up_to_3_axes,
                  draft_law_inputs_frozen, draft_law_ids_in_uint16, draft_law_float32_renormalised,
                  draft_law_cached, draft_law_squeezed, draft_law_axis_by_length,
                  draft_law_empty_as_rows, draft_law_top_10, draft_law_floor_1e6,
                  draft_law_cached_object, draft_law_floor_1e10, draft_law_top_100,
                  draft_law_float32_when_wide, draft_law_d2t_unread_when_full,
                  draft_law_cut_30_below, draft_law_shifted_in_place_when_big,
                  draft_law_cached_by_ends],
    "expected_tokens": [expected_linear, expected_rounded_down, expected_float32,
                        expected_sign_flipped, expected_guarded_below_1e7,
                        expected_first_order_near_1, expected_guarded_by_isclose,
                        expected_guarded_below_1e10, expected_alpha_capped,
                        expected_sum_of_terms_capped, expected_one_plus_alpha_when_tiny,
                        expected_tail_dropped, expected_few_drafts_all_kept,
                        expected_limit_when_tiny, expected_guarded_by_product,
                        expected_one_within_1e12,
                        expected_floor_1e8, expected_one_draft_shortcut],
    "predicted_speedup": [speedup_no_verify_cost, speedup_one_draft_call_short, speedup_product,
                          speedup_inverted, speedup_as_text, speedup_none_without_drafts,
                          speedup_verification_at_least_one, speedup_nearly_free_draft,
                          speedup_one_token_without_drafts, speedup_tokens_capped,
                          speedup_free_within_isclose, speedup_free_below_1e12,
                          speedup_free_below_1e18, speedup_K_in_int32,
                          speedup_draft_cost_capped_at_1, speedup_capped_at_1000,
                          speedup_floored_at_1e3,
                          speedup_cost_floored, speedup_verify_cost_capped, speedup_tiny_as_zero],
}


# Right answers, written otherwise

def residual_by_where(q, p):
    r = np.where(q > p, q - p, 0.0)
    return r / r.sum()


def residual_into_empty(q, p):
    """Into np.empty, every entry written before it is read."""
    r = np.empty(len(q))
    np.subtract(q, p, out=r)
    np.maximum(r, 0.0, out=r)
    r /= r.sum()
    return r


def lookahead_into_empty(W, L):
    """Into np.empty, row by row, every entry written."""
    mask = np.empty((W * L, W * L), dtype=bool)
    for i in range(W * L):
        level, column = divmod(i, W)
        for j in range(W * L):
            mask[i, j] = (j < W and j % W <= column) or (j % W == column and j // W <= level)
    return mask


def chain_uniforms_first(drafts, P, Q, rng):
    K, V = len(drafts), Q.shape[-1]
    u = rng.random(K)
    n = 0
    while n < K and u[n] * P[n, drafts[n]] < Q[n, drafts[n]]:
        n += 1
    if n == K:
        return np.int64(K), rng.choice(V, p=Q[K])
    r = np.where(Q[n] > P[n], Q[n] - P[n], 0.0)
    return np.int64(n), rng.choice(V, p=r / r.sum())


def chain_binomial_draws(drafts, P, Q, rng):
    """Each coin a binomial draw, each token a multinomial one: right, and no uniform is drawn,
    so the support cases cannot set them (untested there, not failed)."""
    for t, x in enumerate(drafts):
        if not rng.binomial(1, min(1.0, Q[t][x] / P[t][x])):
            r = np.maximum(Q[t] - P[t], 0)
            return t, int(rng.multinomial(1, r / r.sum()).argmax())
    return len(drafts), int(rng.multinomial(1, Q[-1] / Q[-1].sum()).argmax())


def binomial_coin(rng, a):
    return bool(rng.binomial(1, a))


def gumbel_max(law, rng):
    """A token from law by Gumbel-max: argmax of log law + Gumbel noise (no uniform drawn)."""
    with np.errstate(divide="ignore"):
        return int(np.argmax(np.log(law) + rng.gumbel(size=len(law))))


def wr_binomial_gumbel(tokens, parents, Q, P, rng):
    """Each coin a binomial draw, each token Gumbel-max: right, and no uniform is drawn."""
    return tree_walk(tokens, parents, Q, P, rng, coin=binomial_coin, final=gumbel_max)


def wr_recursive(tokens, parents, Q, P, rng, node=-1, q=None):
    q = np.array(Q[node + 1] if q is None else q, dtype=float)
    drawn = []
    for child in [i for i in range(len(tokens)) if parents[i] == node]:
        p = np.array(P[child], dtype=float)
        p[drawn] = 0.0
        p /= p.sum()
        x = tokens[child]
        if rng.uniform() < min(1.0, q[x] / p[x]):
            path, token = wr_recursive(tokens, parents, Q, P, rng, child)
            return [child] + path, token
        q = np.where(q > p, q - p, 0.0)
        q /= q.sum()
        drawn.append(x)
    return [], int(rng.choice(len(q), p=q))


def wr_path_as_array(tokens, parents, Q, P, rng):
    """The path a NumPy int array (np.flatnonzero-style), not a list: nodes all the same."""
    path, token = wr_recursive(tokens, parents, Q, P, rng)
    return np.array(path, dtype=np.int64), token


def wr_path_by_np_array(tokens, parents, Q, P, rng):
    """The path through np.array(path): int64 when it holds nodes, float64 when empty, as
    np.array([]) is: no node, no wrong index."""
    path, token = wr_recursive(tokens, parents, Q, P, rng)
    return np.array(path), token


def medusa_from_parents(choices):
    n = len(choices) + 1
    parent = [0] + [0 if len(c) == 1 else 1 + choices.index(c[:-1]) for c in choices]
    depth = np.array([0] + [len(c) for c in choices])
    mask = np.eye(n, dtype=bool)
    for i in range(1, n):
        mask[i] |= mask[parent[i]]
    leaves = [i for i in range(n) if i not in parent[1:]]
    retrieve = np.full((len(leaves), depth.max() + 1), -1)
    for row, leaf in enumerate(reversed(leaves)):
        retrieve[row, :depth[leaf] + 1] = np.flatnonzero(mask[leaf])
    return {"attn_mask": mask, "position_ids": depth, "retrieve_indices": retrieve}


def typical_vectorised(tokens, parents, probs, epsilon, delta):
    rows = probs[np.asarray(parents, dtype=int) + 1]  # [m, V]; int: no candidates, no rows
    logs = np.log(rows, out=np.zeros_like(rows), where=rows > 0)
    threshold = np.minimum(epsilon, delta * np.exp(np.sum(rows * logs, -1)))  # [m]
    return (rows[np.arange(len(tokens)), tokens] > threshold).tolist()


def candidates_by_windows(x, max_ngram_size=3, num_pred_tokens=10):
    ids = np.asarray(x)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)  # the trailing one left out
        hits = np.flatnonzero((windows == ids[-n:]).all(1))
        if hits.size:
            return ids[hits[0] + n:hits[0] + n + num_pred_tokens].tolist()
    return []


def candidates_numpy_ids(x, max_ngram_size=3, num_pred_tokens=10):
    """The draft a list of NumPy ints: ids all the same."""
    ids = np.asarray(x)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for s in range(len(x) - n):
            if (ids[s:s + n] == ids[-n:]).all():
                return list(ids[s + n:s + n + num_pred_tokens])
    return []


def suffix_by_set(corpus, context, max_suffix):
    for n in range(min(max_suffix, len(context)), 0, -1):
        if tuple(context[-n:]) in {tuple(corpus[i:i + n]) for i in range(len(corpus) - n + 1)}:
            return n
    return 0


def trie_of_dicts(sequences):
    root, tokens, parents, counts = {}, [], [], []
    for seq in sequences:
        level, parent = root, -1
        for t in seq:
            if t not in level:
                level[t] = (len(tokens), {})
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            node, level = level[t]
            counts[node] += 1
            parent = node
    return tokens, parents, counts


def lookahead_vectorised(W, L):
    level, column = np.divmod(np.arange(W * L), W)  # [W * L] each
    first = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    own = (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])
    return first | own


def expected_by_summing(alpha, K):
    """Every term of the sum added, one at a time."""
    return float(sum(alpha**j for j in range(K + 1)))


def trie_by_prefix(sequences):
    """A node for each whole prefix, kept by the prefix as a tuple."""
    tokens, parents, counts, node_of = [], [], [], {}
    for seq in sequences:
        parent = -1
        for k in range(len(seq)):
            prefix = tuple(seq[:k + 1])
            if prefix not in node_of:
                node_of[prefix] = len(tokens)
                tokens.append(seq[k])
                parents.append(parent)
                counts.append(0)
            counts[node_of[prefix]] += 1
            parent = node_of[prefix]
    return tokens, parents, counts


def expected_closed_form(alpha, K):
    return np.float64(K + 1) if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)


def draft_law_by_lookup(z, d2t, n_vocab):
    z = np.asarray(z, dtype=np.float64)
    column = np.full(n_vocab, len(d2t))  # each target id's draft column; the last: a zero
    column[d2t] = np.arange(len(d2t))
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    law = np.concatenate([e / e.sum(axis=-1, keepdims=True), np.zeros(z.shape[:-1] + (1,))], -1)
    return law[..., column]


def speedup_per_token(E, c, K, c_d):
    return 1 / ((c + c_d * K) / E)


RIGHT = {"residual": residual_by_where, "verify_chain": chain_uniforms_first,
         "verify_without_replacement": wr_recursive, "medusa_buffers": medusa_from_parents,
         "typical_accept": typical_vectorised, "find_candidates": candidates_by_windows,
         "longest_suffix": suffix_by_set, "trie": trie_of_dicts,
         "lookahead_mask": lookahead_vectorised, "expected_tokens": expected_closed_form,
         "predicted_speedup": speedup_per_token, "draft_law": draft_law_by_lookup}
# more right answers, each written as some learner would
RIGHT_TOO = [("verify_chain", chain_binomial_draws), ("find_candidates", candidates_numpy_ids),
             ("verify_without_replacement", wr_binomial_gumbel),
             ("verify_without_replacement", wr_path_as_array),
             ("verify_without_replacement", wr_path_by_np_array),
             ("residual", residual_into_empty), ("lookahead_mask", lookahead_into_empty),
             ("expected_tokens", expected_by_summing), ("trie", trie_by_prefix)]
