"""Real checkpoints on demand: names -> a local folder with config.json, model.safetensors,
vocab.json, merges.txt.

    resolve("gpt2-xl")                -> ~/.cache/picospec/openai-community/gpt2-xl (downloaded
    once) resolve("distilbert/distilgpt2")  -> any Hugging Face repo of GPT-2 architecture
    resolve("./folder"), resolve("~/ckpt"), resolve("/abs/folder"), or any existing folder -> used
    as it is resolve("tiny-target")            -> the built-in model shipped in gpt2/assets

A name that starts with ./ ../ / or ~, ends with /, or exists on disk is a local folder (missing: an
error naming it) and never a repo id. A repo id must follow the hub's rules (owner/name, see
check_repo_id) before anything touches the network or the disk, so no name can make a download write
outside the cache folder.

Environment: PICOSPEC_CACHE (cache folder, default ~/.cache/picospec; check_cache_dir refuses a file
or an unwritable place before a download starts), PICOSPEC_HUB_URL (default https://huggingface.co;
tests point it at a server on 127.0.0.1), PICOSPEC_OFFLINE=1 (never touch the network).

Downloads stream with requests into FILE.part with a tqdm bar and resume a partial .part with an
HTTP Range request. A host that cannot be reached (DNS lookup failed, connection refused, no answer
within TIMEOUT[0] s) fails at once with what to do offline. A stalled answer (no byte for TIMEOUT[1]
s), a cut connection or a 5xx answer is retried RETRIES times with waits of BACKOFF, 2 BACKOFF, 4
BACKOFF s: a server that stalls for good fails within (RETRIES + 1) * (TIMEOUT[0] + TIMEOUT[1]) + 7
BACKOFF = 59 s. The size (Content-Length, X-Linked-Size) and the sha256, when the server states it
(X-Linked-Etag of LFS files), are checked before the file is renamed into place. A failed download
removes the cache folders it made if they are still empty, and keeps a .part only if it holds bytes.
"""
import hashlib
import os
import re
import time
from pathlib import Path
from urllib.parse import urlsplit

ASSETS = Path(__file__).resolve().parent / "assets"
BUILTIN = {"tiny-target": ASSETS / "tiny-target", "tiny-draft": ASSETS / "tiny-draft"}
ALIASES = {"gpt2": "openai-community/gpt2", "124M": "openai-community/gpt2",
           "gpt2-medium": "openai-community/gpt2-medium", "355M": "openai-community/gpt2-medium",
           "gpt2-large": "openai-community/gpt2-large", "774M": "openai-community/gpt2-large",
           "gpt2-xl": "openai-community/gpt2-xl", "1558M": "openai-community/gpt2-xl"}
FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")
# seconds to connect, and seconds without a byte before an answer counts as stalled
TIMEOUT = (5, 8)
RETRIES, BACKOFF = 3, 1.0
# one part of a repo id: letters, digits, - _ . (1 to 96), starting and ending with a letter, digit
# or _
REPO_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")


class DownloadError(ValueError):
    """A download that failed; the message says why and what to do."""


class Unreachable(DownloadError):
    """No connection could be made at all (DNS lookup failed, refused, connect timeout); not
    retried."""


def cache_dir():
    return Path(os.environ.get("PICOSPEC_CACHE")
                or Path.home() / ".cache" / "picospec").expanduser()


def check_cache_dir(cache=None):
    """The cache folder (`cache`, else PICOSPEC_CACHE, else ~/.cache/picospec) if files can be
    written there; else a one-line ValueError naming PICOSPEC_CACHE. Creates nothing: a missing
    folder needs a writable existing parent."""
    folder = Path(cache).expanduser() if cache else cache_dir()
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    fix = "set PICOSPEC_CACHE to a folder you can write to, or unset it to use ~/.cache/picospec"
    if not existing.is_dir():
        raise ValueError(f"the cache folder {folder} (PICOSPEC_CACHE) cannot be made: {existing} "
                         f"is a file; {fix}")
    # a file made and removed: permission bits say nothing for root or /proc
    from picospec_cli import cannot_write_in

    if (why := cannot_write_in(existing)) is not None:
        raise ValueError(f"the cache folder {folder} (PICOSPEC_CACHE) is not writable: cannot "
                         f"write in {existing} ({why}); {fix}")
    return folder


def is_offline(offline=None):
    """--offline, else PICOSPEC_OFFLINE: 1, true, yes or on (any case) means offline; unset, empty,
    0, false, no or off means online; another value is a ValueError naming it
    (picospec_cli.env_flag)."""
    from picospec_cli import env_flag

    setting = env_flag("PICOSPEC_OFFLINE", default=False)  # even under --offline: a typo shows
    return offline if offline is not None else setting


def hub_url():
    return os.environ.get("PICOSPEC_HUB_URL", "https://huggingface.co").rstrip("/")


def valid_names():
    return (f"built-in: {', '.join(BUILTIN)}, ngram (drafts only); GPT-2: {', '.join(ALIASES)}; "
            "a Hugging Face repo id such as distilbert/distilgpt2; or a local folder with "
            "config.json and model.safetensors")


def resolve(name, offline=None, cache=None):
    """The local folder holding checkpoint `name`, downloading its missing files first (see the
    module docstring)."""
    name = str(name)
    if not name.strip():
        raise ValueError(f"the model name is empty: name one ({valid_names()})")
    if name in BUILTIN:
        if not (BUILTIN[name] / "model.safetensors").exists():
            raise ValueError(f"built-in model {name!r} is missing from {BUILTIN[name]}; rebuild it "
                             f"(see README)")
        return BUILTIN[name]
    if name not in ALIASES and is_local(name):
        return local_folder(name)
    repo = check_repo_id(ALIASES.get(name, name), name)
    folder = (Path(cache).expanduser() if cache else cache_dir()) / repo
    missing = [file for file in FILES if not (folder / file).exists()]
    if missing and is_offline(offline):
        raise ValueError(f"offline: {folder / missing[0]} is not in the cache; run once online to "
                         f"download {repo}, or put {', '.join(missing)} into {folder} by hand, "
                         "or drop --offline and unset PICOSPEC_OFFLINE")
    if missing:
        check_cache_dir(cache)
        fetch(repo, missing, folder)
    return folder


def is_local(name):
    """./x, ../x, /x, ~/x, x/ and anything that exists on disk name a local path, never a repo
    id."""
    return name in (".",
                    "..") or name.startswith(("./", "../", "/",
                                              "~")) or name.endswith("/") or Path(name).exists()


def local_folder(name):
    try:
        path = Path(name).expanduser()
    except RuntimeError:  # ~someone/x where no such user exists
        raise ValueError(f"local folder {name}: cannot expand {name.split('/')[0]}") from None
    if not path.exists():
        raise ValueError(f"local folder {path} does not exist; give a checkpoint folder with "
                         f"config.json and model.safetensors, or a model name ({valid_names()})")
    if not path.is_dir():
        raise ValueError(f"{path} is a file; give the folder that holds config.json and "
                         f"model.safetensors")
    return path


def check_repo_id(repo, name=None):
    """`repo` if it is a Hugging Face repo id owner/name by the hub's rules: each part 1 to 96
    letters, digits, - _ ., not starting or ending with - or ., no .. or -- and no .git ending.
    Example: "distilbert/distilgpt2" -> itself; "../x", "a/b/c", "a/.x" -> ValueError. (The hub also
    allows a bare name; its GPT-2 ones are the aliases.)"""
    name = repo if name is None else name
    parts = repo.split("/")
    if len(parts) == 1:
        raise ValueError(f"unknown model {name!r}: use one of {valid_names()}")
    if len(parts) != 2 or not all(REPO_PART.fullmatch(p)
                                  for p in parts) or ".." in repo or "--" in repo \
            or repo.endswith(".git"):
        raise ValueError(f"unknown model {name!r}: not a local folder (start it with ./ or /), nor "
                         f"a Hugging Face repo id owner/name (letters, digits, - _ . up to 96 "
                         f"each, no .. or --, not starting or ending with - or .)")
    return repo


def fetch(repo, files, folder):
    """Download `files` of `repo` from the hub into `folder`; on failure, remove the folders this
    made if empty."""
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for file in files:
            download(f"{hub_url()}/{repo}/resolve/main/{file}", folder / file)
    except Unreachable as e:
        _remove_empty(made)
        raise Unreachable(f"{e}. No network? Put {', '.join(files)} of {repo} into {folder} by "
                          f"hand (inside the cache folder, set by PICOSPEC_CACHE) and run with "
                          f"--offline (or PICOSPEC_OFFLINE=1)") from None
    except BaseException:
        _remove_empty(made)
        raise


def _remove_empty(folders):  # deepest first; stops at the first that is not empty
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def download(url, dest, expected_size=None, sha256=None, timeout=TIMEOUT, retries=RETRIES,
             backoff=BACKOFF):
    """Fetch url into dest atomically, resuming dest.part. Raises Unreachable at once when no
    connection can be made, and DownloadError after `retries` more attempts at a stalled, cut or 5xx
    answer, at once on a 404 or bad sha256."""
    import requests

    dest, part = Path(dest), Path(str(dest) + ".part")
    for attempt in range(retries + 1):
        try:
            return _attempt(url, dest, part, expected_size, sha256, timeout)
        except (requests.ConnectionError, requests.Timeout,
                requests.exceptions.ChunkedEncodingError) as e:
            why = _no_connection(e)
            if why:
                raise Unreachable(f"cannot connect to {urlsplit(url).netloc} ({why})") from None
            if attempt == retries:
                raise DownloadError(f"{url}: failed after {retries + 1} "
                                    f"attempt{'s' if retries else ''} "
                                    f"({_reason(e, timeout)}); {_drop_if_empty(part)}") from None
            time.sleep(backoff * 2**attempt)


def _attempt(url, dest, part, expected_size, sha256, timeout):
    """One GET, resuming `part` with a Range request; -> dest once the whole file arrived and
    checked out."""
    import requests

    have = part.stat().st_size if part.exists() else 0
    with requests.get(url, headers={"Range": f"bytes={have}-"} if have else {}, stream=True,
                      timeout=timeout) as r:
        _check_status(r, url, part)
        if r.status_code == 200:  # a whole file: no Range was sent, or the server ignored it
            have = 0
        length = _int(r.headers.get("Content-Length"))
        total = expected_size or _int(r.headers.get("X-Linked-Size")) or (have + length
                                                                          if length is not None
                                                                          else None)
        sha256 = sha256 or _sha(r.headers.get("X-Linked-Etag") or r.headers.get("ETag"))
        _stream(r, part, have, total, dest.name)
    got = part.stat().st_size
    if total is not None and got != total:
        raise requests.ConnectionError(f"connection closed after {got} of {total} bytes")
    if sha256 and _file_sha256(part) != sha256:
        part.unlink()
        raise DownloadError(f"{url}: sha256 mismatch; the download was corrupted and has been "
                            f"removed, retry")
    os.replace(part, dest)
    return dest


def _check_status(r, url, part):
    import requests

    if r.status_code == 404:
        raise DownloadError(f"{url}: not found (404); check the model name ({valid_names()})")
    if r.status_code == 416:  # the .part is already complete or larger than the file: start again
        part.unlink()
        raise requests.ConnectionError("the partial file did not fit the file on the server (416)")
    if r.status_code >= 500:
        raise requests.ConnectionError(f"server error {r.status_code}")
    if r.status_code >= 400:
        raise DownloadError(f"{url}: HTTP {r.status_code}")


def _no_connection(e):
    """Why no connection was made at all (DNS lookup failed, refused, connect timeout), or None if
    one was."""
    import requests
    from urllib3.exceptions import NewConnectionError

    if isinstance(e, requests.ConnectTimeout):
        return "no answer to the connection request"
    reason = getattr(e.args[0], "reason", None) if e.args else None
    if isinstance(reason, NewConnectionError):
        return str(reason.__cause__ or reason.__context__ or "connection failed")
    return None


def _reason(e, timeout):
    """A short reason for a failed attempt, out of requests' nested exceptions."""
    import requests
    from urllib3.exceptions import ReadTimeoutError

    if isinstance(e, requests.ReadTimeout) or (e.args and isinstance(e.args[0], ReadTimeoutError)):
        return f"the server stalled: no data for {timeout[1]} s"
    if isinstance(e, requests.exceptions.ChunkedEncodingError):
        return "the connection broke mid-file"
    return str(e)


def _drop_if_empty(part):
    """Delete an empty .part; -> what became of the partial file, for the error message."""
    if part.exists() and part.stat().st_size == 0:
        part.unlink()
    if not part.exists():
        return "nothing was kept; run again to retry"
    return (f"the partial file {part} ({part.stat().st_size} bytes) is kept and the next run "
            f"resumes it")


def _stream(response, part, have, total, label):
    from tqdm import tqdm

    with open(part, "ab" if have else "wb") as f, tqdm(total=total, initial=have, unit="B",
                                                       unit_scale=True,
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
