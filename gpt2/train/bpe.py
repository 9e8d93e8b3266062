"""Train a byte-level BPE vocabulary in GPT-2's file formats (Sennrich et al. 2016): from the 256
bytes, merge the most frequent adjacent pair of symbols over the distinct words (GPT-2's regex),
recounting only the words that hold the merged pair; ties go to the largest (first, second).

    words {"abab": 2, "ab": 1} -> (a,b)=5, (b,a)=2 -> merge (a,b) -> (ab,ab)=2 -> merge (ab,ab)

    python -m gpt2.train.bpe --out gpt2/assets/tiny-target --vocab_size 4096
"""
import sys
from collections import Counter, defaultdict
from pathlib import Path

from gpt2.weights import output_folder
from picospec_cli import Option, out_folder
from gpt2.train.corpus import stdlib_files
from gpt2.encoder import EOT, PATTERN, bytes_to_unicode, merge_pair


def count_words(texts):
    words = Counter()
    for text in texts:
        words.update(PATTERN.findall(text))
    return words


def train_bpe(texts, vocab_size=4096, verbose=False):
    """-> (encoder {token: id}, merges [(a, b)]): ids 0..255 are the bytes, then one id per merge,
    then <|endoftext|>."""
    byte_encoder = bytes_to_unicode()
    words = count_words(texts)
    # each word as its symbols
    symbols = [[byte_encoder[b] for b in word.encode("utf-8")] for word in words]
    freqs = list(words.values())
    # pair -> count over the corpus; pair -> words that contain it
    pairs, where = Counter(), defaultdict(set)
    for w, (word, f) in enumerate(zip(symbols, freqs)):
        for pair in zip(word, word[1:]):
            pairs[pair] += f
            where[pair].add(w)
    n_merges = vocab_size - 256
    bar = None
    if verbose and pairs:
        from tqdm import tqdm

        bar = tqdm(total=n_merges, desc="bpe merges")
    merges = []
    while len(merges) < n_merges and pairs:
        (first, second), count = max(pairs.items(), key=lambda item: (item[1], item[0]))
        if count <= 0:
            break
        merges.append((first, second))
        for w in where.pop((first, second)):
            word, f = symbols[w], freqs[w]
            for pair in zip(word, word[1:]):  # take the word's old pairs out of the counts ...
                pairs[pair] -= f
            merged = symbols[w] = merge_pair(word, first, second)
            for pair in zip(merged, merged[1:]):  # ... and its new pairs in
                pairs[pair] += f
                where[pair].add(w)
        del pairs[first, second]
        if bar:
            bar.update()
    if bar:
        bar.close()
    encoder = {byte_encoder[b]: b for b in range(256)}
    for first, second in merges:
        encoder[first + second] = len(encoder)
    encoder[EOT] = len(encoder)
    return encoder, merges


def main(out, vocab_size=4096, files=None, overwrite=False):
    """Train a byte-level BPE vocabulary into OUT (vocab.json, merges.txt) on FILES (comma-separated
    UTF-8 text files; default: the Python standard library's source)."""
    from gpt2.encoder import save_tokenizer

    held = [n for n in ("vocab.json", "merges.txt") if (Path(out) / n).exists()]
    if (Path(out) / "model.safetensors").exists() and held and not overwrite:
        raise ValueError(f"--out {out} holds a model (model.safetensors) and its tokenizer "
                         f"({', '.join(held)}): a new vocabulary would change what the weights' "
                         f"token ids mean; give another folder, or --overwrite to replace the "
                         f"tokenizer (then train the model again)")
    paths = [Path(f) for f in files] if files else stdlib_files()
    texts = [read_text(p) for p in paths]
    where = f"--files {','.join(files)}" if files else "the standard library"
    if not any(text.strip() for text in texts):
        raise ValueError(f"{where}: no text to learn merges from (empty, or only white space); "
                         f"give files of text")
    encoder, merges = train_bpe(texts, vocab_size, verbose=True)
    if not merges:
        raise ValueError(f"{where}: no pair of symbols to merge (no word of two bytes or more); "
                         f"give files of more text")
    if len(merges) < vocab_size - 256:
        print(f"note: {len(merges)} merges learned, not the {vocab_size - 256} that --vocab_size "
              f"{vocab_size} asks for ({where} hold no more): the vocabulary has {len(encoder)} "
              f"tokens; give more text for more", file=sys.stderr)
    with output_folder(out):
        save_tokenizer(out, encoder, merges)  # each file written to a temporary name, then renamed
    print(f"{len(encoder)} tokens from {len(paths)} files -> {out}")


def read_text(path):
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"--files {path} is not UTF-8 text ({e.reason} at byte {e.start}); leave "
                         f"it out") from None


# -> None, or why one of --files cannot be read (the door checks each item of a list)
def no_file(path):
    if not Path(path).is_file():
        return "no such file" + (" (it is a folder)" if Path(path).is_dir() else "")


OPTIONS = [
    Option("out", "path", None, "folder to write vocab.json + merges.txt into (made if missing)",
           check=out_folder, required=True),
    Option("vocab_size", int, 4096,
           "tokens: 256 bytes + merges + <|endoftext|> (gpt2.train.corpus stores ids as uint16)",
           low=257, high=65536),
    Option("files", "strs", None,
           "comma-separated UTF-8 text files to train on (default: the Python standard library)",
           check=no_file),
    Option("overwrite", bool, False, "replace the tokenizer of a model's folder (a folder with "
           "model.safetensors), whose weights then need training again"),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
