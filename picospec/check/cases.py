"""The battery's cases per contract: toy target and draft, warping, K and (trees) the tree's shape
and siblings. Sequences start after PROMPT. Shapes: V vocabulary, N new tokens, K (k) drafts, m
tree nodes.
"""
from typing import NamedTuple

import numpy as np

from picospec.check.exact_law import Toy, forbidding_toy, perturbed, random_toy
from picospec.sampling import residual, warp


class Case(NamedTuple):
    name: str
    V: int
    N: int
    K: int = 2  # drafts per step (chain, rejection)
    sampling: dict = {}  # temperature, top_k, top_p: applied alike to draft and target
    target: int = 7  # random_toy seed
    # ("near", eps) | ("far",) | ("zeros", share) | ("same",) | ("one-hot",) | ("swap", d) |
    # ("sharp", T): the target at temperature T < 1, an over-confident draft kept long
    draft: tuple = ("near", 0.6)
    parents: tuple = None  # tree shape (tree contract)
    # how a tree's siblings are drawn:
    #   "iid"                  i.i.d. from the draft
    #   "two drafts"           i.i.d., every second sibling of a node from a second toy draft
    #   "top"                  the draft's top tokens
    #   "without_replacement"  without replacement from the draft
    siblings: str = "iid"
    dtype: str = "float64"
    # a share of the target's entries set to 0 (one token kept per row): some rows one-hot beside
    # spread ones
    target_zeros: float = 0.0
    lowest: bool = False  # every uniform the sampler draws is 0.0: checks the support, not the law
    highest: bool = False  # every uniform is the largest double below 1: the support too
    no_drafts: float = 0.0  # the share of calls given no drafts (K = 0), or a tree of no nodes
    # the target's law after the last token alone (the draft's after the last two): one target row
    # meets several draft rows
    last_only: bool = False
    # target and draft of whole weights 1 or 2 per entry, normalised (ties_toy): at V = 3 every row
    # has equal entries, and a row is even (all entries equal) with probability 1/4
    ties: bool = False
    # the vocabulary the sampler is handed: the V tokens as ids spread over `wide`, every other id
    # of probability 0 in P and Q (drivers.widened); 0: V itself. A path taken by large calls alone
    # (a vectorised one past some size, as every real call's) runs only here
    wide: int = 0

    @property
    def support(self):
        """A case that counts forbidden sequences under extreme uniforms, and tests no law."""
        return self.lowest or self.highest

    def laws(self):
        """Warped target and draft tables [V, V, V]."""
        if self.ties:
            target, draft = ties_toy(self.V, self.target), ties_toy(self.V, self.target + 1)
            return warp(target.table, **self.sampling), warp(draft.table, **self.sampling)
        # a support case's target forbids every token somewhere, token 0 too (SUPPORT below)
        target = (forbidding_toy(self.V, self.target) if self.support else
                  random_toy(self.V, self.target,
                           zeros=self.target_zeros or (0.3 if self.draft[0] == "one-hot" else 0)))
        if self.last_only:  # row (a, b) is row (0, b)
            target = Toy(np.broadcast_to(target.table[:1], target.table.shape))
        kind = self.draft[0]
        draft = {"near": lambda: perturbed(target, self.draft[1], self.target + 1),
                 "far": lambda: random_toy(self.V, self.target + 1),
                 "zeros": lambda: random_toy(self.V, self.target + 1, zeros=self.draft[1]),
                 "same": lambda: target,
                 "one-hot": lambda: Toy(np.tile(np.eye(self.V)[0], (self.V, self.V, 1))),
                 "swap": lambda: swapped(target, self.draft[1]),
                 "sharp": lambda: Toy(warp(target.table, temperature=self.draft[1])),
                 "part": lambda: in_half(target, perturbed(target, self.draft[1],
                                                           self.target + 1))}[kind]()
        q, p = warp(target.table, **self.sampling), warp(draft.table, **self.sampling)
        return short_of_one(q, p) if self.support else q, p

    def second_draft(self):
        """The warped table [V, V, V] of every second sibling ("two drafts")."""
        return warp(random_toy(self.V, self.target + 2).table, **self.sampling)


# a call's first rows may be the target's exactly and its later ones not
def in_half(target, other):
    """A draft equal to the target in the contexts (a, b) with a + b even, `other` elsewhere."""
    V = target.table.shape[0]
    same = (np.add.outer(np.arange(V), np.arange(V)) % 2 == 0)[..., None]  # [V, V, 1]
    return Toy(np.where(same, target.table, other.table))


# A law as a float softmax may hand it (sums off 1 by ulps): a draw from such a row by an inverse
# CDF with u unscaled runs past its end at the near-1 uniforms (at u = 0, read at 1 - u), onto the
# last token or back to token 0, each forbidden in some row. Rows whose residual norm(max(0, q -
# p)) against the draft already ends short of 1 stay as they are: lowering q there could move the
# residual's rounding, which SUPPORT's seed holds.
def short_of_one(q, p):
    """q [..., V] with each row's float64 cumsum ending below 1, its largest entry lowered by as
    few ulps as that takes. Example: q = p = [0.2, 0.3, 0.5] -> [0.2, 0.3, 0.4999999999999999]."""
    q = q.copy()
    for row, draft in zip(q.reshape(-1, q.shape[-1]), p.reshape(-1, p.shape[-1])):  # views
        if (row < draft).any() and np.cumsum(residual(row, draft))[-1] < 1:
            continue
        top = row.argmax()
        while np.cumsum(row)[-1] >= 1:
            row[top] = np.nextafter(row[top], 0)
    return q


def ties_toy(V, seed):
    """A Toy whose rows are whole weights 1 or 2, normalised: ties in every row at V = 3.
    Example: weights [1, 2, 1] -> [0.25, 0.5, 0.25]; [2, 2, 2] -> an even row."""
    weights = np.random.default_rng(seed).integers(1, 3, (V, V, V)).astype(float)  # [V, V, V]
    return Toy(weights / weights.sum(-1, keepdims=True))


def swapped(target, d):
    """A draft p = q but for mass d moved from q's top token to the next id in each row.
    Example: q = [0.1, 0.6, 0.3], d = 0.04 -> p = [0.1, 0.56, 0.34], residual [0, 0.04, 0]."""
    table = target.table.copy()  # [V, V, V]
    top = table.argmax(-1)[..., None]  # [V, V, 1]
    moved = np.minimum(d, np.take_along_axis(table, top, -1))  # [V, V, 1]
    np.put_along_axis(table, top, np.take_along_axis(table, top, -1) - moved, -1)
    nxt = (top + 1) % table.shape[-1]  # [V, V, 1]
    np.put_along_axis(table, nxt, np.take_along_axis(table, nxt, -1) + moved, -1)
    return Toy(table)


PROMPT = (1,)
# The support cases' target (forbidding_toy) forbids every token, token 0 too, in V or more of its
# V^2 rows: an inverse CDF that lands on token 0 at u = 0 whatever its probability emits a token
# the target forbids. Seed 833 is chosen (rounding cannot be built in) so that, after the far
# draft, a residual norm(max(0, q - p)) whose float64 cumsum ends below 1 has q forbidding token 0
# in one context and the last token in another: an inverse CDF that falls back to token 0 past the
# end of a law (argmax(cdf > u)), or clamps to the last token there, emits a forbidden token at the
# near-1 uniforms. tests/picospec/test_check.py holds these properties.
SUPPORT = 833
# The trees' case of a sharp target and a draft near it: at T = 0.4 four of the target's nine rows
# hold 0.95 to 0.97 on their likeliest token (a target taken as certain past a threshold moves the
# rest), and in eight of nine the draft is within 0.03 of it (a draft "close enough" kept untested)
SHARP = dict(sampling=dict(temperature=0.4), draft=("near", 0.05), parents=(-1, -1, 0, 0))


def wider(k, K):
    """A draft spread over V = 6 tokens (a draft sent as its top 5 answers otherwise), then a
    target with zeros: some rows one-hot beside spread ones (a call taken as greedy when its
    first row is one-hot answers otherwise)."""
    return (Case(f"V=6 {k}", 6, 3, K, target=197),
            Case(f"V=3 {k} target with zeros", 3, 5, K, target=7, target_zeros=0.5))


def one_draft(k):
    """One draft a call: a draft with zeros on a target with zeros (some rows of each one-hot,
    some drafts forbidden), then V = 12 at T = 2 with a quarter of the calls given none (a path of
    its own for K = 1, or a bonus or next token cut to the likeliest few, answers otherwise)."""
    return (Case(f"V=4 {k} draft with zeros, target with zeros", 4, 4, 1, target=257,
                 draft=("zeros", 0.6), target_zeros=0.5),
            Case(f"V=12 {k} or 0 T=2", 12, 2, 1, dict(temperature=2), target=271,
                 draft=("near", 0.3), no_drafts=0.25))


# a node at depth 1, one at depth 2, two siblings at depth 3, two below the first of them at depth
# 4: siblings below depth 2 (every case above has them at depth 1 or 2), leaves at depth 4
DEEPER = (-1, 0, 1, 1, 2, 2)


def deeper(siblings):
    """Siblings at depths 3 and 4 (DEEPER; without replacement, an over-confident draft kept
    long); then a tree of one node over V = 12 at T = 2 (its rejection replaced from the
    residual, its bonus from the whole law)."""
    draft = ("sharp", 0.5) if siblings == "without_replacement" else ("near", 0.3)
    return (Case("V=3 siblings at depths 3 and 4", 3, 5, target=263, draft=draft, parents=DEEPER,
                 siblings=siblings),
            Case("V=12 one node T=2 draft with zeros", 12, 2, sampling=dict(temperature=2),
                 target=271, draft=("zeros", 0.5), parents=(-1,), siblings=siblings))


def wide_and_long(k):
    """V = 12 with every draft row its own (the V = 12 cases above have a one-hot draft or one
    draft a call: a rule that reads the first draft row, or treats wide laws apart, answers
    otherwise); then seven drafts over V = 4, an over-confident draft kept long (the residual
    from the fourth draft on over more than two tokens, and K >= 7 past V = 2)."""
    return (Case(f"V=12 {k}=2", 12, 2, 2, target=283),
            Case(f"V=4 {k}=7 sharp draft", 4, 5, 7, target=27, draft=("sharp", 0.3)))


# the wide cases' tree: two pairs of siblings, the second below the first pair's first node (depth
# 3), over 4,096 ids
WIDE_TREE = (-1, -1, 0, 0, 2, 2)

CASES = {
    "chain": [
        Case("uniforms at 0: support", 3, 5, 3, target=SUPPORT, draft=("far",), lowest=True,
             no_drafts=0.25),
        Case("V=3 K=1", 3, 5, 1),
        Case("V=3 K=2 T=0.6", 3, 5, 2, dict(temperature=0.6), target=17),
        Case("V=3 K=4 T=1.4 top_k=2", 3, 5, 4, dict(temperature=1.4, top_k=2), target=27),
        Case("V=4 K=3 or 0 top_p=0.8", 4, 4, 3, dict(top_p=0.8), target=37, draft=("near", 0.5),
             no_drafts=0.25),
        Case("V=5 K=2 draft with zeros", 5, 3, 2, target=47, draft=("zeros", 0.4)),
        Case("V=2 K=6 or 0 far draft", 2, 7, 6, target=57, draft=("far",), no_drafts=0.25),
        Case("V=3 K=2 draft = target", 3, 5, 2, target=67, draft=("same",)),
        Case("V=4 K=3 one-hot draft", 4, 4, 3, target=77, draft=("one-hot",)),
        Case("V=4 K=2 T=0", 4, 4, 2, dict(temperature=0), target=87),
        Case("V=4 K=3 draft = target but 2 tokens", 4, 4, 3, target=107, draft=("swap", 0.04)),
        # the rule at drafts 4 to 6 (a tie kept only from the fourth draft on, say)
        Case("uniforms at 0, 6 drafts: support", 3, 8, 6, target=SUPPORT, draft=("far",),
             lowest=True, no_drafts=0.25),
        Case("uniforms near 1: support", 3, 5, 3, target=SUPPORT, draft=("far",), highest=True,
             no_drafts=0.25),
        # V = 12, the draft one token: residuals spread over up to 11 tokens (a residual cut to
        # its likeliest few is wrong here, and right wherever it has few)
        Case("V=12 K=2 T=2 one-hot draft", 12, 2, 2, dict(temperature=2), target=147,
             draft=("one-hot",)),
        # drafts kept often and rejected with residuals of two tokens, deep into the chain: the
        # rule from the fourth draft on (every other K >= 4 case has one-token residuals there)
        Case("V=3 K=6 sharp draft", 3, 5, 6, target=17, draft=("sharp", 0.5)),
        # a draft 0.02 from the target, seven tokens long: a shortcut for a draft "close enough"
        # (np.allclose at 0.03, a guard on residuals below 0.03) acts at every step
        Case("V=2 K=3 draft = target but 2 tokens", 2, 7, 3, target=17, draft=("swap", 0.02)),
        # the target's law after the last token alone, the draft's after the last two: a residual
        # kept by the target's row alone (a cache keyed by q) is another draft row's here
        Case("V=3 K=2 target of the last token", 3, 5, 2, target=167, last_only=True),
        # eight drafts over V = 2, an over-confident draft kept often: the rule from the seventh
        # draft on (uniforms drawn six at a time and read again from the seventh)
        Case("V=2 K=8 sharp draft", 2, 7, 8, target=57, draft=("sharp", 0.3)),
        *wider("K=2", 2),
        # five drafts kept often: the rule at the fifth (uniforms drawn four at a time, a last
        # block of one reading the block before's)
        Case("V=2 K=5 sharp draft", 2, 6, 5, target=57, draft=("sharp", 0.3)),
        *one_draft("K=1"),
        *wide_and_long("K"),
        # four drafts, residuals of up to three tokens (the other K = 4 case cuts them to about
        # one), the draft the target's own in half the contexts: a call's first row may equal the
        # target's and its later ones not (a rule for K = 4 alone, or a call whose first row is
        # equal taken for "draft = target", answers otherwise)
        Case("V=4 K=4 draft = target in half its rows", 4, 5, 4, target=293,
             draft=("part", 0.5)),
        # equal entries in every row, five of the target's nine even: a token found again by its
        # probability (tied tokens taken for one), an even row taken for padding, answer otherwise
        Case("V=3 K=2 ties and even rows", 3, 5, 2, target=251, ties=True),
        Case("V=6 K=4 over 4,096 ids", 6, 3, 4, target=311, wide=4096),
    ],
    "tree": [
        Case("uniforms at 0: support", 3, 5, target=SUPPORT, draft=("far",), parents=(-1, -1, 0, 1),
             lowest=True),
        Case("V=3 sampled siblings", 3, 5, parents=(-1, -1, 0, 0)),
        Case("V=3 top tokens T=0.7", 3, 5, sampling=dict(temperature=0.7), target=17,
             parents=(-1, -1, -1, 0, 1), siblings="top"),
        Case("V=4 chain of 4 top_k=3", 4, 4, sampling=dict(top_k=3), target=27,
             parents=(-1, 0, 1, 2)),
        Case("V=4 four siblings top_p=0.9", 4, 4, sampling=dict(top_p=0.9), target=37,
             draft=("far",), parents=(-1, -1, -1, -1)),
        Case("V=5 top tokens, draft with zeros", 5, 3, target=47, draft=("zeros", 0.4),
             parents=(-1, -1, 0, 0, 1, 1), siblings="top"),
        Case("V=3 sampled, draft = target", 3, 5, target=67, draft=("same",),
             parents=(-1, -1, 0, 1)),
        Case("V=4 T=0", 4, 4, sampling=dict(temperature=0), target=87, parents=(-1, -1, 0)),
        Case("V=4 siblings from two drafts", 4, 4, target=107, parents=(-1, -1, -1, 0, 0),
             siblings="two drafts"),
        Case("V=4 draft = target but 2 tokens", 4, 4, target=117, draft=("swap", 0.04),
             parents=(-1, -1, 0, 0)),
        # the trees above are numbered level by level (siblings adjacent); this one depth first:
        # the root's children are nodes 0 and 4, node 0's are 1 and 3, each apart from the next
        Case("V=4 numbered depth first", 4, 4, target=127, parents=(-1, 0, 1, 0, -1, 4)),
        # two chains of five levels: the rule below depth 2
        Case("uniforms at 0, five levels: support", 3, 7, target=SUPPORT, draft=("far",),
             parents=(-1, -1, 0, 1, 2, 3, 4, 5, 6, 7), lowest=True),
        Case("uniforms near 1: support", 3, 5, target=SUPPORT, draft=("far",),
             parents=(-1, -1, 0, 1), highest=True),
        Case("V=12 T=2 one-hot draft", 12, 2, sampling=dict(temperature=2), target=147,
             draft=("one-hot",), parents=(-1, -1, 0)),
        # a chain of five levels, often kept deep: the rule and the next token below depth 3
        Case("V=3 chain of 5 sharp draft", 3, 5, target=17, draft=("sharp", 0.4),
             parents=(-1, 0, 1, 2, 3)),
        # five siblings, the draft's top five of V = 5: the rule from a node's fourth child on
        Case("V=5 five top tokens", 5, 3, target=157, parents=(-1, -1, -1, -1, -1, 0),
             siblings="top"),
        Case("V=3 sampled siblings, target of the last token", 3, 5, target=167,
             parents=(-1, -1, 0, 0), last_only=True),
        # a quarter of the calls given a tree of no nodes (REST or prompt lookup found nothing):
        # the next token a draw from Q[0], not its likeliest
        Case("V=3 sampled siblings or no nodes", 3, 5, target=187, parents=(-1, -1, 0, 0),
             no_drafts=0.25),
        # a target whose likeliest tokens hold up to 0.97, a draft within 0.03 of it (SHARP)
        Case("V=3 T=0.4 sharp target, draft near it", 3, 5, target=17, **SHARP),
        # a root of one child whose child has two: no chain (a tree read as one when the root has
        # one child walks node 2 as node 1's child)
        Case("V=6 one root child", 6, 3, target=197, parents=(-1, 0, 0, 1)),
        Case("V=3 sampled siblings, target with zeros", 3, 5, target=7, target_zeros=0.5,
             parents=(-1, -1, 0, 0)),
        *deeper("iid"),
        Case("V=3 top tokens at depths 3 and 4 T=0.7", 3, 5, sampling=dict(temperature=0.7),
             target=263, draft=("near", 0.3), parents=DEEPER, siblings="top"),
        # V = 12, each sibling's draft row its own (the V = 12 cases above have one-hot drafts or
        # one node): a rule that reads another node's draft row on wide laws answers otherwise
        Case("V=12 siblings from two drafts", 12, 2, target=283, parents=(-1, -1, -1, 0, 0),
             siblings="two drafts"),
        # a chain of five levels over V = 2 read to six tokens: the token after the whole chain
        Case("V=2 chain of 5 sharp draft", 2, 6, target=57, draft=("sharp", 0.3),
             parents=(-1, 0, 1, 2, 3)),
        Case("V=3 sampled siblings, ties and even rows", 3, 5, target=251, parents=(-1, -1, 0, 0),
             ties=True),
        Case("V=6 siblings at depth 3 over 4,096 ids", 6, 3, target=311, parents=WIDE_TREE,
             wide=4096),
        # the root's second child has two children: reached after its sibling's rejection, its own
        # second child is judged against the residual its first leaves (every node above with two
        # children is a first child; a walk that judges it against the node's own row, once a
        # sibling above was rejected, answers otherwise)
        Case("V=2 two children below the second, draft with zeros", 2, 6, target=229,
             draft=("zeros", 0.4), parents=(-1, -1, 1, 1)),
    ],
    "tree_without_replacement": [
        Case("uniforms at 0: support", 3, 5, target=SUPPORT, draft=("far",), parents=(-1, -1, 0, 0),
             lowest=True, siblings="without_replacement"),
        Case("V=3 two pairs of siblings", 3, 5, parents=(-1, -1, 0, 0),
             siblings="without_replacement"),
        Case("V=4 three siblings T=0.7", 4, 4, sampling=dict(temperature=0.7), target=17,
             parents=(-1, -1, -1, 0, 1), siblings="without_replacement"),
        Case("V=4 three siblings top_k=3", 4, 4, sampling=dict(top_k=3), target=27, draft=("far",),
             parents=(-1, -1, -1), siblings="without_replacement"),
        Case("V=5 far draft", 5, 3, target=47, draft=("far",), parents=(-1, -1, 0, 0, 1, 1),
             siblings="without_replacement"),
        # one chain (its kept test applies): with draft = target every node is kept, the leaf too
        Case("V=3 chain, draft = target", 3, 5, target=67, draft=("same",), parents=(-1, 0, 1),
             siblings="without_replacement"),
        Case("V=4 T=0 chain", 4, 4, sampling=dict(temperature=0), target=87, parents=(-1, 0, 1),
             siblings="without_replacement"),
        Case("V=4 draft = target but 2 tokens", 4, 4, target=107, draft=("swap", 0.04),
             parents=(-1, -1, 0, 0), siblings="without_replacement"),
        # numbered depth first, siblings apart (as the tree case); V = 5: no node's law is emptied
        # by removing the 4 nodes before it
        Case("V=5 numbered depth first", 5, 3, target=127, parents=(-1, 0, 1, 0, -1, 4),
             siblings="without_replacement"),
        # four siblings: the last one's law has three tokens removed (a run of the last two
        # removed, say, is seen only from the fourth sibling on)
        Case("V=5 four siblings", 5, 3, target=137, draft=("far",), parents=(-1, -1, -1, -1),
             siblings="without_replacement"),
        # four siblings at u = 0: a tie kept only from a node's third or fourth child on
        Case("uniforms at 0, four siblings: support", 5, 3, target=SUPPORT, draft=("far",),
             parents=(-1, -1, -1, -1), lowest=True, siblings="without_replacement"),
        Case("uniforms near 1: support", 3, 5, target=SUPPORT, draft=("far",),
             parents=(-1, 0, 0, 1), highest=True, siblings="without_replacement"),
        # siblings drawn without replacement need two draft tokens or more: zeros, not one-hot
        Case("V=12 T=2 draft with zeros", 12, 2, sampling=dict(temperature=2), target=147,
             draft=("zeros", 0.6), parents=(-1, -1, 0), siblings="without_replacement"),
        Case("V=3 chain of 4 sharp draft", 3, 5, target=17, draft=("sharp", 0.4),
             parents=(-1, 0, 1, 2), siblings="without_replacement"),
        Case("V=3 two pairs of siblings, target of the last token", 3, 5, target=167,
             parents=(-1, -1, 0, 0), siblings="without_replacement", last_only=True),
        Case("V=3 two pairs of siblings or no nodes", 3, 5, target=187, parents=(-1, -1, 0, 0),
             siblings="without_replacement", no_drafts=0.25),
        Case("V=3 T=0.4 sharp target, draft near it", 3, 5, target=17,
             siblings="without_replacement", **SHARP),
        Case("V=6 one root child", 6, 3, target=197, parents=(-1, 0, 0, 1),
             siblings="without_replacement"),
        Case("V=3 two pairs of siblings, target with zeros", 3, 5, target=7, target_zeros=0.5,
             parents=(-1, -1, 0, 0), siblings="without_replacement"),
        *deeper("without_replacement"),
        Case("V=3 two pairs of siblings, ties and even rows", 3, 5, target=251,
             parents=(-1, -1, 0, 0), siblings="without_replacement", ties=True),
        # an over-confident draft: siblings drawn alike would repeat its likeliest token often
        Case("V=6 sharp draft, siblings at depth 3 over 4,096 ids", 6, 3, target=311,
             draft=("sharp", 0.5), parents=WIDE_TREE, siblings="without_replacement", wide=4096),
    ],
    "rejection": [
        Case("uniforms at 0: support", 3, 5, 3, target=SUPPORT, draft=("far",), lowest=True),
        Case("V=3 k=1", 3, 5, 1),
        Case("V=3 k=2 T=0.7", 3, 5, 2, dict(temperature=0.7), target=17),
        Case("V=4 k=4 top_k=3", 4, 4, 4, dict(top_k=3), target=27),
        Case("V=5 k=3 top_p=0.8 draft with zeros", 5, 3, 3, dict(top_p=0.8), target=47,
             draft=("zeros", 0.4)),
        Case("V=2 k=5 far draft", 2, 7, 5, target=57, draft=("far",)),
        Case("V=3 k=2 draft = target", 3, 5, 2, target=67, draft=("same",)),
        Case("V=4 k=3 float32", 4, 4, 3, target=77, dtype="float32"),
        Case("V=4 k=2 T=0", 4, 4, 2, dict(temperature=0), target=87),
        Case("V=4 k=3 draft = target but 2 tokens", 4, 4, 3, target=107, draft=("swap", 0.04)),
        Case("uniforms at 0, 6 drafts: support", 3, 8, 6, target=SUPPORT, draft=("far",),
             lowest=True),
        Case("uniforms near 1: support", 3, 5, 3, target=SUPPORT, draft=("far",), highest=True),
        Case("V=12 k=2 T=2 one-hot draft", 12, 2, 2, dict(temperature=2), target=147,
             draft=("one-hot",)),
        Case("V=3 k=6 sharp draft", 3, 5, 6, target=17, draft=("sharp", 0.5)),
        Case("V=2 k=3 draft = target but 2 tokens", 2, 7, 3, target=17, draft=("swap", 0.02)),
        Case("V=3 k=2 target of the last token", 3, 5, 2, target=167, last_only=True),
        *wider("k=2", 2),
        Case("V=2 k=8 sharp draft", 2, 7, 8, target=57, draft=("sharp", 0.3)),
        *one_draft("k=1")[:1], Case("V=12 k=1 T=2", 12, 2, 1, dict(temperature=2), target=271,
                                     draft=("near", 0.3)),
        *wide_and_long("k"),
        # ... and in float32 (a row whose first position's laws are equal taken for "draft =
        # target" answers otherwise; a path for float32 inputs alone is seen here only)
        Case("V=4 k=4 float32 draft = target in half its rows", 4, 5, 4, target=293,
             draft=("part", 0.5), dtype="float32"),
        # float32 with every residual 0.04 on one token (as case 10 in float64): a guard that
        # swaps a small residual for q on float32 inputs alone acts at every rejection
        Case("V=4 k=3 float32 draft = target but 2 tokens", 4, 4, 3, target=107,
             draft=("swap", 0.04), dtype="float32"),
        Case("V=3 k=2 ties and even rows", 3, 5, 2, target=251, ties=True),
        # the batches' laws over 256 ids, not 4,096: the rows of a step come in one call
        Case("V=6 k=4 over 256 ids", 6, 3, 4, target=311, wide=256),
    ],
}
