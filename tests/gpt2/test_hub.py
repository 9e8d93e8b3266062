"""Checkpoints through huggingface_hub against a fake hub the test starts on 127.0.0.1 that answers
as the Hugging Face hub does (HEAD and GET /{repo}/resolve/{revision}/{file} with X-Repo-Commit,
ETag, X-Linked-Etag, X-Linked-Size; LFS files by a redirect to a second server, the "CDN", under
the host name localhost; errors with X-Error-Code). What it downloads lands in the Hugging Face
cache that transformers reads; a model already there costs no request; each failure is one line.
Names that are folders, not repo ids, are never sent anywhere."""
import ast
import hashlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpt2.hub import (ASSETS, FILES, DownloadError, Unreachable, check_repo_id, resolve)

ROOT = Path(__file__).resolve().parents[2]
MODEL = {f: (ASSETS / "tiny-draft" / f).read_bytes() for f in FILES}  # a GPT-2 transformers loads
LFS = {"model.safetensors"}  # served as the hub serves LFS files: a redirect to the CDN


def commit_of(text):
    return hashlib.sha1(text.encode()).hexdigest()  # 40 hex digits, as a git commit


class Hub:
    """The hub at .url and its CDN at another port: repos {repo: {file: bytes}}, main at .commit
    (with .moves, at a new one once config.json was sent); gated repos answer 403 GatedRepo;
    .status, when set, answers every request, .cdn_status every request to the CDN; .cdn_body, when
    set, is what the CDN sends (in full, or .cut bytes of it before it hangs up). .requests: every
    request either server saw, as (method, path)."""

    def __init__(self):
        self.repos, self.gated, self.requests = {}, set(), []
        self.cdn_body, self.cut, self.cdn_status = None, None, None
        self.commit, self.status, self.moves = commit_of("first"), None, False
        self.commits = {self.commit}  # main is the last; the earlier ones stay served
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.answer(head=True)

            def do_GET(self):
                self.answer(head=False)

            def send(self, status, headers, body=b"", head=False):
                self.send_response(status)
                for k, v in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def send_cut(self, body, cut, head):  # Content-Length of body, then body[:cut]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body[:cut])
                    self.close_connection = True

            def answer(self, head):
                if hub.moves and any(m == "GET" and p.endswith("/config.json")
                                     for m, p in hub.requests):
                    hub.commit = commit_of("second")
                    hub.commits.add(hub.commit)
                hub.requests.append(("HEAD" if head else "GET", self.path))
                if hub.status:
                    return self.send(hub.status, {}, head=head)
                if self.server is hub.cdn and hub.cdn_status:
                    return self.send(hub.cdn_status, {}, head=head)
                if self.server is hub.cdn:  # /blobs/{sha256}
                    blobs = {hashlib.sha256(b).hexdigest(): b for r in hub.repos.values()
                             for b in r.values()}
                    sha = self.path.rsplit("/", 1)[-1]
                    if sha in blobs and hub.cdn_body is not None:
                        return self.send_cut(hub.cdn_body, hub.cut, head)
                    return self.send(200, {}, blobs[sha], head) if sha in blobs else \
                        self.send(404, {}, head=head)
                owner, name, resolve_, revision, file = (self.path.split("/", 5) + [""] * 5)[1:6]
                repo = f"{owner}/{name}"
                if resolve_ != "resolve" or repo not in hub.repos:
                    return self.send(404, {"X-Error-Code": "RepoNotFound"}, head=head)
                if repo in hub.gated:
                    return self.send(403, {"X-Error-Code": "GatedRepo"}, head=head)
                if revision != "main" and revision not in hub.commits:
                    return self.send(404, {"X-Error-Code": "RevisionNotFound"}, head=head)
                commit = {"X-Repo-Commit": hub.commit if revision == "main" else revision}
                if file not in hub.repos[repo]:
                    return self.send(404, {"X-Error-Code": "EntryNotFound", **commit}, head=head)
                body = hub.repos[repo][file]
                if file in LFS:
                    sha = hashlib.sha256(body).hexdigest()
                    return self.send(302, {**commit, "X-Linked-Etag": f'"{sha}"',
                                           "X-Linked-Size": str(len(body)),
                                           "Location": f"{hub.cdn_url}/blobs/{sha}"}, head=head)
                git_sha = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
                self.send(200, {**commit, "ETag": f'"{git_sha}"'}, body, head)

        self.hub, self.cdn = (ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2))
        # the CDN under another host name, as the hub's is: huggingface_hub follows a redirect to
        # the hub's own host (any port) for a file's metadata, and stops at one to another host
        self.url, self.cdn_url = (f"http://{host}:{s.server_address[1]}"
                                  for host, s in (("127.0.0.1", self.hub), ("localhost", self.cdn)))
        for s in (self.hub, self.cdn):
            threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        for s in (self.hub, self.cdn):
            s.shutdown()
            s.server_close()


@pytest.fixture
def hub():
    h = Hub()
    h.repos = {"openai-community/gpt2": dict(MODEL), "someone/tiny": dict(MODEL)}
    yield h
    h.close()


@pytest.fixture
def sleeps(monkeypatch):
    """huggingface_hub's waits between its retries, recorded instead of slept."""
    import huggingface_hub.utils._http as http

    waited = []
    monkeypatch.setattr(http.time, "sleep", waited.append)
    return waited


def one_line(e):
    message = str(e.value)
    assert "\n" not in message and message.strip() == message, message
    return message


def snapshot(cache, repo, commit):
    return cache / f"models--{repo.replace('/', '--')}" / "snapshots" / commit


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        # nothing listens there once the socket is closed: connections are refused
        return s.getsockname()[1]


# --- the shared cache
# -----------------------------------------------------------------------------------------------

def test_a_model_is_downloaded_once_into_the_hugging_face_cache(hub, tmp_path):
    cache = tmp_path / "hf"
    folder = resolve("gpt2", cache=cache, endpoint=hub.url)
    assert folder == snapshot(cache, "openai-community/gpt2", hub.commit)
    assert {f: (folder / f).read_bytes() for f in FILES} == MODEL
    # the big file came from the CDN, each small one from the hub
    gets = sorted(p for m, p in hub.requests if m == "GET")
    sha = hashlib.sha256(MODEL["model.safetensors"]).hexdigest()
    assert gets == sorted([f"/blobs/{sha}"] + [f"/openai-community/gpt2/resolve/{rev}/{f}"
                                               for rev, f in [("main", "config.json"),
                                                              (hub.commit, "vocab.json"),
                                                              (hub.commit, "merges.txt")]])
    n = len(hub.requests)
    assert resolve("124M", cache=cache, endpoint=hub.url) == folder and len(hub.requests) == n


def test_the_files_of_one_download_share_one_commit(hub, tmp_path):
    """A repo that changes while it downloads: the later files are fetched at the first file's
    commit, so one snapshot folder holds them all."""
    first, hub.moves = hub.commit, True
    folder = resolve("someone/tiny", cache=tmp_path / "hf", endpoint=hub.url)
    assert folder.name == first and hub.commit != first
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)


def test_transformers_finds_what_picospec_downloaded(hub, tmp_path):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cache = tmp_path / "hf"
    folder = resolve("someone/tiny", cache=cache, endpoint=hub.url)
    n = len(hub.requests)
    model = transformers.AutoModelForCausalLM.from_pretrained("someone/tiny", cache_dir=cache,
                                                              local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained("someone/tiny", cache_dir=cache,
                                                           local_files_only=True)
    assert model.config.n_layer == 2 and len(hub.requests) == n
    from gpt2.encoder import load_encoder

    assert tokenizer.encode("Alan Turing") == load_encoder(folder).encode("Alan Turing")


def place(cache, repo, files, commit):
    """`files` in the Hugging Face cache as huggingface_hub lays them out (blobs named by etag, a
    snapshot of links, refs/main)."""
    root = cache / f"models--{repo.replace('/', '--')}"
    for name, body in files.items():
        blob = root / "blobs" / hashlib.sha256(body).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(body)
        (root / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
        (root / "snapshots" / commit / name).symlink_to(os.path.relpath(blob, root / "snapshots"
                                                                      / commit))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    return root / "snapshots" / commit


@pytest.mark.parametrize("offline", [False, True])
def test_a_model_already_in_the_cache_costs_no_request(hub, tmp_path, offline):
    cache, commit = tmp_path / "hf", commit_of("theirs")
    placed = place(cache, "openai-community/gpt2", MODEL, commit)
    assert resolve("gpt2", offline=offline, cache=cache, endpoint=hub.url) == placed
    assert hub.requests == []


def test_a_model_huggingface_hub_fetched_for_another_library_costs_no_request(hub, tmp_path):
    """As transformers' from_pretrained fetches files: hf_hub_download, one file at a time."""
    from huggingface_hub import hf_hub_download

    cache = tmp_path / "hf"
    for file in FILES:
        hf_hub_download("openai-community/gpt2", file, cache_dir=cache, endpoint=hub.url)
    hub.requests.clear()
    folder = resolve("gpt2", cache=cache, endpoint=hub.url)
    assert folder == snapshot(cache, "openai-community/gpt2", hub.commit) and hub.requests == []


def test_a_partly_cached_model_downloads_only_what_is_missing(hub, tmp_path):
    cache = tmp_path / "hf"
    place(cache, "someone/tiny", {f: MODEL[f] for f in FILES[:3]}, hub.commit)
    folder = resolve("someone/tiny", cache=cache, endpoint=hub.url)
    assert folder == snapshot(cache, "someone/tiny", hub.commit)
    sha = hashlib.sha256(MODEL["model.safetensors"]).hexdigest()
    assert [p for m, p in hub.requests if m == "GET"] == [f"/blobs/{sha}"]
    assert (folder / "model.safetensors").read_bytes() == MODEL["model.safetensors"]


# --- failures: one line each
# ----------------------------------------------------------------------------------------

def test_offline_with_nothing_cached(hub, tmp_path, monkeypatch):
    cache = tmp_path / "hf"
    with pytest.raises(DownloadError) as e:
        resolve("distilbert/distilgpt2", offline=True, cache=cache, endpoint=hub.url)
    assert one_line(e).startswith(f"offline: distilbert/distilgpt2 is not in the Hugging Face "
                                  f"cache {cache} (missing config.json, vocab.json, merges.txt, "
                                  f"model.safetensors)")
    # the way out names what asked for offline: the command line, the setting, or anything
    for offline, undo in (("--offline", "drop --offline"),
                          ("PICOSPEC_OFFLINE", "unset PICOSPEC_OFFLINE (or give --no-offline)"),
                          (True, "drop --offline and unset PICOSPEC_OFFLINE")):
        with pytest.raises(DownloadError, match=f"^offline: .*download it: {re.escape(undo)}$"):
            resolve("distilbert/distilgpt2", offline=offline, cache=cache, endpoint=hub.url)
    # HF_HUB_OFFLINE, as huggingface_hub read it, counts too
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(DownloadError, match="^offline: .*download it: unset HF_HUB_OFFLINE$"):
        resolve("distilbert/distilgpt2", cache=cache, endpoint=hub.url)
    assert hub.requests == [] and not cache.exists()


def test_a_repo_the_hub_does_not_have(hub, tmp_path):
    with pytest.raises(DownloadError) as e:
        resolve("nobody/nothing", cache=tmp_path / "hf", endpoint=hub.url)
    assert one_line(e).startswith(f"nobody/nothing is not on {hub.url}: check the name (built-in")
    assert not isinstance(e.value, Unreachable)


def test_a_file_the_repo_does_not_have(hub, tmp_path):
    del hub.repos["someone/tiny"]["merges.txt"]
    with pytest.raises(DownloadError) as e:
        resolve("someone/tiny", cache=tmp_path / "hf", endpoint=hub.url)
    assert one_line(e) == ("someone/tiny has no merges.txt: picospec loads GPT-2 checkpoints with "
                           "config.json, vocab.json, merges.txt, model.safetensors")


LLAMA = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                    "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                    "vocab_size": 32000, "max_position_embeddings": 2048}).encode()


@pytest.mark.parametrize("config, message", [
    (LLAMA, "model_type is 'llama': picospec runs GPT-2's architecture (model_type gpt2); give a "
            "GPT-2 checkpoint"),
    (b"<html><body>Too many requests</body></html>",  # a proxy's error page, sent with 200
     "not valid JSON (Expecting value: line 1 column 1 (char 0)); delete it (and ")])
def test_a_config_picospec_cannot_run_stops_the_download_before_the_weights(hub, tmp_path, config,
                                                                          message):
    """A repo of another architecture with all four files (as many have), or an error page in
    place of config.json: one line naming the file, and the weights (gigabytes) never fetched."""
    hub.repos["someone/tiny"]["config.json"] = config
    cache = tmp_path / "hf"
    with pytest.raises(ValueError) as e:
        resolve("someone/tiny", cache=cache, endpoint=hub.url)
    path = snapshot(cache, "someone/tiny", hub.commit) / "config.json"
    assert one_line(e).startswith(f"{path}: {message}")
    assert not [p for m, p in hub.requests if "/blobs/" in p or p.endswith("model.safetensors")]
    assert not list(cache.rglob("model.safetensors"))


def test_a_gated_repo(hub, tmp_path):
    hub.gated.add("someone/tiny")
    with pytest.raises(DownloadError) as e:
        resolve("someone/tiny", cache=tmp_path / "hf", endpoint=hub.url)
    assert one_line(e) == (f"someone/tiny is gated: accept its terms at {hub.url}/someone/tiny, "
                           f"then set HF_TOKEN (or run `hf auth login`)")


@pytest.mark.parametrize("default", [True, False])
def test_a_server_that_is_down(tmp_path, sleeps, monkeypatch, default):
    """No answer at all fails at once (one request, no retries); the line says what to do: a
    mirror for the default hub, and for a mirror of the user's (HF_ENDPOINT) that it answers."""
    import gpt2.hub

    url = f"http://127.0.0.1:{closed_port()}"
    if default:
        monkeypatch.setattr(gpt2.hub, "DEFAULT_ENDPOINT", url)
    with pytest.raises(Unreachable) as e:
        resolve("gpt2", cache=tmp_path / "hf", endpoint=url)
    check = ("check the network (or set HF_ENDPOINT to a mirror)" if default else
             "check that this endpoint (HF_ENDPOINT) answers, or unset HF_ENDPOINT")
    assert one_line(e) == (f"cannot download config.json of openai-community/gpt2 from {url} "
                           f"([Errno 111] Connection refused): {check}, or put the model into "
                           f"the Hugging Face cache {tmp_path / 'hf'} and run with --offline (or "
                           f"PICOSPEC_OFFLINE=1)")
    assert sleeps == [] and not (tmp_path / "hf").exists()


def test_a_server_that_fails(hub, tmp_path, sleeps, caplog):
    """A 5xx: huggingface_hub may retry it (2.x does, its waits recorded here, not slept), then one
    line, and none of its warnings (a terminal would show each retry)."""
    hub.status = 500
    with pytest.raises(Unreachable) as e:
        resolve("gpt2", cache=tmp_path / "hf", endpoint=hub.url)
    assert "config.json of openai-community/gpt2 from" in one_line(e)
    assert "(HTTP 500): check that this endpoint (HF_ENDPOINT) answers" in one_line(e)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("status, then", [
    (401, "set HF_TOKEN to a token that may read someone/tiny (or run `hf auth login`)"),
    (403, "set HF_TOKEN to a token that may read someone/tiny (or run `hf auth login`)"),
    (429, "wait a few minutes and run again; signed in (HF_TOKEN, or `hf auth login`) you may "
          "download more")])
def test_a_hub_that_refuses_is_no_network_failure(hub, tmp_path, sleeps, status, then):
    """A 401 or 403 without the hub's gated or not-found code (a token without access), or a 429
    (too many requests): the hub answered, so the line says what the answer asks for, not to
    check the network or go offline."""
    hub.status = status
    with pytest.raises(DownloadError) as e:
        resolve("someone/tiny", cache=tmp_path / "hf", endpoint=hub.url)
    what = "HTTP 429: too many requests" if status == 429 else f"HTTP {status}"
    assert one_line(e) == f"{hub.url} refused config.json of someone/tiny ({what}): {then}"
    assert not isinstance(e.value, Unreachable)


@pytest.mark.parametrize("status", [401, 403])
def test_a_download_link_refused_is_no_token_matter(hub, tmp_path, sleeps, status):
    """The hub answers, but the link it sends the weights from (a signed CDN link, which expires)
    is refused: the line names that link's server and says to run again (a fresh link), not to
    set a token the CDN never reads."""
    hub.cdn_status = status
    with pytest.raises(DownloadError) as e:
        resolve("someone/tiny", cache=tmp_path / "hf", endpoint=hub.url)
    cdn = hub.cdn_url.removeprefix("http://")
    assert one_line(e) == (f"{cdn} refused the download link of model.safetensors of someone/tiny "
                           f"(HTTP {status}; such links expire): run again")
    assert not list((tmp_path / "hf").rglob("model.safetensors"))


@pytest.mark.parametrize("body, cut", [(MODEL["model.safetensors"], 1000),  # a dropped line
                                       (b"<html>Service unavailable</html>", None)])  # a proxy's
def test_a_weights_file_that_comes_short_is_never_taken_as_whole(hub, tmp_path, sleeps, body,
                                                                    cut):
    """A connection that drops mid-file, or a page of its own length in place of the announced
    file: one line that says to run again (huggingface_hub 2 removes its partial file: the next
    run starts over, it does not resume), no part of the file where a later run would take it as
    whole, and the next run downloads the whole file."""
    cache = tmp_path / "hf"
    hub.cdn_body, hub.cut = body, cut
    with pytest.raises(DownloadError) as e:
        resolve("someone/tiny", cache=cache, endpoint=hub.url)
    assert one_line(e).startswith(f"cannot download model.safetensors of someone/tiny from "
                                  f"{hub.url} (")
    assert one_line(e).endswith("): check HF_TOKEN if it is set, or run again")
    assert not list(cache.rglob("model.safetensors"))
    hub.cdn_body = None
    folder = resolve("someone/tiny", cache=cache, endpoint=hub.url)
    assert (folder / "model.safetensors").read_bytes() == MODEL["model.safetensors"]


def test_a_cache_folder_that_is_a_file_costs_no_request(hub, tmp_path):
    (tmp_path / "file").write_text("")
    for cache in (tmp_path / "file", tmp_path / "file" / "below"):
        with pytest.raises(DownloadError) as e:
            resolve("gpt2", cache=cache, endpoint=hub.url)
        assert one_line(e) == (f"cannot write openai-community/gpt2 into the Hugging Face cache "
                               f"{cache} (a file is in the way: {tmp_path / 'file'}); set "
                               f"HF_HUB_CACHE (or HF_HOME) to a folder you can write to, with room "
                               f"for the model")
        # offline, going online would not help: the cache itself is named
        with pytest.raises(DownloadError) as e:
            resolve("gpt2", offline=True, cache=cache, endpoint=hub.url)
        assert one_line(e) == (f"the Hugging Face cache {cache} is not a folder (a file is in the "
                               f"way: {tmp_path / 'file'}); set HF_HUB_CACHE (or HF_HOME) to the "
                               f"folder that holds the model")
    assert hub.requests == []


def test_an_unwritable_cache(hub, tmp_path):
    """/proc takes no file, for root too (permission bits do not stop root)."""
    with pytest.raises(DownloadError) as e:
        resolve("gpt2", cache="/proc/picospec-cache", endpoint=hub.url)
    assert one_line(e).startswith("cannot write openai-community/gpt2 into the Hugging Face cache "
                                  "/proc/picospec-cache (")
    assert hub.requests == []


def test_a_disk_that_fills_up(hub, tmp_path):
    """A write that fails mid-file (a file-size limit in a child process stands in for a full
    disk: the same OSError path) is one line, and the cache holds no model after it."""
    script = ("import resource, signal, sys\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (500_000, 500_000))\n"
              "from gpt2.hub import resolve\n"
              "try:\n"
              f"    resolve('someone/tiny', cache={str(tmp_path / 'hf')!r}, endpoint={hub.url!r})\n"
              "except ValueError as e:\n"
              "    sys.exit(str(e))\n")
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and r.stderr.startswith(
        f"cannot write someone/tiny into the Hugging Face cache {tmp_path / 'hf'} (File too large:")
    assert r.stderr.count("\n") == 1, r.stderr
    assert not list((tmp_path / "hf").rglob("model.safetensors"))


@pytest.mark.parametrize("trainer, extra", [("gpt2.train.heads", []),
                                            ("gpt2.train.eagle", ["--distill_tokens", "10"])])
def test_the_trainers_take_offline(trainer, extra, tmp_path):
    """The trainers resolve their backbone with --offline too (the hub at a closed port)."""
    from tests.support.clitools import assert_refused, files_under, run_cli

    (tmp_path / "data").mkdir()
    before = files_under(tmp_path)
    r = run_cli(["-m", trainer, "--backbone", "gpt2", "--offline", "--data", "data", "--out",
                 "runs/x", *extra], tmp_path, env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert_refused(r, f"^error: offline: openai-community/gpt2 is not in the Hugging Face cache "
                      f"{tmp_path}/.cache/huggingface/hub ", tmp_path, before)


# --- names: built-in, local folders, repo ids
# -------------------------------------------------------------------------------

def test_local_folder_and_unknown_names(tmp_path):
    assert resolve(str(tmp_path)) == tmp_path
    assert resolve("tiny-target") == ASSETS / "tiny-target"
    with pytest.raises(ValueError, match="unknown model 'gpt5'.*gpt2-xl"):
        resolve("gpt5")
    for empty in ("", "  "):  # not the current folder
        with pytest.raises(ValueError,
                           match="the model name is empty: name one \\(built-in: tiny-target"):
            resolve(empty)


@pytest.mark.parametrize("name",
                         ["./nowhere", "../nowhere", "nowhere/", "/nowhere/at/all",
                          "~/picospec-nowhere"])
def test_missing_local_folders_are_errors_not_repo_ids(hub, tmp_path, monkeypatch, name):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="local folder .*nowhere.* does not exist"):
        resolve(name, cache=tmp_path / "cache", endpoint=hub.url)
    assert hub.requests == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["loop", "./loop", "gone", "gone/"])
def test_a_link_that_leads_nowhere_is_named_as_one(hub, tmp_path, monkeypatch, name):
    """A loop of links, or a link whose target is gone: neither a repo id nor a missing folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    (tmp_path / "gone").symlink_to(tmp_path / "deleted")
    with pytest.raises(ValueError, match=r"^local folder .*(loop|gone) is a symbolic link that "
                                         r"leads nowhere \(a loop of links, or a target that is "
                                         r"gone\); link it to a checkpoint folder"):
        resolve(name, cache=tmp_path / "cache", endpoint=hub.url)
    assert hub.requests == []


@pytest.mark.parametrize("name, message", [
    ("x" * 300, "^unknown model 'x{300}': use one of built-in"),
    ("x" * 300 + "/y", "^unknown model 'x{300}/y': not a local folder"),
    ("./" + "x" * 300, "^local folder ./x{300}: File name too long; give a checkpoint folder with "
                       "config.json and model.safetensors, or a model name$")])
def test_a_name_too_long_for_a_path_is_one_line(hub, tmp_path, monkeypatch, name, message):
    """No file has a name over the system's limit (255 bytes a part): as a model name it is no
    local path; as a local path (./...) the line says so."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message):
        resolve(name, cache=tmp_path / "cache", endpoint=hub.url)
    assert hub.requests == [] and list(tmp_path.iterdir()) == []


def test_local_folders_by_prefix(tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    (tmp_path / "home" / "ckpt").mkdir(parents=True)
    (tmp_path / "work" / "weights.bin").write_bytes(b"")
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve("../work") == Path("../work") and resolve(".") == Path(".")
    assert resolve("~/ckpt") == tmp_path / "home" / "ckpt"
    with pytest.raises(ValueError, match="weights.bin is a file; give the folder"):
        resolve("weights.bin")


@pytest.mark.parametrize("name",
                         ["a/../b", "a/b/c", "a/.x", "a/x.", "-a/b", "a/b-", "a/b--c", "a/b..c",
                          "a b/c", "a/b$", "a/b.git", "x" * 97 + "/y", "a/" + "y" * 97, "a//b"])
def test_bad_repo_ids_are_refused_before_any_work(hub, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="unknown model|local folder"):
        resolve(name, cache=tmp_path / "cache", endpoint=hub.url)
    assert hub.requests == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("repo",
                         ["distilbert/distilgpt2", "EleutherAI/gpt-neo-1.3B", "_a/b_", "a.b/c-d",
                          "x" * 96 + "/" + "y" * 96])
def test_good_repo_ids(repo):
    assert check_repo_id(repo) == repo


# --- settings: read at the app's edge, never inside gpt2/
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("setting, offline",
                         [("1", True), ("yes", True), ("TRUE", True), ("", False), ("0", False),
                          ("false", False), ("False", False), ("no", False), ("off", False)])
def test_picospec_offline_reads_as_a_switch(setting, offline):
    """PICOSPEC_OFFLINE=false means online; the app passes it to the hub as offline=."""
    from picospec_app.settings import read_settings

    assert read_settings({"PICOSPEC_OFFLINE": setting}).offline is offline


def test_the_hub_reads_no_environment_and_imports_no_door():
    tree = ast.parse((ROOT / "gpt2" / "hub.py").read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "os" not in names | modules and "picospec_cli" not in modules


# the command line prints a ValueError as one line `error: ...`, exit 2
def test_errors_are_value_errors():
    assert issubclass(Unreachable, DownloadError) and issubclass(DownloadError, ValueError)


# --- main.py offline: each way of asking keeps it off the network; the command line wins
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, env, undo", [
    (["--offline"], {"PICOSPEC_OFFLINE": ""}, "drop --offline"),
    ([], {"PICOSPEC_OFFLINE": "1"}, "unset PICOSPEC_OFFLINE (or give --no-offline)"),
    (["--offline"], {"PICOSPEC_OFFLINE": "1"}, "drop --offline"),
    (["--offline"], {"PICOSPEC_OFFLINE": "0"}, "drop --offline"),
])
def test_main_offline_sends_no_request(hub, tmp_path, monkeypatch, args, env, undo):
    """A model not in the cache, a hub on 127.0.0.1 that records every request: none reaches it,
    and the one line names the way back online that the user really took."""
    from tests.support.clitools import assert_refused, run_here

    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", hub.url)
    r = run_here(["main.py", "--target", "gpt2", "--n_tokens", "2", *args], tmp_path, env=env)
    assert hub.requests == []
    assert_refused(r, rf"^error: offline: openai-community/gpt2 is not in the Hugging Face cache "
                      rf".*download it: {re.escape(undo)}$", tmp_path)


@pytest.mark.parametrize("alias", ["gpt2", "124M", "gpt2-medium"])
def test_an_alias_wins_over_a_folder_of_its_name_from_any_folder(alias, tmp_path, monkeypatch):
    """A folder named like an alias in the current folder (the repository's own gpt2/, or a
    user's) never shadows the alias: the name goes to the hub (here: offline, not cached)."""
    (tmp_path / "work" / alias).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    with pytest.raises(DownloadError, match=r"^offline: openai-community/gpt2"):
        resolve(alias, offline=True, cache=tmp_path / "hf")
