"""Change events sent to the configured webhooks, one delivery at a time: every process
that delivers (`freshness deliver`, `freshness_metrics` after a run) takes the same lock,
which keeps each receiver's events in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..adapters.state.store import StateStore
from ..adapters.webhooks import Delivery, deliver
from ..config import Settings, Webhook, state_url
from .ports import State

LOCK = "_webhooks"


def deliver_hooks(store: State, hooks: Sequence[Webhook]) -> list[Delivery]:
    def sections(source: str, keys: Sequence[str]) -> list[dict[str, Any]]:
        """Each section of `keys` as the manifest holds it now, chunk by chunk."""
        found = (s for key in keys for s in store.manifest.by_key(source, key))
        return [{"key": s.key, "chunk": s.chunk_index, "content_hash": s.content_hash} for s in found]

    with store.locks.lock(LOCK, wait=True):
        return [deliver(store.metrics, hook, sections=sections) for hook in hooks]


def deliver_all(settings: Settings) -> list[Delivery]:
    """`freshness deliver`: one `Delivery` per webhook of the sources file, in its order."""
    if not settings.webhooks:
        return []
    store = StateStore(state_url(settings))
    try:
        return deliver_hooks(store, settings.webhooks)
    finally:
        store.close()
