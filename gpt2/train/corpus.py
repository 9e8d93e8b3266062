"""The training corpus, with no downloads: the Python standard library's source. A file goes by
sha256(path relative to the library) mod 100: < 90 train, < 95 val, else heldout (never trained on).

    python -m gpt2.train.corpus --tokenizer gpt2/assets/tiny-target --out data/   # *.bin, meta.json
"""
import hashlib
import json
import sysconfig
from pathlib import Path

import numpy as np

from gpt2.weights import output_folder
from picospec_cli import Option, out_folder

EXCLUDED = {"test", "tests", "idle_test", "site-packages"}


def stdlib_root():
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root=None):
    """The standard library's .py files, sorted, without test folders and installed packages."""
    root = Path(root or stdlib_root())
    files = [p for p in root.rglob("*.py") if not EXCLUDED & set(p.relative_to(root).parts)]
    return sorted(p for p in files if _is_utf8(p))


def _is_utf8(path):
    try:
        path.read_text(encoding="utf-8")
        return True
    except UnicodeDecodeError:
        return False


def split_of(relative_path):
    bucket = int(hashlib.sha256(str(relative_path).encode()).hexdigest(), 16) % 100
    return "train" if bucket < 90 else "val" if bucket < 95 else "heldout"


def split_files(files, root=None):
    root = Path(root or stdlib_root())
    splits = {"train": [], "val": [], "heldout": []}
    for path in files:
        splits[split_of(Path(path).relative_to(root))].append(Path(path))
    return splits


def tokenize(files, encoder):
    """Token ids of the files, each followed by <|endoftext|>."""
    ids = []
    for path in files:
        ids += encoder.encode(path.read_text(encoding="utf-8"), allowed_special=()) + [encoder.eot]
    return ids


def main(tokenizer, out, root=None):
    """Tokenize the standard library (or ROOT) into OUT/train.bin, val.bin, heldout.bin (uint16)
    and meta.json."""
    from gpt2.encoder import EOT, load_encoder
    from picospec_cli import replace_file

    encoder, out, root = load_encoder(tokenizer), Path(out), Path(root or stdlib_root())
    if EOT not in encoder.encoder:  # tokenize() ends each file with it
        raise ValueError(f"--tokenizer {tokenizer} has no {EOT} token, which ends each file in the "
                         f"token files: give a tokenizer with it (python -m gpt2.train.bpe adds "
                         f"it)")
    if set(encoder.decoder) != set(range(encoder.n_vocab)):  # meta.json's n_vocab bounds the ids
        raise ValueError(f"--tokenizer {tokenizer}: its {encoder.n_vocab} tokens do not have the "
                         f"ids 0 to {encoder.n_vocab - 1}, one each (the largest is "
                         f"{max(encoder.decoder)}): give a tokenizer made by python -m "
                         f"gpt2.train.bpe, or a model's own")
    if encoder.n_vocab > 65536:
        raise ValueError(f"--tokenizer {tokenizer} has {encoder.n_vocab} tokens: they do not fit "
                         f"uint16 token files (at most 65536)")
    splits = split_files(stdlib_files(root), root)
    if not any(splits.values()):
        raise ValueError(f"--root {root}: no UTF-8 .py files there (test folders and site-packages "
                         f"are left out)")
    if empty := [name for name, files in splits.items() if not files]:
        counts = ", ".join(f"{len(files)} to {name}" for name, files in splits.items())
        raise ValueError(f"--root {root} has {sum(map(len, splits.values()))} .py files: {counts} "
                         f"(by a hash of the path, about 90, 5 and 5 in 100), and each split needs "
                         f"at least one file ({' and '.join(empty)} would be empty): give a folder "
                         f"of more files")
    meta = {"n_vocab": encoder.n_vocab, "tokenizer": encoder.fingerprint,
            "tokenizer_folder": str(Path(tokenizer).resolve()), "root": str(root), "tokens": {},
            "files": {}}
    ids = {}
    # all the work first: a failed or interrupted run writes nothing
    for name, files in splits.items():
        ids[name] = np.array(tokenize(files, encoder), dtype=np.uint16)  # [n_tokens]
        meta["tokens"][name] = len(ids[name])
        meta["files"][name] = [str(p.relative_to(root)) for p in files]
        print(f"{name}: {len(files)} files, {len(ids[name])} tokens")
    with output_folder(out):
        for name, a in ids.items():  # each file written to a temporary name, then renamed
            replace_file(out / f"{name}.bin", [a.tobytes()])
        replace_file(out / "meta.json", [json.dumps(meta, indent=1).encode()])


def heldout_prompts(encoder, n, n_tokens=64, seed=0, root=None):
    """n prompts of n_tokens ids cut from held-out files at line starts, deterministically."""
    import numpy as np

    root = Path(root or stdlib_root())
    files = split_files(stdlib_files(root), root)["heldout"]
    rng = np.random.default_rng(seed)
    prompts, tries = [], 0
    while len(prompts) < n:
        tries += 1
        # a prompt longer than any 200 lines of the held-out files: never found
        if tries > 1000 + 100 * n:
            raise ValueError(f"found only {len(prompts)} of {n} held-out prompts of {n_tokens} "
                             f"tokens in {tries - 1} "
                             "tries: ask for fewer tokens per prompt (--prompt_tokens)")
        text = files[rng.integers(len(files))].read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        start = int(rng.integers(len(lines)))
        ids = encoder.encode("".join(lines[start:start + 200]), allowed_special=())
        if len(ids) >= n_tokens and lines[start].strip():
            prompts.append(ids[:n_tokens])
    return prompts


def meta_string(path, key="tokenizer"):
    """The text the meta.json at `path` records under `key` (default: the tokenizer's
    fingerprint), or None (not recorded)."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def has_tokenizer(folder):  # -> None, or what the tokenizer folder lacks
    if not any((Path(folder) / a).is_file() and (Path(folder) / b).is_file()
               for a, b in (("encoder.json", "vocab.bpe"), ("vocab.json", "merges.txt"))):
        return ("has no tokenizer: it needs vocab.json + merges.txt (from python -m "
                "gpt2.train.bpe) or encoder.json + vocab.bpe")


OPTIONS = [
    Option("tokenizer", "dir", None,
           "folder with vocab.json + merges.txt (or encoder.json + vocab.bpe)",
           check=has_tokenizer, required=True),
    Option("out", "path", None,
           "folder to write train.bin, val.bin, heldout.bin and meta.json into (made if missing)",
           check=out_folder, required=True),
    Option("root", "dir", None,
           "folder of .py files to use instead of this Python's standard library"),
]

if __name__ == "__main__":
    from picospec_cli import command

    command(main, OPTIONS)
