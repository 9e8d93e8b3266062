"""Real checkpoints on demand: names -> a local folder with config.json, model.safetensors, vocab.json, merges.txt.

    resolve("gpt2-xl")                -> ~/.cache/picospec/openai-community/gpt2-xl (downloaded once)
    resolve("distilbert/distilgpt2")  -> any Hugging Face repo of GPT-2 architecture
    resolve("path/to/folder")         -> a local checkpoint folder, used as it is
    resolve("tiny-target")            -> the built-in model shipped in gpt2/assets

Environment: PICOSPEC_CACHE (cache folder, default ~/.cache/picospec), PICOSPEC_HUB_URL (default
https://huggingface.co; tests point it at a server on 127.0.0.1), PICOSPEC_OFFLINE=1 (never touch the network).

Downloads stream with requests into FILE.part with a tqdm bar, time out, retry connection errors and 5xx answers with
backoff, resume a partial .part with an HTTP Range request, check the size (Content-Length, X-Linked-Size) and the
sha256 when the server states it (X-Linked-Etag of LFS files), and only then rename into place.
"""
import hashlib
import os
import time
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
BUILTIN = {"tiny-target": ASSETS / "tiny-target", "tiny-draft": ASSETS / "tiny-draft"}
ALIASES = {"gpt2": "openai-community/gpt2", "124M": "openai-community/gpt2",
           "gpt2-medium": "openai-community/gpt2-medium", "355M": "openai-community/gpt2-medium",
           "gpt2-large": "openai-community/gpt2-large", "774M": "openai-community/gpt2-large",
           "gpt2-xl": "openai-community/gpt2-xl", "1558M": "openai-community/gpt2-xl"}
FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")


class DownloadError(ValueError):
    pass


def cache_dir():
    return Path(os.environ.get("PICOSPEC_CACHE", Path.home() / ".cache" / "picospec"))


def is_offline(offline=None):
    return offline if offline is not None else os.environ.get("PICOSPEC_OFFLINE", "") not in ("", "0")


def valid_names():
    return (f"built-in: {', '.join(BUILTIN)}, ngram (drafts only); GPT-2: {', '.join(ALIASES)}; "
            "a Hugging Face repo id such as distilbert/distilgpt2; or a local folder with config.json and model.safetensors")


def resolve(name, offline=None, cache=None):
    """The local folder holding checkpoint `name`, downloading its files first if needed."""
    name = str(name)
    if name in BUILTIN:
        if not (BUILTIN[name] / "model.safetensors").exists():
            raise ValueError(f"built-in model {name!r} is missing from {BUILTIN[name]}; rebuild it (see README)")
        return BUILTIN[name]
    if name not in ALIASES and Path(name).is_dir():
        return Path(name)
    repo = ALIASES.get(name, name)
    if repo.count("/") != 1 or repo.startswith("/") or repo.endswith("/") or Path(name).suffix:
        raise ValueError(f"unknown model {name!r}: use one of {valid_names()}")
    folder = Path(cache or cache_dir()) / repo
    for file in FILES:
        if not (folder / file).exists():
            if is_offline(offline):
                raise ValueError(f"offline: {folder / file} is not in the cache; run once online to download {repo}, "
                                 "or drop --offline and unset PICOSPEC_OFFLINE")
            folder.mkdir(parents=True, exist_ok=True)
            base = os.environ.get("PICOSPEC_HUB_URL", "https://huggingface.co").rstrip("/")
            download(f"{base}/{repo}/resolve/main/{file}", folder / file)
    return folder


def download(url, dest, expected_size=None, sha256=None, timeout=(10, 60), retries=4, backoff=1.0):
    """Fetch url into dest atomically, resuming dest.part; raise DownloadError with what went wrong."""
    import requests

    dest, part = Path(dest), Path(str(dest) + ".part")
    for attempt in range(retries + 1):
        have = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with requests.get(url, headers=headers, stream=True, timeout=timeout) as r:
                if r.status_code == 404:
                    raise DownloadError(f"{url}: not found (404); check the model name ({valid_names()})")
                if r.status_code == 416:  # the .part is already complete or larger than the file: start again
                    part.unlink()
                    continue
                if r.status_code >= 500:
                    raise requests.ConnectionError(f"server error {r.status_code}")
                if r.status_code >= 400:
                    raise DownloadError(f"{url}: HTTP {r.status_code}")
                if r.status_code == 200 and have:  # the server ignored Range: start over
                    have = 0
                size = expected_size or _int(r.headers.get("X-Linked-Size"))
                length = _int(r.headers.get("Content-Length"))
                total = size or (have + length if length is not None else None)
                sha256 = sha256 or _sha(r.headers.get("X-Linked-Etag") or r.headers.get("ETag"))
                _stream(r, part, have, total, dest.name)
            got = part.stat().st_size
            if total is not None and got != total:
                raise requests.ConnectionError(f"connection closed after {got} of {total} bytes")
            if sha256 and _file_sha256(part) != sha256:
                part.unlink()
                raise DownloadError(f"{url}: sha256 mismatch; the download was corrupted and has been removed, retry")
            os.replace(part, dest)
            return dest
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as e:
            if attempt == retries:
                raise DownloadError(f"{url}: failed after {retries + 1} attempts ({e}); "
                                    f"the partial file {part} is kept and the next run resumes it") from None
            time.sleep(backoff * 2**attempt)


def _stream(response, part, have, total, label):
    from tqdm import tqdm

    with open(part, "ab" if have else "wb") as f, tqdm(total=total, initial=have, unit="B", unit_scale=True,
                                                         desc=label, disable=None) as bar:
        for chunk in response.iter_content(chunk_size=1 << 14):
            f.write(chunk)
            bar.update(len(chunk))


def _int(value):
    return int(value) if value and value.isdigit() else None


def _sha(etag):
    etag = (etag or "").strip('"').removeprefix("W/").strip('"')
    return etag if len(etag) == 64 and all(c in "0123456789abcdef" for c in etag) else None


def _file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
