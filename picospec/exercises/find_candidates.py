"""Exercise: prompt lookup's n-gram match (Saxena 2023), graded on every short sequence over three
tokens."""
import itertools

import numpy as np

from picospec.exercises.grading import grade_cases, hash_twins, not_ids, thue_morse
from picospec.prompt_lookup import find_candidates as reference

NAME, FAMILY = "find_candidates", "model-free drafting (prompt lookup, REST)"
STATEMENT = """\
**Exercise `find_candidates(x, max_ngram_size, num_pred_tokens)`: prompt lookup's draft.** x: the
token ids so far (a list of ints from GPT-2's 50,257, to be left as it was). For
n = min(max_ngram_size, len(x) - 1) down to 1: take the trailing n-gram x[-n:] and look for its
first earlier occurrence, a window x[s:s + n] with s + n < len(x) (not the trailing n-gram
itself), scanning s from 0; at the first match return the tokens that followed it,
x[s + n : s + n + num_pred_tokens]. No match for any n: return [].
Example: x = [1, 2, 3, 1, 2], max_ngram_size 3, num_pred_tokens 2 -> [3, 1]."""
STUB = '''def find_candidates(x, max_ngram_size=3, num_pred_tokens=10):
    """x (token ids) -> the draft: a list of at most num_pred_tokens ids."""
    raise NotImplementedError'''
ANSWER = "from picospec.prompt_lookup import find_candidates  # the project's answer"


def cases(seed=None):
    """Every x of 1 to 6 tokens over {0, 1, 2}, shortest first; n-grams 1 to 3, 1, 2 or 4 drafts."""
    small = [(list(x), n, k) for length in range(1, 7)
             for x in itertools.product(range(3), repeat=length)
             for n in (1, 2, 3) for k in (1, 2, 4)]
    # GPT-2's ids: multi-digit ("1 2" is in the text "2 9 11 2 7 1 2" at 11 2, not as a window),
    # past a byte (256), up to the vocabulary's last, 50256
    rng, shown = np.random.default_rng(1), {}
    real = [([11, 2, 1, 2], 2, 2), ([2, 9, 11, 2, 7, 1, 2], 2, 1), ([256, 1, 256], 1, 1),
            ([50256, 12, 50256], 1, 2), ([256, 5, 0], 1, 1)]  # 256 and 0: one byte, two ids
    # an id whose digits begin or end a longer id's: " 5 1" begins " 5 11", "1 5 " ends "21 5 "
    real += [([11, 5, 1], 1, 2), ([5, 11, 9, 5, 1], 2, 1), ([300, 2, 30], 1, 1),
             ([21, 5, 1], 1, 2), ([9, 21, 5, 7, 1, 5], 2, 1)]
    # n-grams past 3: the 4-gram's first match lies after the 3-gram's; 5 drafts of the 10 asked
    longer = [2, 3, 4, 8, 1, 2, 3, 4, 9, 1, 2, 3, 4]
    real += [(longer, 4, 10), (list(longer), 5, 10)]
    # no tokens yet (n from -1 down to 1: no n-gram); no drafts asked for; n-grams of size 0
    real += [([], 3, 10), ([1, 2, 1], 1, 0), ([1, 2, 1], 0, 2)]
    # a match of 8 tokens, 12 drafted: the 7-gram's first match lies before the 8-gram's; then
    # of 20 (n-grams capped at 8 or 16 take a shorter, earlier one)
    for m in (8, 20):
        pattern = list(range(1, m + 1))
        real.append((pattern[1:] + [90] + pattern + list(range(91, 102)) + pattern, m + 2, 12))
    # 2,000 drafts asked and found (a draft capped at 16, 64 or 1,024 is short)
    drafts = list(range(1, 2_001)) + [1]
    real.append((drafts, 1, 2_000))
    shown[id(drafts)] = "[1, 2, ..., 2000, 1]"
    # two prompts of one length and one last 41 tokens, their match followed by 3, then 4: a
    # draft kept by the length and the last tokens is the other prompt's
    tail = list(range(100, 140)) + [99]
    real += [([99, 3] + tail, 1, 1), ([99, 4] + tail, 1, 1)]
    # a 4-gram matched only in full (its sum, first and last token agree with an earlier window's)
    # and a match that overlaps the n-gram itself
    real += [([3, 7, 0, 2, 1, 3, 8, 0, 1, 2, 3], 4, 1), ([1, 2, 3, 4, 5, 6, 0, 0, 0], 2, 2)]
    for length in (8, 20, 40):
        x = [int(t) for t in rng.choice([7, 300, 11, 1, 50256, 4000], size=length)]
        real += [(x, n, k) for n in (1, 2, 3) for k in (1, 3)]
    # ids compared as digits joined ("1", "12" is "11", "2"), as float16 (40000 is 40001), and
    # <|endoftext|> inside the draft, not its end
    real += [([1, 12, 5, 11, 2], 2, 1), ([40000, 9, 40001], 1, 1),
             ([50256, 7, 50256, 1, 50256], 1, 3)]
    # 70,000 tokens whose first match lies at the very start and another near the end (a scan of
    # the last 32,768, or an index where a later start overwrites the first, takes the other)
    long = [5, 6] + [7] * 69_994 + [5, 9] + [8, 5]
    real.append((long, 2, 3))
    shown[id(long)] = "[5, 6] + [7] * 69994 + [5, 9] + [8, 5]"
    # ... and 70,000 whose one match lies near the end, past 2^16, after 69,988 windows that
    # start as it does (a scan of the first 65,536 misses it, a start held in 16 bits wraps, the
    # first 10,000 starts that share its first token do not hold it)
    late = [2, 8] + [1] * 69_988 + [1, 2, 3] + [1] * 5 + [1, 2]
    real.append((late, 2, 1))
    shown[id(late)] = "[2, 8] + [1] * 69988 + [1, 2, 3] + [1] * 5 + [1, 2]"
    # window sums of large ids in float32 (a filter by sum) round the one match away
    sums = [50_001] * 1_000 + [1, 2, 3, 1, 2]
    real.append((sums, 2, 1))
    shown[id(sums)] = "[50001] * 1000 + [1, 2, 3, 1, 2]"
    # the windows [1, 50256 - B] for every B from 2 to 50256, each followed by 9, then the tail
    # [0, 50256], which matches none: a window packed into one number a * B + b (or hashed so,
    # unchecked) with any B short of the vocabulary takes [1, 50256 - B] for it
    packed = [t for B in range(2, 50_257) for t in (1, 50_256 - B, 9)] + [0, 50_256]
    real.append((packed, 2, 1))
    shown[id(packed)] = "[1, 50254, 9, 1, 50253, 9, ..., 1, 0, 9, 0, 50256] (150,767 tokens)"
    # windows whose polynomial hash with base 50,257 wraps to [0, 0]'s (0) modulo 2^31 - 1, 2^31,
    # 10^9 + 7, 10^9 + 9 and 998,244,353, then the tail [0, 0], found nowhere before: a hash
    # unchecked takes one of them for a match
    real.append(([42730, 2037, 11, 42730, 2038, 12, 19897, 36478, 13, 19897, 36480, 14, 19862,
                  39819, 15, 0, 0], 2, 1))
    # ... 5-grams whose hash wraps to the trailing one's modulo 2^64 (int64 or uint64 keys), then
    # modulo 2^61 - 1
    real += [([3201, 0, 0, 0, 1396, 77, 0, 1694, 887, 1440, 0], 5, 1),
             ([1046, 1251, 2173, 2208, 0, 77, 0, 0, 0, 0, 3028], 5, 1)]
    # windows of 33 alike in their first and last 16 tokens, apart in between (a long n-gram
    # compared at its ends only takes the wrong one)
    A, B = list(range(100, 116)), list(range(200, 216))
    sampled = B + [5] + A + [1] + B + [9] + A + [2] + B
    real.append((sampled, 33, 1))
    shown[id(sampled)] = ("B + [5] + A + [1] + B + [9] + A + [2] + B, A = [100, ..., 115], "
                          "B = [200, ..., 215]")
    # a match of 300 tokens, 12 drafted (n-grams capped at 32, 64 or 128 take a shorter, earlier
    # one)
    pattern = list(range(1, 301))
    ngram = pattern[1:] + [900] + pattern + list(range(901, 912)) + pattern
    real.append((ngram, 302, 12))
    shown[id(ngram)] = ("[2, 3, ..., 300, 900, 1, 2, ..., 300, 901, 902, ..., 911, 1, 2, ..., "
                        "300]")
    # two prompts alike in their first and last 101 tokens and length, their match followed by 3,
    # then 4: a draft kept by the prompt's ends is the other prompt's
    ends = list(range(200, 300)) + [99], list(range(300, 400)) + [99]
    for middle in (3, 4):
        real.append((x := ends[0] + [middle] + ends[1], 1, 1))
        shown[id(x)] = f"[200, 201, ..., 299, 99, {middle}, 300, 301, ..., 399, 99]"
    # windows whose polynomial hash is that of the tail [0, 0, 0] for popular bases and moduli
    # (grading.HASH_BASES, HASH_MODULI), each followed by 9 (only the 2-gram [0, 0] inside the
    # tail matches); [15505, 31842] before the tail [23022, 1073], whose hash(tuple) agree in
    # their last 32 bits
    twins = [t for w in hash_twins() for t in (*w, 9)] + [0, 0, 0]
    real += [(twins, 3, 1), ([15505, 31842, 5, 23022, 1073], 2, 1)]
    shown[id(twins)] = (f"[{', '.join(map(str, twins[:8]))}, ..., 9, 0, 0, 0] "
                        f"({len(twins) // 4} windows of 3, each then 9, then 0, 0, 0)")
    # ids zero-padded to 5 digits: "00001" (the tail, id 1) is found first across 4000 and 11,
    # misaligned, and only then at the id itself
    real.append(([4000, 11, 1, 9, 1], 1, 2))
    # the Thue-Morse sequence of 0 and 1 over 128 tokens, 9, its complement, 7 and the complement
    # again: the first two agree in their polynomial hash modulo 2^32 whatever the odd base (h * B
    # + token wraps so in uint32), so such a hash unchecked takes the first for the trailing
    # 128-gram's match (modulo 2^64 it takes 1,024 tokens, and an index of every n-gram up to
    # 1,024, a right answer, gigabytes)
    morse, twin = thue_morse(128), thue_morse(128, 1, 0)
    thue = morse + [9] + twin + [7] + twin
    real.append((thue, 128, 1))
    shown[id(thue)] = ("M + [9] + C + [7] + C, M the Thue-Morse sequence [0, 1, 1, 0, 1, 0, 0, 1, "
                       "...] over 128 tokens, C its complement")
    out = [(f"x={shown.get(id(x), x)}, max_ngram_size={n}, num_pred_tokens={k}", (x, n, k))
           for x, n, k in small + real]
    # the defaults, 3 and 10: the 2-, 3- and 4-gram ending x first match apart, 20 tokens follow
    # each
    bare = [2, 3, 5, 9, 1, 2, 3, *range(20, 40), 0, 1, 2, 3, *range(40, 60), 0, 1, 2, 3]
    return out + [("x=[2, 3, 5, 9, 1, 2, 3, 20, 21, ..., 39, 0, 1, 2, 3, 40, 41, ..., 59, 0, 1, "
                   "2, 3], max_ngram_size and num_pred_tokens left to their defaults (3 and 10)",
                   (bare,))]


def compare(yours, expected):
    if not isinstance(yours, list):  # x + an array adds ids elementwise; x + a tuple raises
        got = "a NumPy array" if isinstance(yours, np.ndarray) else f"a {type(yours).__name__}"
        return f"what it returns: {got}, not a list"
    if yours != expected:
        return "draft"
    return None if (odd := not_ids(yours)) is None else f"draft: {odd}"


def grade(fn, samples=None, seed=0):
    return grade_cases(NAME, fn, reference, cases(), compare,
                       "picospec.prompt_lookup.find_candidates")


# WRONG: plausible mistakes, each one the grader rejects
def last_occurrence(x, max_ngram_size=3, num_pred_tokens=10):
    """The latest earlier occurrence instead of the first."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for start in range(len(x) - n - 1, -1, -1):
            if x[start:start + n] == x[-n:]:
                return x[start + n:start + n + num_pred_tokens]
    return []


def shortest_first(x, max_ngram_size=3, num_pred_tokens=10):
    """N from 1 up, so a 1-gram match wins over a longer one."""
    for n in range(1, min(max_ngram_size, len(x) - 1) + 1):
        for start in range(len(x) - n):
            if x[start:start + n] == x[-n:]:
                return x[start + n:start + n + num_pred_tokens]
    return []


def matches_itself(x, max_ngram_size=3, num_pred_tokens=10):
    """The scan reaches the trailing n-gram, which matches itself and drafts nothing."""
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        for start in range(len(x) - n + 1):
            if x[start:start + n] == x[-n:]:
                return x[start + n:start + n + num_pred_tokens]
    return []


def through_bytes(x, max_ngram_size=3, num_pred_tokens=10):
    """The n-gram found with bytes(x).find: fast, and wrong past id 255 (it cannot encode them)."""
    data = bytes(x)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        s = data.find(data[-n:])
        if s + n < len(x):
            return list(x[s + n:s + n + num_pred_tokens])
    return []


def yields_the_draft(x, max_ngram_size=3, num_pred_tokens=10):
    """yield, not return: a generator of the right tokens, used up by one pass over it."""
    yield from reference(x, max_ngram_size, num_pred_tokens)


def as_text(x, max_ngram_size=3, num_pred_tokens=10):
    """Searched as text, a space before each id: " 5 1" begins " 5 11"."""
    text = "".join(f" {t}" for t in x)
    for n in range(min(max_ngram_size, len(x) - 1), 0, -1):
        at = text.find("".join(f" {t}" for t in x[-n:]))
        s = text[:at].count(" ")  # the window's first token
        if s + n < len(x):
            return x[s + n:s + n + num_pred_tokens]
    return []


WRONG = (last_occurrence, shortest_first, matches_itself, through_bytes, as_text,
         yields_the_draft)
