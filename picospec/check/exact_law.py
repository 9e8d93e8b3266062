"""Toy models, the exact law of their whole sequences, the G-test against it (rare cells pooled)
and its power by simulation. p = draft, q = target. Shapes: V vocabulary, N new tokens, S
sequences (V^N in a law vector), C cells after pooling.
"""
import functools
import itertools
import math
from collections import Counter

import numpy as np

from picospec.sampling import warp

ALPHA = 1e-4  # per check (a battery case of picospec.check, a statistical test of the suite)
# the reference size of the power table (tests size their own n: tests/suite/power.py)
SAMPLES = 30_000
SAMPLES_HIGH = 120_000  # its larger reference size

# Toy models: next-token laws that depend on the last two tokens (a [V, V, V] table), so
# whole-sequence laws are non-trivial and cheap to compute exactly.

class Toy:
    """model(x, n=1) -> probs [n, V] from a table [V, V, V]: (second-to-last, last) -> law."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float64)  # [V, V, V]
        self.n_vocab = self.table.shape[-1]
        self.calls = 0

    def __call__(self, x, n=1):
        self.calls += 1
        # [n, V]: the law after each of the last n prefixes (token 0 before the first)
        return np.stack([self.table[x[i - 2] if i >= 2 else 0, x[i - 1]]
                         for i in range(len(x) - n + 1, len(x) + 1)])


def random_toy(V, seed, concentration=1.0, zeros=0.0):
    """A Toy of Dirichlet rows, a share `zeros` of entries set to 0 (one token kept per row)."""
    # table [V, V, V]: (second-to-last, last) -> next-token law
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.full(V, concentration), size=(V, V))
    if zeros:
        mask = rng.random(table.shape) < zeros  # [V, V, V]
        mask[..., rng.integers(0, V)] = False  # [V, V]: one token kept in every row
        table = np.where(mask, 0, table)
        table /= table.sum(-1, keepdims=True)
    return Toy(table)


def forbidding_toy(V, seed, zeros=0.3):
    """A Toy of Dirichlet rows in which every token is forbidden somewhere: row (a, b) gives token
    (a + b) % V probability 0 and keeps token (a + b + 1) % V, and a share `zeros` of the other
    entries is 0 too. Each token, token 0 among them, is 0 in at least V of the V^2 rows (a third
    at V = 3). Example: V = 3, row (0, 1) -> token 1 forbidden, token 2 kept, token 0 zeroed with
    probability 0.3."""
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.ones(V), size=(V, V))  # [V, V, V]
    mask = rng.random(table.shape) < zeros  # [V, V, V]
    diagonal = np.add.outer(np.arange(V), np.arange(V))  # [V, V]: a + b
    np.put_along_axis(mask, (diagonal % V)[..., None], True, -1)
    np.put_along_axis(mask, ((diagonal + 1) % V)[..., None], False, -1)
    table = np.where(mask, 0, table)
    return Toy(table / table.sum(-1, keepdims=True))


def perturbed(model, eps, seed):
    """A draft near the target: each row mixed with a random one (eps = 0: the same model)."""
    other = random_toy(model.n_vocab, seed).table
    return Toy((1 - eps) * model.table + eps * other)


# Exact laws of whole sequences. A law is a vector over the V^N sequences in base-V order.

def exact_law(model, x, N, **sampling_options):
    """{N new tokens: probability} of autoregressive sampling from the warped model after x."""
    law = {(): 1.0}
    for _ in range(N):
        grown = {}
        for seq, prob in law.items():
            q = warp(model(list(x) + list(seq))[-1], **sampling_options)  # [V]
            for token, qt in enumerate(q):
                if qt > 0:
                    grown[seq + (token,)] = prob * float(qt)
        law = grown
    return law


def law_vector(model, x, N, **sampling_options):  # -> [V^N]
    law, V = exact_law(model, x, N, **sampling_options), model.n_vocab
    probs = np.zeros(V**N)  # [V^N]
    probs[[index(s, V) for s in law]] = list(law.values())
    return probs


def index(seqs, V):
    """Base-V index of sequences [..., N]. Example: index([2, 0, 1], V=3) -> 2*9 + 0*3 + 1 = 19."""
    seqs = np.asarray(seqs)  # [..., N]
    return seqs @ V ** np.arange(seqs.shape[-1] - 1, -1, -1)  # [..., N] @ [N] -> [...]


def all_sequences(V, N):
    return list(itertools.product(range(V), repeat=N))


# The G-test (likelihood-ratio chi-square) with rare cells pooled; its chi-square tail.

def chi2_sf(x, df):
    """P(X > x), X ~ chi-square(df): the upper incomplete gamma Q(df/2, x/2) (Numerical Recipes 6.2:
    series below a + 1, Lentz's continued fraction above). Example: chi2_sf(3.841459, 1) -> 0.05."""
    if x <= 0:
        return 1.0
    if x == math.inf:
        return 0.0
    a, z = df / 2, x / 2
    # log(x) - log(2), not log(z): z is 0 where x is the smallest subnormal
    front = math.exp(-z + a * (math.log(x) - math.log(2)) - math.lgamma(a))
    if z < a + 1:  # P(a, z) = front * sum_n z^n / (a (a+1) .. (a+n)); Q = 1 - P
        term = total = 1 / a
        for n in range(1, 10_000):
            term *= z / (a + n)
            total += term
            if term < total * 1e-16:
                break
        return max(0.0, 1 - front * total)
    b, c, d = z + 1 - a, 1e300, 1 / (z + 1 - a)
    h = d
    for n in range(1, 10_000):
        an = -n * (n - a)
        b += 2
        d = an * d + b
        d = 1 / (d if abs(d) > 1e-300 else 1e-300)
        c = b + an / c
        c = c if abs(c) > 1e-300 else 1e-300
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return front * h


@functools.lru_cache
def chi2_isf(alpha, df):
    """The x with chi2_sf(x, df) = alpha, by bisection."""
    low, high = 0.0, df + 20 * math.sqrt(2 * df) + 100
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if chi2_sf(mid, df) > alpha else (low, mid)
    return high


def rare(probs, n, min_expected=5.0):
    """[S]: the possible sequences expected fewer than min_expected times in n samples."""
    # the G-test pools them into one cell: an error that moves mass among them alone is invisible
    return (probs > 0) & (n * probs < min_expected)


def cells(probs, n, min_expected=5.0):
    """The G-test's cells at n samples -> (each sequence's cell [S], expected counts [C]); cell -1:
    impossible, C - 1: the pool of those expected below min_expected."""
    small = rare(probs, n, min_expected)  # [S]
    big = (probs > 0) & ~small  # [S]
    cell = np.full(len(probs), -1)  # [S]
    cell[big] = np.arange(big.sum())
    expected = list(n * probs[big])
    if small.any():
        cell[small] = len(expected)
        expected.append(n * probs[small].sum())
    return cell, np.array(expected)  # [S], [C]


def williams(expected):
    """Williams' (1976) divisor of G, cells expected [C] counts: 1 + (sum 1/p - 1) / (6 n df)."""
    # G's mean is df times it, to O(1/n); undivided, G rejects a right sampler at 1.3 to 1.8 times
    # alpha = 1e-4 where many cells are expected 5 to 20 times
    n, df = expected.sum(), len(expected) - 1
    return 1 + (np.sum(n / expected) - 1) / (6 * n * df) if df > 0 else 1.0


def g_statistic(counts, probs):
    """counts [..., S] -> (G [...] against the law probs [S], df), Williams-corrected; inf where an
    impossible sequence was drawn."""
    n = counts.sum(-1).max()
    cell, expected = cells(probs, n)
    possible = cell >= 0
    pooled = pooled_counts(counts[..., possible], cell[possible], len(expected))  # [..., C]
    with np.errstate(divide="ignore", invalid="ignore"):
        G = 2 * np.sum(np.where(pooled > 0, pooled * np.log(pooled / expected), 0.0), -1)
    impossible = counts[..., ~possible].sum(-1) > 0  # [...]
    return np.where(impossible, np.inf, G / williams(expected)), len(expected) - 1


def pooled_counts(counts, cell, C):  # counts [..., S], cell [S] in [0, C) -> [..., C]
    # each sequence's count added into its cell: one bincount, not a product with a one-hot
    # [S, C] (BLAS threads woken at every call); the counts are whole, so every order of their
    # sums is exact: the same G to the last digit
    rows = counts.reshape(math.prod(counts.shape[:-1]), len(cell))  # [R, S]
    at = np.arange(len(rows))[:, None] * C + cell  # [R, S]: row r's cell c at r * C + c
    return np.bincount(at.ravel(), rows.ravel(), len(rows) * C).reshape(counts.shape[:-1] + (C,))


def g_test(counts, law):
    """{sequence: count}, {sequence: probability} -> (G, df, p-value); p = 0 if an impossible
    sequence was drawn."""
    if any(seq not in law for seq in counts):
        return np.inf, 0, 0.0
    seqs = list(law)
    observed = np.array([counts.get(s, 0) for s in seqs], float)  # [S]
    G, df = g_statistic(observed, np.array([law[s] for s in seqs]))
    return float(G), df, (0.0 if G == np.inf else chi2_sf(float(G), df) if df > 0 else 1.0)


PAIRS_ALPHA = 1e-6  # the pairs test's level: a case's rate of failing a right sampler grows by 1%


def pairs_p_value(seqs, probs, V):
    """seqs [n, N] -> p-value of neighbours' first tokens against the product of their law."""
    # G-tests on the pairs (2j, 2j + 1) and (2j + 1, 2j + 2), Bonferroni: independent sequences of
    # the law pass; neighbours sharing a state (a cache, uniforms kept), or a first token off, fail
    first = probs.reshape(V, -1).sum(1)  # [V]: the law of the first token
    p = 1.0
    for start in (0, 1):
        x = seqs[start:, 0]  # [n - start]
        pairs = x[0:len(x) - 1:2] * V + x[1::2]  # [(n - start) // 2]
        G, df = g_statistic(np.bincount(pairs, minlength=V * V).astype(float),
                            np.outer(first, first).ravel())
        p = min(p, 0.0 if G == np.inf else chi2_sf(float(G), df) if df > 0 else 1.0)
    return min(1.0, 2 * p)


KEPT_ALPHA = 1e-6  # the kept test's level, as the pairs test's


def kept_p_value(full, rule):
    """full [C]: whether call c kept every draft; rule [C]: the token rule's chance of that ->
    p-value of a sampler that keeps them less often than the rule."""
    # A sampler that keeps every draft with chance >= rule[c] given call c's inputs (the rule;
    # block verification, whose chance is w_K = min(1, w_{K-1} r_K) >= prod_t min(1, r_t) by
    # induction, r_t = q_t(x_t) / p_t(x_t)) makes each exp(-lam sum full) / prod_c (1 - rule[c]
    # (1 - e^-lam)) a supermartingale of mean <= 1, and so their mean over a grid of lam: by
    # Ville's inequality it reaches 1 / alpha with probability <= alpha, however many calls
    full, rule = np.asarray(full, dtype=float), np.asarray(rule, dtype=float)  # [C] each
    if (full < 1)[rule >= 1].any():  # a call the rule keeps whole, cut
        return 0.0
    lam = 2.0 ** np.arange(-8, 4)[:, None]  # [L, 1]
    # [L]: log of each supermartingale at the end
    log_m = -lam[:, 0] * full.sum() - np.log1p(rule * np.expm1(-lam)).sum(1)
    log_mean = np.logaddexp.reduce(log_m) - math.log(len(lam))
    return math.exp(-log_mean) if log_mean > 0 else 1.0


def check_law(samples, law, alpha=ALPHA):
    """-> p-value; raises AssertionError with the worst cells when the samples reject the law."""
    counts = Counter(tuple(s) for s in samples)
    G, df, p = g_test(counts, law)
    if p < alpha:
        n = len(samples)
        rows = sorted(set(law) | set(counts),
                      key=lambda s: -abs(counts.get(s, 0) - n * law.get(s, 0)))[:8]
        table = "\n".join(f"  {s}: observed {counts.get(s, 0)}, expected {n * law.get(s, 0):.1f}"
                          for s in rows)
        raise AssertionError(f"empirical law differs from the target (G = {G:.1f}, df = {df}, p = "
                             f"{p:.2e}):\n{table}")
    return p


# Power, measured by simulation: draws from a perturbed law, the share the test rejects.

SHAPES = ("between two large cells", "out of a rare cell", "spread")


def perturb(probs, how, tv):
    """probs [S] with total variation tv moved as `how` of SHAPES says: between the cells nearest
    0.02, from the cell nearest 0.005 to the largest, or spread from half the mass to the rest."""
    moved = probs.copy()  # [S]
    if how == "spread":
        order = np.argsort(probs)  # [S]
        half = order[np.cumsum(probs[order]) <= 0.5]  # the smaller cells, about half of the mass
        rest = np.setdiff1d(np.flatnonzero(probs > 0), half)  # the other possible cells
        moved[half] *= 1 + tv / probs[half].sum()
        moved[rest] *= 1 - tv / probs[rest].sum()
    else:
        if how == "between two large cells":
            i, j = np.argsort(np.abs(probs - 0.02))[:2]  # [2]: the cells nearest 0.02
        else:
            i, j = int(np.argmin(np.abs(probs - 0.005))), int(np.argmax(probs))
        moved[i] -= tv
        moved[j] += tv
    return moved  # negative entries where tv is more than the shape can move


def power(probs, how, tv, n, alpha=ALPHA, repeats=100, seed=0):
    """The share of `repeats` runs of n samples from the perturbed law that the G-test rejects."""
    moved = perturb(probs, how, tv)
    if moved.min() < 0:
        return float("nan")
    # [repeats, S]
    counts = np.random.default_rng(seed).multinomial(n, moved / moved.sum(), size=repeats)
    G, df = g_statistic(counts.astype(float), probs)  # [repeats]
    return float(np.mean(G > chi2_isf(alpha, df))) if df > 0 else float(np.mean(G == np.inf))


def kept_by_law(f):
    """f(probs [S], ...) computed once per law (its bytes) and arguments: a simulation of a fixed
    seed gives one value each time, and every case of a battery asks it again at each run."""
    @functools.lru_cache(maxsize=512)
    def kept(law, *args, **kwargs):
        return f(np.frombuffer(law), *args, **kwargs)

    @functools.wraps(f)
    def call(probs, *args, **kwargs):
        return kept(np.ascontiguousarray(probs, dtype=float).tobytes(), *args, **kwargs)
    return call


@kept_by_law
def detectable_tv(probs, n, how="spread", alpha=ALPHA, at=0.9, repeats=100, seed=0):
    """The smallest TV error of shape `how` (SHAPES, or "anywhere") that n samples catch with
    probability `at` (bisection in log TV)."""
    if (probs > 0).sum() < 2:  # one possible sequence: the impossible mass hit with probability at
        return 1 - (1 - at) ** (1 / n)  # (wherever it goes: no pool holds mass to move)
    # "anywhere" (battery.py's tv90): the "spread" error's, the least detectable outside the pool,
    # plus the mass of the rare sequences pooled at n, among which an error shows only in total
    if how == "anywhere":
        return (detectable_tv(probs, n, "spread", alpha, at, repeats, seed)
                + float(probs[rare(probs, n)].sum()))
    low, high = 1e-4, 0.5
    while perturb(probs, how, high).min() < 0:  # the largest error of this shape
        high *= 0.9
    if not power(probs, how, high, n, alpha, repeats, seed) >= at:
        return float("nan")
    for _ in range(10):
        mid = math.sqrt(low * high)
        caught = power(probs, how, mid, n, alpha, repeats, seed) >= at
        low, high = (low, mid) if caught else (mid, high)
    return high


def power_table(samples=(SAMPLES, SAMPLES_HIGH), alpha=ALPHA):
    """[(samples, shape, tv90)] on the reference law: 5 tokens over 3 (243 sequences) of
    random_toy(3, seed=7)."""
    probs = law_vector(random_toy(3, seed=7), [1], 5)
    return [(n, how, detectable_tv(probs, n, how, alpha)) for n in samples for how in SHAPES]
