"""Checkpoints by name -> a folder with config.json, model.safetensors, vocab.json, merges.txt:

    resolve("gpt2-xl")               -> openai-community/gpt2-xl in the Hugging Face cache
    resolve("distilbert/distilgpt2") -> any Hugging Face repo of GPT-2 architecture
    resolve("tiny-target")           -> the built-in model in gpt2/assets
    resolve("./ckpt")                -> that folder (also ~/ckpt, ckpt/): never a repo id

huggingface_hub downloads into the cache transformers shares, with its HF_* settings.
"""
import re
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

ASSETS = Path(__file__).resolve().parent / "assets"
BUILTIN = {"tiny-target": ASSETS / "tiny-target", "tiny-draft": ASSETS / "tiny-draft"}
SIZES = {"gpt2": "124M", "gpt2-medium": "355M", "gpt2-large": "774M", "gpt2-xl": "1558M"}
ALIASES = {alias: f"openai-community/{n}" for n, size in SIZES.items() for alias in (n, size)}
DEFAULT_ENDPOINT = "https://huggingface.co"  # huggingface_hub's, where HF_ENDPOINT is unset
FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")
# one part of a repo id: letters, digits, - _ . (1 to 96), first and last one of A-Za-z0-9_
REPO_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")
NAMES = (f"built-in: {', '.join(BUILTIN)}, ngram (drafts only); GPT-2: {', '.join(ALIASES)}; a "
         "Hugging Face repo id such as distilbert/distilgpt2; or a local folder with config.json "
         "and model.safetensors")  # the names a message offers


class DownloadError(ValueError):
    """A failed download; the message says why and what to do."""


class Unreachable(DownloadError):
    """The hub did not answer, or answered 5xx after retries."""


def resolve(name, offline=False, cache=None, endpoint=None):
    """The local folder of checkpoint `name`; offline: never touch the network."""
    name = str(name)
    if not name.strip():
        raise ValueError(f"the model name is empty: name one ({NAMES})")
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
        if (blocked := file_in_the_way(cache)) is not None:  # going online would not help
            raise DownloadError(f"the Hugging Face cache {cache} is not a folder (a file is in "
                                f"the way: {blocked}); set HF_HUB_CACHE (or HF_HOME) to the "
                                f"folder that holds the model")
        missing = ", ".join(f for f, path in zip(FILES, found) if not isinstance(path, str))
        undo = {"--offline": "drop --offline", "PICOSPEC_OFFLINE": "unset PICOSPEC_OFFLINE (or "
                "give --no-offline)"}.get(offline, "drop --offline and unset PICOSPEC_OFFLINE")
        undo = undo if offline else "unset HF_HUB_OFFLINE"
        raise DownloadError(f"offline: {repo} is not in the Hugging Face cache {cache} (missing "
                            f"{missing}); run once online to download it: {undo}")
    return download(repo, cache, endpoint or constants.ENDPOINT)


def download(repo, cache, endpoint):
    """FILES of `repo` into the cache, at the first file's commit -> its snapshot folder."""
    import logging

    from huggingface_hub import errors as e
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    from gpt2.weights import CorruptFile, hparams_from_config, read_json

    log, file = logging.getLogger("huggingface_hub"), FILES[0]
    level = log.level
    log.setLevel(logging.ERROR)  # its retries' warnings: the one line below says what came of them
    try:
        if (blocked := file_in_the_way(cache)) is not None:
            raise NotADirectoryError(20, "a file is in the way", str(blocked))
        existing = next(p for p in (cache, *cache.parents) if p.exists())  # writable, or none made
        tempfile.TemporaryFile(dir=existing).close()  # permission bits say nothing for root, /proc
        try:  # one request, no retries: a hub that does not answer at all fails at once
            get_hf_file_metadata(hf_hub_url(repo, file, endpoint=endpoint))
        except e.HfHubHTTPError:
            pass  # it answered: hf_hub_download says what the answer means
        except Exception as error:
            raise e.LocalEntryNotFoundError("no answer") from error
        folder = Path(hf_hub_download(repo, file, cache_dir=cache, endpoint=endpoint)).parent
        # a config picospec cannot run (a Llama's, an error page): refused before the weights come
        hparams_from_config(read_json(folder / file), folder / file)
        for file in FILES[1:]:
            hf_hub_download(repo, file, revision=folder.name, cache_dir=cache, endpoint=endpoint)
        return folder
    except CorruptFile:
        raise  # it names the file and what to do
    except e.GatedRepoError:
        raise DownloadError(f"{repo} is gated: accept its terms at {endpoint}/{repo}, then set "
                            f"HF_TOKEN (or run `hf auth login`)") from None
    except e.RepositoryNotFoundError:
        raise DownloadError(f"{repo} is not on {endpoint}: check the name ({NAMES}); a "
                            f"private repo needs HF_TOKEN") from None
    except e.LocalEntryNotFoundError as error:  # no answer, or 5xx after the retries
        if line := refusal(error, endpoint, file, repo):  # an answer: not the network's fault
            raise DownloadError(line) from None
        check = "check the network (or set HF_ENDPOINT to a mirror)"
        if endpoint.rstrip("/") != DEFAULT_ENDPOINT:  # a mirror of the user's that is down
            check = "check that this endpoint (HF_ENDPOINT) answers, or unset HF_ENDPOINT"
        raise Unreachable(f"cannot download {file} of {repo} from {endpoint} ({reason(error)}): "
                          f"{check}, or put the model into the Hugging Face cache {cache} and run "
                          f"with --offline (or PICOSPEC_OFFLINE=1)") from None
    except e.EntryNotFoundError:
        raise DownloadError(f"{repo} has no {file}: picospec loads GPT-2 checkpoints with "
                            f"{', '.join(FILES)}") from None
    except Exception as error:  # an OSError with an errno: a full disk, an unwritable cache
        if line := refusal(error, endpoint, file, repo):  # a 401 huggingface_hub raises as is
            raise DownloadError(line) from None
        raise DownloadError(f"cannot write {repo} into the Hugging Face cache {cache} "
                            f"({error.strerror}: {error.filename or cache}); set HF_HUB_CACHE (or "
                            f"HF_HOME) to a folder you can write to, with room for the model"
                            if isinstance(error, OSError) and error.errno is not None else
                            f"cannot download {file} of {repo} from {endpoint} ({reason(error)}): "
                            f"check HF_TOKEN if it is set, or run again") from None
    finally:
        log.setLevel(level)


def file_in_the_way(folder):
    """The file that stands where folder or one of its parents should be, or None."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    return None if existing.is_dir() else existing


def refusal(error, endpoint, file, repo):
    """The one line for the hub's refusal (HTTP 401, 403, 429) of a download, else None."""
    error = error.__cause__ or error  # huggingface_hub's LocalEntryNotFoundError wraps the cause
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    host = urlsplit(str(getattr(response, "url", "") or endpoint)).netloc
    if status in (401, 403) and host != urlsplit(endpoint).netloc:  # the link the hub sent
        return (f"{host} refused the download link of {file} of {repo} (HTTP {status}; such "
                f"links expire): run again")
    if status in (401, 403):
        return (f"{endpoint} refused {file} of {repo} (HTTP {status}): set HF_TOKEN to a token "
                f"that may read {repo} (or run `hf auth login`)")
    if status == 429:
        return (f"{endpoint} refused {file} of {repo} (HTTP 429: too many requests): wait a few "
                f"minutes and run again; signed in (HF_TOKEN, or `hf auth login`) you may "
                f"download more")
    return None


def reason(error):
    """An HTTP status, a connection's [Errno], or the error's first line."""
    error = error.__cause__ or error  # huggingface_hub's LocalEntryNotFoundError wraps the cause
    status, text = getattr(getattr(error, "response", None), "status_code", None), str(error)
    found = re.search(r"\[Errno -?\d+\][^'\")\n]*", text) or re.match(r"[^\n]*", text)
    return f"HTTP {status}" if status else found.group(0).strip() or type(error).__name__


def is_local(name):
    """./x, ../x, /x, ~/x, x/ and anything on disk (a link to nowhere too) are local paths, never
    repos."""
    try:
        return (name in (".", "..") or name.startswith(("./", "../", "/", "~"))
                or name.endswith("/") or Path(name).exists() or Path(name).is_symlink())
    except OSError:  # a name too long for a path (File name too long): no file has it
        return False


def local_folder(name):
    try:
        path = Path(name).expanduser()
    except RuntimeError:  # ~someone/x where no such user exists
        raise ValueError(f"local folder {name}: cannot expand {name.split('/')[0]} (no such "
                         f"user): write the folder's path in full") from None
    try:
        found = path.exists()
    except OSError as error:  # a name too long for a path, a folder that cannot be entered
        raise ValueError(f"local folder {name}: {error.strerror}; give a checkpoint folder with "
                         f"config.json and model.safetensors, or a model name") from None
    if not found and path.is_symlink():
        raise ValueError(f"local folder {path} is a symbolic link that leads nowhere (a loop of "
                         f"links, or a target that is gone); link it to a checkpoint folder with "
                         f"config.json and model.safetensors, or give that folder")
    if not found:
        raise ValueError(f"local folder {path} does not exist; give a checkpoint folder with "
                         f"config.json and model.safetensors, or a model name ({NAMES})")
    if not path.is_dir():
        raise ValueError(f"{path} is a file; give the folder that holds config.json and "
                         f"model.safetensors")
    return path


def check_repo_id(repo, name=None):
    """`repo` if owner/name by the hub's rules: "a/b" -> itself; "../x", "a/b/c" -> ValueError."""
    name = repo if name is None else name
    parts = repo.split("/")
    if len(parts) == 1:  # the hub allows a bare name; its GPT-2 ones are the aliases
        raise ValueError(f"unknown model {name!r}: use one of {NAMES}")
    if (len(parts) != 2 or not all(REPO_PART.fullmatch(p) for p in parts) or ".." in repo
            or "--" in repo or repo.endswith(".git")):
        raise ValueError(f"unknown model {name!r}: not a local folder (start it with ./ or /), nor "
                         f"a Hugging Face repo id owner/name (letters, digits, - _ . up to 96 "
                         f"each, no .. or --, not starting or ending with - or .)")
    return repo
