"""The fetcher's transport honours proxies: the environment's (HTTP_PROXY, NO_PROXY) when
`trust_env`, none when not, and an explicit one; and the page deadline holds through a proxy
(its pool is made with our network backend too). A tiny loopback forward proxy records what
it relays."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest

from freshness_pipeline.adapters.fetch import Fetcher, Target
from freshness_pipeline.adapters.scope import DeadlineBackend, Scope
from freshness_pipeline.adapters.transport import environment_proxies, transports
from freshness_pipeline.config import FetchPolicy, Source
from freshness_pipeline.core.models import Outcome
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline_tests.sitefixture import Page, SiteServer


class ForwardProxy:
    """An HTTP forward proxy on loopback: GETs an absolute URL from its origin and answers with
    what the origin said. `silent` holds every request without answering until closed."""

    def __init__(self, *, silent: bool = False) -> None:
        self.relayed: list[str] = []
        self.silent = silent
        self.closing = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if proxy.silent:
                    proxy.closing.wait(30)
                    return
                proxy.relayed.append(self.path)
                target = urlsplit(self.path)
                origin = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=10)
                try:
                    origin.request("GET", target.path or "/", headers={"Host": target.netloc})
                    answer = origin.getresponse()
                    body = answer.read()
                finally:
                    origin.close()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer({"/docs/a": Page("<html><title>a</title><p>a body</p></html>")}) as server:
        yield server


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def fetch_a(site: SiteServer, **policy: float) -> tuple[Outcome, str]:
    fetch = FetchPolicy(obey_robots=False, timeout_s=10.0, max_retries=0, **policy)  # type: ignore[arg-type]
    with Fetcher(Source(name="t", start_urls=[site.url("/docs/a")], fetch=fetch)) as fetcher:
        (result,) = fetcher.fetch([Target(normalize_url(site.url("/docs/a")), site.url("/docs/a"))])
    return result.outcome, result.reason


def test_the_environment_proxy_carries_the_fetch(site: SiteServer, clean_env: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        clean_env.setenv("HTTP_PROXY", proxy.url)
        outcome, _ = fetch_a(site)
        assert outcome is Outcome.OK
        assert proxy.relayed == [site.url("/docs/a")]


def test_no_proxy_sends_the_fetch_direct(site: SiteServer, clean_env: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        clean_env.setenv("HTTP_PROXY", proxy.url)
        clean_env.setenv("NO_PROXY", "127.0.0.1")
        outcome, _ = fetch_a(site)
        assert outcome is Outcome.OK
        assert proxy.relayed == []
        assert site.paths_requested("/docs/a") == 1


def test_the_page_deadline_holds_through_a_proxy(site: SiteServer, clean_env: pytest.MonkeyPatch) -> None:
    with ForwardProxy(silent=True) as proxy:
        clean_env.setenv("HTTP_PROXY", proxy.url)
        started = time.monotonic()
        outcome, reason = fetch_a(site, page_deadline_s=1.0)
        took = time.monotonic() - started
    assert outcome is Outcome.ERROR and "page_deadline_s" in reason
    assert took < 1.0 + 5.0, took  # well under timeout_s (10 s), the socket's own bound


def get_through(site: SiteServer, *, trust_env: bool, proxy: str | None = None) -> int:
    transport, mounts = transports(
        DeadlineBackend(Scope([site.base_url], allow_private=False)), httpx.Limits(), trust_env=trust_env, proxy=proxy
    )
    with httpx.Client(transport=transport, mounts=mounts, trust_env=trust_env) as client:
        return client.get(site.url("/docs/a")).status_code


def test_trust_env_decides_whether_the_environment_is_read(site: SiteServer, clean_env: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        clean_env.setenv("HTTP_PROXY", proxy.url)
        assert environment_proxies() == {"http://": proxy.url}
        assert get_through(site, trust_env=False) == 200
        assert proxy.relayed == []
        assert get_through(site, trust_env=True) == 200
        assert proxy.relayed == [site.url("/docs/a")]


def test_an_explicit_proxy_is_used_without_the_environment(site: SiteServer, clean_env: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        assert get_through(site, trust_env=False, proxy=proxy.url) == 200
        assert proxy.relayed == [site.url("/docs/a")]


def test_no_proxy_entries_read_as_httpx_reads_them(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTPS_PROXY", "proxy.internal:3128")
    clean_env.setenv("NO_PROXY", "localhost, 10.0.0.1,::1,.example.com,http://skip.me")
    assert environment_proxies() == {
        "https://": "http://proxy.internal:3128",
        "all://localhost": None,
        "all://10.0.0.1": None,
        "all://[::1]": None,
        "all://*.example.com": None,
        "http://skip.me": None,
    }
    clean_env.setenv("NO_PROXY", "*")
    assert environment_proxies() == {}
