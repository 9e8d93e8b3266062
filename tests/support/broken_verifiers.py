"""Broken verification steps the method tests share: each keeps the drafts it should check, so the
exact-law checks of the methods that call it must reject it."""
from picospec.sampling import sample
from picospec.tree import children, paths


def resample_from_target(drafts, P, Q, rng):
    for t, x in enumerate(drafts):
        if rng.random() >= min(1, Q[t][x] / P[t][x]):
            return t, sample(Q[t], rng), "resample"  # bug: q instead of norm(max(0, q - p))
    return len(drafts), sample(Q[len(drafts)], rng), "bonus"


def longest_match(tokens, parents, Q, rng, P=None):
    """The known flaw: every candidate path gets its own independent target sample at each of its
    positions (as if the paths were separate sequences) and the longest matching path wins. More
    paths -> more chances to match."""
    best, next_token = [], None
    for path in paths(parents):
        rows = [-1] + path  # row of the distribution each position is drawn from
        draws = [sample(Q[r + 1], rng) for r in rows]
        n = 0
        while n < len(path) and tokens[path[n]] == draws[n]:
            n += 1
        if next_token is None or n > len(best):
            best, next_token = path[:n], draws[n]
    return best, next_token, "bonus"


def unverified(tokens, parents, Q, rng, P=None):  # broken: take the first retrieved path as it is
    path = paths(parents)[0] if tokens else []
    return path, sample(Q[path[-1] + 1 if path else 0], rng), "bonus"


def first_guess_unverified(tokens, parents, Q, rng, P=None):
    """Broken variant: the first guess is kept whole without verification, then a token from the
    target."""
    kids, path, node = children(parents), [], -1
    while kids[node]:
        node = kids[node][0]
        path.append(node)
    return path, sample(Q[node + 1], rng), "bonus"


def one_hot_without_residual(tokens, parents, Q, rng, P=None):
    """Broken: each one-hot sibling is kept with q(x) of the unchanged q; when all fail, the token
    comes from q."""
    kids, node, path = {}, -1, []
    for i, p in enumerate(parents):
        kids.setdefault(p, []).append(i)
    while True:
        q = Q[node + 1]
        for child in kids.get(node, []):
            if rng.random() < q[tokens[child]]:
                node = child
                path.append(child)
                break
        else:
            return path, sample(q, rng), "resample"
