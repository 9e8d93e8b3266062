"""GPT-2's byte-level BPE tokenizer (Radford et al. 2019, sec. 2.2): UTF-8 bytes as printable
characters, split into words by GPT-2's regex, merged lowest rank first. Example: merges
[("a", "b"), ("ab", "c")] turn a b c a b into ab c ab, then abc ab.
"""
import json
from pathlib import Path

import regex as re

# GPT-2's words: contractions, letters, numbers, other symbols, each after an optional space; spaces
PATTERN = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
EOT = "<|endoftext|>"


def bytes_to_unicode():
    """The 256 bytes -> printable characters: 33 ('!') -> '!', 32 (space) -> 'Ġ', 10 -> 'Ċ'."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def apply_merges(word, ranks):
    """Merge the adjacent pair of lowest rank until none has a rank: "abcab" -> ["abc", "ab"]."""
    parts = list(word)
    while len(parts) > 1:
        rank, i = min((ranks.get(pair, len(ranks)), i)
                      for i, pair in enumerate(zip(parts, parts[1:])))
        if rank == len(ranks):
            break
        parts = merge_pair(parts, parts[i], parts[i + 1])
    return parts


def merge_pair(parts, first, second):
    """Merge every occurrence of the pair, left to right: [a, b, a, b, b], (a, b) -> [ab, ab, b]."""
    merged, j = [], 0
    while j < len(parts):
        if j + 1 < len(parts) and parts[j] == first and parts[j + 1] == second:
            merged.append(first + second)
            j += 2
        else:
            merged.append(parts[j])
            j += 1
    return merged


class Encoder:
    def __init__(self, encoder, bpe_merges):
        self.encoder = encoder  # token string -> id
        self.decoder = {i: s for s, i in encoder.items()}
        self.ranks = {tuple(pair): rank for rank, pair in enumerate(bpe_merges)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        self.cache = {}  # word -> ids: source code repeats its words a lot

    @property
    def n_vocab(self):
        return len(self.encoder)

    @property
    def fingerprint(self):
        """sha256 of the vocabulary and merges: equal for tokenizers that encode alike."""
        if not hasattr(self, "_fingerprint"):
            import hashlib

            vocab = sorted(self.encoder.items(), key=lambda item: item[1])
            merges = sorted(self.ranks, key=self.ranks.get)
            text = json.dumps([vocab, merges], ensure_ascii=False, separators=(",", ":"))
            self._fingerprint = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return self._fingerprint

    @property
    def eot(self):
        return self.encoder[EOT]

    def encode_word(self, word):
        if word not in self.cache:
            chars = "".join(self.byte_encoder[b] for b in word.encode("utf-8"))
            self.cache[word] = [self.encoder[part] for part in apply_merges(chars, self.ranks)]
        return self.cache[word]

    def encode(self, text, allowed_special=(EOT,)):
        """Text -> ids; `<|endoftext|>` becomes its id (tiktoken's allowed_special="all")."""
        ids = []
        specials = [s for s in allowed_special if s in self.encoder]
        chunks = (re.split("(" + "|".join(map(re.escape, specials)) + ")", text)
                  if specials else [text])
        for chunk in chunks:
            if chunk in specials:
                ids.append(self.encoder[chunk])
            else:
                for word in PATTERN.findall(chunk):
                    ids.extend(self.encode_word(word))
        return ids

    def decode(self, ids):
        data = bytearray()
        for i in ids:
            token = self.decoder[int(i)]
            data.extend(token.encode() if token == EOT
                        else bytes(self.byte_decoder[c] for c in token))
        return data.decode("utf-8", errors="replace")


def load_encoder(folder):
    """The tokenizer in `folder` (OpenAI's or Hugging Face's file names)."""
    folder = Path(folder)
    for vocab, merges in (("encoder.json", "vocab.bpe"), ("vocab.json", "merges.txt")):
        if (folder / vocab).exists() and (folder / merges).exists():
            encoder = read_vocab(folder / vocab)
            return Encoder(encoder, read_merges(folder / merges, encoder))
    raise ValueError(f"{folder}: no tokenizer found; it needs encoder.json + vocab.bpe or "
                     f"vocab.json + merges.txt")


def read_vocab(path):
    """token -> id, ids whole numbers >= 0, all 256 byte tokens present."""
    from gpt2.weights import CorruptFile, read_json

    encoder = read_json(path)
    if (not isinstance(encoder, dict)
            or not all(type(i) is int and i >= 0 for i in encoder.values())):
        raise CorruptFile(path, "not a vocabulary: expected a JSON object of token -> id "
                                "(a whole number >= 0)")
    missing = [c for c in bytes_to_unicode().values() if c not in encoder]
    if missing:
        raise CorruptFile(path,
                          f"not a byte-level vocabulary: {len(missing)} of the 256 byte tokens are "
                          f"missing, such as {missing[0]!r}")
    return encoder


def read_merges(path, encoder):
    """Merge pairs in rank order, one "a b" a line, each a + b a token."""
    from gpt2.weights import CorruptFile

    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise CorruptFile(path, f"not UTF-8 text ({e})") from None
    pairs = []
    for n, line in enumerate(lines, 1):
        if line.strip() and not line.startswith("#version"):
            pair = tuple(line.split())
            if len(pair) != 2 or pair[0] + pair[1] not in encoder:
                raise CorruptFile(path,
                                  f"line {n} {line[:40]!r} is not a merge: two tokens whose join "
                                  f"is a token")
            pairs.append(pair)
    return pairs


def save_tokenizer(folder, encoder, merges):
    """Write vocab.json + merges.txt atomically."""
    from picospec_cli import replace_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    replace_file(folder / "vocab.json", [json.dumps(encoder, ensure_ascii=False).encode("utf-8")])
    replace_file(folder / "merges.txt",
                 ["#version: 0.2\n".encode(), *(f"{a} {b}\n".encode("utf-8") for a, b in merges)])
