"""Downloads against an HTTP server the test starts on 127.0.0.1: success, resume, 404, 500, truncation, offline."""
import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpt2.hub import FILES, DownloadError, download, resolve

BODY = bytes(range(256)) * 400  # 102,400 bytes


class Server:
    """Serves BODY at every path; `plan` is a list of behaviours consumed one request at a time."""

    def __init__(self):
        self.plan, self.requests = [], []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                how = server.plan.pop(0) if server.plan else "ok"
                if how in (404, 500):
                    self.send_response(how)
                    self.end_headers()
                    return
                start = int(self.headers["Range"][6:-1]) if self.headers.get("Range") and how != "ignore-range" else 0
                body = BODY[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(body)))
                if how == "sha":
                    self.send_header("X-Linked-Etag", '"' + hashlib.sha256(BODY).hexdigest() + '"')
                if how == "bad-sha":
                    self.send_header("X-Linked-Etag", '"' + "0" * 64 + '"')
                self.end_headers()
                if how == "cut":  # close the connection halfway: a truncated body
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.httpd.shutdown()


def test_success(server, tmp_path):
    server.plan = ["sha"]
    assert download(server.url + "/f", tmp_path / "f", backoff=0).read_bytes() == BODY
    assert not (tmp_path / "f.part").exists()


def test_interrupted_then_resumed_with_range(server, tmp_path):
    server.plan = ["cut", "ok"]
    assert download(server.url + "/f", tmp_path / "f", backoff=0).read_bytes() == BODY
    first, second = server.requests[0][1], server.requests[1][1]
    assert first is None and second.startswith("bytes=") and second != "bytes=0-"  # resumed, not restarted


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
    with pytest.raises(DownloadError, match="failed after 3 attempts"):
        download(server.url + "/f", tmp_path / "f", retries=2, backoff=0)
    assert not (tmp_path / "f").exists()


def test_truncated_body_every_time(server, tmp_path):
    server.plan = ["cut"] * 10
    with pytest.raises(DownloadError):
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
    assert sorted(p for p, _ in server.requests) == sorted(f"/openai-community/gpt2/resolve/main/{f}" for f in FILES)
    n = len(server.requests)
    assert resolve("124M", cache=tmp_path) == folder and len(server.requests) == n  # cached: no request


def test_offline_never_touches_the_network(server, tmp_path, monkeypatch):
    monkeypatch.setenv("PICOSPEC_HUB_URL", server.url)
    monkeypatch.setenv("PICOSPEC_OFFLINE", "1")
    with pytest.raises(ValueError, match="offline: .*config.json"):
        resolve("distilbert/distilgpt2", cache=tmp_path)
    assert server.requests == []


def test_local_folder_and_unknown_names(tmp_path):
    assert resolve(str(tmp_path)) == tmp_path
    with pytest.raises(ValueError, match="unknown model 'gpt5'.*gpt2-xl"):
        resolve("gpt5")
