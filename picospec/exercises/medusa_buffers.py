"""Exercise: Medusa's tree buffers from a choices list (Cai et al. 2024, section 2.1.2).
n = 1 + len(choices) rows, root first; L leaves, D the deepest node's depth."""
import itertools

import numpy as np

from picospec.exercises.grading import grade_cases, named, same_array, thue_morse
from picospec.tree import medusa_buffers as buffers
from picospec.tree import sort_choices

NAME, FAMILY = "medusa_buffers", "Medusa"
STATEMENT = """\
**Exercise `medusa_buffers(choices)`: a Medusa tree's attention mask, position ids and retrieve
indices.** choices: the tree's nodes (one or more) as rank paths below the root (a rank: an
integer from 0 to 2^40 - 1), sorted by depth then ranks (Medusa's order), e.g. [[0], [1], [0, 0],
[0, 1]]: [0, 1] is the second candidate of head 2 below the first of head 1. Row 0 is the root
(the last accepted token), row i + 1 is choices[i]; n = 1 + len(choices). Return a dict of NumPy
arrays:
- "attn_mask": bool [n, n], row i sees column j when j is i or an ancestor of i (the root is
  every row's ancestor; siblings and cousins never see each other);
- "position_ids": int [n], each row's depth (the root 0);
- "retrieve_indices": int [L, D + 1], one row per leaf (a node with no child; L leaves, D the
  deepest node's depth): the rows on the path from the root (row 0) to the leaf, padded with -1
  to D + 1; the rows in any order.
Example: [[0], [1], [0, 0]] -> position_ids [0, 1, 1, 2], retrieve_indices rows [0, 1, 3] and
[0, 2, -1]. Leave choices as it was."""
STUB = '''def medusa_buffers(choices):
    """choices -> {"attn_mask" [n, n], "position_ids" [n], "retrieve_indices" [L, D + 1]}."""
    raise NotImplementedError'''
ANSWER = '''from picospec.tree import medusa_buffers as buffers


def medusa_buffers(choices):  # the project's answer, topk (10 by default) raised to fit any rank
    return buffers(choices, topk=1 + max(max(c) for c in choices))'''
PARTS = ("attn_mask", "position_ids", "retrieve_indices")


def reference(choices):
    made = buffers(choices, topk=1 + max(max(c) for c in choices))  # topk: room for every rank
    rows = made["retrieve_indices"]  # [L, D + 1], shown sorted (any order is right)
    return {**{part: made[part] for part in PARTS},
            "retrieve_indices": np.array(sorted(map(tuple, rows.tolist())), rows.dtype)}


def closed(nodes):  # every node's parent is a node too
    return all(len(c) == 1 or c[:-1] in nodes for c in nodes)


def cases(seed=0):
    """Every tree of up to 4 nodes (ranks 0-1, depth 3); ranks 3 and 10+ by hand, trees of 300
    and 1,031 rows; then random trees of up to 12 nodes."""
    universe = [c for d in (1, 2, 3) for c in itertools.product((0, 1), repeat=d)]
    out = []
    for size in range(1, 5):
        for nodes in itertools.combinations(universe, size):
            if closed(set(nodes)):
                out.append([list(c) for c in sort_choices(nodes)])
    # [0]'s one child has rank 3: [0] is no leaf; joined, "10" starts with "1", "010" with "01"
    out += [[[0], [0, 3]], [[1], [10]], [[0], [1], [0, 1], [0, 10], [1, 12]]]
    # ranks read as the digits of one number in base b: [0, b] and [1, 0] are both b (and the
    # parent of [0, b, 0] is not [1, 0])
    out += [[[0], [1], [0, b], [1, 0], [0, b, 0]]
            for b in (10, 16, 32, 64, 100, 256, 1000, 1024, 4096, 10_000, 65_536, 2**20, 2**32)]
    # a node keyed by its depth and its ranks' digits joined: [1, 10] and [11, 0] are "110"
    out.append([[1], [11], [1, 10], [11, 0], [1, 10, 0]])
    # [0, 1, 1] and [1, 0, 1] share their depth, rank sum and last rank: an ancestor found by
    # those (not by its whole path) is the other for one of [0, 1, 1, 0] and [1, 0, 1, 0]
    out.append([list(c) for c in sort_choices({(0,), (1,), (0, 1), (1, 0), (0, 1, 1), (1, 0, 1),
                                               (0, 1, 1, 0), (1, 0, 1, 0)})])
    # [0, 1, 1] and [1, 1, 1] share their depth and last two ranks: [0, 1, 1, 0]'s parent found by
    # those is the other
    out.append([[0], [1], [0, 1], [1, 1], [0, 1, 1], [1, 1, 1], [0, 1, 1, 0]])
    # 300 rows: row numbers and depths past what 8 bits hold; a chain 300 deep (past int8 and
    # uint8)
    out.append([[r] for r in range(299)] + [[298, 0]])
    out.append([[0] * d for d in range(1, 301)])
    # [0, b] and [0, b, 0] for every b from 0 to 512 beside [1, 0] and [1, 0, 0]: ranks packed
    # into one number in any base up to 512 (or cut to a byte) take one parent for the other; 1,031
    # rows (a mask kept in 1,024 rows overflows)
    out.append([[0], [1], *([0, b] for b in range(513)), [1, 0],
                *([0, b, 0] for b in range(513)), [1, 0, 0]])
    rng = np.random.default_rng(seed)
    for top in [3] * 30 + [12] * 10:  # children's ranks below top, the root's up to top
        nodes = {(0,)}
        for _ in range(int(rng.integers(4, 12))):
            parent = list(nodes)[int(rng.integers(len(nodes)))]
            if rng.random() < 0.7:  # a child of a node so far, else a child of the root
                nodes.add(parent + (int(rng.integers(0, top)),))
            else:
                nodes.add((int(rng.integers(0, top + 1)),))
        out.append([list(c) for c in sort_choices(nodes)])
    # ranks 2^31 and 2^32 (none is cut to 32 bits); 2^32 below the root beside [0, 0], whose
    # parent is row 1 (a key (parent's row << 32) | rank takes one for the other); the largest
    out += [[[0], [2**31]], [[0], [2**32], [0, 0]], [[0], [2**32], [0, 0], [2**32, 0]],
            [[0], [2**40 - 1], [0, 2**40 - 1]]]
    # ranks 2^24 and 2^24 + 1, one in float32 (exact below 2^24), and a child of the second
    out.append([[2**24], [2**24 + 1], [2**24 + 1, 0]])
    # ranks a popular modulus apart below the root, then [0, 0]: a path keyed by a hash modulo
    # 998,244,353, 10^9 + 7, 10^9 + 9 or 2^31 - 1 (whatever its base) takes [0] for the other
    out.append([[0], [998_244_353], [10**9 + 7], [10**9 + 9], [2**31 - 1], [0, 0]])
    # [71297665170] and [811007108076]: their hash(tuple) agree in the last 32 bits
    out.append([[71_297_665_170], [811_007_108_076], [71_297_665_170, 0]])
    # the Thue-Morse path of ranks 0 and 2^39 over 64 levels and its complement, a 0 below each:
    # their polynomial hashes agree modulo 2^64 whatever the odd base (2^39 times a product
    # divisible by 2^25); then two paths apart in their first rank and alike in the 65 after it,
    # a 0 below each: alike modulo 2^64 for every even base
    morse, shown = thue_morse(64, 0, 2**39), {}
    for said, two in (("the Thue-Morse path of 0 and 2^39 over 64 levels and its complement, "
                       "then 0", [morse + [0], [2**39 - t for t in morse] + [0]]),
                      ("[0, 1, 1, ..., 1, 0] and [1, 1, ..., 1, 0] (65 1s after the first)",
                       [[0] + [1] * 65 + [0], [1] + [1] * 65 + [0]])):
        out.append([list(c) for c in sort_choices({tuple(p[:d]) for p in two
                                                    for d in range(1, len(p) + 1)})])
        shown[id(out[-1])] = f"every prefix of {said} ({len(out[-1])} nodes)"
    return [(f"choices={shown[id(c)]}" if id(c) in shown else
             f"choices={c}" if len(c) < 100 else
             f"choices=[{', '.join(map(str, c[:3]))}, ..., {', '.join(map(str, c[-3:]))}] "
             f"({len(c)} nodes)", (c,)) for c in out]


def compare(yours, expected):
    """The first part that differs (retrieve_indices as a set of rows), or None."""
    if not isinstance(yours, dict) or set(PARTS) - set(yours):
        return f"a dict with the keys {', '.join(PARTS)}"
    for part in PARTS:
        mine, right = yours[part], expected[part]
        if (part == "retrieve_indices" and isinstance(mine, np.ndarray) and mine.ndim == 2
                and mine.shape == right.shape):  # the rows sorted, each array keeping its dtype
            mine, right = (np.array(sorted(map(tuple, a.tolist())), a.dtype) for a in (mine, right))
        if (differs := same_array(mine, right)) is not None:
            return named(part, differs)
    return None


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(seed), compare,
                       "picospec.tree.medusa_buffers", known=WRONG)


def depth_of(choices):
    return np.array([0] + [len(c) for c in choices])


# WRONG: plausible mistakes, each one the grader rejects
def siblings_see_each_other(choices):
    """Every row sees all shallower rows (a mask by depth), cousins included."""
    out = reference(choices)
    d = depth_of(choices)  # [n]
    out["attn_mask"] = (d[None, :] < d[:, None]) | np.eye(len(d), dtype=bool)  # [n, n]
    return out


def positions_from_one(choices):
    """Position ids counted from 1 at the root."""
    out = reference(choices)
    out["position_ids"] = depth_of(choices) + 1
    return out


def retrieve_without_root(choices):
    """Retrieve indices without the root's row 0, padded to D + 1 at the end."""
    out = reference(choices)
    rows = out["retrieve_indices"]  # [L, D + 1]
    out["retrieve_indices"] = np.concatenate([rows[:, 1:], np.full((len(rows), 1), -1)], 1)
    return out


def retrieve_leaf_to_root(choices):
    """Each retrieve row listed from its leaf up to the root, then padded."""
    out = reference(choices)
    rows = []
    for row in out["retrieve_indices"].tolist():  # [D + 1], padded with -1 at the end
        path = [i for i in row if i >= 0]
        rows.append(path[::-1] + row[len(path):])
    out["retrieve_indices"] = np.array(rows)  # [L, D + 1]
    return out


def leaf_by_ranks_up_to_2(choices):
    """A leaf told by its having no child of rank 0, 1 or 2 (Medusa's top 3): rank 3 missed."""
    out = reference(choices)
    nodes = [tuple(c) for c in choices]
    row, depth = {c: i + 1 for i, c in enumerate(nodes)}, max(map(len, nodes))
    leaves = [c for c in nodes if not any(c + (r,) in row for r in range(3))]
    out["retrieve_indices"] = np.array([[0] + [row[c[:d]] for d in range(1, len(c) + 1)]
                                        + [-1] * (depth - len(c)) for c in leaves])  # [L, D + 1]
    return out


def ancestor_by_joined_ranks(choices):
    """An ancestor told by string prefix of the joined ranks: "1" starts "10", so [1] is [10]'s."""
    out = reference(choices)
    joined = [""] + ["".join(map(str, c)) for c in choices]  # the root: ""
    out["attn_mask"] = np.array([[i.startswith(j) for j in joined] for i in joined])  # [n, n]
    return out


def ranks_as_one_number(choices):
    """A node keyed by its depth and its ranks as base-10 digits: [0, 10] is [1, 0]."""
    out = reference(choices)

    def key(c):
        return len(c), sum(r * 10 ** (len(c) - 1 - d) for d, r in enumerate(c))

    row = {key(c): i + 1 for i, c in enumerate(choices)}  # the last row with a key wins
    mask = np.eye(1 + len(choices), dtype=bool)  # [n, n]
    mask[:, 0] = True
    for i, c in enumerate(choices):
        mask[i + 1, [row[key(c[:d])] for d in range(1, len(c))]] = True
    out["attn_mask"] = mask
    return out


def indices_in_int8(choices):
    """Position ids and retrieve indices in int8: past row 127 they wrap."""
    out = reference(choices)
    return {**out, **{part: out[part].astype(np.int8) for part in PARTS[1:]}}


WRONG = (siblings_see_each_other, positions_from_one, retrieve_without_root,
         retrieve_leaf_to_root, leaf_by_ranks_up_to_2, ancestor_by_joined_ranks,
         ranks_as_one_number, indices_in_int8)
