"""`freshness run --submit URL` against a server that is not a working Dagster webserver: each
case, a real loopback server, is one `error:` line naming the GraphQL URL, exit 2, no
traceback, within the bound the sources file's `runs.graphql_timeout_s` sets."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from freshness_pipeline.cli import main

TIMEOUT_S = 1.0  # runs.graphql_timeout_s in the test's sources file
# A call is bounded by its timeout, once to connect or read and once for a body that trickles.
BOUND_S = 2 * TIMEOUT_S + 5.0  # and the command's own start on a busy host
RUN_ID = "3b0f7c8e-0000-4000-8000-000000000000"

Answer = Callable[[BaseHTTPRequestHandler, dict], None]


def _json(handler: BaseHTTPRequestHandler, body: object, status: int = 200) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _graphql(handler: BaseHTTPRequestHandler, request: dict) -> None:
    """A webserver that knows no run: the partition and the launch succeed, the run is not found."""
    query = request["query"]
    if "addDynamicPartition" in query:
        _json(handler, {"data": {"addDynamicPartition": {"__typename": "AddDynamicPartitionSuccess"}}})
    elif "launchRun" in query:
        _json(handler, {"data": {"launchRun": {"__typename": "LaunchRunSuccess", "run": {"runId": RUN_ID}}}})
    else:
        found = {"__typename": "RunNotFoundError", "message": f"Run {RUN_ID} could not be found."}
        _json(handler, {"data": {"runOrError": found}})


def _garbage(handler: BaseHTTPRequestHandler, request: dict) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "9")
    handler.end_headers()
    handler.wfile.write(b"<html>hi!")


def _trickle(handler: BaseHTTPRequestHandler, request: dict) -> None:
    """Headers, then a byte of the body now and then, for ever (until the client goes)."""
    handler.send_response(200)
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    with contextlib.suppress(OSError):
        for _ in range(int(20 * BOUND_S)):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(TIMEOUT_S / 4)


ANSWERS: dict[str, tuple[Answer, str]] = {
    "garbage body": (_garbage, "not JSON"),
    "data null": (lambda h, r: _json(h, {"data": None}), "holds no data"),
    "run not found": (_graphql, "could not be found"),
    "502": (lambda h, r: _json(h, {"message": "bad gateway"}, status=502), "HTTP 502"),
    "hanging server": (_trickle, f"no answer within {TIMEOUT_S:g} s"),
}


@contextlib.contextmanager
def _server(answer: Answer) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path != "/graphql":  # as dagster-webserver answers a POST elsewhere
                _json(self, {"message": "Method Not Allowed"}, status=405)
                return
            answer(self, json.loads(body))

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def _refused() -> Iterator[str]:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def _silent() -> Iterator[str]:
    with socket.socket() as s:  # the kernel accepts the connection; nobody ever reads it
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def _run(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, float]:
    sources = tmp_path / "sources.yaml"
    sources.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "docs", "sitemap": "http://127.0.0.1:9/sitemap.xml"}],
                "embedder": {"provider": "hashing"},
                "runs": {"graphql_timeout_s": TIMEOUT_S},
            }
        )
    )
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FRESHNESS_DAGSTER_URL", raising=False)
    err, out = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["--sources", str(sources), "run", "--submit", url])
    return code, err.getvalue(), time.monotonic() - started


def _assert_one_line(code: int, err: str, elapsed: float, url: str, cause: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"error: {url}/graphql"), err
    assert cause in err and "Traceback" not in err, err
    assert elapsed < BOUND_S, (elapsed, err)


@pytest.mark.parametrize("case", list(ANSWERS))
def test_a_bad_server_is_one_error_line(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answer, cause = ANSWERS[case]
    with _server(answer) as url:
        code, err, elapsed = _run(tmp_path, url, monkeypatch)
    _assert_one_line(code, err, elapsed, url, cause)


def test_a_refused_port_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _refused() as url:
        code, err, elapsed = _run(tmp_path, url, monkeypatch)
    _assert_one_line(code, err, elapsed, url, "cannot reach the webserver")


def test_a_silent_port_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _silent() as url:
        code, err, elapsed = _run(tmp_path, url, monkeypatch)
    _assert_one_line(code, err, elapsed, url, f"no answer within {TIMEOUT_S:g} s")


@pytest.mark.parametrize("endpoint", ["/graphql", "/graphql/"])
def test_the_graphql_endpoint_given_as_the_url_is_the_endpoint(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _server(_graphql) as url:
        code, err, elapsed = _run(tmp_path, url + endpoint, monkeypatch)
    _assert_one_line(code, err, elapsed, url, "could not be found")  # it reached the endpoint, once
    assert "/graphql/graphql" not in err


def test_an_empty_url_is_a_usage_error_not_a_run_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as stop:
        _run(tmp_path, "", monkeypatch)
    assert stop.value.code == 2
    assert not (tmp_path / "home").exists()  # nothing ran on this machine's instance
