"""Downloads against an HTTP server the test starts on 127.0.0.1: success, resume, 404, 500,
truncation, stalls, offline, no network (a failed DNS lookup is simulated, never made); names that
are folders, not repo ids; the cache folder. Every test here must finish within a few seconds."""
import functools
import hashlib
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpt2 import hub
from gpt2.hub import (BACKOFF, FILES, RETRIES, TIMEOUT, DownloadError, Unreachable, check_cache_dir,
                      check_repo_id, download, resolve)

BODY = bytes(range(256)) * 400  # 102,400 bytes


class Server:
    """Serves BODY at every path; `plan` is a list of behaviours consumed one request at a time."""

    def __init__(self):
        self.plan, self.requests = [], []
        # set at the end of the test: stalled answers may then finish
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                how = server.plan.pop(0) if server.plan else "ok"
                if how == "stall":  # accept the request, answer nothing
                    server.release.wait(10)
                    return
                if how in (404, 500):
                    self.send_response(how)
                    self.end_headers()
                    return
                start = (int(self.headers["Range"][6:-1]) if self.headers.get("Range")
                         and how != "ignore-range" else 0)
                body = BODY[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(body)))
                if how == "sha":
                    self.send_header("X-Linked-Etag", '"' + hashlib.sha256(BODY).hexdigest() + '"')
                if how == "bad-sha":
                    self.send_header("X-Linked-Etag", '"' + "0" * 64 + '"')
                self.end_headers()
                # send the headers (and half the body), then nothing more
                if how in ("stall-headers", "stall-mid"):
                    self.wfile.write(body[: len(body) // 2] if how == "stall-mid" else b"")
                    self.wfile.flush()
                    server.release.wait(10)
                    return
                if how == "cut":  # close the connection halfway: a truncated body
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.release.set()
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.fixture(autouse=True)
def quick():
    """A download test that waits on long timeouts or retries is a bug: each must take only a few
    seconds."""
    start = time.monotonic()
    yield
    assert time.monotonic() - start < 5, "this test took more than 5 s"


def test_success(server, tmp_path):
    server.plan = ["sha"]
    assert download(server.url + "/f", tmp_path / "f", backoff=0).read_bytes() == BODY
    assert not (tmp_path / "f.part").exists()


def test_interrupted_then_resumed_with_range(server, tmp_path):
    server.plan = ["cut", "ok"]
    assert download(server.url + "/f", tmp_path / "f", backoff=0).read_bytes() == BODY
    first, second = server.requests[0][1], server.requests[1][1]
    # resumed, not restarted
    assert first is None and second.startswith("bytes=") and second != "bytes=0-"


def test_server_ignoring_range_restarts(server, tmp_path):
    (tmp_path / "f.part").write_bytes(BODY[:1000])
    server.plan = ["ignore-range"]
    assert download(server.url + "/f", tmp_path / "f", backoff=0).read_bytes() == BODY


def test_404_is_a_clear_error_and_leaves_nothing(server, tmp_path):
    server.plan = [404]
    with pytest.raises(DownloadError, match="not found"):
        download(server.url + "/f", tmp_path / "f", backoff=0)
    assert list(tmp_path.iterdir()) == [] or not (tmp_path / "f").exists()


def test_500_then_success(server, tmp_path):
    server.plan = [500, 500, "ok"]
    assert download(server.url + "/f", tmp_path / "f", backoff=0).read_bytes() == BODY


def test_500_forever(server, tmp_path):
    server.plan = [500] * 10
    with pytest.raises(DownloadError, match="failed after 3 attempts") as e:
        download(server.url + "/f", tmp_path / "f", retries=2, backoff=0)
    assert not (tmp_path / "f").exists() and not (tmp_path / "f.part").exists()
    assert "nothing was kept" in str(e.value) and ".part" not in str(e.value)


def test_truncated_body_every_time(server, tmp_path):
    server.plan = ["cut"] * 10
    with pytest.raises(DownloadError,
                       match=r"f.part \(\d+ bytes\) is kept and the next run resumes it"):
        download(server.url + "/f", tmp_path / "f", retries=0, backoff=0)
    assert not (tmp_path / "f").exists() and 0 < (tmp_path / "f.part").stat().st_size < len(BODY)


def test_checksum_mismatch(server, tmp_path):
    server.plan = ["bad-sha"]
    with pytest.raises(DownloadError, match="sha256"):
        download(server.url + "/f", tmp_path / "f", backoff=0)
    assert not (tmp_path / "f").exists() and not (tmp_path / "f.part").exists()


def test_resolve_downloads_a_repo_once(server, tmp_path, monkeypatch):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    folder = resolve("gpt2", cache=tmp_path)
    assert folder == tmp_path / "openai-community" / "gpt2"
    assert sorted(p for p,
                  _ in server.requests) == sorted(f"/openai-community/gpt2/resolve/main/{f}"
                                                  for f in FILES)
    n = len(server.requests)
    # cached: no request
    assert resolve("124M", cache=tmp_path) == folder and len(server.requests) == n


def test_offline_never_touches_the_network(server, tmp_path, monkeypatch):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    with pytest.raises(ValueError, match="offline: .*config.json"):
        resolve("distilbert/distilgpt2", cache=tmp_path)
    assert server.requests == []


@pytest.mark.parametrize("setting, offline",
                         [("1", True), ("yes", True), ("TRUE", True), ("", False), ("0", False),
                                              ("false", False), ("False", False), ("no", False),
                                              ("off", False)])
def test_picospec_offline_reads_as_a_switch(monkeypatch, setting, offline):
    """PICOSPEC_OFFLINE=false means online (it used to mean offline: anything but "" and "0" did);
    --offline wins."""
    monkeypatch.setenv("PICOSPEC_OFFLINE", setting)
    assert (hub.is_offline() is offline and hub.is_offline(True) is True
            and hub.is_offline(False) is False)


def test_local_folder_and_unknown_names(tmp_path):
    assert resolve(str(tmp_path)) == tmp_path
    with pytest.raises(ValueError, match="unknown model 'gpt5'.*gpt2-xl"):
        resolve("gpt5")
    for empty in ("", "  "):  # not the current folder
        with pytest.raises(ValueError,
                           match="the model name is empty: name one \\(built-in: tiny-target"):
            resolve(empty)


# --- no network, stalled servers
# ---------------------------------------------------------------------------------

def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        # nothing listens there once the socket is closed: connections are refused
        return s.getsockname()[1]


@pytest.mark.parametrize("how", ["dns", "refused"])
def test_no_network_fails_at_once_and_says_what_to_do(tmp_path, monkeypatch, how):
    lookups = []

    def no_dns(host, *args, **kwargs):
        lookups.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    # the default hub URL; the lookup fails here, before any packet leaves the machine
    if how == "dns":
        monkeypatch.delenv("PICOSPEC_HUB_URL", raising=False)
        monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    else:
        monkeypatch.setenv("PICOSPEC_HUB_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.delenv("PICOSPEC_OFFLINE", raising=False)
    start = time.monotonic()
    with pytest.raises(Unreachable) as e:
        resolve("gpt2", cache=tmp_path / "cache")
    # no retries with backoff: a failed lookup or a refusal will not heal
    assert time.monotonic() - start < 3
    message = str(e.value)
    for hint in ("cannot connect to", "--offline", "PICOSPEC_OFFLINE=1", "PICOSPEC_CACHE",
                 str(tmp_path / "cache" / "openai-community" / "gpt2"), "config.json, vocab.json"):
        assert hint in message
    assert lookups == (["huggingface.co"] if how == "dns" else [])
    assert not (tmp_path / "cache").exists()  # the folders it made for the download are gone again


def test_stalled_server_times_out(server, tmp_path):
    server.plan = ["stall", "stall"]
    start = time.monotonic()
    with pytest.raises(DownloadError,
                       match="failed after 2 attempts .the server stalled: no data for 0.3 s") as e:
        download(server.url + "/f", tmp_path / "f", timeout=(1, 0.3), retries=1, backoff=0)
    assert time.monotonic() - start < 2 and len(server.requests) == 2
    assert "nothing was kept" in str(e.value) and list(tmp_path.iterdir()) == []


def test_stall_after_the_headers_keeps_no_empty_part(server, tmp_path):
    server.plan = ["stall-headers"]
    with pytest.raises(DownloadError, match="stalled") as e:
        download(server.url + "/f", tmp_path / "f", timeout=(1, 0.3), retries=0, backoff=0)
    assert ".part" not in str(e.value) and list(tmp_path.iterdir()) == []


def test_stall_mid_body_keeps_the_part_and_resumes(server, tmp_path):
    server.plan = ["stall-mid"]
    with pytest.raises(DownloadError, match=r"stalled.*f.part \(\d+ bytes\) is kept"):
        download(server.url + "/f", tmp_path / "f", timeout=(1, 0.3), retries=0, backoff=0)
    kept = (tmp_path / "f.part").stat().st_size
    assert 0 < kept <= len(BODY) // 2
    server.plan = ["stall-mid", "ok"]  # half of the rest, a stall, then the rest
    assert download(server.url + "/f", tmp_path / "f", timeout=(1, 0.3),
                    backoff=0).read_bytes() == BODY
    ranges = [r for _, r in server.requests]
    # each resumes where it stopped
    assert ranges[:2] == [None, f"bytes={kept}-"] and int(ranges[2][6:-1]) > kept


def test_default_timeouts_bound_a_stall_under_a_minute():
    """The module docstring's promise: a server that accepts and then never answers fails within 59
    s."""
    attempts = RETRIES + 1
    assert attempts * sum(TIMEOUT) + sum(BACKOFF * 2**i for i in range(RETRIES)) < 60


def test_failed_download_leaves_no_empty_folders(server, tmp_path, monkeypatch):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    server.plan = [404]
    with pytest.raises(DownloadError, match="not found"):
        resolve("someone/model", cache=tmp_path / "new" / "cache")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "cache" / "someone").mkdir(parents=True)  # folders that were there before stay
    server.plan = [404]
    with pytest.raises(DownloadError, match="not found"):
        resolve("someone/model", cache=tmp_path / "cache")
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*")] == [Path("cache"),
                                                                      Path("cache/someone")]


def test_failed_download_keeps_the_folder_of_a_kept_part(server, tmp_path, monkeypatch):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    monkeypatch.setattr(hub, "download", functools.partial(hub.download, retries=0, backoff=0))
    server.plan = ["ok", "cut"]
    with pytest.raises(DownloadError, match="vocab.json.part .* is kept"):
        resolve("someone/model", cache=tmp_path)
    assert sorted(p.name for p in (tmp_path / "someone" / "model").iterdir()) == ["config.json",
                                                                                  "vocab.json.part"]


# --- names: local folders, repo ids
# ------------------------------------------------------------------------------

@pytest.mark.parametrize("name",
                         ["./nowhere", "../nowhere", "nowhere/", "/nowhere/at/all",
                          "~/picospec-nowhere"])
def test_missing_local_folders_are_errors_not_repo_ids(server, tmp_path, monkeypatch, name):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="local folder .*nowhere.* does not exist"):
        resolve(name, cache=tmp_path / "cache")
    assert server.requests == [] and list(tmp_path.iterdir()) == []


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
                          "a b/c",
                                  "a/b$", "a/b.git", "x" * 97 + "/y", "a/" + "y" * 97, "a//b"])
def test_bad_repo_ids_are_refused_before_any_work(server, tmp_path, monkeypatch, name):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="unknown model|local folder"):
        resolve(name, cache=tmp_path / "cache")
    assert server.requests == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("repo",
                         ["distilbert/distilgpt2", "EleutherAI/gpt-neo-1.3B", "_a/b_", "a.b/c-d",
                                  "x" * 96 + "/" + "y" * 96])
def test_good_repo_ids(repo):
    assert check_repo_id(repo) == repo


# --- the cache folder
# ----------------------------------------------------------------------------------------------

def test_cache_that_is_a_file_is_refused_before_any_request(server, tmp_path, monkeypatch):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    (tmp_path / "file").write_text("")
    for cache in (tmp_path / "file", tmp_path / "file" / "below"):
        monkeypatch.setenv("PICOSPEC_CACHE", str(cache))
        with pytest.raises(ValueError,
                           match=f"the cache folder {cache} .PICOSPEC_CACHE. cannot be made: .*is "
                                 f"a file"):
            check_cache_dir()
        with pytest.raises(ValueError, match="PICOSPEC_CACHE"):
            resolve("gpt2")
    assert server.requests == []


def test_unwritable_cache_is_refused(tmp_path, monkeypatch):
    """A folder no file can be made in: /proc for anyone (root too: permission bits do not stop
    root), a read-only folder for other users."""
    monkeypatch.setenv("PICOSPEC_CACHE", "/proc/picospec-cache")
    with pytest.raises(ValueError,
                       match=r"PICOSPEC_CACHE\) is not writable: cannot write in /proc \("):
        check_cache_dir()
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    monkeypatch.setenv("PICOSPEC_CACHE", str(tmp_path / "ro" / "cache"))
    try:
        if os.geteuid() != 0:
            with pytest.raises(ValueError,
                               match="PICOSPEC_CACHE. is not writable: cannot write in .*ro"):
                check_cache_dir()
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_cache_folder_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PICOSPEC_CACHE", str(tmp_path / "not-yet"))
    # nothing is made
    assert check_cache_dir() == tmp_path / "not-yet" and not (tmp_path / "not-yet").exists()
    monkeypatch.setenv("PICOSPEC_CACHE", "")
    assert check_cache_dir() == Path.home() / ".cache" / "picospec"


# the command line prints a ValueError as one line `error: ...`, exit 2
def test_errors_are_value_errors():
    assert issubclass(Unreachable, DownloadError) and issubclass(DownloadError, ValueError)
