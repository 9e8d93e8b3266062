"""Exercise: REST's trie of retrieved continuations (He et al. 2023, arXiv:2311.08252,
section 3.2)."""
import itertools

from picospec.exercises.grading import grade_cases, hash_twins, not_ids, thue_morse
from picospec.tree import trie as reference

NAME, FAMILY = "trie", "model-free drafting (prompt lookup, REST)"
STATEMENT = """\
**Exercise `trie(sequences)`: merge retrieved continuations on their shared prefixes.** REST
retrieves the token sequences that followed the context's longest suffix in a datastore and merges
them into a trie, one node per distinct prefix. Return (tokens, parents, counts), lists with one
entry per node, nodes numbered in the order they are first met (sequence by sequence, token by
token): tokens[i] the node's token, parents[i] its parent (-1 below the root, always < i),
counts[i] how many of the sequences pass through it. Token ids are ints from GPT-2's 50,257, a
sequence may be empty; leave the sequences as they were.
Example: [[5, 6], [5, 7], [8]] -> tokens [5, 6, 7, 8], parents [-1, 0, 0, -1], counts
[2, 1, 1, 1]."""
STUB = '''def trie(sequences):
    """sequences (lists of token ids) -> (tokens, parents, counts), one entry per node."""
    raise NotImplementedError'''
ANSWER = "from picospec.tree import trie  # the project's answer"


def cases(seed=None):
    """Every list of 1 to 3 sequences of 1 or 2 tokens over {0, 1}, then longer ones."""
    words = [list(w) for n in (1, 2) for w in itertools.product(range(2), repeat=n)]
    small = [list(s) for k in (1, 2, 3) for s in itertools.product(words, repeat=k)]
    longer = [[[0, 1, 2], [0, 1, 0], [0, 2], [1], [0, 1, 2, 2]], [[2, 2, 2], [2, 2], [2]],
              [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0]], [[3, 1], [1, 3], [3, 1, 1], [], [1]],
              [[50256, 11], [50256, 1], [11, 1], [300, 256, 1]], [[1, 11], [11, 1], [1, 1, 1]],
              # the same tokens at the same depth below different prefixes: distinct nodes
              [[1, 2, 3], [4, 2, 3]], [[1, 2, 3, 5], [4, 2, 3, 5]], [[7, 1, 2, 3], [8, 1, 2, 3]],
              [[256, 1], [0, 1]],  # ids 256 apart: one byte, two tokens
              # a node keyed by one number, (parent + 1) * C + token, takes ids below C: with C
              # short of the vocabulary, token C below the root is token 0 below node 0
              *([[1, 0], [c]] for c in (1000, 10000, 32000, 32768, 50000, 50256)),
              [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 9, 7], [1, 2, 3, 4, 5, 6, 7, 8]],
              [], [[]],  # nothing retrieved, or only an empty continuation: no node
              # 3,000 tokens in one sequence: deeper than Python's recursion limit
              [list(range(3000)), list(range(1500))],
              # a node keyed by its parent's number and token as digits joined ("1", "10" is
              # "11", "0"), by (parent << 15) | token, by token as float16 (40000 is 40001)
              [[5, 6, 10], [7] * 9 + [0]], [[0], [32768]], [[40000], [40001]],
              # one sequence twice, 8 tokens long (a repeat skipped counts it once)
              [list(range(1, 9))] * 2,
              # the middle of [0, 1, 2, 3, 0] in every order: prefixes of one length, sum,
              # first and last token, set and sorted tokens, apart only in their order (a node
              # keyed by those takes one for another)
              [[0, *p, 0] for p in itertools.permutations((1, 2, 3))],
              # [0, 0, 0] beside windows whose polynomial hash is its own for popular bases and
              # moduli (grading.HASH_BASES, HASH_MODULI); [15505, 31842] beside [23022, 1073],
              # whose hash(tuple) agree in their last 32 bits: a key so hashed takes one for the
              # other
              [[0, 0, 0], *hash_twins()], [[15505, 31842], [23022, 1073]]]
    shown = {}
    # two sequences of 1,100 tokens apart only in the first: a node keyed by its depth and the
    # last few (up to 1,024) tokens of its prefix merges them
    apart = [[9, *range(100, 1_199)], [8, *range(100, 1_199)]]
    shown[id(apart)] = "[[9, 100, 101, ..., 1198], [8, 100, 101, ..., 1198]]"
    # 300 nodes below the root, then tokens 0 and 1 below node 299: a key (parent + 1) * 65536 +
    # token held in float32 (exact below 2^24) takes them for one
    wide = [[c] for c in range(300)] + [[299, 0], [299, 1]]
    shown[id(wide)] = "[[0], [1], ..., [299], [299, 0], [299, 1]]"
    # [1, 0], every id from 2 to 50256 alone (node c holds token c), then a 5 below node C - 1
    # for round C: a node keyed by one number, (parent + 1) * C + token with any C short of the
    # vocabulary, or token * C + parent + 1 with these C, takes one node for another (token C
    # below the root for 0 below node 0; 5 below node C - 1 for 6 below the root)
    rounds = (1000, 1024, 4096, 8192, 10_000, 16_384, 20_000, 32_000, 32_768, 40_000, 50_000,
              50_256, 50_257)
    # ... then [2, t] for t below 15,269 and [2, 15268, 7]: node 65,538 holds [2, 15268], and a
    # key (parent + 1) << 16 | token in 32 bits wraps there, taking 7 below it for 7 below node 2;
    # then [2, t] on to t = 35,188, node 85,459, and 4078 below it: a key (parent + 1) * 50257 +
    # token in 32 bits wraps there to 2 below the root's
    roots = ([[1, 0]] + [[c] for c in range(2, 50_257)] + [[C - 1, 5] for C in rounds]
             + [[2, t] for t in range(15_269)] + [[2, 15_268, 7]]
             + [[2, t] for t in range(15_269, 35_189)] + [[2, 35_188, 4_078]])
    shown[id(roots)] = ("[[1, 0], [2], [3], ..., [50256], [999, 5], [1023, 5], ..., [50256, 5], "
                        "[2, 0], [2, 1], ..., [2, 15268], [2, 15268, 7], [2, 15269], ..., "
                        "[2, 35188], [2, 35188, 4078]] (85,460 sequences)")
    # one sequence 70,000 times: a count past 2^16 (counts held in 16 bits wrap)
    same = [[1]] * 70_000
    shown[id(same)] = "[[1]] * 70000"
    # the Thue-Morse sequence of 0 and 1 over 2,048 tokens, then its complement: their
    # polynomial hashes agree modulo 2^64 whatever the odd base (h * B + token in uint64 wraps
    # so); an even base's are caught by `apart`
    morse = thue_morse(2_048)
    thue = [morse, thue_morse(2_048, 1, 0)]
    shown[id(thue)] = ("[[0, 1, 1, 0, 1, 0, 0, 1, ...], [1, 0, 0, 1, 0, 1, 1, 0, ...]] (Thue-Morse "
                       "over 2,048 tokens, then its complement)")
    longer += [apart, wide, thue, roots, same]
    return [(f"sequences={shown.get(id(s), s)}" if id(s) in shown or sum(map(len, s)) < 100 else
             f"sequences of {' and '.join(str(len(q)) for q in s)} tokens", (s,))
            for s in small + longer]


def compare(yours, expected):
    try:
        tokens, parents, counts = (list(v) for v in yours)
    except (TypeError, ValueError):
        return "a tuple (tokens, parents, counts)"
    for part, mine, right in zip(("tokens", "parents", "counts"), (tokens, parents, counts),
                                 expected):
        if mine != right:
            return part
    for part, v in zip(("tokens", "parents", "counts"), yours):  # a caller appends to them
        if not isinstance(v, list):
            return f"{part}: a {type(v).__name__}, not a list"
    for part, ids in (("tokens", tokens), ("parents", parents),  # ids, indices, counts: ints
                      ("counts", counts)):
        if (odd := not_ids(ids)) is not None:
            return f"{part}: {odd}"
    return None


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(), compare, "picospec.tree.trie")


# WRONG: plausible mistakes, each one the grader rejects
def no_merging(sequences):
    """A chain of new nodes for every sequence, shared prefixes not merged."""
    tokens, parents, counts = [], [], []
    for seq in sequences:
        node = -1
        for t in seq:
            tokens.append(t)
            parents.append(node)
            counts.append(1)
            node = len(tokens) - 1
    return tokens, parents, counts


def merged_by_token(sequences):
    """A node per (depth, token), whatever its parent: [1, 2] and [3, 2] share the 2."""
    tokens, parents, counts, seen = [], [], [], {}
    for seq in sequences:
        node = -1
        for depth, t in enumerate(seq):
            if (depth, t) not in seen:
                seen[(depth, t)] = len(tokens)
                tokens.append(t)
                parents.append(node)
                counts.append(0)
            node = seen[(depth, t)]
            counts[node] += 1
    return tokens, parents, counts


def counts_at_ends(sequences):
    """counts[i] = how many sequences end at node i, not pass through it."""
    tokens, parents, _ = reference(sequences)
    counts = [0] * len(tokens)
    for seq in sequences:
        node = -1
        for t in seq:
            node = next(i for i in range(len(tokens)) if parents[i] == node and tokens[i] == t)
        if node >= 0:
            counts[node] += 1
    return tokens, parents, counts


def joined_keys(sequences):
    """Prefixes keyed by their digits joined: [1, 11] and [11, 1] are one node ("111")."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent = -1
        for k in range(len(seq)):
            key = "".join(map(str, seq[:k + 1]))
            if key not in node:
                node[key] = len(tokens)
                tokens.append(seq[k])
                parents.append(parent)
                counts.append(0)
            counts[node[key]] += 1
            parent = node[key]
    return tokens, parents, counts


def keyed_by_parent_token(sequences):
    """A node per (depth, parent's token, token): [1, 2, 3] and [4, 2, 3] share their 3."""
    tokens, parents, counts, node = [], [], [], {}
    for seq in sequences:
        parent, above = -1, None
        for depth, t in enumerate(seq):
            if (depth, above, t) not in node:
                node[(depth, above, t)] = len(tokens)
                tokens.append(t)
                parents.append(parent)
                counts.append(0)
            parent, above = node[(depth, above, t)], t
            counts[parent] += 1
    return tokens, parents, counts


def packed_keys(sequences):
    """A node keyed by (parent + 1) * 50000 + token: [50000] is [x, 0]."""
    node, counts = {}, []  # key -> (index, token, parent), in the order met
    for seq in sequences:
        at = -1
        for t in seq:
            at = node.setdefault((at + 1) * 50000 + t, (len(node), t, at))[0]
            counts += [0] * (at == len(counts))
            counts[at] += 1
    return [v[1] for v in node.values()], [v[2] for v in node.values()], counts


def counts_in_floats(sequences):
    """Counts as floats: 2.0 sequences, not 2."""
    tokens, parents, counts = reference(sequences)
    return tokens, parents, [float(c) for c in counts]


def yields_each_list(sequences):
    """yield tokens, parents and counts in turn: a generator, not the tuple asked."""
    yield from reference(sequences)


WRONG = (no_merging, merged_by_token, counts_at_ends, joined_keys, keyed_by_parent_token,
         packed_keys, counts_in_floats, yields_each_list)
