"""The one error for damaged or unusable durable state (the state database, the vector
store): its message is one line naming the damage and the way out, shown without a
traceback by the command line."""

from __future__ import annotations


class DamagedState(RuntimeError):
    """State on disk (or a server) cannot be used as it is; the message says how to recover."""


REPAIR_INDEX = "`freshness reconcile --fix` rebuilds it from the manifest and the embedding cache"


class SchemaOutdated(DamagedState):
    """The state database is not at the schema this code reads: `freshness migrate` brings
    it there (a refresh also does, at its start). Opening a store never migrates."""


class StateUnreachable(DamagedState):
    """The state database cannot be opened at all: its URL does not parse, or its server
    does not answer. Nothing was read or changed."""
