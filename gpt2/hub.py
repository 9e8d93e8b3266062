"""Real checkpoints by name: a local folder with config.json, model.safetensors, vocab.json and
merges.txt.

    resolve("gpt2-xl")                -> openai-community/gpt2-xl in the Hugging Face cache
    resolve("distilbert/distilgpt2")  -> any Hugging Face repo of GPT-2 architecture
    resolve("./folder"), resolve("~/ckpt"), resolve("/abs/folder"), or any existing folder -> used
    as it is; resolve("tiny-target")  -> the built-in model shipped in gpt2/assets

A name that starts with ./ ../ / or ~, ends with /, or exists on disk is a local folder (missing: an
error naming it) and never a repo id. A repo id must follow the hub's rules (owner/name, see
check_repo_id) before anything touches the network or the disk.

Repos live in the Hugging Face cache that transformers shares: a repo whose four files are there is
used without a request, and what is downloaded here transformers finds. huggingface_hub downloads
(resume, retries, checksums) and reads its own settings (HF_HUB_CACHE or HF_HOME, HF_ENDPOINT,
HF_HUB_OFFLINE, HF_TOKEN); this module reads no environment: `offline`, `cache` and `endpoint` are
arguments. Every failure is a DownloadError of one line that says what to do.
"""
import re
import tempfile
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
BUILTIN = {"tiny-target": ASSETS / "tiny-target", "tiny-draft": ASSETS / "tiny-draft"}
ALIASES = {"gpt2": "openai-community/gpt2", "124M": "openai-community/gpt2",
           "gpt2-medium": "openai-community/gpt2-medium", "355M": "openai-community/gpt2-medium",
           "gpt2-large": "openai-community/gpt2-large", "774M": "openai-community/gpt2-large",
           "gpt2-xl": "openai-community/gpt2-xl", "1558M": "openai-community/gpt2-xl"}
FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")
# one part of a repo id: letters, digits, - _ . (1 to 96), starting and ending with a letter, digit
# or _
REPO_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")


class DownloadError(ValueError):
    """A download that failed; the message says why and what to do."""


class Unreachable(DownloadError):
    """The hub could not be reached (no network, a server down or failing)."""


def valid_names():
    return (f"built-in: {', '.join(BUILTIN)}, ngram (drafts only); GPT-2: {', '.join(ALIASES)}; "
            "a Hugging Face repo id such as distilbert/distilgpt2; or a local folder with "
            "config.json and model.safetensors")


def resolve(name, offline=False, cache=None, endpoint=None):
    """The local folder holding checkpoint `name` (see the module docstring). offline: never touch
    the network (HF_HUB_OFFLINE also counts); cache, endpoint: huggingface_hub's when None."""
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
    from huggingface_hub import constants, try_to_load_from_cache

    cache = Path(cache or constants.HF_HUB_CACHE).expanduser()
    found = [try_to_load_from_cache(repo, file, cache_dir=cache) for file in FILES]
    if all(isinstance(path, str) for path in found):
        return Path(found[0]).parent  # the snapshot folder of the cached revision
    if offline or constants.HF_HUB_OFFLINE:
        missing = ", ".join(f for f, path in zip(FILES, found) if not isinstance(path, str))
        raise DownloadError(f"offline: {repo} is not in the Hugging Face cache {cache} (missing "
                            f"{missing}); run once online to download it, or drop --offline and "
                            f"unset PICOSPEC_OFFLINE and HF_HUB_OFFLINE")
    return download(repo, cache, endpoint or constants.ENDPOINT)


def download(repo, cache, endpoint):
    """FILES of `repo` into the cache, all at the first file's commit -> its snapshot folder."""
    import logging

    from huggingface_hub import errors as e
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    log, file = logging.getLogger("huggingface_hub"), FILES[0]
    level = log.level
    log.setLevel(logging.ERROR)  # its retries' warnings: the one line below says what came of them
    try:
        check_writable(cache)
        try:  # one request, no retries: a hub that does not answer at all fails at once
            get_hf_file_metadata(hf_hub_url(repo, file, endpoint=endpoint))
        except e.HfHubHTTPError:
            pass  # it answered: hf_hub_download says what the answer means
        except Exception as error:
            raise e.LocalEntryNotFoundError("no answer") from error
        folder = Path(hf_hub_download(repo, file, cache_dir=cache, endpoint=endpoint)).parent
        for file in FILES[1:]:
            hf_hub_download(repo, file, revision=folder.name, cache_dir=cache, endpoint=endpoint)
        return folder
    except e.GatedRepoError:
        raise DownloadError(f"{repo} is gated: accept its terms at {endpoint}/{repo}, then set "
                            f"HF_TOKEN (or run `hf auth login`)") from None
    except e.RepositoryNotFoundError:
        raise DownloadError(f"{repo} is not on {endpoint}: check the name ({valid_names()}); a "
                            f"private repo needs HF_TOKEN") from None
    except e.LocalEntryNotFoundError as error:  # no answer, or 5xx after huggingface_hub's retries
        raise Unreachable(f"cannot download {file} of {repo} from {endpoint} "
                          f"({reason(error.__cause__)}): check the network (or set HF_ENDPOINT "
                          f"to a mirror), or put the model into the Hugging Face cache {cache} "
                          f"and run with --offline (or PICOSPEC_OFFLINE=1)") from None
    except e.EntryNotFoundError:
        raise DownloadError(f"{repo} has no {file}: picospec loads GPT-2 checkpoints with "
                            f"{', '.join(FILES)}") from None
    except e.HfHubHTTPError as error:  # 401 (a bad HF_TOKEN), a 5xx while the file streams, ...
        raise DownloadError(f"{endpoint} did not send {file} of {repo} ({reason(error)}): check "
                            f"HF_TOKEN if it is set, or try again later") from None
    except Exception as error:  # the disk's (an OSError with an errno), or the HTTP client's own
        if isinstance(error, OSError) and error.errno is not None:  # full, unwritable, a file
            raise DownloadError(f"cannot write {repo} into the Hugging Face cache {cache} "
                                f"({error.strerror}: {error.filename or cache}); set HF_HUB_CACHE "
                                f"(or HF_HOME) to a folder you can write to, with room for the "
                                f"model") from None
        raise DownloadError(f"downloading {file} of {repo} from {endpoint} failed "
                            f"({reason(error)}); run again to resume") from None
    finally:
        log.setLevel(level)


def reason(error):
    """What went wrong, in a few words: an HTTP status, an [Errno] of the connection, or the first
    line of the message. Example: a refused connection -> "[Errno 111] Connection refused"."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    text = (str(error).strip().splitlines() or [type(error).__name__])[0] if error else "no answer"
    errno = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    return f"HTTP {status}" if status else errno.group(0).strip() if errno else text


def check_writable(cache):
    """Raise OSError unless files can be written in `cache` (or, not made yet, its first existing
    parent): a file made and removed, for permission bits say nothing for root or /proc."""
    existing = next(p for p in (cache, *cache.parents) if p.exists())
    if not existing.is_dir():
        raise NotADirectoryError(20, "a file is in the way", str(existing))
    tempfile.TemporaryFile(dir=existing).close()


def is_local(name):
    """./x, ../x, /x, ~/x, x/ and anything that exists on disk name a local path, never a repo
    id."""
    return (name in (".", "..") or name.startswith(("./", "../", "/", "~")) or name.endswith("/")
            or Path(name).exists())


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
    if (len(parts) != 2 or not all(REPO_PART.fullmatch(p) for p in parts) or ".." in repo
            or "--" in repo or repo.endswith(".git")):
        raise ValueError(f"unknown model {name!r}: not a local folder (start it with ./ or /), nor "
                         f"a Hugging Face repo id owner/name (letters, digits, - _ . up to 96 "
                         f"each, no .. or --, not starting or ending with - or .)")
    return repo
