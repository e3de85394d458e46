"""Change events reach a webhook that is down for a while: refused connections, then
500s, then OK. Every event arrives once acknowledged, signed, in order, none lost."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.adapters.webhooks import EVENT_HEADER, SIGNATURE_HEADER, deliver
from freshness_pipeline.config import Webhook
from freshness_pipeline_tests.metrics.receiver import Receiver, free_port

SECRET = "s3cret-for-tests"


def add_events(store: StateStore, events: list[tuple[str, str]]) -> None:
    rows = [
        {
            "source": "docs",
            "url": url,
            "kind": kind,
            "content_hash": None,
            "section_keys": [f"k-{url}"],
            "created_at": time.time(),
        }
        for url, kind in events
    ]
    with store.engine.begin() as conn:
        conn.execute(schema.change_events.insert(), rows)


def test_delivery_survives_a_receiver_outage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    migrate(f"sqlite:///{tmp_path / 'state.db'}")
    store = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    metrics = store.metrics
    port = free_port()
    hook = Webhook(
        url=f"http://127.0.0.1:{port}/hook", secret_env="HOOK_SECRET", attempts=3, backoff_s=0.01, timeout_s=2
    )
    # Two pages, interleaved: page a is new, changes, then goes; page b is new then changes.
    add_events(store, [("a", "new"), ("b", "new"), ("a", "changed"), ("b", "changed"), ("a", "gone")])

    down = deliver(metrics, hook)  # nothing listens: connection refused on every attempt
    assert (down.delivered, down.backlog) == (0, 5)
    assert "ConnectError" in (down.error or "")
    assert metrics.cursor(hook.url)["last_event_id"] == 0

    with Receiver(port, fail_first=4) as rx:
        failing = deliver(metrics, hook)  # three 500s for the first event: stop there
        assert (failing.delivered, failing.backlog, rx.seen) == (0, 5, 3)
        assert "HTTP 500" in (failing.error or "")
        assert metrics.cursor(hook.url)["attempts"] == 2

        up = deliver(metrics, hook)  # one more 500, then every event goes through
        assert (up.delivered, up.backlog, up.error) == (5, 0, None)

        add_events(store, [("b", "gone")])
        later = deliver(metrics, hook)
        assert (later.delivered, later.ids) == (1, [6])

    got = rx.events()
    assert [e["id"] for e in got] == [1, 2, 3, 4, 5, 6]  # in order, none lost, none twice
    assert [(e["url"], e["kind"]) for e in got if e["url"] == "a"] == [("a", "new"), ("a", "changed"), ("a", "gone")]
    assert got[0]["section_keys"] == ["k-a"] and got[0]["source"] == "docs"
    for headers, body in rx.accepted:
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers[SIGNATURE_HEADER], expected)
        assert headers[EVENT_HEADER] == str(json.loads(body)["id"])
    assert metrics.cursor(hook.url) | {"updated_at": 0} == {
        "url": hook.url,
        "last_event_id": 6,
        "attempts": 0,
        "last_error": None,
        "updated_at": 0,
    }
    store.close()


def test_a_missing_secret_delivers_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_SECRET", raising=False)
    migrate(f"sqlite:///{tmp_path / 'state.db'}")
    store = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    add_events(store, [("a", "new")])
    out = deliver(store.metrics, Webhook(url="http://127.0.0.1:9/x", secret_env="NO_SUCH_SECRET"))
    assert out.delivered == 0 and out.backlog == 1 and "NO_SUCH_SECRET" in (out.error or "")
    store.close()
