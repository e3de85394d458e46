"""Where LanceDB keeps a namespace: its table's name and folder. Apart from the store so
that naming an index (a run's metadata) loads neither LanceDB nor numpy."""

from __future__ import annotations

import hashlib
import re

__all__ = ["table_folder", "table_name"]


def table_name(namespace: str) -> str:
    """A LanceDB-safe table name; a hash suffix keeps distinct namespaces distinct."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", namespace)
    if safe != namespace or not safe:
        safe = f"{safe}-{hashlib.blake2b(namespace.encode(), digest_size=4).hexdigest()}"
    return safe


def table_folder(namespace: str) -> str:
    """The folder of a namespace's table under the store's root."""
    return f"{table_name(namespace)}.lance"
