"""Exercise: REST's retrieval step, the context's longest suffix in the datastore (He et al. 2023,
arXiv:2311.08252, section 3.1)."""
import functools
import itertools

import numpy as np

from picospec.exercises.grading import grade_cases, hash_twins, thue_morse
from picospec.rest import Datastore

NAME, FAMILY = "longest_suffix", "model-free drafting (prompt lookup, REST)"
STATEMENT = """\
**Exercise `longest_suffix(corpus, context, max_suffix)`: how much of the context REST matches.**
corpus, context: lists of token ids (ints from GPT-2's 50,257; leave them as they were). REST
looks the context up in its datastore by its longest suffix first: for
n = min(max_suffix, len(context)) down to 1, is the suffix context[-n:] found somewhere in the
corpus (as consecutive tokens, anywhere, the corpus's last tokens included)?
Return the first n that is, or 0 when not even the last token occurs (or the context or the
corpus is empty).
(REST then drafts from what followed those occurrences; picospec finds them with a suffix array,
a scan is fine here.)
Example: corpus [1, 2, 3, 1, 2], context [7, 3, 1, 2], max_suffix 4 -> 3."""
STUB = '''def longest_suffix(corpus, context, max_suffix):
    """corpus, context (token ids), max_suffix >= 1 -> n, the longest suffix's length (0: none)."""
    raise NotImplementedError'''
ANSWER = '''import numpy as np
from picospec.rest import Datastore


def longest_suffix(corpus, context, max_suffix):  # the project's answer: REST's suffix array
    if not corpus:  # a datastore holds one token or more
        return 0
    return Datastore.build(np.array(corpus), max_suffix).search(context, 1, 1)[1]'''


@functools.lru_cache(maxsize=None)
def store(corpus, max_suffix):
    return Datastore.build(np.array(corpus), max_suffix)


def reference(corpus, context, max_suffix):
    return store(tuple(corpus), max_suffix).search(context, 1, 1)[1] if corpus else 0


def cases(seed=None):
    """Every corpus of 1 to 4 tokens over {0, 1}, context of 1 to 3 over {0, 1, 2}, max_suffix 1
    to 3; then the worked example."""
    corpora = [list(c) for n in range(1, 5) for c in itertools.product(range(2), repeat=n)]
    contexts = [list(c) for n in range(1, 4) for c in itertools.product(range(3), repeat=n)]
    out = [(c, x, s) for c in corpora for x in contexts for s in (1, 2, 3)]
    out.append(([1, 2, 3, 1, 2], [7, 3, 1, 2], 4))
    # GPT-2's ids: [1, 2] is not in [11, 2] though "1, 2" is in "11, 2"; ids past a byte
    out += [([11, 2], [1, 2], 2), ([5, 12, 3], [1, 2, 3], 3), ([300, 50256, 7], [9, 50256, 7], 3),
            ([256, 1], [0, 1], 2), ([2, 13, 4], [3, 4], 2)]
    # an id whose digits begin a longer id's: " 1 2" begins " 1 23", " 2" begins " 23"
    out += [([1, 23], [1, 2], 2), ([23], [7, 2], 1), ([11, 2], [7, 1], 2)]
    out.append(([1, 2], [], 2))  # no context: nothing to match
    out.append(([], [1], 1))  # no corpus: nothing matches
    # 256 then 0 as 32- or 16-bit bytes hold the bytes of 1 at an offset no id starts at
    out.append(([256, 0], [1], 1))
    # suffixes past 3 tokens: 4 of a context of 5, then 4 where max_suffix stops a match of 5
    out += [([5, 1, 2, 3, 4, 6], [9, 1, 2, 3, 4], 5), ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], 4)]
    out.append(([5, *range(1, 10), 6], [42, *range(1, 10)], 12))  # 9 of 10, max_suffix past it
    # ids compared as digits joined ("1", "12" is "11", "2") or as float16 (40000 is 40001)
    out += [([1, 12, 5], [11, 2], 2), ([40000, 7], [40001], 1)]
    # 5,000 3s, then the one 1, 3: only the last occurrence of 3 extends; then 1, 3 and 5,000 3s:
    # only the first
    threes, first = [3] * 5_000 + [1, 3], [1, 3] + [3] * 5_000
    out += [(threes, [1, 3], 2), (first, [1, 3], 2)]
    # corpora of 70,000 tokens whose one match lies near the end, past 2^16, then at the start (a
    # corpus cut to its head or tail misses one, a place held in 16 bits wraps), the second 12
    # tokens long (a set of the n-grams up to 8 in a long corpus is short); a match of 1,100
    # tokens (a suffix capped at REST's 16, or 64, or 1,024, is short)
    tail, head = [7] * 69_990 + [1, 2, 3, 9] + [7] * 6, [*range(1, 13), 9] + [7] * 69_987
    run, ran = [5, *range(1_000, 2_100), 6], [42, *range(1_000, 2_100)]
    out += [(tail, [4, 1, 2, 3], 4), (head, [4, *range(1, 13)], 13), (run, ran, 1_200)]
    # 300 0s in corpus and context (a suffix array keyed by 16 tokens, or a run cut to 256, is
    # short)
    zeros = [0] * 300
    out.append((zeros, zeros, 300))
    # [257, 0] as 16-bit bytes lies across [256, 1, 0]'s at an offset no id starts at; a 4-token
    # context whose sum, first and last token are those of the corpus
    out += [([256, 1, 0], [257, 0], 2), ([0, 1, 2, 3], [0, 2, 1, 3], 4)]
    # the pairs [1, 50256 - B] for every B from 2 to 50256, each followed by 9, and the context
    # [0, 50256], found nowhere: a pair packed into one number a * B + b (or hashed so,
    # unchecked) with any B short of the vocabulary takes [1, 50256 - B] for it
    packed = [t for B in range(2, 50_257) for t in (1, 50_256 - B, 9)]
    out.append((packed, [0, 50_256], 2))
    # pairs whose polynomial hash with base 50,257 wraps to [0, 0]'s (0) modulo 2^31 - 1, 2^31,
    # 10^9 + 7, 10^9 + 9 and 998,244,353: [0, 0] is found nowhere (an unchecked hash finds it)
    out.append(([42730, 2037, 9, 42730, 2038, 9, 19897, 36478, 9, 19897, 36480, 9, 19862, 39819],
                [0, 0], 2))
    # ... a corpus whose 5-gram's hash wraps to the context's modulo 2^64 (int64 or uint64 keys),
    # then modulo 2^61 - 1
    out += [([3201, 0, 0, 0, 1396], [0, 1694, 887, 1440, 0], 5),
            ([1046, 1251, 2173, 2208, 0], [0, 0, 0, 0, 3028], 5)]
    # two corpora alike in their first and last 100 tokens and length, 1, 2 in one, 1, 3 in the
    # other between them: an index kept by the corpus's ends is the other corpus's
    ends = list(range(100, 200)), list(range(200, 300))
    apart = [ends[0] + [1, last] + ends[1] for last in (2, 3)]
    out += [(apart[0], [1, 2], 2), (apart[1], [1, 3], 2)]
    # 1 then 0 as big-endian bytes of 16, 32 or 64 bits hold the bytes of 256 at an offset no id
    # starts at
    out.append(([1, 0], [256], 1))
    # windows whose polynomial hash is that of [0, 0, 0] for popular bases and moduli
    # (grading.HASH_BASES, HASH_MODULI), each followed by 9: [0, 0, 0] is found nowhere (an
    # unchecked hash finds it); [23022, 1073] beside [15505, 31842], whose hash(tuple) agree in
    # their last 32 bits
    twins = [t for w in hash_twins() for t in (*w, 9)]
    out += [(twins, [0, 0, 0], 3), ([15505, 31842], [23022, 1073], 2)]
    # every corpus of 5 or 6 tokens over {0, 1} against every context of 3: a match that must fall
    # back along two borders (KMP falling back once, a suffix automaton redirecting one
    # transition to a clone, answer otherwise)
    out += [(list(c), list(x), 3) for n in (5, 6) for c in itertools.product(range(2), repeat=n)
            for x in itertools.product(range(2), repeat=3)]
    # ids zero-padded to 5 digits: "00001" (id 1) is found first across 4000 and 11, misaligned,
    # and only then at the id itself
    out.append(([4000, 11, 1], [1], 1))
    # a match of 40,000 tokens (a suffix capped at 2,048, 4,096 or 8,192, or a length held in 16
    # bits, is short)
    run5, ran5 = [5, *range(1_000, 41_000), 6], [42, *range(1_000, 41_000)]
    out.append((run5, ran5, 50_000))
    # the Thue-Morse sequence of 0 and 1 over 1,024 tokens, 9, then its complement but the first
    # token, against the whole complement: the sequence and its complement agree in their
    # polynomial hash modulo 2^64 whatever the odd base (h * B + token wraps so in uint64, and
    # modulo 2^32 too), so such a hash unchecked finds all 1,024 (1,023 are)
    morse, twin = thue_morse(1_024), thue_morse(1_024, 1, 0)
    thue = morse + [9] + twin[1:]
    out.append((thue, twin, 1_024))
    shown = {id(run5): "[5, 1000, 1001, ..., 40999, 6]", id(ran5): "[42, 1000, 1001, ..., 40999]",
             id(threes): "[3] * 5000 + [1, 3]", id(first): "[1, 3] + [3] * 5000",
             id(tail): "[7] * 69990 + [1, 2, 3, 9] + [7] * 6",
             id(head): "[1, 2, ..., 12, 9] + [7] * 69987", id(run): "[5, 1000, 1001, ..., 2099, 6]",
             id(ran): "[42, 1000, 1001, ..., 2099]", id(zeros): "[0] * 300",
             **{id(c): f"[100, 101, ..., 199, 1, {c[101]}, 200, 201, ..., 299]" for c in apart},
             id(packed): "[1, 50254, 9, 1, 50253, 9, ..., 1, 0, 9] (150,765 tokens)",
             id(twins): f"[{', '.join(map(str, twins[:8]))}, ...] ({len(twins) // 4} windows of "
                        f"3, each then 9)",
             id(thue): "M + [9] + C[1:], M the Thue-Morse sequence [0, 1, 1, 0, 1, 0, 0, 1, ...] "
                       "over 1,024 tokens, C its complement", id(twin): "C"}
    return [(f"corpus={shown.get(id(c), c)}, context={shown.get(id(x), x)}, max_suffix={s}",
             (c, x, s)) for c, x, s in out]


def compare(yours, expected):
    if isinstance(yours, (bool, np.bool_)) or not isinstance(yours, (int, np.integer)):
        return f"what it returns: a {type(yours).__name__}, not an int"
    return None if yours == expected else "n"


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(), compare,
                       "picospec.rest.Datastore.search")


def found(corpus, s):  # s occurs in corpus as consecutive tokens
    return any(corpus[i:i + len(s)] == s for i in range(len(corpus) - len(s) + 1))


# WRONG: plausible mistakes, each one the grader rejects
def no_cap(corpus, context, max_suffix):
    """max_suffix ignored, every suffix of the context tried."""
    return next((n for n in range(len(context), 0, -1) if found(corpus, context[-n:])), 0)


def needs_a_continuation(corpus, context, max_suffix):
    """An occurrence at the corpus's very end not counted (nothing follows it)."""
    return next((n for n in range(min(max_suffix, len(context)), 0, -1)
                 if found(corpus[:-1], context[-n:])), 0)


def first_miss(corpus, context, max_suffix):
    """N counted up from 1, returning the first n not found (one too many)."""
    n = 1
    while n <= min(max_suffix, len(context)) and found(corpus, context[-n:]):
        n += 1
    return n


def as_strings(corpus, context, max_suffix):
    """Found as text: "1, 2" is inside "11, 2", so [1, 2] is wrongly found in [11, 2]."""
    text = str(corpus)[1:-1]
    return next((n for n in range(min(max_suffix, len(context)), 0, -1)
                 if str(context[-n:])[1:-1] in text), 0)


def as_spaced_text(corpus, context, max_suffix):
    """Searched as text, a space before each id: " 1 2" is inside " 1 23"."""
    text = "".join(f" {t}" for t in corpus)
    return next((n for n in range(min(max_suffix, len(context)), 0, -1)
                 if "".join(f" {t}" for t in context[-n:]) in text), 0)


WRONG = (no_cap, needs_a_continuation, first_miss, as_strings, as_spaced_text)
