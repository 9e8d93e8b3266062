"""The training corpus, with no downloads: the Python standard library's own source on this machine.

Anyone with the same Python version reproduces the built-in models' data. Files are split by a hash of their path
relative to the standard library folder, so the split never depends on file order or machine:
sha256(relative path) mod 100 < 90 -> train, < 95 -> val, else heldout (evaluation prompts; never trained on).

    python -m gpt2.corpus --tokenizer gpt2/assets/tiny-target --out data/     # train.bin, val.bin, heldout.bin, meta.json
"""
import hashlib
import json
import sysconfig
from pathlib import Path

import numpy as np

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
    from gpt2.encoder import load_encoder
    from gpt2.weights import _atomic_write

    encoder, out = load_encoder(tokenizer), Path(out)
    if encoder.n_vocab > 65536:
        raise ValueError(f"{encoder.n_vocab} tokens do not fit uint16 token files")
    out.mkdir(parents=True, exist_ok=True)
    root = Path(root or stdlib_root())
    splits = split_files(stdlib_files(root), root)
    meta = {"n_vocab": encoder.n_vocab, "root": str(root), "tokens": {}, "files": {}}
    for name, files in splits.items():
        ids = np.array(tokenize(files, encoder), dtype=np.uint16)
        _atomic_write(out / f"{name}.bin", [ids.tobytes()])
        meta["tokens"][name], meta["files"][name] = len(ids), [str(p.relative_to(root)) for p in files]
        print(f"{name}: {len(files)} files, {len(ids)} tokens")
    _atomic_write(out / "meta.json", [json.dumps(meta, indent=1).encode()])


if __name__ == "__main__":
    import fire

    fire.Fire(main)


def heldout_prompts(encoder, n, n_tokens=64, seed=0, root=None):
    """n prompts of n_tokens ids cut from held-out files at line starts (never trained on); deterministic."""
    import numpy as np

    root = Path(root or stdlib_root())
    files = split_files(stdlib_files(root), root)["heldout"]
    rng = np.random.default_rng(seed)
    prompts = []
    while len(prompts) < n:
        lines = files[rng.integers(len(files))].read_text(encoding="utf-8").splitlines(keepends=True)
        start = int(rng.integers(len(lines)))
        ids = encoder.encode("".join(lines[start:start + 200]), allowed_special=())
        if len(ids) >= n_tokens and lines[start].strip():
            prompts.append(ids[:n_tokens])
    return prompts
