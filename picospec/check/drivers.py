"""Run a sampler of each contract on a case until every row holds N new tokens: drafts from the toy
draft, laws from the toy target, each output checked against the contract. Shapes: V vocabulary, N
new tokens, K (k) drafts, m tree nodes, W tokens a step emits at most, rows the unfinished ones.
"""
import copy
import itertools
from collections import Counter

import numpy as np

from picospec.check.cases import PROMPT
from picospec.batched.rejection import sample_rows


class ContractError(Exception):
    """The sampler's output breaks its contract (shape, token range, path)."""


class LowestUniforms(np.random.Generator):
    """A Generator whose uniforms are all 0.0: a right sampler still never emits a token the target
    forbids; one that breaks the tie u == q/p toward the draft does."""
    # the calls of random() (choice() calls it) and uniform() since run() set it to 0, in this
    # Generator, those it spawned and subclasses around it: 0, the uniforms came from elsewhere
    draws = 0
    # of the calls run() repeated (repeated()), those whose answer changed: some draws are not rng's
    varied = 0

    def random(self, size=None, dtype=np.float64, out=None):  # 0.0, zeros of shape size, or out
        LowestUniforms.draws += 1
        return filled(0, size, dtype, out)

    # Generator.uniform does not call random(): its 0.0 maps to low
    def uniform(self, low=0.0, high=1.0, size=None):  # low, broadcast with high (and to size)
        LowestUniforms.draws += 1
        return filled(np.broadcast_arrays(np.asarray(low, float), high)[0], size)


class HighestUniforms(np.random.Generator):
    """A Generator whose uniforms are all the largest below 1 (1 - 2^-53 in float64): an inverse
    CDF run past the end of a law that rounding left below 1 emits a token out of range or one the
    target forbids; a right sampler does neither. draws, varied: as LowestUniforms'."""
    draws = varied = 0

    def random(self, size=None, dtype=np.float64, out=None):  # 1 - ulp, of shape size, or out
        HighestUniforms.draws += 1
        one = np.dtype(dtype if out is None else out.dtype).type(1)
        return filled(np.nextafter(one, 0 * one), size, one.dtype, out)

    def uniform(self, low=0.0, high=1.0, size=None):  # below high, as near it as rounding lets
        HighestUniforms.draws += 1
        low, high = np.broadcast_arrays(np.asarray(low, float), np.asarray(high, float))
        return filled(np.minimum(low + (high - low) * np.nextafter(1.0, 0.0),
                                 np.nextafter(high, low)), size)


def filled(value, size, dtype=np.float64, out=None):
    """Generator.random()'s or .uniform()'s answer, every entry `value`."""
    # a float (no size, value a scalar), a new array of shape size (or value's), or out filled
    value = np.asarray(value, dtype=dtype)
    if out is not None:
        out[...] = value
        return out
    if size is None and value.ndim == 0:
        return float(value)
    if value.ndim == 0:  # the array below, made faster: a sampler may draw at every row
        return np.full(size, value, dtype=dtype)
    return np.array(np.broadcast_to(value, value.shape if size is None else size), dtype=dtype)


def draft_chains(D, T, last2, last1, u):
    """K drafts after contexts last2, last1 [rows], by uniforms u [rows, K] -> drafts [rows, K],
    P [rows, K, V], Q [rows, K + 1, V]."""
    drafts, P, Q = [], [], [T[last2, last1]]
    for t in range(u.shape[1]):
        p = D[last2, last1]  # [rows, V]
        token = sample_rows(p, u[:, t])  # [rows]
        drafts.append(token)
        P.append(p)
        last2, last1 = last1, token
        Q.append(T[last2, last1])  # [rows, V]
    return np.stack(drafts, 1), np.stack(P, 1), np.stack(Q, 1)


def run(fn, contract, case, n, seed, kept=None):
    """n sequences of fn on this case -> new tokens [n, N]; seed: a tuple of ints."""
    # kept: a list the chain and rejection steps (and tree steps on a tree that is one chain)
    # extend with (the token rule's chance of keeping every draft [calls], whether the call kept
    # every draft [calls])
    T, D = case.laws()  # [V, V, V] each
    rng = np.random.default_rng([*seed, 0])  # the checker's draws: drafts, bonus tokens
    # the sampler's own draws: extreme uniforms in a support case
    extreme = LowestUniforms if case.lowest else HighestUniforms if case.highest else None
    fn_rng = (extreme or np.random.Generator)(np.random.PCG64([*seed, 1]))
    if getattr(case, "wide", 0):  # the exercises' own cases have no `wide`
        fn = widened(fn, contract, case.V, case.wide)
    if extreme:
        extreme.draws = extreme.varied = 0  # the uniforms this run's sampler draws, counted
        fn = repeated(fn, contract, fn_rng, seed)
    L = len(PROMPT)
    seqs = np.zeros((n, L + case.N), dtype=np.int64)  # [n, L + N]: the prompt, then new tokens
    seqs[:, :L] = PROMPT
    length = np.full(n, L)  # [n]
    while (rows := np.flatnonzero(length < L + case.N)).size:  # [rows]: the unfinished ones
        last1 = seqs[rows, length[rows] - 1]  # [rows]
        last2 = np.where(length[rows] >= 2, seqs[rows, length[rows] - 2], 0)  # [rows]
        # the rejection contract's calls: each row of the first alone(n) sequences by itself (a
        # batch of one), the next in_small_batches(n) two and three rows a call in turn, the next
        # in_medium_batches(n) in batches of MEDIUM's sizes in turn, then the others together
        ones, few = alone(contract, n), in_small_batches(contract, n)
        cuts = tuple(int(np.searchsorted(rows, m))
                     for m in (ones, ones + few, ones + few + in_medium_batches(contract, n)))
        # [rows, W]: new tokens, then -1
        new = STEPS[contract](fn, case, T, D, last2, last1, rng, fn_rng,
                              [] if kept is None else kept, cuts)
        count = (new >= 0).sum(1)  # [rows]
        if (count < 1).any() or (new >= case.V).any():
            row = int(np.flatnonzero((count < 1) | (new >= case.V).any(1))[0])
            raise ContractError(f"a step emitted {new[row][new[row] >= 0].tolist()}: expected 1 or "
                                f"more token ids in [0, {case.V})")
        at = length[rows, None] + np.arange(new.shape[1])  # [rows, W]: where each new token goes
        keep = (new >= 0) & (at < seqs.shape[1])  # [rows, W]
        seqs[np.broadcast_to(rows[:, None], at.shape)[keep], at[keep]] = new[keep]
        length[rows] = np.minimum(length[rows] + count, seqs.shape[1])
    return seqs[:, L:L + case.N]  # [n, N]


def wide_ids(V, W):
    """The ids [V] a wide case hands its V tokens as, spread over [0, W), the last id W - 1 among
    them. Example: wide_ids(12, 4096)[:3] -> three ids of 4,096, in no order."""
    ids = np.random.default_rng(W).permutation(W)[:V]
    if W - 1 not in ids:
        ids[-1] = W - 1
    return ids


def widened(fn, contract, V, W):
    """fn called as a case of V tokens would call it, handed them as wide_ids(V, W) out of a
    vocabulary of W, every other id of probability 0 in P and Q; its tokens read back as the
    case's own. A sampler that takes another path for large calls takes it here."""
    ids = wide_ids(V, W)  # [V]
    back = np.full(W, -1, dtype=np.int64)  # [W]: the case's token of each id, or -1
    back[ids] = np.arange(V)

    def wide(laws):  # [..., V] -> [..., W], zeros but at ids
        out = np.zeros(laws.shape[:-1] + (W,), dtype=laws.dtype)
        out[..., ids] = laws
        return out

    def narrow(tokens, floats=False):
        """The sampler's ids (a token; an array of them in the rejection contract) as the case's
        tokens; what is no id (-1, a fraction, not a number) stays as it is, for its step to
        name. floats: a whole float (2.0) is an id, as the step would take it."""
        try:
            a = np.asarray(tokens)
        except ValueError:  # ragged lists
            return tokens
        if floats and a.dtype.kind == "f" and np.isfinite(a).all() and (a == np.round(a)).all():
            a = a.astype(np.int64)
        if a.dtype.kind not in "iu":
            return tokens
        if (a >= W).any():
            raise ContractError(f"token {int(a[a >= W].flat[0])}: expected ids in [0, {W:,}) (the "
                                f"case's {V} tokens were handed as ids of a vocabulary of {W:,})")
        held = a >= 0
        mapped = back[a[held]]
        if (mapped < 0).any():
            raise ContractError(f"token {int(a[held][mapped < 0][0])}: P and Q give it "
                                f"probability 0 (the case's {V} tokens were handed as ids of a "
                                f"vocabulary of {W:,}, the others 0)")
        out = a.copy()
        out[held] = mapped
        return out if a.ndim else out.item()

    def kept_whole(names, *inputs):  # fn on the wide inputs, left as they were (as each step's)
        *inputs, run = inputs
        before = snapshot(inputs)
        out = run(*inputs)
        unchanged(before, inputs, names)
        return out

    if contract == "chain":
        def call(drafts, P, Q, rng):
            out = kept_whole(("drafts", "P", "Q"), ids[drafts].tolist(), wide(P), wide(Q),
                             lambda d, p, q: fn(d, p, q, rng))
            n, token = pair(out, "(n_accepted, next_token)")
            return n, narrow(token, floats=True)
    elif contract == "rejection":
        def call(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, rng):
            return narrow(kept_whole(
                ("target_with_bonus_probs", "bonus_token_ids", "draft_probs", "draft_token_ids"),
                wide(target_with_bonus_probs), ids[bonus_token_ids], wide(draft_probs),
                ids[draft_token_ids], lambda q, b, p, d: fn(q, b, p, d, rng=rng)))
    else:
        def call(tokens, parents, Q, *rest, P=None):
            P = rest[0] if contract == "tree_without_replacement" else P
            p = None if P is None else wide(P)
            if contract == "tree":  # fn(tokens, parents, Q, rng, P=P)
                run = lambda t, s, q, p: fn(t, s, q, rest[0], P=p)  # noqa: E731
            else:  # fn(tokens, parents, Q, P, rng)
                run = lambda t, s, q, p: fn(t, s, q, p, rest[1])  # noqa: E731
            out = kept_whole(("tokens", "parents", "Q", "P"), ids[tokens].tolist(), parents,
                             wide(Q), p, run)
            path, token = pair(out, "(path, next_token)")
            return path, narrow(token, floats=True)
    return call


# the calls of a support case made twice more on copies of their inputs: the first 500 (all of a
# small run's, where a draw elsewhere may change few answers), every 20th (chain, tree: one a row,
# over all steps) and, in the rejection contract, every batch of 2 rows or more (a step's rows but
# those drawn alone)
REPEATED = (500, 20)


def repeated(fn, contract, fn_rng, seed):
    """fn whose calls numbered by REPEATED are made again on copies of their inputs, fn_rng
    replaced by extreme Generators of other seeds: a sampler that draws all its random numbers
    from them answers the same; type(fn_rng).varied counts the calls whose answer changed."""
    def call(*args, **kwargs):
        call.calls += 1
        batch = contract == "rejection" and len(args[0]) > 1
        if call.calls > REPEATED[0] and call.calls % REPEATED[1] and not batch:
            return fn(*args, **kwargs)
        # copies of the inputs before fn can change them, the rng left out
        copies = [copy.deepcopy(([a for a in args if a is not fn_rng],
                                 {n: a for n, a in kwargs.items() if a is not fn_rng}))
                  for _ in range(2)]
        out = fn(*args, **kwargs)
        want = answer(out, contract)  # before another call can overwrite a buffer it returned
        for stream, (a, k) in enumerate(copies, 2):
            fresh = type(fn_rng)(np.random.PCG64([*seed, stream, call.calls]))
            a = iter(a)
            again = fn(*[fresh if x is fn_rng else next(a) for x in args],
                       **{n: k.get(n, fresh) for n in kwargs})
            if answer(again, contract) != want:
                type(fn_rng).varied += 1
                break
        return out
    call.calls = 0
    return call


def answer(out, contract):
    """What a call returned, as nested lists to compare (None when it is not a contract's)."""
    try:
        return [np.asarray(x).tolist() for x in ([out] if contract == "rejection" else out[:2])]
    except Exception:  # its step raises ContractError on it
        return None


def alone(contract, n):
    """How many of a case's n sequences are drawn a call each: a tenth in the rejection contract,
    whose batches are otherwise never of one row (the other contracts call a row at a time)."""
    return n // 10 if contract == "rejection" else 0


def in_small_batches(contract, n):
    """How many sequences, after those drawn alone, are drawn two and three rows a call in turn:
    as many (rejection), where a row's place in a batch and a batch of two rows are rare."""
    return alone(contract, n)


SMALL = (2, 3)  # the sizes of the small batches, in turn


def in_medium_batches(contract, n):
    """How many sequences, after the small batches, come in batches of MEDIUM's sizes: a fifth
    (rejection)."""
    return n // 5 if contract == "rejection" else 0


# the sizes of the medium batches, in turn, large and small alternating (a fifth of 4,000
# sequences reaches 255): serving systems take another path by a batch's size (CUDA graphs
# captured for batches of up to 512 rows), and a kernel tiled by 32, 64 or 256 rows leaves most
# of a tile partial at a size one short of a multiple of it
MEDIUM = (511, 4, 383, 5, 255, 7, 127, 9, 63, 17, 31, 33, 100, 512)


def pair(out, want):
    """The sampler's return value as its two parts, or ContractError naming what came back."""
    try:
        first, second = out[0], out[1]
    except (TypeError, IndexError, KeyError):
        raise ContractError(f"the sampler returned {out!r:.60}: expected {want}") from None
    return first, second


def whole(v, what):
    """v as an int when it is a whole number (an integer type, or a float such as 2.0)."""
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: inf
        raise ContractError(f"{what} = {v!r:.40}: expected an integer") from None
    if n != v:
        raise ContractError(f"{what} = {v!r:.40}: expected a whole number")
    return n


def token_id(v, V):
    """next_token as an int in [0, V), or ContractError: -1 is no token (the sampler's "none")."""
    token = whole(v, "next_token")
    if not 0 <= token < V:
        raise ContractError(f"next_token = {token}: expected a token id in [0, {V}), drawn every "
                            f"call (after a rejection, or past the last accepted draft)")
    return token


def snapshot(inputs):
    """What each input holds (arrays as their bytes in C order: cheap, and NaN equals NaN; with
    their shape and dtype, which `x.shape = ...` or `x.dtype = ...` changes in place beside the
    same bytes), to compare after a call."""
    return [held(x) if isinstance(x, np.ndarray) else list(x) if isinstance(x, list) else x
            for x in inputs]


def held(x):  # an array's bytes (its strides' effect among them), shape and dtype
    return x.tobytes(), x.shape, x.dtype


def unchanged(before, inputs, names):
    """ContractError when the sampler changed an input in place (arrays the caller may reuse),
    or made it read-only."""
    for name, was, now, x in zip(names, before, snapshot(inputs), inputs):
        if was != now:
            raise ContractError(f"the sampler changed its input {name} in place: leave the "
                                f"caller's arrays as they were (change a copy)")
        if isinstance(x, np.ndarray) and not x.flags.writeable:
            raise ContractError(f"the sampler made its input {name} read-only: the caller can "
                                f"no longer write into it (leave its flags as they were)")


def padded(rows, width):  # lists of token ids -> [len(rows), width], -1 after each row's tokens
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def rule_keeps_all(drafts, P, Q):
    """The token rule's chance of keeping all K drafts [rows]."""
    # prod_t min(1, q_t(x_t) / p_t(x_t)); drafts [rows, K], P [rows, K, V], Q [rows, K + 1, V]
    rows, t = np.arange(len(drafts))[:, None], np.arange(drafts.shape[1])[None, :]
    return np.minimum(1, Q[rows, t, drafts] / P[rows, t, drafts]).prod(1)  # [rows, K] -> [rows]


def step_chain(fn, case, T, D, last2, last1, rng, fn_rng, kept, cuts=(0, 0)):
    # [rows, K]: drawn a draft position at a time
    drafts, P, Q = draft_chains(D, T, last2, last1, rng.random((case.K, len(last1))).T)
    # [rows]: the drafts each call is given, K or (a share no_drafts of the calls) none: drafts [],
    # P [0, V], Q[:1], as prompt lookup calls it when nothing matched (the law stays the target's);
    # getattr: a case of the exercises' own (draft_law's Head) has no no_drafts
    share = getattr(case, "no_drafts", 0.0)
    Ks = np.where(rng.random(len(drafts)) < share, 0, case.K) if share else np.full(len(drafts),
                                                                                  case.K)
    ns, tokens = [], []  # [rows] each: n_accepted, next_token
    for d, p, q, K in zip(drafts.tolist(), P, Q, Ks.tolist()):
        if K < case.K:  # no drafts: [], P [0, V], Q [1, V]
            d, p, q = d[:K], p[:K], q[:K + 1]
        # snapshot((d, p, q)) and its comparison written out: they run at every call
        before = (list(d), held(p), held(q))
        out = fn(d, p, q, fn_rng)
        if (d, held(p), held(q)) != before or not (p.flags.writeable and q.flags.writeable):
            unchanged(before, (d, p, q), ("drafts", "P", "Q"))
        n, token = pair(out, "(n_accepted, next_token)")
        n, token = whole(n, "n_accepted"), token_id(token, case.V)
        if not 0 <= n <= K:
            raise ContractError(f"n_accepted = {n} with K = {K} drafts")
        ns.append(n)
        tokens.append(token)
    ns = np.array(ns, dtype=np.int64)  # [rows]
    # a call with no drafts keeps all 0 with the rule's chance 1 (n = 0 is the contract's)
    kept.append((np.where(Ks == 0, 1.0, rule_keeps_all(drafts, P, Q)), ns == Ks))
    # [rows, K + 1]: the n accepted drafts, next_token, then -1 (padded(), at once)
    new = np.where(np.arange(case.K + 1) < ns[:, None], np.pad(drafts, ((0, 0), (0, 1))), -1)
    new[np.arange(len(ns)), ns] = tokens
    return new


def step_tree(fn, case, T, D, last2, last1, rng, fn_rng, kept, cuts=(0, 0)):
    """Draw every row's tree from the draft, score it with the target, verify -> [rows, m + 1]."""
    parents, m = list(case.parents), len(case.parents)
    tokens = np.zeros((len(last1), m), dtype=np.int64)  # [rows, m]
    ctx = {-1: (last2, last1)}  # node -> the (second-to-last, last) tokens [rows] of its path
    P = np.zeros((len(last1), m, case.V))  # [rows, m, V]
    # parent -> its children so far; parent -> [rows, V] tokens drawn (without replacement)
    rank, removed = Counter(), {}
    D2 = case.second_draft() if case.siblings == "two drafts" else None  # [V, V, V]
    for i, parent in enumerate(parents):
        p = D[ctx[parent]]  # [rows, V]: the draft's law after the parent's path
        if case.siblings == "two drafts" and rank[parent] % 2:
            p = D2[ctx[parent]]  # [rows, V]: every second sibling from the second draft
        if case.siblings in ("iid", "two drafts"):
            tokens[:, i] = sample_rows(p, rng.random(len(p)))  # [rows]
        elif case.siblings == "top":
            # [rows]: the parent's children are the draft's top tokens, in order
            tokens[:, i] = np.argsort(-p, -1, kind="stable")[:, rank[parent]]
        else:
            # [rows]: p without the siblings drawn before (sample_rows renormalises)
            drawn = removed.setdefault(parent, np.zeros(p.shape, dtype=bool))  # [rows, V]
            tokens[:, i] = sample_rows(np.where(drawn, 0, p), rng.random(len(p)))
            drawn[np.arange(len(p)), tokens[:, i]] = True
        rank[parent] += 1
        P[:, i] = p  # [rows, V]
        ctx[i] = (ctx[parent][1], tokens[:, i])  # [rows] each
    Q = np.stack([T[ctx[i]] for i in range(-1, m)], 1)  # [rows, 1 + m, V]
    # the paths a sampler may return, numbered: 0 the root's own (), i + 1 node i's (its parent's
    # path, then i)
    path_to = {-1: ()}
    for i, parent in enumerate(parents):
        path_to[i] = path_to[parent] + (i,)
    number = {path: j for j, path in enumerate(path_to.values())}
    top, without = case.siblings == "top", case.siblings == "without_replacement"
    # [rows]: a share no_drafts of the calls is given no nodes: tokens [], parents [], Q[:1],
    # P [0, V], as REST calls it when nothing matched (the law stays the target's)
    share = getattr(case, "no_drafts", 0.0)
    empty = rng.random(len(last1)) < share if share else np.zeros(len(last1), dtype=bool)
    js, next_tokens = [], []  # [rows] each: the number of the call's path, its next_token
    for row, (t, q) in enumerate(zip(tokens.tolist(), Q)):
        # P [m, V]: the law of each node's siblings before removals
        p = None if top else P[row]  # [m, V]
        shape = parents
        if empty[row]:  # no nodes
            t, shape, q, p = [], [], q[:1], None if top else p[:0]
        # snapshot((t, shape, q, p)) and its comparison written out: they run at every call
        before = (list(t), list(shape), held(q), None if top else held(p))
        if without:
            out = fn(t, shape, q, p, fn_rng)
        else:
            out = fn(t, shape, q, fn_rng, P=p)
        if (t, shape, held(q), None if top else held(p)) != before or not (
                q.flags.writeable and (top or p.flags.writeable)):
            unchanged(before, (t, shape, q, p), ("tokens", "parents", "Q", "P"))
        path, token = pair(out, "(path, next_token)")
        try:
            path = [whole(i, "a node of the path") for i in path]
        except TypeError:  # not a sequence
            raise ContractError(f"path {path!r}: expected a list of node indices") from None
        if (j := number.get(tuple(path))) is None or empty[row] and path:
            raise ContractError(f"path {path} is not a root-to-node path of the tree with parents "
                                f"{shape}")
        js.append(j)
        next_tokens.append(token_id(token, case.V))
    length = np.array([len(path) for path in number])[js]  # [rows]
    full = length == m  # [rows]: the call kept every node of its path, leaf too
    if len(set(parents)) == m:
        # one chain (no node with two children): every right verifier is a chain verifier there,
        # and the token rule reaches the leaf with prod_i min(1, q_i(x_i) / p_i(x_i)); p_i(x_i) = 1
        # for the draft's top token
        rows = np.arange(len(tokens))[:, None]  # [rows, 1]
        q_x = Q[rows, np.array(parents) + 1, tokens]  # [rows, m]
        p_x = 1.0 if case.siblings == "top" else P[rows, np.arange(m), tokens]  # [rows, m]
        # (a call given no nodes keeps its whole path, (), with the rule's chance 1)
        kept.append((np.where(empty, 1.0, np.minimum(1, q_x / p_x).prod(1)), full | empty))
    # [rows, m + 1]: the tokens of each call's path, its next_token, then -1 (padded(), at once)
    nodes = padded(list(number), m)[js]  # [rows, m]: the path's nodes, then -1
    new = np.full((len(js), m + 1), -1, dtype=np.int64)
    new[:, :m] = np.where(nodes >= 0, np.take_along_axis(tokens, nodes, 1), -1)
    new[np.arange(len(js)), length] = next_tokens
    return new


def step_rejection(fn, case, T, D, last2, last1, rng, fn_rng, kept, cuts=(0, 0, 0)):
    """Draw every row's drafts and bonus token, call fn on rows [:cuts[0]] one at a time (B = 1),
    on rows [cuts[0]:cuts[1]] two and three at a time in turn (SMALL), on rows [cuts[1]:cuts[2]]
    in batches of MEDIUM's sizes in turn, then on the others together -> [rows, k + 1]."""
    (cut, small, medium), k, rows = cuts, case.K, len(last1)
    # [rows, k + 1]: the checker's uniforms in the order of the calls: a row alone draws its k
    # drafts then its bonus token, the batch a draft position at a time, then its bonus tokens
    u = np.concatenate([rng.random((cut, k + 1)), rng.random((k + 1, rows - cut)).T])
    drafts, P, Q = draft_chains(D, T, last2, last1, u[:, :k])
    # [rows, 1]: the caller samples it, as in vLLM
    bonus = sample_rows(Q[:, -1], u[:, k])[:, None]
    rule = rule_keeps_all(drafts, P, Q)  # [rows]
    # a row a call, then two rows, three, two, ... up to small, then 511, 4, 383, ... up to medium
    parts = in_turn(0, cut, (1,)) + in_turn(cut, small, SMALL) + in_turn(small, medium, MEDIUM)
    parts += [slice(medium, rows)] if medium < rows else []
    outs = []
    for part in parts:
        outs.append(call_rejection(fn, case, Q[part], bonus[part], P[part], drafts[part], fn_rng))
        # read before the next call can overwrite a buffer the sampler returned
        kept.append((rule[part], (outs[-1] >= 0).sum(1) == k + 1))
    return np.concatenate(outs)


def in_turn(start, end, sizes):
    """Rows [start, end) as slices of sizes in turn, the last cut at end."""
    out, sizes = [], itertools.cycle(sizes)
    while start < end:
        size = next(sizes)
        out.append(slice(start, min(start + size, end)))
        start += size
    return out


def call_rejection(fn, case, Q, bonus, P, drafts, fn_rng):
    """One call of fn on B rows, its output checked against the contract -> [B, k + 1]."""
    inputs = (Q.astype(case.dtype), bonus, P.astype(case.dtype), drafts.copy())
    before = snapshot(inputs)
    out = fn(*inputs, rng=fn_rng)
    unchanged(before, inputs, ("target_with_bonus_probs", "bonus_token_ids", "draft_probs",
                             "draft_token_ids"))
    B, k = drafts.shape
    try:
        out = np.asarray(out)
    except ValueError as e:  # ragged lists
        raise ContractError(f"the output is not an array ({e}): expected integer ids "
                            f"[{B}, {k + 1}]") from None
    if out.dtype.kind == "u" and out.shape == (B, k + 1):
        raise ContractError(f"output of dtype {out.dtype}: an unsigned type cannot hold the -1 "
                            f"padding, return signed integer ids [{B}, {k + 1}]")
    if out.shape != (B, k + 1) or out.dtype.kind not in "iu":
        raise ContractError(f"output of shape {out.shape} and dtype {out.dtype}: expected integer "
                            f"ids [{B}, {k + 1}]")
    if (out < -1).any():
        row = int(np.flatnonzero((out < -1).any(1))[0])
        raise ContractError(f"row {row}: {out[row].tolist()}: the contract pads with -1 after the "
                            f"last token, and no other negative id")
    emitted = (out >= 0).cumprod(1).sum(1)  # [B]: tokens before the first -1
    accepted_ok = np.where(np.arange(k) < emitted[:, None] - 1, out[:, :k] == drafts, True).all(1)
    if (emitted == 0).any() or ((out >= 0).sum(1) != emitted).any() or not accepted_ok.all():
        row = int(np.flatnonzero((emitted == 0) | ((out >= 0).sum(1) != emitted) | ~accepted_ok)[0])
        raise ContractError(f"row {row}: {out[row].tolist()} for drafts {drafts[row].tolist()}: "
                            f"expected accepted drafts, one recovered or bonus token, then -1")
    return out


# cut: the rows called one at a time; the chain and tree steps call every row by itself
STEPS = {"chain": step_chain, "tree": step_tree, "tree_without_replacement": step_tree,
         "rejection": step_rejection}
