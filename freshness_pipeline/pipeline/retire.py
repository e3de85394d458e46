"""Retiring a source taken out of the sources file: its vectors, then its state.

A source removed from the file keeps what it had: its namespaces in the vector store (a bot
that queries the store directly still finds its records), its rows in the state store and
its Dagster partition. `unlisted_sources` names such sources (`freshness status` lists
them). `drop_source`, under the source's run lock, drops every namespace the source may
have written (each index version up to the one after the active, which a re-index writes,
and the retired ones still to drop), then deletes its rows in one transaction. Dropping a
namespace is idempotent, so a retirement stopped between the two is finished by the next.
The partition is the Dagster layer's (`defs/retirement.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..adapters.state.forget import forget_source, source_names
from ..adapters.state.store import StateStore
from ..config import Settings, state_url
from ..core.versions import namespace
from .context import vector_store
from .faults import crash_point
from .source_runs import SourceHold


@dataclass(frozen=True, slots=True)
class Unlisted:
    """A source the state store holds and the sources file no longer names."""

    source: str
    sections: int  # in its committed manifest, each a record in the vector store


@dataclass(frozen=True, slots=True)
class Dropped:
    namespaces: list[str]  # dropped from the vector store, each whether it held records or not
    sections: int  # in the committed manifest: the active namespace's records (not counted in
    # the store, which on Pinecone would mean fetching every record)
    rows: int  # deleted from the state store


def unlisted_sources(settings: Settings) -> list[Unlisted]:
    """The sources with rows in the state store that the sources file does not name."""
    store = StateStore(state_url(settings), read_only=True)
    try:
        listed = {s.name for s in settings.sources}
        return [Unlisted(n, store.manifest.count(n)) for n in source_names(store.engine) if n not in listed]
    finally:
        store.close()


def drop_source(settings: Settings, hold: SourceHold) -> Dropped:
    """Drop the held source's namespaces, then its rows (it must not be in the sources file)."""
    state = hold.store.sources.get(hold.source)
    names: list[str] = []
    if state is not None:
        names = [namespace(hold.source, v) for v in range(1, state.active_version + 2)]
        names += [n for n in state.retired_namespaces if n not in names]
    sections = hold.store.manifest.count(hold.source)
    if names:
        vectors = vector_store(settings)
        for ns in names:
            vectors.drop_namespace(ns)
        crash_point("retire_dropped")  # a crash trial's moment: the namespaces gone, the rows not yet
    return Dropped(names, sections, forget_source(hold.store.engine, hold.source))
