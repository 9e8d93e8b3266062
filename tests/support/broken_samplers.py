"""Deliberately broken samplers, each with one bug that people ship; `python -m picospec.check` must
fail every one, but the four whose bug sits in draws from their own generator, which no run can
reach (their support cases say "untested"): ties_toward_draft_own_generator,
inverse_cdf_side_left_partly_own_generator, batched_ties_toward_draft_partly_own_generator,
no_drafts_own_generator.

    # exit status 1
    python -m picospec.check tests/support/broken_samplers.py:ties_toward_draft --contract chain

Notation as in picospec/verify.py (Chen et al.): p = draft, q = target. The negative controls that
the command runs before every verdict (picospec.check.controls.CONTROLS) are further broken samplers
of the same kind.
"""
import itertools

import numpy as np

from picospec.batched.rejection import recovered_probs, rejection_sample, sample_rows
from picospec.sampling import residual, sample
from picospec.verify import verify_chain, verify_tree, verify_without_replacement


def chain(drafts, P, Q, rng, accept=lambda u, q, p: u < min(1, q / p), resample=lambda t, q,
          p: residual(q, p), bonus=lambda P, Q: Q[-1], uniform=lambda rng: rng.random(),
          draw=sample):
    """Chen et al. Alg. 2's verification with each step replaceable (the defaults are the right
    rules)."""
    for t, x in enumerate(drafts):
        if not accept(uniform(rng), Q[t][x], P[t][x]):
            return t, draw(resample(t, Q[t], P[t]), rng)
    return len(drafts), draw(bonus(P, Q), rng)


def residual_not_renormalised(drafts, P, Q, rng):
    """max(0, q - p) sampled by inverse CDF against a uniform on [0, 1) without dividing by its sum:
    the missing mass 1 - sum lands on the last token."""
    for t, x in enumerate(drafts):
        if not rng.random() < min(1, Q[t][x] / P[t][x]):
            r = np.maximum(Q[t] - P[t], 0)
            return t, min(int(np.searchsorted(np.cumsum(r), rng.random(), side="right")),
                          len(r) - 1)
    return len(drafts), sample(Q[-1], rng)


def bonus_from_draft(drafts, P, Q, rng):
    """All K accepted: the extra token is drawn from the draft's last law instead of the target's
    row K (from Q[0] when there are no drafts, as there is no draft law)."""
    return chain(drafts, P, Q, rng, bonus=lambda P, Q: P[-1] if len(P) else Q[-1])


def ratio_inverted(drafts, P, Q, rng):
    """Accept with min(1, p/q): Leviathan's q/p read with Chen's letters (the notations swap p and
    q)."""
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u < min(1, p / q))


def ties_toward_draft(drafts, P, Q, rng):
    """Accept when u <= q/p: the tie u == q/p goes to the draft, so when u = 0 a token the target
    forbids (q = 0) is kept. With 53-bit uniforms the tie has probability 2^-53 per draft and no
    sampled law can show it; the battery's "uniforms at 0" case hands the sampler u = 0 and catches
    it."""
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u <= q / p)


def ties_toward_draft_from_the_fourth(drafts, P, Q, rng):
    """The tie u == q/p given to the draft from the fourth draft on only (later drafts taken by
    another path): the "uniforms at 0" case of 6 drafts catches it, the one of 3 cannot."""
    for t, x in enumerate(drafts):
        u, ratio = rng.random(), Q[t][x] / P[t][x]
        if not (u <= ratio if t >= 3 else u < min(1, ratio)):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def residual_argmax_from_the_fifth(drafts, P, Q, rng):
    """From the fifth draft on, a rejected draft is replaced by the residual's likeliest token (a
    "greedy recovery" for long drafts): only a case of 5 drafts or more, rejected there with a
    residual of two tokens or more, shows it."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: (
        np.eye(len(q))[np.argmax(residual(q, p))] if t >= 4 else residual(q, p)))


def close_draft_kept_untested(drafts, P, Q, rng):
    """A draft whose law is np.allclose to the target's (atol 0.03) kept without a test, "to save
    a uniform": right where the draft is the target, wrong 0.02 from it."""
    for t, x in enumerate(drafts):
        close = np.allclose(P[t], Q[t], rtol=0, atol=0.03)
        if not (close or rng.random() < min(1, Q[t][x] / P[t][x])):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def last_residual_skipped(drafts, P, Q, rng):
    """A rejection of the last draft (t = K - 1) is replaced from q instead of the residual."""
    return chain(drafts, P, Q, rng, resample=lambda t, q,
                 p: q if t == len(drafts) - 1 else residual(q, p))


def guarded(q, p):
    """A 'numerical guard' in the residual: when max(0, q - p) has mass below 0.05 it is taken for
    rounding noise and q is returned instead. Example: q = [0.5, 0.5], p = [0.46, 0.54] -> mass 0.04
    -> q, not [1, 0]."""
    return q if np.maximum(q - p, 0).sum() < 0.05 else residual(q, p)


def small_residual_guard(drafts, P, Q, rng):
    """A rejected draft is replaced from q when the residual's mass is below 0.05 (guarded).
    Rejections are rare exactly then, so a sampled law shows it only when the draft is that close to
    the target: the battery's "draft = target but 2 tokens" case."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: guarded(q, p))


def top_four(q, p):
    """norm(max(0, q - p)) cut to its four likeliest tokens (a "sparse" residual, as top-k is):
    right while the residual has four tokens or fewer, which V <= 5 ensures."""
    r = residual(q, p)  # [V]
    r[np.argsort(-r, kind="stable")[4:]] = 0
    return r / r.sum()


def residual_top_four(drafts, P, Q, rng):
    """A rejected draft replaced from the residual cut to its four likeliest tokens (top_four):
    the battery's case of V = 12 fails it."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: top_four(q, p))


def ties_toward_draft_by_uniform(drafts, P, Q, rng):
    """ties_toward_draft with its uniforms from rng.uniform() instead of rng.random(): the support
    case must hand u = 0 through every way a Generator draws a uniform."""
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u <= q / p,
                 uniform=lambda rng: rng.uniform())


def ties_toward_draft_by_out(drafts, P, Q, rng):
    """ties_toward_draft with its acceptance uniforms written into a buffer by rng.random(out=...):
    the support case must fill the buffer the sampler hands it, not return a new 0.0 beside it."""
    u = np.full(len(drafts), 0.5)  # [K]
    rng.random(out=u)
    it = iter(u)
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u <= q / p, uniform=lambda rng: next(it))


def searchsorted_left(p, rng):
    """One token id from p [V] by np.searchsorted(cdf, u) with its default side='left': the first
    id whose cdf is >= u. Example: p = [0, 0.5, 0.5], u = 0 -> 0, a token of probability 0."""
    return int(np.searchsorted(np.cumsum(p), rng.random()))


def inverse_cdf_side_left(drafts, P, Q, rng):
    """The replacement and the extra token drawn with searchsorted_left: u = 0 lands on token 0
    even where the law gives it 0. The battery's "uniforms at 0" case hands the sampler u = 0 and
    its target forbids token 0 in some rows."""
    return chain(drafts, P, Q, rng, draw=searchsorted_left)


def clamped_to_last(p, rng):
    """One token id from p [V] by np.searchsorted(cdf, u, side="right") on u unscaled, an index
    past the end clamped to the last token: where rounding leaves cdf[-1] at 1 - 2^-53, u = 1 -
    2^-53 lands on token V - 1 even where the law gives it 0."""
    return min(int(np.searchsorted(np.cumsum(p), rng.random(), side="right")), len(p) - 1)


def by_argmax(p, rng):
    """One token id from p [V] as argmax(cdf > u), u unscaled: past cdf[-1] no entry is True and
    argmax falls back to token 0, whatever its probability."""
    return int(np.argmax(np.cumsum(p) > rng.random()))


def one_minus_u_clamped(p, rng):
    """One token id from p [V] as the first id whose cdf is >= 1 - u (u ~ U[0, 1)), an index past
    the end clamped to the last token: u = 0 asks for cdf >= 1, which a cdf ending at 1 - 2^-53
    never reaches, and lands on token V - 1 even where the law gives it 0."""
    return min(int(np.searchsorted(np.cumsum(p), 1 - rng.random())), len(p) - 1)


def inverse_cdf_clamped_to_last(drafts, P, Q, rng):
    """The replacement and the extra token drawn with clamped_to_last. The battery's "uniforms
    near 1" case hands the sampler u = 1 - 2^-53, and its target forbids the last token where a
    residual's cumsum ends short of 1."""
    return chain(drafts, P, Q, rng, draw=clamped_to_last)


def inverse_cdf_one_minus_u(drafts, P, Q, rng):
    """The replacement and the extra token drawn with one_minus_u_clamped: the battery's "uniforms
    at 0" case hands it u = 0."""
    return chain(drafts, P, Q, rng, draw=one_minus_u_clamped)


def inverse_cdf_by_argmax(drafts, P, Q, rng):
    """The replacement and the extra token drawn as argmax(cdf > u): a u at or past cdf[-1], which
    rounding can leave at 1 - 2^-53, finds no True and argmax falls back to token 0, forbidden or
    not. The battery's "uniforms near 1" case hands the sampler u = 1 - 2^-53."""
    return chain(drafts, P, Q, rng, draw=by_argmax)


def drawn_alone(drafts, P, Q, rng, draw, bonus):
    """Chen et al.'s rule with one of its draws alone made by draw(q, rng): the extra token (bonus:
    every draft kept, or none given) or the replacement (from the residual); the other right."""
    t, law = chain(drafts, P, Q, rng, draw=lambda q, rng: q)
    return t, (draw if (t == len(drafts)) == bonus else sample)(law, rng)


def residual_clamped_to_last(drafts, P, Q, rng):
    """The replacement alone drawn with clamped_to_last: the near-1 case's residuals that end
    short of 1 where the target forbids the last token show it."""
    return drawn_alone(drafts, P, Q, rng, clamped_to_last, bonus=False)


def residual_by_argmax(drafts, P, Q, rng):
    """The replacement alone drawn as argmax(cdf > u): token 0 past a residual short of 1."""
    return drawn_alone(drafts, P, Q, rng, by_argmax, bonus=False)


def bonus_clamped_to_last(drafts, P, Q, rng):
    """The extra token alone drawn with clamped_to_last: a target row whose float cumsum ends
    short of 1 (as a softmax's may) and forbids its last token gives it at u = 1 - 2^-53."""
    return drawn_alone(drafts, P, Q, rng, clamped_to_last, bonus=True)


def bonus_by_argmax(drafts, P, Q, rng):
    """The extra token alone drawn as argmax(cdf > u): past the end of a target row short of 1,
    no True, and argmax falls back to token 0, forbidden or not."""
    return drawn_alone(drafts, P, Q, rng, by_argmax, bonus=True)


def bonus_one_minus_u(drafts, P, Q, rng):
    """The extra token alone drawn with one_minus_u_clamped: at u = 0 a target row short of 1
    never reaches cdf >= 1, and the last token comes out, forbidden or not."""
    return drawn_alone(drafts, P, Q, rng, one_minus_u_clamped, bonus=True)


def by_overlap(drafts, P, Q, rng, pick):
    """A rejected draft replaced by searching max(0, q - p) unnormalised at u (1 - sum min(p, q)):
    the residual's mass written as one minus the overlap, equal in exact arithmetic, larger by 1 -
    sum(q) where q sums short of 1; pick(cdf, u) -> the token."""
    for t, x in enumerate(drafts):
        q, p = Q[t], P[t]
        if not rng.random() < min(1, q[x] / p[x]):
            cdf = np.cumsum(np.maximum(q - p, 0))  # [V]
            return t, pick(cdf, rng.random() * (1 - np.minimum(p, q).sum()))
    return len(drafts), sample(Q[len(drafts)], rng)


def residual_scaled_by_overlap(drafts, P, Q, rng):
    """by_overlap, an index past the end clamped to the last token: near 1 it runs past the
    residual's cumsum onto the last token, forbidden or not."""
    return by_overlap(drafts, P, Q, rng, lambda cdf, u: min(
        int(np.searchsorted(cdf, u, side="right")), len(cdf) - 1))


def residual_overlap_argmax(drafts, P, Q, rng):
    """by_overlap, the token found as argmax(cdf > u): past the end, token 0."""
    return by_overlap(drafts, P, Q, rng, lambda cdf, u: int(np.argmax(cdf > u)))


def greedy_replacement_at_four_drafts(drafts, P, Q, rng):
    """Given exactly four drafts, a rejected one replaced by the residual's likeliest token (a
    path written for K = 4 alone): the case of four drafts whose residuals hold up to three
    tokens shows it."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: (
        np.eye(len(q))[np.argmax(residual(q, p))] if len(drafts) == 4 else residual(q, p)))


def one_hot_target(Q):
    """Whether every row of Q is one-hot (greedy decoding)."""
    return bool((np.asarray(Q).max(-1) == 1).all())


def first_row_equal_kept_whole(drafts, P, Q, rng):
    """Greedy where every target row is one-hot (right there); else a call whose first draft row
    equals the target's taken for "draft = target" (self-drafting): every draft kept untested,
    though its later rows differ."""
    if one_hot_target(Q):
        for t, x in enumerate(drafts):
            if x != int(np.argmax(Q[t])):
                return t, int(np.argmax(Q[t]))
        return len(drafts), int(np.argmax(Q[len(drafts)]))
    if len(drafts) and np.array_equal(P[0], Q[0]):
        return len(drafts), sample(Q[len(drafts)], rng)
    return verify_chain(drafts, P, Q, rng)


def answer_kept_for_equal_inputs(drafts, P, Q, rng):
    """The answer of the call before handed back when a call's inputs equal its inputs (a cache
    keyed on the inputs, not on the uniforms): each sequence alone follows the target's law, and
    neighbours share their steps. The battery's pairs test sees it."""
    key = (list(drafts), P.tobytes(), Q.tobytes())
    if getattr(answer_kept_for_equal_inputs, "key", None) != key:
        answer_kept_for_equal_inputs.key = key
        answer_kept_for_equal_inputs.answer = verify_chain(drafts, P, Q, rng)[:2]
    return answer_kept_for_equal_inputs.answer


def uniforms_kept_for_the_next_call(drafts, P, Q, rng):
    """Every second call reuses the uniforms of the call before (a buffer refilled every other
    call): each sequence alone follows the target's law, and neighbouring calls are tied."""
    state = uniforms_kept_for_the_next_call
    state.calls = getattr(state, "calls", 0) + 1
    if state.calls % 2 or len(getattr(state, "u", ())) < len(drafts) + 1:  # fewer kept than needed
        state.u = rng.random(len(drafts) + 1)  # [K + 1]
    u = iter(state.u)
    return chain(drafts, P, Q, rng, uniform=lambda rng: next(u), draw=lambda p, rng: int(
        np.searchsorted(np.cumsum(p), next(u) * np.sum(p), side="right")))


def bonus_dropped(drafts, P, Q, rng):
    """All K drafts kept: returned as K - 1 kept and the last draft as next_token, the bonus token
    dropped. Lossless (the next call draws that position from q again), one token a step short:
    the battery's kept test sees it."""
    n, token = verify_chain(drafts, P, Q, rng)[:2]
    return (n - 1, drafts[-1]) if n == len(drafts) > 0 else (n, token)


def accepts_half(drafts, P, Q, rng):
    """Each draft kept with probability min(1, q/p) / 2, a rejection replaced from norm(q -
    min(p, q) / 2), which keeps the target's law: lossless, and all K drafts kept 2^K times less
    often than the rule keeps them."""
    def resample(t, q, p):  # what q lacks once half of min(p, q) is kept, renormalised
        rest = q - np.minimum(p, q) / 2  # [V]
        return rest / rest.sum()
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u < min(1, q / p) / 2,
                 resample=resample)


def no_drafts_argmax(drafts, P, Q, rng):
    """Right with drafts; with none (K = 0: prompt lookup found no match) the next token is Q[0]'s
    likeliest, not a draw from Q[0]. The battery's calls all had drafts before it gave some none."""
    if not drafts:
        return 0, int(np.argmax(Q[0]))
    return verify_chain(drafts, P, Q, rng)[:2]


def no_drafts_searchsorted_left(drafts, P, Q, rng):
    """Right with drafts; with none, the next token drawn from Q[0] with searchsorted_left (a
    separate path for K = 0): u = 0 lands on token 0 even where Q[0] forbids it."""
    if not drafts:
        return 0, searchsorted_left(Q[0], rng)
    return verify_chain(drafts, P, Q, rng)[:2]


RESIDUALS = {}  # q's bytes -> its residual: one cache for the samplers below, keyed by q alone


def cached_residual(q, p):
    """norm(max(0, q - p)) from a cache keyed by q alone: right while q always meets one p."""
    return RESIDUALS.setdefault(q.tobytes(), residual(q, p))


def residual_cached_by_target_row(drafts, P, Q, rng):
    """A rejected draft's residual cached by the target's row Q[t] alone, the draft's P[t] left out
    of the key: right wherever one target row always meets the same draft row."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: cached_residual(q, p))


def uniforms_in_a_buffer_of_six(drafts, P, Q, rng):
    """The acceptance uniforms drawn six at a time into one buffer and read again from the seventh
    draft on (u[t % 6]): right up to six drafts; from the seventh, a draft is kept by the first
    one's uniform."""
    u = rng.random(6)  # [6]
    for t, x in enumerate(drafts):
        if not u[t % 6] < min(1, Q[t][x] / P[t][x]):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def certain(Q, top=0.95):
    """Each law [..., V] whose likeliest token holds `top` or more taken as certain: that token's
    one-hot row (a "confident target" shortcut). Example: [0.96, 0.04] -> [1, 0]."""
    Q = np.asarray(Q, dtype=float)
    return np.where(Q.max(-1, keepdims=True) >= top, np.eye(Q.shape[-1])[Q.argmax(-1)], Q)


def sharp_target_taken_as_certain(drafts, P, Q, rng):
    """The target taken as certain wherever its likeliest token holds 0.95 (certain): right
    wherever no target law the calls meet is that sharp but not one-hot."""
    return verify_chain(drafts, P, certain(Q), rng)[:2]


def top_five(p):
    """p [..., V] with all but its 5 likeliest entries read as 0 (a draft sent as its top-5
    log-probabilities): right while a law has 5 tokens or fewer."""
    p = np.array(p, dtype=float)
    np.put_along_axis(p, np.argsort(-p, -1, kind="stable")[..., 5:], 0.0, -1)
    return p


def draft_top_five(drafts, P, Q, rng):
    """Each draft law read as its top five tokens (top_five): q/p and the residual off at V >= 6."""
    return verify_chain(drafts, top_five(P), Q, rng)[:2]


def uniforms_in_blocks_of_four(drafts, P, Q, rng):
    """The acceptance uniforms drawn four at a time; a last block of one draft reads the block
    before's last uniform again: right at K = 1 to 4 and 6 to 8, wrong at K = 5."""
    u = []
    for start in range(0, len(drafts), 4):
        n = min(4, len(drafts) - start)
        u += [u[-1]] if n == 1 and start else rng.random(n).tolist()
    for t, x in enumerate(drafts):
        if not u[t] < min(1, Q[t][x] / P[t][x]):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def greedy_when_first_row_one_hot(drafts, P, Q, rng):
    """A call whose first target law is one-hot taken as greedy decoding (T = 0) throughout:
    drafts kept while they are each row's argmax, then the argmax: right where every row is
    one-hot, wrong where a one-hot row sits beside spread ones."""
    if not (len(drafts) and Q[0].max() == 1.0):
        return verify_chain(drafts, P, Q, rng)[:2]
    for t, x in enumerate(drafts):
        if x != int(np.argmax(Q[t])):
            return t, int(np.argmax(Q[t]))
    return len(drafts), int(np.argmax(Q[len(drafts)]))


def found_by_value(p, u):
    """An inverse CDF at u over p sorted by probability, the token found again by its value
    (np.flatnonzero(p == value)[0]): of tied tokens, only the lowest ever comes out."""
    order = np.argsort(-p, kind="stable")  # [V]
    cdf = np.cumsum(p[order])  # [V]
    value = p[order][min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(p) - 1)]
    return int(np.flatnonzero(p == value)[0])


def even(q):
    """A row whose entries are all equal, taken for padding by the samplers below."""
    return q.max() == q.min()


def ties_found_by_value(drafts, P, Q, rng):
    """The replacement and the extra token drawn with found_by_value: right wherever no law has
    two equal entries (equal logits, bf16's few digits)."""
    return chain(drafts, P, Q, rng, draw=lambda p, rng: found_by_value(p, rng.random()))


def even_target_row_kept(drafts, P, Q, rng):
    """A target row whose entries are all equal taken for padding: its draft kept untested."""
    for t, x in enumerate(drafts):
        if not (even(Q[t]) or rng.random() < min(1, Q[t][x] / P[t][x])):
            return t, sample(residual(Q[t], P[t]), rng)
    return len(drafts), sample(Q[-1], rng)


def likeliest(q, k):
    """q cut to its k likeliest tokens, renormalised."""
    kept = np.where(q >= np.sort(q)[-k], q, 0.0) if len(q) > k else q
    return kept / kept.sum()


def one_draft_forbidden_from_target(drafts, P, Q, rng):
    """One draft the target forbids replaced from q ("q - p is q where q(x) = 0"): right for a
    one-hot draft, not for one spread over other tokens."""
    one = len(drafts) == 1 and Q[0][drafts[0]] == 0
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: q if one else residual(q, p))


def one_draft_residual_on_its_support(drafts, P, Q, rng):
    """One draft a call: the residual kept to the tokens the draft could propose ("the others were
    never at stake"), where it has mass there."""
    def resample(t, q, p):
        r = np.where(p > 0, np.maximum(q - p, 0), 0.0)
        return r / r.sum() if len(drafts) == 1 and r.sum() > 0 else residual(q, p)
    return chain(drafts, P, Q, rng, resample=resample)


def bonus_top_eight(drafts, P, Q, rng):
    """The extra token, every draft kept, drawn from Q[K] cut to its eight likeliest (a sampling
    kernel of width 8)."""
    return chain(drafts, P, Q, rng, bonus=lambda P, Q: likeliest(Q[-1], 8))


def no_drafts_top_four(drafts, P, Q, rng):
    """A call given no drafts draws its token from Q[0] cut to its four likeliest."""
    return chain(drafts, P, Q, rng, bonus=lambda P, Q: likeliest(Q[-1], 4) if len(P) == 0
                 else Q[-1])


def wide_residual_against_first_draft_row(drafts, P, Q, rng):
    """Past V = 8, every rejected draft's residual taken against the first draft row P[0] ("the
    draft's law barely moves along a chain"): right at V <= 8, and wherever the rows are alike."""
    return chain(drafts, P, Q, rng,
                 resample=lambda t, q, p: residual(q, P[0] if len(q) > 8 else p))


def residual_top_two_from_the_fourth(drafts, P, Q, rng):
    """From the fourth draft on, the residual cut to its two likeliest tokens: right wherever the
    residuals there hold two tokens or fewer (V <= 3 ensures it)."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: (
        likeliest(residual(q, p), 2) if t >= 3 else residual(q, p)))


def residual_top_two_from_the_fifth(drafts, P, Q, rng):
    """From the fifth draft on, the residual cut to its two likeliest tokens: right at V <= 3,
    and wherever a rejection that late lands past the tokens a case compares."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: (
        likeliest(residual(q, p), 2) if t >= 4 else residual(q, p)))


def bonus_top_two_after_four_drafts(drafts, P, Q, rng):
    """Every draft of four or more kept, the extra token drawn from Q[K] cut to its two
    likeliest ("long accepted runs are confident"): right at V <= 2."""
    return chain(drafts, P, Q, rng, bonus=lambda P, Q: likeliest(Q[-1], 2) if len(P) >= 4
                 else Q[-1])


def residual_argmax_given_seven_drafts(drafts, P, Q, rng):
    """Given seven drafts or more, a rejected draft replaced by the residual's likeliest token
    ("long drafts decode greedily"): right at V = 2, where a residual holds one token."""
    return chain(drafts, P, Q, rng, resample=lambda t, q, p: (
        np.eye(len(q))[np.argmax(residual(q, p))] if len(drafts) >= 7 else residual(q, p)))


# Wrong in calls larger than a toy's: a vectorised path past some size, as every real call over
# 50,257 tokens takes. Only the battery's wide cases (the case's tokens handed as ids of 4,096 or
# 256) reach it.

def reused_uniform_in_large_calls(drafts, P, Q, rng):
    """Past 64 probabilities a call draws its K acceptance uniforms at once and draws the
    replacement with the rejected draft's own, unscaled: after a rejection it lies in [q/p, 1),
    so the draw leans to the residual's last tokens."""
    if np.size(P) <= 64:
        return verify_chain(drafts, P, Q, rng)[:2]
    K, t = len(drafts), np.arange(len(drafts))
    u = rng.random(K)  # [K]
    kept = u < np.minimum(1, Q[t, drafts] / P[t, drafts])  # [K]
    if kept.all():
        return K, sample(Q[K], rng)
    n = int(kept.argmin())
    cdf = np.cumsum(residual(Q[n], P[n]))  # [V]
    return n, int(min(np.searchsorted(cdf, u[n] * cdf[-1], side="right"), len(cdf) - 1))


def while_warming_up(broken, right, calls):
    """broken for its first `calls` calls (a warm-up, an autotune, a path taken until a graph is
    captured), right from then on."""
    made = itertools.count()

    def sampler(*args, **kwargs):
        return (broken if next(made) < calls else right)(*args, **kwargs)
    return sampler


# a residual left unnormalised for the first 70,000 calls: at the command's 20,000 sequences the
# first case, a support case, makes about 75,000 (uniforms at 0 reject no draft, so no residual
# is drawn there): run in number order, the battery passed it
residual_not_renormalised_while_warming_up = while_warming_up(residual_not_renormalised,
                                                              verify_chain, 70_000)


CHAIN = ["residual_not_renormalised", "bonus_from_draft", "ratio_inverted", "ties_toward_draft",
         "last_residual_skipped", "small_residual_guard", "ties_toward_draft_by_uniform",
         "ties_toward_draft_by_out", "inverse_cdf_side_left", "inverse_cdf_by_argmax",
         "answer_kept_for_equal_inputs", "uniforms_kept_for_the_next_call", "bonus_dropped",
         "accepts_half", "no_drafts_argmax", "no_drafts_searchsorted_left",
         "ties_toward_draft_from_the_fourth", "residual_top_four",
         "residual_argmax_from_the_fifth", "close_draft_kept_untested",
         "residual_cached_by_target_row", "uniforms_in_a_buffer_of_six",
         "sharp_target_taken_as_certain", "draft_top_five", "uniforms_in_blocks_of_four",
         "greedy_when_first_row_one_hot", "ties_found_by_value", "even_target_row_kept",
         "one_draft_forbidden_from_target", "one_draft_residual_on_its_support", "bonus_top_eight",
         "no_drafts_top_four", "wide_residual_against_first_draft_row",
         "residual_top_two_from_the_fourth", "residual_argmax_given_seven_drafts",
         "residual_top_two_from_the_fifth", "bonus_top_two_after_four_drafts",
         "reused_uniform_in_large_calls",
         "bonus_clamped_to_last", "bonus_by_argmax", "bonus_one_minus_u",
         "residual_scaled_by_overlap", "residual_overlap_argmax", "residual_clamped_to_last",
         "residual_by_argmax", "greedy_replacement_at_four_drafts", "first_row_equal_kept_whole",
         "residual_not_renormalised_while_warming_up"]


def tree(tokens, parents, Q, rng, P=None, accept=lambda u, q, p: u < min(1, q / p),
         last_residual=True, update=residual, draw=sample, at=lambda n, depth: {},
         untested=lambda q, p: False):
    """verify_tree's recursive rejection sampling over siblings, with the acceptance test, the
    residual update, whether it follows the last sibling and the next token's draw replaceable;
    at(n, depth) -> {"accept": ..., "update": ...}: the hooks of a node's n-th child (from 0)
    once the path holds `depth` nodes, where they differ; untested(q, p): a child kept without
    drawing a uniform."""
    node, path = -1, []
    while True:
        q, kids = Q[node + 1], [i for i, parent in enumerate(parents) if parent == node]
        for n, c in enumerate(kids):
            p = P[c] if P is not None else np.eye(len(q))[tokens[c]]
            hooks = {"accept": accept, "update": update, **at(n, len(path))}
            if untested(q, p) or hooks["accept"](rng.random(), q[tokens[c]], p[tokens[c]]):
                node = c
                path.append(c)
                break
            if last_residual or n < len(kids) - 1:
                q = hooks["update"](q, p)
        else:
            return path, draw(q, rng)


def tree_ties_toward_draft(tokens, parents, Q, rng, P=None):
    """Siblings accepted when u <= q/p: with u = 0 a child the (residual) target forbids is kept."""
    return tree(tokens, parents, Q, rng, P, accept=lambda u, q, p: u <= q / p)


def tree_ties_toward_draft_below_depth_2(tokens, parents, Q, rng, P=None):
    """Siblings accepted when u <= q/p once the path holds 2 nodes: the "uniforms at 0" case of
    five levels catches it, the one of two cannot."""
    return tree(tokens, parents, Q, rng, P,
                at=lambda n, depth: {"accept": lambda u, q, p: u <= q / p} if depth >= 2 else {})


def tree_last_residual_skipped(tokens, parents, Q, rng, P=None):
    """After the last sibling is rejected the next token comes from the law before its rejection,
    not the residual."""
    return tree(tokens, parents, Q, rng, P, last_residual=False)


def tree_draft_law_hoisted(tokens, parents, Q, rng, P=None):
    """Every sibling judged against the law of its parent's first child, as if that row were hoisted
    out of the sibling loop: right while all siblings come from one law, wrong when they do not (two
    drafters, a temperature per branch), which the contract allows: the battery's "siblings from two
    drafts" case.
    Example: parents (-1, -1, -1, 0, 0) -> rows P[[0, 0, 0, 3, 3]]."""
    # [m]: node -> the first child of its parent
    first = [list(parents).index(parent) for parent in parents]
    return tree(tokens, parents, Q, rng, None if P is None else P[first])


def tree_inverse_cdf_side_left(tokens, parents, Q, rng, P=None):
    """The next token drawn with searchsorted_left: u = 0 lands on token 0 even where the
    (residual) target gives it 0."""
    return tree(tokens, parents, Q, rng, P, draw=searchsorted_left)


def tree_inverse_cdf_clamped_to_last(tokens, parents, Q, rng, P=None):
    """The next token drawn with clamped_to_last: u = 1 - 2^-53 lands on the last token where a
    law's cumsum ends short of 1."""
    return tree(tokens, parents, Q, rng, P, draw=clamped_to_last)


def tree_drawn_alone(tokens, parents, Q, rng, P, draw, leaf):
    """verify_tree's rule (P: Sequoia's laws, or None) with one of its draws alone made by
    draw(q, rng): the token after a kept leaf (leaf), or from a residual (every child of the last
    kept node rejected); the others right."""
    path, law = tree(tokens, parents, Q, rng, P, draw=lambda q, rng: q)
    rejected = (path[-1] if path else -1) in parents
    return path, (draw if (bool(path) and not rejected if leaf else rejected) else sample)(law, rng)


def tree_residual_clamped_to_last(tokens, parents, Q, rng, P=None):
    """The token drawn from a residual alone drawn with clamped_to_last."""
    return tree_drawn_alone(tokens, parents, Q, rng, P, clamped_to_last, leaf=False)


def tree_leaf_next_clamped_to_last(tokens, parents, Q, rng, P=None):
    """The token after a kept leaf alone drawn with clamped_to_last: the leaf's target row, short
    of 1, gives its last token at u = 1 - 2^-53 where it forbids it."""
    return tree_drawn_alone(tokens, parents, Q, rng, P, clamped_to_last, leaf=True)


def tree_bonus_argmax_below_depth_4(tokens, parents, Q, rng, P=None):
    """Once the path holds four nodes, the next token is the likeliest of its law (the residual
    after a rejection, else the last node's row), not a draw: a tree of 5 levels shows it."""
    path, token, _ = verify_tree(tokens, parents, Q, rng, P)
    if len(path) < 4:
        return path, token
    q = Q[path[-1] + 1]
    for c in [i for i, parent in enumerate(parents) if parent == path[-1]]:  # all rejected
        q = residual(q, P[c] if P is not None else np.eye(len(q))[tokens[c]])
    return path, int(np.argmax(q))


def tree_fourth_sibling_against_q(tokens, parents, Q, rng, P=None):
    """Siblings that are the draft's top tokens (P None), from a node's fourth child on: judged
    against the node's own row of Q, not the residual the siblings before left. Only a node of
    four top-token children or more shows it."""
    return judged_against(tokens, parents, Q, rng, P,
                          lambda n, depth: P is None and n >= 3)


def judged_against(tokens, parents, Q, rng, P, own_row):
    """verify_tree's walk whose n-th child below a path of `depth` nodes is judged against its
    node's own row of Q where own_row(n, depth), not the residual the children before it left
    (the residual itself kept right)."""
    node, path = -1, []
    while True:
        q = r = Q[node + 1]
        for n, c in enumerate([i for i, parent in enumerate(parents) if parent == node]):
            p = P[c] if P is not None else np.eye(len(q))[tokens[c]]
            judged = q if own_row(n, len(path)) else r
            if rng.random() < min(1, judged[tokens[c]] / p[tokens[c]]):
                node = c
                path.append(c)
                break
            r = residual(r, p)
        else:
            return path, sample(r, rng)


def tree_fifth_sibling_kept_as_the_fourth(tokens, parents, Q, rng, P=None):
    """A node's fifth child or later, once kept, recorded as the child before it (an index one
    short past a buffer of four)."""
    path, token, _ = verify_tree(tokens, parents, Q, rng, P)
    for k, node in enumerate(path):
        kids = [i for i, parent in enumerate(parents) if parent == parents[node]]
        if kids.index(node) >= 4:
            return path[:k] + [kids[kids.index(node) - 1]], token
    return path, token


def tree_residual_top_four(tokens, parents, Q, rng, P=None):
    """Each rejected sibling's residual cut to its four likeliest tokens (top_four)."""
    return tree(tokens, parents, Q, rng, P, update=top_four)


def tree_children_as_a_run(tokens, parents, Q, rng, P=None):
    """verify_tree's walk with a node's children read as the run of indices from its first child
    (as many as it has), the path read back from the last kept node's ancestors: right while
    siblings are numbered next to each other (level by level), wrong on a tree numbered depth
    first, which the contract (parents[i] < i) allows. Example: parents (-1, 0, 1, 0, -1, 4): the
    root's children read as nodes 0 and 1, not 0 and 4."""
    node = -1
    while True:
        q, kids = Q[node + 1], [i for i, parent in enumerate(parents) if parent == node]
        for c in range(kids[0], kids[0] + len(kids)) if kids else ():
            p = P[c] if P is not None else np.eye(len(q))[tokens[c]]
            if rng.random() < min(1, q[tokens[c]] / p[tokens[c]]):
                node = c
                break
            q = residual(q, p)
        else:
            path = []
            while node >= 0:  # the kept node's ancestors, root first
                path, node = [node] + path, parents[node]
            return path, sample(q, rng)


def tree_leaf_dropped(tokens, parents, Q, rng, P=None):
    """verify_tree whose path, when it reaches a leaf, stops a node short: the leaf's token
    returned as next_token, the bonus token after it dropped. Lossless, one token a step short;
    on a tree that is one chain it keeps the whole chain less often than the rule."""
    path, token, _ = verify_tree(tokens, parents, Q, rng, P)
    return (path[:-1], tokens[path[-1]]) if path and path[-1] not in parents else (path, token)


def tree_residual_cached_by_target_row(tokens, parents, Q, rng, P=None):
    """verify_tree with each residual cached by q alone (the node's target row, then each residual
    after it), the sibling's draft law p left out of the key."""
    return tree(tokens, parents, Q, rng, P, update=cached_residual)



def tree_no_nodes_argmax(tokens, parents, Q, rng, P=None):
    """verify_tree, but a tree of no nodes (nothing matched) answers Q[0]'s likeliest token, not
    a draw from Q[0]."""
    if not len(tokens):
        return [], int(np.argmax(Q[0]))
    return tree(tokens, parents, Q, rng, P)


def tree_sharp_target_taken_as_certain(tokens, parents, Q, rng, P=None):
    """The target taken as certain wherever its likeliest token holds 0.95 (certain)."""
    return tree(tokens, parents, certain(Q), rng, P)


def close(q, p):
    """q [V] and p [V] np.allclose at atol 0.03: "the draft is the target"."""
    return np.allclose(p, q, rtol=0, atol=0.03)


def tree_close_draft_kept_untested(tokens, parents, Q, rng, P=None):
    """A child whose draft law P[c] is np.allclose to q (atol 0.03) kept without a test (as
    close_draft_kept_untested); siblings that are the draft's top tokens (P None) all tested."""
    return tree(tokens, parents, Q, rng, P, untested=lambda q, p: P is not None and close(q, p))


def tree_draft_top_five(tokens, parents, Q, rng, P=None):
    """Each node's draft law read as its top five tokens (top_five)."""
    return tree(tokens, parents, Q, rng, None if P is None else top_five(P))


def one_root_child_as_chain(tokens, parents, Q, laws, rng):
    """A tree whose root has one child walked as a chain, node i below node i - 1 (laws [m, V]:
    each node's draft law, None for the draft's top tokens) -> (path, next_token), or None for
    another tree."""
    if not (len(tokens) and list(parents).count(-1) == 1):
        return None
    for i, x in enumerate(tokens):
        p = np.eye(Q.shape[-1])[x] if laws is None else laws[i]
        if not rng.random() < min(1, Q[i][x] / p[x]):
            return list(range(i)), sample(residual(Q[i], p), rng)
    return list(range(len(tokens))), sample(Q[len(tokens)], rng)


def tree_one_root_child_as_chain(tokens, parents, Q, rng, P=None):
    """A root of one child taken for a chain (one_root_child_as_chain): right on every chain,
    wrong where that child has two children."""
    return (one_root_child_as_chain(tokens, parents, Q, P, rng)
            or tree(tokens, parents, Q, rng, P))


def greedy_walk(tokens, parents, Q):
    """Greedy decoding over a tree: the child holding each row's argmax, then the argmax."""
    node, path = -1, []
    while True:
        best = int(np.argmax(Q[node + 1]))
        kids = [c for c, parent in enumerate(parents) if parent == node and tokens[c] == best]
        if not kids:
            return path, best
        node = kids[0]
        path.append(node)


def tree_greedy_when_root_row_one_hot(tokens, parents, Q, rng, P=None):
    """A call whose root law Q[0] is one-hot taken as greedy throughout (greedy_walk)."""
    if Q[0].max() == 1.0:
        return greedy_walk(tokens, parents, Q)
    return tree(tokens, parents, Q, rng, P)


def tree_ties_found_by_value(tokens, parents, Q, rng, P=None):
    """The next token drawn with found_by_value."""
    return tree(tokens, parents, Q, rng, P, draw=lambda p, rng: found_by_value(p, rng.random()))


def tree_even_target_row_kept(tokens, parents, Q, rng, P=None):
    """A child below an even target row kept untested (the row taken for padding)."""
    return tree(tokens, parents, Q, rng, P, untested=lambda q, p: even(q))


def tree_siblings_against_q_below_depth_2(tokens, parents, Q, rng, P=None):
    """Once the path holds two nodes, a node's later children are judged against its q, not the
    residual of the children rejected before them (the residual itself kept right)."""
    return judged_against(tokens, parents, Q, rng, P, lambda n, depth: depth >= 2)


def tree_one_node_from_target(tokens, parents, Q, rng, P=None):
    """A tree of one node, rejected: the next token from q, not the residual ("a single draft is
    a plain rejection")."""
    return tree(tokens, parents, Q, rng, P, last_residual=len(parents) != 1)


def tree_top_eight(tokens, parents, Q, rng, P=None):
    """The extra token after a leaf drawn from its law cut to the eight likeliest."""
    path, token = verify_tree(tokens, parents, Q, rng, P=P)[:2]
    if path and path[-1] not in parents:  # a leaf: redraw its extra token from the cut law
        token = sample(likeliest(Q[path[-1] + 1], 8), rng)
    return path, token


def tree_draft_law_hoisted_when_wide(tokens, parents, Q, rng, P=None):
    """tree_draft_law_hoisted past V = 8 alone (siblings "from one law" on wide vocabularies):
    right at V <= 8."""
    if Q.shape[-1] <= 8:
        return verify_tree(tokens, parents, Q, rng, P=P)[:2]
    return tree_draft_law_hoisted(tokens, parents, Q, rng, P)


def tree_bonus_argmax_after_five_levels(tokens, parents, Q, rng, P=None):
    """A path of five nodes or more that ends at a leaf: the next token the leaf row's likeliest,
    not a draw (a chain of five levels shows it once every node is kept and one token more is
    read)."""
    path, token = verify_tree(tokens, parents, Q, rng, P=P)[:2]
    if len(path) >= 5 and path[-1] not in parents:
        token = int(np.argmax(Q[path[-1] + 1]))
    return path, token


def tree_siblings_against_q_in_large_calls(tokens, parents, Q, rng, P=None):
    """Past 64 probabilities (nodes times vocabulary) a node's later children are judged against
    its q, not the residual of the children rejected before them."""
    return judged_against(tokens, parents, Q, rng, P,
                          lambda n, depth: len(tokens) * Q.shape[-1] > 64)



def tree_second_child_against_its_row(tokens, parents, Q, rng, P=None):
    """Below a node kept after a rejected sibling, a second child is judged against the node's
    own target row, not the residual its first child left (a flag of the level above read
    wrongly)."""
    node, path, rejected_above = -1, [], False
    while True:
        row = q = Q[node + 1]
        kids = [i for i, parent in enumerate(parents) if parent == node]
        kept, rejected = None, False
        for c in kids:
            x = tokens[c]
            p = P[c] if P is not None else np.eye(len(q))[x]
            judged = row if rejected_above and P is not None else q
            if rng.random() < min(1, judged[x] / p[x]):
                kept = c
                break
            rejected, q = True, residual(q, p)
        if kept is None:
            return path, sample(q, rng)
        node, rejected_above = kept, rejected
        path.append(kept)


TREE = ["tree_second_child_against_its_row", "tree_ties_toward_draft", "tree_last_residual_skipped",
        "tree_draft_law_hoisted",
        "tree_inverse_cdf_side_left", "tree_children_as_a_run", "tree_leaf_dropped",
        "tree_ties_toward_draft_below_depth_2", "tree_residual_top_four",
        "tree_bonus_argmax_below_depth_4", "tree_fourth_sibling_against_q",
        "tree_fifth_sibling_kept_as_the_fourth", "tree_residual_cached_by_target_row",
        "tree_no_nodes_argmax", "tree_sharp_target_taken_as_certain",
        "tree_close_draft_kept_untested", "tree_draft_top_five", "tree_one_root_child_as_chain",
        "tree_greedy_when_root_row_one_hot", "tree_ties_found_by_value",
        "tree_even_target_row_kept", "tree_siblings_against_q_below_depth_2",
        "tree_one_node_from_target", "tree_top_eight", "tree_draft_law_hoisted_when_wide",
        "tree_bonus_argmax_after_five_levels", "tree_leaf_next_clamped_to_last",
        "tree_residual_clamped_to_last", "tree_siblings_against_q_in_large_calls"]


def without_replacement_laws(tokens, parents, P, renormalise=True):
    """Sequoia's law of each node [m, V]: P's row with the tokens of its earlier siblings removed,
    renormalised."""
    laws = np.array(P, dtype=float)  # [m, V]
    for i, parent in enumerate(parents):
        laws[i, [tokens[j] for j in range(i) if parents[j] == parent]] = 0
        if renormalise:
            laws[i] /= laws[i].sum()
    return laws


def without_replacement_not_renormalised(tokens, parents, Q, P, rng):
    """Sequoia's rule with the siblings drawn before removed from p but p not renormalised: child i
    is judged against (and its rejection subtracts) too small a law."""
    return tree(tokens, parents, Q, rng,
                without_replacement_laws(tokens, parents, P, renormalise=False))


def without_replacement_small_residual_guard(tokens, parents, Q, P, rng):
    """Sequoia's rule with the residual guarded: q kept when max(0, q - p) has mass below 0.05."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                update=guarded)


def without_replacement_residual_skipped_below_depth_3(tokens, parents, Q, P, rng):
    """Sequoia's rule; once the path holds three nodes, a rejected node leaves q as it was (no
    residual)."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                at=lambda n, depth: {"update": lambda q, p: q} if depth >= 3 else {})


def without_replacement_residual_top_four(tokens, parents, Q, P, rng):
    """Sequoia's rule with each residual cut to its four likeliest tokens (top_four)."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                update=top_four)


def without_replacement_inverse_cdf_side_left(tokens, parents, Q, P, rng):
    """Sequoia's rule with the next token drawn with searchsorted_left."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                draw=searchsorted_left)


def without_replacement_inverse_cdf_clamped_to_last(tokens, parents, Q, P, rng):
    """Sequoia's rule with the next token drawn with clamped_to_last."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                draw=clamped_to_last)


def without_replacement_residual_clamped_to_last(tokens, parents, Q, P, rng):
    """Sequoia's rule with the token drawn from a residual alone drawn with clamped_to_last: the
    near-1 case's root has one child, whose rejection leaves one draft's residual."""
    return tree_drawn_alone(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                            clamped_to_last, leaf=False)


def without_replacement_leaf_next_clamped_to_last(tokens, parents, Q, P, rng):
    """Sequoia's rule with the token after a kept leaf alone drawn with clamped_to_last."""
    return tree_drawn_alone(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                            clamped_to_last, leaf=True)


def without_replacement_siblings_as_a_run(tokens, parents, Q, P, rng):
    """Sequoia's rule with the siblings drawn before node i read as the nodes from its parent's
    first child to i - 1: right while siblings are numbered next to each other, wrong on a tree
    numbered depth first (tokens of other branches removed from p_i)."""
    laws = np.array(P, dtype=float)  # [m, V]
    for i, parent in enumerate(parents):
        laws[i, list(tokens[list(parents).index(parent):i])] = 0
        laws[i] /= laws[i].sum()
    return tree(tokens, parents, Q, rng, laws)


def without_replacement_last_two_removed(tokens, parents, Q, P, rng):
    """Sequoia's rule with only the last two earlier siblings' tokens removed from p_i (a short
    list of them kept): right up to three siblings, wrong from the fourth."""
    laws = np.array(P, dtype=float)  # [m, V]
    for i, parent in enumerate(parents):
        laws[i, [tokens[j] for j in range(i) if parents[j] == parent][-2:]] = 0
        laws[i] /= laws[i].sum()
    return tree(tokens, parents, Q, rng, laws)


def without_replacement_ties_toward_draft_from_the_third(tokens, parents, Q, P, rng):
    """Sequoia's rule with siblings accepted when u <= q/p from a node's third child on: at u = 0
    a third sibling the residual forbids is kept. Only a node of three children or more, two of
    them rejected at u = 0 (their tokens forbidden), shows it: the support case of four
    siblings."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                at=lambda n, depth: {"accept": lambda u, q, p: u <= q / p} if n >= 2 else {})


def without_replacement_leaf_dropped(tokens, parents, Q, P, rng):
    """Sequoia's rule whose path, when it reaches a leaf, stops a node short (tree_leaf_dropped)."""
    path, token = tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P))
    return (path[:-1], tokens[path[-1]]) if path and path[-1] not in parents else (path, token)


def without_replacement_residual_cached_by_target_row(tokens, parents, Q, P, rng):
    """Sequoia's rule with each residual cached by q alone (tree_residual_cached_by_target_row)."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                update=cached_residual)



def without_replacement_no_nodes_argmax(tokens, parents, Q, P, rng):
    """Sequoia's rule, but a tree of no nodes answers Q[0]'s likeliest token (as
    tree_no_nodes_argmax)."""
    if not len(tokens):
        return [], int(np.argmax(Q[0]))
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P))


def without_replacement_sharp_target_taken_as_certain(tokens, parents, Q, P, rng):
    """Sequoia's rule with the target taken as certain wherever its likeliest token holds 0.95."""
    return tree(tokens, parents, certain(Q), rng, without_replacement_laws(tokens, parents, P))


def without_replacement_close_draft_kept_untested(tokens, parents, Q, P, rng):
    """Sequoia's rule with a child whose law (its earlier siblings removed) is np.allclose to q
    (atol 0.03) kept without a test."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                untested=close)


def without_replacement_one_root_child_as_chain(tokens, parents, Q, P, rng):
    """Sequoia's rule, but a root of one child taken for a chain (one_root_child_as_chain)."""
    laws = without_replacement_laws(tokens, parents, P)
    return (one_root_child_as_chain(tokens, parents, Q, laws, rng)
            or tree(tokens, parents, Q, rng, laws))


def without_replacement_greedy_when_root_row_one_hot(tokens, parents, Q, P, rng):
    """Sequoia's rule, but a call whose root law is one-hot taken as greedy (greedy_walk)."""
    if Q[0].max() == 1.0:
        return greedy_walk(tokens, parents, Q)
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P))


def without_replacement_ties_found_by_value(tokens, parents, Q, P, rng):
    """Sequoia's rule with the next token drawn with found_by_value."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                draw=lambda p, rng: found_by_value(p, rng.random()))


def without_replacement_even_target_row_kept(tokens, parents, Q, P, rng):
    """Sequoia's rule, a child below an even target row kept untested."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                untested=lambda q, p: even(q))


def without_replacement_not_removed_below_depth_2(tokens, parents, Q, P, rng):
    """Sequoia's rule with the earlier siblings' tokens removed only down to depth 2: deeper
    siblings judged against P's row as it is."""
    laws, depth = without_replacement_laws(tokens, parents, P), []
    for parent in parents:
        depth.append(1 if parent < 0 else depth[parent] + 1)
    deep = np.array(depth) > 2  # [m]
    laws[deep] = np.asarray(P, dtype=float)[deep]
    return tree(tokens, parents, Q, rng, laws)


def without_replacement_one_node_from_target(tokens, parents, Q, P, rng):
    """Sequoia's rule, a tree of one node rejected: the next token from q, not the residual."""
    return tree(tokens, parents, Q, rng, without_replacement_laws(tokens, parents, P),
                last_residual=len(parents) != 1)


def without_replacement_as_iid_in_large_calls(tokens, parents, Q, P, rng):
    """Past 64 probabilities (nodes times vocabulary) siblings are judged as i.i.d. draws from P,
    not without replacement."""
    if len(tokens) * Q.shape[-1] > 64:
        return verify_tree(tokens, parents, Q, rng, P)[:2]
    return verify_without_replacement(tokens, parents, Q, P, rng)[:2]


WITHOUT_REPLACEMENT = ["without_replacement_not_renormalised",
                       "without_replacement_small_residual_guard",
                       "without_replacement_inverse_cdf_side_left",
                       "without_replacement_siblings_as_a_run", "without_replacement_leaf_dropped",
                       "without_replacement_last_two_removed",
                       "without_replacement_residual_top_four",
                       "without_replacement_ties_toward_draft_from_the_third",
                       "without_replacement_residual_skipped_below_depth_3",
                       "without_replacement_residual_cached_by_target_row",
                       "without_replacement_no_nodes_argmax",
                       "without_replacement_sharp_target_taken_as_certain",
                       "without_replacement_close_draft_kept_untested",
                       "without_replacement_one_root_child_as_chain",
                       "without_replacement_greedy_when_root_row_one_hot",
                       "without_replacement_ties_found_by_value",
                       "without_replacement_even_target_row_kept",
                       "without_replacement_not_removed_below_depth_2",
                       "without_replacement_one_node_from_target",
                       "without_replacement_leaf_next_clamped_to_last",
                       "without_replacement_residual_clamped_to_last",
                       "without_replacement_as_iid_in_large_calls"]


def batched(q, bonus, p, drafts, rng, accept=np.less, recover=recovered_probs,
            uniforms=lambda rng, shape: rng.random(shape), draw=sample_rows):
    """vLLM's contract, vectorised (as picospec.batched.rejection), with the acceptance test, its
    uniforms, the recovered law and its draw replaceable."""
    (B, k, _), rows, cols = p.shape, np.arange(len(p))[:, None], np.arange(p.shape[1])[None, :]
    # [B, k]
    accepted = accept(uniforms(rng, (B, k)), q[rows, cols, drafts] / p[rows, cols, drafts])
    n = np.where(accepted.all(1), k, accepted.argmin(1))  # [B]: first rejection
    at = np.minimum(n, k - 1)
    recovered = draw(recover(q[:, :k], p)[np.arange(B), at], rng.random(B))  # [B]
    out = np.where(np.arange(k + 1) < n[:, None], np.pad(drafts, ((0, 0), (0, 1))), -1)
    out[np.arange(B), n] = np.where(n == k, bonus[:, 0], recovered)
    return out


def batched_ties_toward_draft(target_with_bonus_probs, bonus_token_ids, draft_probs,
                              draft_token_ids, rng):
    """accepted = u <= q/p (vLLM's own kernel avoids the tie's effect by drawing float64
    uniforms)."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   accept=np.less_equal)


def batched_last_row_from_target(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                 draft_token_ids, rng):
    """In a batch of two rows or more, the last row's rejected draft replaced from q, not the
    residual (a loop over rows one short): right at one row, and on every other row."""
    def recover(q, p):  # [B, k, V] each
        out = recovered_probs(q, p)
        return np.concatenate([out[:-1], q[-1:]]) if len(q) > 1 else out

    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_pair_recovered_from_target(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                       draft_token_ids, rng):
    """A path for batches of exactly two rows (a pair kernel, say) that replaces a rejected draft
    from q, not the residual: right at one row and at three or more. Only the battery's rows drawn
    two and three a call show it."""
    recover = (lambda q, p: q) if len(draft_token_ids) == 2 else recovered_probs
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_graph_sizes_recovered_from_target(target_with_bonus_probs, bonus_token_ids,
                                              draft_probs, draft_token_ids, rng):
    """A path for batches of 4 to 512 rows (the sizes a server captures CUDA graphs for) that
    replaces a rejected draft from q, not the residual: right at one to three rows and past 512.
    The battery's rows drawn in batches of 4 to 512 show it."""
    recover = (lambda q, p: q) if 4 <= len(draft_token_ids) <= 512 else recovered_probs
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_partial_tile_from_target(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                     draft_token_ids, rng):
    """A kernel tiled by 256 rows whose last, partial tile (past 256 rows) replaces a rejected
    draft from q, not the residual: right in whole tiles and below 257 rows."""
    def recover(q, p):  # [B, k, V] each
        out, whole = recovered_probs(q, p), len(q) // 256 * 256
        return np.concatenate([out[:whole], q[whole:]]) if len(q) > 256 else out

    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_ties_toward_draft_from_the_fourth(target_with_bonus_probs, bonus_token_ids,
                                             draft_probs, draft_token_ids, rng):
    """accepted = u <= q/p from the fourth draft on only: the "uniforms at 0" case of 6 drafts
    catches it, the one of 3 cannot."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   accept=lambda u, r: np.where(np.arange(u.shape[1]) >= 3, u <= r, u < r))


def batched_residual_not_renormalised(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                      draft_token_ids, rng):
    """The recovered law max(0, q - p) plus its missing mass on token 0."""
    def recover(q, p):
        r = np.maximum(q - p, 0)
        r[..., 0] += 1 - r.sum(-1)
        return r
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_ratio_inverted(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng):
    """accepted with min(1, p/q)."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   accept=lambda u, ratio: u < 1 / ratio)


def batched_small_residual_guard(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                 draft_token_ids, rng):
    """The recovered law is q itself at positions where max(0, q - p) has mass below 0.05 (guarded,
    vectorised)."""
    def recover(q, p):
        r = np.maximum(q - p, 0)  # [B, k, V]
        small = r.sum(-1, keepdims=True) < 0.05  # [B, k, 1]
        return np.where(small, q, r / np.where(small, 1, r.sum(-1, keepdims=True)))
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_float32_small_residual_guard(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                         draft_token_ids, rng):
    """On float32 inputs alone, a recovered law of mass below 0.1 taken for float32 cancellation
    noise and swapped for q (float64 inputs are verified right)."""
    def recover(q, p):
        r = np.maximum(q - p, 0)  # [B, k, V]
        small = (r.sum(-1, keepdims=True) < 0.1) & (p.dtype == np.float32)  # [B, k, 1]
        return np.where(small, q, r / np.where(small, 1, r.sum(-1, keepdims=True)))
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def recovered_top(keep, start=0):
    """recovered_probs with each law from draft `start` on cut to its `keep` likeliest tokens
    (top_four's cut, vectorised)."""
    def recover(q, p):  # [B, k, V] each
        r = recovered_probs(q, p)
        late = r[:, start:]  # [B, k - start, V]: a view
        np.put_along_axis(late, np.argsort(-late, -1, kind="stable")[..., keep:], 0, -1)
        return r / r.sum(-1, keepdims=True)
    return recover


def batched_residual_top_four(target_with_bonus_probs, bonus_token_ids, draft_probs,
                              draft_token_ids, rng):
    """The recovered law cut to its four likeliest tokens in every row (top_four, vectorised)."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recovered_top(4))


def batched_recovered_argmax_from_the_fourth(target_with_bonus_probs, bonus_token_ids,
                                             draft_probs, draft_token_ids, rng):
    """A rejection at the fourth draft or later recovers the residual's likeliest token."""
    q, bonus, p, drafts = target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids
    out = rejection_sample(q, bonus, p, drafts, rng=rng)  # [B, k + 1]
    n = (out >= 0).sum(1) - 1  # [B]: drafts kept
    late = (n >= 3) & (n < drafts.shape[1])  # [B]: rejected at the fourth draft or later
    rows = np.flatnonzero(late)
    out[rows, n[rows]] = recovered_probs(q[rows, n[rows]], p[rows, n[rows]]).argmax(-1)
    return out


def batched_close_rows_kept_untested(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                     draft_token_ids, rng):
    """A draft whose row is np.allclose to the target's (atol 0.03) kept without a test."""
    q, p = target_with_bonus_probs, draft_probs
    close = (np.abs(q[:, :p.shape[1]] - p) <= 0.03).all(-1)  # [B, k]
    return batched(q, bonus_token_ids, p, draft_token_ids, rng,
                   accept=lambda u, ratio: close | (u < ratio))


def batched_ties_toward_draft_by_uniform(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                         draft_token_ids, rng):
    """batched_ties_toward_draft with its uniforms from rng.uniform(size=...) instead of
    rng.random(...)."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   accept=np.less_equal, uniforms=lambda rng, shape: rng.uniform(size=shape))


def batched_inverse_cdf_strict(target_with_bonus_probs, bonus_token_ids, draft_probs,
                               draft_token_ids, rng):
    """The recovered token counted as the entries with cdf < u (not <=): u = 0 counts none and
    gives token 0, whatever its probability."""
    def draw(probs, u):  # probs [B, V], u [B] -> token ids [B]
        cdf = np.cumsum(probs, axis=-1)  # [B, V]
        return (cdf < (u * cdf[:, -1])[:, None]).sum(-1)
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   draw=draw)


def batched_inverse_cdf_clamped_to_last(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                        draft_token_ids, rng):
    """The recovered token counted as the entries with cdf <= u, u unscaled, clamped to the last
    token: u = 1 - 2^-53 past a cdf that ends short of 1 gives token V - 1, whatever its
    probability."""
    def draw(probs, u):  # probs [B, V], u [B] -> token ids [B]
        cdf = np.cumsum(probs, axis=-1)  # [B, V]
        return np.minimum((cdf <= u[:, None]).sum(-1), probs.shape[-1] - 1)
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   draw=draw)


def batched_recovered_by_overlap(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                 draft_token_ids, rng):
    """The recovered law max(0, q - p) divided by 1 - sum min(p, q) (its mass as one minus the
    overlap) and counted as the entries with cdf <= u, clamped to the last token: where q sums
    short of 1 that divisor is larger than the mass, the cdf ends short of 1, and u = 1 - 2^-53
    gives token V - 1, whatever its probability."""
    def recover(q, p):  # [B, k, V] each
        return np.maximum(q - p, 0) / (1 - np.minimum(p, q).sum(-1, keepdims=True))

    def draw(probs, u):  # probs [B, V], u [B] -> token ids [B]
        return np.minimum((np.cumsum(probs, -1) <= u[:, None]).sum(-1), probs.shape[-1] - 1)
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover, draw=draw)


def batched_first_row_equal_kept_whole(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                       draft_token_ids, rng):
    """Rows whose target laws are all one-hot verified greedily (right there); else a row whose
    first position's laws are equal taken for "draft = target": all its drafts kept untested."""
    q, bonus, p, drafts = target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids
    out = rejection_sample(q, bonus, p, drafts, rng=rng)  # [B, k + 1]
    k = p.shape[1]
    for b in range(len(p)):
        if one_hot_target(q[b]):
            greedy = q[b].argmax(-1)  # [k + 1]
            n = next((t for t in range(k) if drafts[b, t] != greedy[t]), k)
            out[b] = np.r_[drafts[b, :n], greedy[n], np.full(k - n, -1)]
        elif np.array_equal(p[b, 0], q[b, 0]):
            out[b] = np.r_[drafts[b], bonus[b, 0]]
    return out


def batched_equal_rows_deduplicated(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                    draft_token_ids, rng):
    """A row whose inputs equal the row before's is given that row's answer (a batch deduplicated
    to save work): each row alone follows the target's law, and neighbours are not independent."""
    q, bonus, p, drafts = target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids
    out = rejection_sample(q, bonus, p, drafts, rng=rng)  # [B, k + 1]
    for b in range(1, len(out)):
        if ((drafts[b] == drafts[b - 1]).all() and bonus[b, 0] == bonus[b - 1, 0]
                and np.array_equal(q[b], q[b - 1]) and np.array_equal(p[b], p[b - 1])):
            out[b] = out[b - 1]
    return out


def batched_one_row_reuses_uniform(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                   draft_token_ids, rng):
    """A path for a batch of one row that walks its drafts one by one and draws the recovered
    token with the uniform that rejected the draft (u >= q/p: the top of the residual's CDF only);
    a batch of two rows or more goes through rejection_sample, right. Only the battery's rows
    drawn a call each show it."""
    q, bonus, p, drafts = target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids
    if len(drafts) != 1:
        return rejection_sample(q, bonus, p, drafts, rng=rng)
    out = np.full((1, drafts.shape[1] + 1), -1, dtype=np.int64)  # [1, k + 1]
    for t, x in enumerate(drafts[0]):
        u = rng.random()
        if not u < min(1, q[0, t, x] / p[0, t, x]):
            out[0, t] = sample_rows(recovered_probs(q[0, t], p[0, t]), u)
            return out
        out[0, t] = x
    out[0, -1] = bonus[0, 0]
    return out


def batched_bonus_dropped(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                          rng):
    """picospec's rejection sampler with its bonus column set to -1: a row that kept all k drafts
    ends at its last draft (lossless, one token a step short)."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    out[:, -1] = -1  # [B]
    return out


def batched_recovered_cached_by_target_row(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                           draft_token_ids, rng):
    """Each row's recovered law cached by its target row alone (cached_residual), the draft row
    left out of the key."""
    def recover(q, p):  # [B, k, V] each -> [B, k, V]
        return np.array([[cached_residual(*rows) for rows in zip(*pair)] for pair in zip(q, p)])
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_sharp_target_taken_as_certain(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                          draft_token_ids, rng):
    """The target taken as certain wherever its likeliest token holds 0.95 (certain)."""
    return rejection_sample(certain(target_with_bonus_probs), bonus_token_ids, draft_probs,
                            draft_token_ids, rng=rng)


def batched_draft_top_five(target_with_bonus_probs, bonus_token_ids, draft_probs,
                           draft_token_ids, rng):
    """Each draft row read as its top five tokens (top_five)."""
    return rejection_sample(target_with_bonus_probs, bonus_token_ids, top_five(draft_probs),
                            draft_token_ids, rng=rng)


def batched_uniforms_tiled_past_six(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                    draft_token_ids, rng):
    """Uniforms drawn for at most six positions (a buffer of MAX_SPEC = 6) and tiled past them:
    draft 7 reads draft 1's uniform."""
    def uniforms(rng, shape):
        u = rng.random((shape[0], min(shape[1], 6)))  # [B, min(k, 6)]
        return np.tile(u, (1, -(-shape[1] // max(u.shape[1], 1))))[:, :shape[1]]
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   uniforms=uniforms)


def batched_greedy_rows_by_first_row(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                     draft_token_ids, rng):
    """A batch row whose first target law is one-hot decoded greedily: drafts kept while each is
    its row's argmax, then the argmax."""
    q, drafts = target_with_bonus_probs, draft_token_ids
    out = rejection_sample(q, bonus_token_ids, draft_probs, drafts, rng=rng)  # [B, k + 1]
    (B, k), top = drafts.shape, q.argmax(-1)  # top [B, k + 1]
    match = drafts == top[:, :k]  # [B, k]
    n = np.where(match.all(1), k, match.argmin(1))  # [B]
    greedy = np.where(np.arange(k + 1) < n[:, None], np.pad(drafts, ((0, 0), (0, 1))), -1)
    greedy[np.arange(B), n] = top[np.arange(B), n]
    rows = q[:, 0].max(-1) == 1.0  # [B]
    out[rows] = greedy[rows]
    return out


def batched_ties_found_by_value(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                draft_token_ids, rng):
    """The recovered tokens drawn with found_by_value, row by row."""
    def draw(laws, u):  # [B, V], [B] -> [B]
        return np.array([found_by_value(law, v) for law, v in zip(laws, u)], dtype=np.int64)
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   draw=draw)


def batched_even_target_row_kept(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                 draft_token_ids, rng):
    """A draft whose target row has all entries equal kept untested (the row taken for
    padding)."""
    q = target_with_bonus_probs[:, :-1]  # [B, k, V]
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   accept=lambda u, ratio: (u < ratio) | (q.max(-1) == q.min(-1)))


def batched_one_draft_residual_on_its_support(target_with_bonus_probs, bonus_token_ids,
                                              draft_probs, draft_token_ids, rng):
    """One draft a row (k = 1): the recovered law kept to the tokens the draft could propose,
    where it has mass there."""
    def recover(q, p):  # [B, k, V] each -> [B, k, V]
        r = recovered_probs(q, p)
        if p.shape[1] != 1:
            return r
        kept = np.where(p > 0, np.maximum(q - p, 0), 0.0)  # [B, 1, V]
        mass = kept.sum(-1, keepdims=True)  # [B, 1, 1]
        return np.where(mass > 0, kept / np.where(mass > 0, mass, 1), r)
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recover)


def batched_bonus_top_eight(target_with_bonus_probs, bonus_token_ids, draft_probs,
                            draft_token_ids, rng):
    """A row that keeps every draft draws its own extra token from the bonus row cut to its eight
    likeliest, in place of the caller's."""
    out = batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng)
    k = draft_token_ids.shape[1]
    for b in np.flatnonzero(out[:, k] >= 0):
        out[b, k] = sample(likeliest(target_with_bonus_probs[b, k], 8), rng)
    return out


def batched_wide_first_draft_row(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                 draft_token_ids, rng):
    """Past V = 8, every position's draft law read as the first position's (draft_probs[:, :1],
    broadcast): right at V <= 8."""
    p = draft_probs
    if p.shape[-1] > 8:
        p = np.repeat(p[:, :1], p.shape[1], axis=1)  # [B, k, V]
    return batched(target_with_bonus_probs, bonus_token_ids, p, draft_token_ids, rng)


def batched_residual_top_two_from_the_fourth(target_with_bonus_probs, bonus_token_ids,
                                             draft_probs, draft_token_ids, rng):
    """From the fourth draft on, the recovered law cut to its two likeliest tokens."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recovered_top(2, start=3))


def batched_residual_top_two_from_the_fifth(target_with_bonus_probs, bonus_token_ids,
                                            draft_probs, draft_token_ids, rng):
    """From the fifth draft on, the recovered law cut to its two likeliest tokens."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=recovered_top(2, start=4))


def batched_recovered_argmax_given_seven_drafts(target_with_bonus_probs, bonus_token_ids,
                                                draft_probs, draft_token_ids, rng):
    """Given seven drafts a row or more, a rejected draft recovers the residual's likeliest
    token."""
    q, bonus, p, drafts = target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids
    out = rejection_sample(q, bonus, p, drafts, rng=rng)  # [B, k + 1]
    if drafts.shape[1] < 7:
        return out
    n = (out >= 0).sum(1) - 1  # [B]: drafts kept
    rows = np.flatnonzero(n < drafts.shape[1])  # rejected somewhere
    out[rows, n[rows]] = recovered_probs(q[rows, n[rows]], p[rows, n[rows]]).argmax(-1)
    return out


def batched_recovered_from_target_in_large_rows(target_with_bonus_probs, bonus_token_ids,
                                                draft_probs, draft_token_ids, rng):
    """Rows of more than 32 draft probabilities (k times vocabulary) have a rejected draft
    replaced from q, not the residual."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   recover=lambda q, p: q if q.shape[1] * q.shape[2] > 32 else
                   recovered_probs(q, p))


REJECTION = ["batched_ties_toward_draft", "batched_residual_not_renormalised",
             "batched_ratio_inverted",
             "batched_small_residual_guard", "batched_ties_toward_draft_by_uniform",
             "batched_inverse_cdf_strict", "batched_equal_rows_deduplicated",
             "batched_one_row_reuses_uniform", "batched_bonus_dropped",
             "batched_ties_toward_draft_from_the_fourth", "batched_last_row_from_target",
             "batched_pair_recovered_from_target", "batched_graph_sizes_recovered_from_target",
             "batched_partial_tile_from_target",
             "batched_residual_top_four", "batched_recovered_argmax_from_the_fourth",
             "batched_close_rows_kept_untested", "batched_recovered_cached_by_target_row",
             "batched_sharp_target_taken_as_certain", "batched_draft_top_five",
             "batched_uniforms_tiled_past_six", "batched_greedy_rows_by_first_row",
             "batched_ties_found_by_value", "batched_even_target_row_kept",
             "batched_one_draft_residual_on_its_support", "batched_bonus_top_eight",
             "batched_wide_first_draft_row", "batched_residual_top_two_from_the_fourth",
             "batched_residual_top_two_from_the_fifth",
             "batched_recovered_argmax_given_seven_drafts", "batched_recovered_by_overlap",
             "batched_first_row_equal_kept_whole", "batched_float32_small_residual_guard",
             "batched_recovered_from_target_in_large_rows"]


# Broken where the law cannot show it: each is lossless in what it emits, and breaks the contract
# a caller relies on. The battery fails its first case with the reason ("error").

def bonus_skipped(drafts, P, Q, rng):
    """All K accepted: next_token = -1 for "no extra token" instead of one drawn from Q[K]. The
    tokens kept still follow the target's law, but a caller that appends next_token appends -1."""
    n, token, _ = verify_chain(drafts, P, Q, rng)
    return n, -1 if n == len(drafts) else token


def residual_in_place(drafts, P, Q, rng):
    """The residual computed in the caller's Q[t] (q -= p; clip; divide): its draw is right, and
    the target's laws the caller holds are overwritten."""
    for t, x in enumerate(drafts):
        if not rng.random() < min(1, Q[t][x] / P[t][x]):
            q = Q[t]  # [V] a view: the bug
            q -= P[t]
            np.maximum(q, 0, out=q)
            q /= q.sum()
            return t, sample(q, rng)
    return len(drafts), sample(Q[-1], rng)


def inputs_frozen(drafts, P, Q, rng):
    """picospec's verifier after making P and Q read-only ("to be safe"): lossless, and the
    caller can no longer write into its own arrays."""
    P.flags.writeable = Q.flags.writeable = False
    return verify_chain(drafts, P, Q, rng)[:2]


def tree_bonus_skipped_at_a_leaf(tokens, parents, Q, rng, P=None):
    """A path that ends at a leaf (no children to try) returns next_token = -1 instead of a token
    drawn from the leaf's row of Q."""
    path, token, _ = verify_tree(tokens, parents, Q, rng, P)
    return path, -1 if path and path[-1] not in parents else token


def batched_padded_with_minus_two(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                  draft_token_ids, rng):
    """picospec's rejection sampler with -2, not -1, after the first rejection: a caller that
    looks for -1 reads -2 as a token."""
    out = rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                           rng=rng)
    return np.where(out < 0, -2, out)


def batched_one_row_squeezed(target_with_bonus_probs, bonus_token_ids, draft_probs,
                             draft_token_ids, rng):
    """picospec's rejection sampler with its output squeezed (np.squeeze, meant for a size-1
    axis elsewhere): a batch of one comes back as [k + 1], not [1, k + 1]."""
    return np.squeeze(rejection_sample(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                       draft_token_ids, rng=rng))


def batched_input_reshaped_in_place(target_with_bonus_probs, bonus_token_ids, draft_probs,
                                    draft_token_ids, rng):
    """picospec's rejection sampler, the caller's bonus_token_ids flattened in place
    (`.shape = (-1,)`, to index it as a vector): its bytes are the same, and the caller's [B, 1]
    is now [B]."""
    bonus_token_ids.shape = (-1,)
    return rejection_sample(target_with_bonus_probs, bonus_token_ids[:, None], draft_probs,
                            draft_token_ids, rng=rng)


def first_rejection_by_argmax(drafts, P, Q, rng):
    """The acceptance tests vectorised, the first rejection found as np.argmax of the rejected
    tests (0 when none is, then checked): np.argmax of an empty array raises ValueError, so a
    caller's call with no drafts (K = 0) raises."""
    t = np.arange(len(drafts))  # [K]
    rejected = rng.random(len(drafts)) >= np.minimum(1, Q[t, drafts] / P[t, drafts])  # [K]
    n = int(np.argmax(rejected))
    if not rejected[n]:  # none rejected: all K kept
        return len(drafts), sample(Q[len(drafts)], rng)
    return n, sample(residual(Q[n], P[n]), rng)


def no_drafts_n_minus_one(drafts, P, Q, rng):
    """Right with drafts; with none it returns n = -1 ("nothing to verify") and a token from
    Q[0]: a caller that keeps drafts[:n] keeps drafts[:-1]."""
    n, token = verify_chain(drafts, P, Q, rng)[:2]
    return (-1 if not drafts else n), token


def no_drafts_own_generator(drafts, P, Q, rng):
    """Right with drafts; with none the next token drawn by NumPy's global generator, out of the
    support cases' reach: their calls with no drafts answer differently when repeated."""
    if not drafts:
        return 0, int(np.random.choice(len(Q[0]), p=Q[0]))
    return verify_chain(drafts, P, Q, rng)[:2]


# contract, the case it fails, what its error says
CONTRACT = {"bonus_skipped": ("chain", 2, "next_token = -1: expected a token id in [0, 3)"),
            "residual_in_place": ("chain", 2, "the sampler changed its input Q in place"),
            "inputs_frozen": ("chain", 2, "the sampler made its input P read-only"),
            "first_rejection_by_argmax": ("chain", 5, "ValueError: attempt to get argmax of an "
                                                      "empty sequence"),
            "no_drafts_n_minus_one": ("chain", 5, "n_accepted = -1 with K = 0 drafts"),
            "tree_bonus_skipped_at_a_leaf": ("tree", 2, "next_token = -1"),
            "batched_padded_with_minus_two": ("rejection", 2, "pads with -1 after the last token"),
            "batched_one_row_squeezed": ("rejection", 2, "expected integer ids [1, 2]"),
            "batched_input_reshaped_in_place": ("rejection", 2, "the sampler changed its input "
                                                                "bonus_token_ids in place")}


def ties_toward_draft_own_generator(drafts, P, Q, rng):
    """ties_toward_draft with its uniforms from NumPy's global generator, not rng: the support cases
    cannot hand it u = 0, and say so ("untested"), not "pass". (The tie itself has probability 2^-53
    a draft with float64 uniforms, 2^-24 with float32 ones as torch.rand draws.)"""
    return chain(drafts, P, Q, rng, accept=lambda u, q, p: u <= q / p,
                 uniform=lambda rng: np.random.random(),
                 draw=lambda p, rng: int(np.searchsorted(np.cumsum(p), np.random.random() *
                                                         np.sum(p), side="right")))


def inverse_cdf_side_left_partly_own_generator(drafts, P, Q, rng):
    """inverse_cdf_side_left with its acceptance uniforms from rng and the uniforms of its draws
    from NumPy's global generator: rng's extreme uniforms reach only the acceptance tests, which
    are right, and never the draw whose u = 0 lands on token 0."""
    return chain(drafts, P, Q, rng, draw=lambda p, rng: int(np.searchsorted(np.cumsum(p),
                                                                            np.random.random())))


def batched_ties_toward_draft_partly_own_generator(target_with_bonus_probs, bonus_token_ids,
                                                   draft_probs, draft_token_ids, rng):
    """batched_ties_toward_draft with its acceptance uniforms from NumPy's global generator and
    the recovered tokens' from rng: the tie u == q/p is never handed u = 0."""
    return batched(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng,
                   accept=np.less_equal, uniforms=lambda rng, shape: np.random.random(shape))

