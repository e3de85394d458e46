"""Deliver the `change_events` outbox to webhooks: JSON, HMAC-SHA256 signed, retried with
exponential backoff (tenacity), in event-id order, never lost.

Each webhook has a cursor in the state store: the id of the last event it answered with a
2xx. Delivery walks the outbox from there and stops at the first event that still fails
after its retries, so the next delivery resumes with it: order is kept (per page, and
overall) and nothing is skipped while a receiver is down. A receiver may see an event twice
(it answered but the answer was lost); `X-Freshness-Event` lets it deduplicate.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from ..config import ConfigError, Webhook

SIGNATURE_HEADER = "X-Freshness-Signature"
EVENT_HEADER = "X-Freshness-Event"


class Outbox(Protocol):
    """The outbox and the cursors, as delivery uses them (`state.metrics_store.MetricsStore`;
    the pipeline hands its port of it, `pipeline/ports.py: Metrics`)."""

    def events_after(self, last_id: int, limit: int = 500) -> list[dict[str, Any]]: ...
    def cursor(self, url: str) -> dict[str, Any]: ...
    def advance(self, url: str, event_id: int) -> None: ...
    def failed(self, url: str, error: str) -> None: ...
    def backlog(self, url: str) -> int: ...


class DeliveryError(RuntimeError):
    """A receiver answered with something other than 2xx."""


@dataclass(slots=True)
class Delivery:
    url: str
    delivered: int = 0
    backlog: int = 0  # events still waiting for this receiver
    error: str | None = None
    ids: list[int] = field(default_factory=list)


def sign(secret: bytes, body: bytes) -> str:
    """The signature header value: `sha256=<hex HMAC-SHA256 of the exact body>`."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


# What a receiver learns of each section an event names: `key`, `chunk` and `content_hash`
# (the sha256 of the retrieval text, the same as in the vector payload), or no entry for a
# key whose section is gone by the time the event is delivered.
SectionLookup = Callable[[str, Sequence[str]], list[dict[str, Any]]]


def payload(event: dict[str, Any], sections: SectionLookup | None = None) -> bytes:
    """The event's JSON body. The event is per page; `sections` lists each of its sections
    with its own `content_hash`. The page-level `content_hash` is that of its only section,
    null when it has several (read `sections` instead)."""
    body = {k: event[k] for k in ("id", "source", "url", "kind", "content_hash", "section_keys", "created_at")}
    if sections is not None:
        body["sections"] = sections(event["source"], event["section_keys"] or [])
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def secret_for(hook: Webhook) -> bytes:
    value = os.environ.get(hook.secret_env)
    if not value:
        raise ConfigError(f"webhook {hook.url}: environment variable {hook.secret_env} is not set")
    return value.encode()


def deliver(
    metrics: Outbox,
    hook: Webhook,
    *,
    client: httpx.Client | None = None,
    limit: int = 500,
    sections: SectionLookup | None = None,
) -> Delivery:
    """Send the events after the hook's cursor, oldest first, advancing the cursor after
    each 2xx. Stops at the first event that fails every attempt. `sections` adds each
    event's sections and their hashes to its body."""
    out = Delivery(hook.url)
    try:
        secret = secret_for(hook)
    except ConfigError as exc:
        out.error = str(exc)
        metrics.failed(hook.url, out.error)
        out.backlog = metrics.backlog(hook.url)
        return out
    own = client is None
    http = client or httpx.Client(timeout=hook.timeout_s)
    try:
        last = metrics.cursor(hook.url)["last_event_id"]
        while out.error is None and (batch := metrics.events_after(last, limit)):
            for event in batch:
                if not _send(http, hook, secret, payload(event, sections), event["id"], out):
                    break
                metrics.advance(hook.url, event["id"])
                last = event["id"]
                out.delivered += 1
                out.ids.append(last)
        if out.error:
            metrics.failed(hook.url, out.error)
    finally:
        if own:
            http.close()
    out.backlog = metrics.backlog(hook.url)
    return out


def _send(http: httpx.Client, hook: Webhook, secret: bytes, body: bytes, event_id: int, out: Delivery) -> bool:
    """POST one event's body with retries; False (and `out.error`) when every attempt failed."""
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body), EVENT_HEADER: str(event_id)}
    try:
        for attempt in Retrying(
            stop=stop_after_attempt(hook.attempts),
            wait=wait_exponential(multiplier=hook.backoff_s, max=60 * hook.backoff_s),
            retry=retry_if_exception_type((httpx.TransportError, DeliveryError)),
            reraise=True,
        ):
            with attempt:
                _post(http, hook.url, body, headers)
    except (httpx.TransportError, DeliveryError) as exc:
        out.error = f"event {event_id}: {exc!r}"
        return False
    return True


def _post(http: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> None:
    resp = http.post(url, content=body, headers=headers)
    if not 200 <= resp.status_code < 300:
        raise DeliveryError(f"HTTP {resp.status_code}")
