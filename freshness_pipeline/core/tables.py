"""The tables people read, declared once: their columns and each column's kind. The
catalog's tables (`defs/metadata.py`: Dagster `TableSchema`) and the frames of the public
API (`frames.py`: typed pandas columns) and `freshness dump --table` are built
from these, so the UI, a notebook and a file show the same columns.

Kinds: "string", "int", "float", "bool", "timestamp" (rows carry POSIX seconds; the
catalog shows UTC minutes, a frame a UTC timestamp) and "date" (rows carry a
`datetime.date`; Arrow's date32). Every column may be empty (None). The same thing has the
same name in every table: `url` for a page, `source`, `run_id` for a Dagster run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from .run_counts import KEYS

Kind = Literal["string", "int", "float", "bool", "timestamp", "date"]


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[tuple[str, Kind], ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def per_source(self) -> Table:
        """The same table with a `source` column first (a frame covers several sources)."""
        return Table(self.name, (("source", "string"), *self.columns))


# The manifest, one row per section (its key): what the active index holds.
MANIFEST = Table(
    "manifest",
    (
        ("key", "string"),
        ("url", "string"),
        ("heading_path", "string"),  # the headings joined by " > "
        ("title", "string"),
        ("content_hash", "string"),  # the chunk's, or of its chunks' in order (sha256)
        ("as_of", "date"),  # the day the text is true as of (a month's first day when only its month is known)
        ("chunks", "int"),
        ("tokens", "int"),
        ("changed_at", "timestamp"),  # first seen with this text
        ("indexed_at", "timestamp"),  # last written to the index
    ),
)
# The freshness history as people read it: ages and lags in hours.
HISTORY = Table(
    "history",
    (
        ("run_id", "string"),  # the run measured (joins `runs`)
        ("measured_at", "timestamp"),
        ("score", "float"),
        ("stale_share", "float"),
        ("error_share", "float"),  # live pages whose last fetch failed, was flagged or skipped
        ("age_median_h", "float"),
        ("lag_p90_h", "float"),
        ("stale_retrieval_rate", "float"),
        ("hit_at_5", "float"),
        ("mrr", "float"),
    ),
)
# The golden set run against the index: one row per query, its rank empty when not found.
GOLDEN = Table(
    "golden",
    (
        ("query", "string"),
        ("expect", "string"),
        ("stale_prone", "bool"),
        ("rank", "int"),
        ("stale", "bool"),
        ("top", "string"),
    ),
)
# Consecutive and total misses per golden query and per expected section.
GOLDEN_MISSES = Table(
    "golden_misses",
    (
        ("kind", "string"),  # query | section
        ("subject", "string"),
        ("consecutive", "int"),
        ("total", "int"),
        ("runs", "int"),
    ),
)
# Searches whose best match was weak.
WEAK = Table(
    "weak",
    (
        ("source", "string"),  # the best match's
        ("created_at", "timestamp"),
        ("best_score", "float"),
        ("query", "string"),
        ("best_url", "string"),
        ("model", "string"),
    ),
)
# Pages for review: flagged pages (soft 404s, bot walls, repeated errors), pages not checked.
PAGES_FOR_REVIEW = Table("review", (("url", "string"), ("why", "string")))
PAGES_IN_ERROR = Table("page_errors", (("url", "string"), ("reason", "string")))
TOP_PAGES = Table("top_pages", (("url", "string"), ("sections written", "int")))
SUSPECTS = Table("suspects", (("phrase added (+) / removed (-)", "string"), ("changed sections", "int")))


# The runs, newest first: how each ended and its tier, when, why a full re-index happened,
# and every count (of those that committed).
RUNS = Table(
    "runs",
    (
        ("run_id", "string"),
        ("status", "string"),  # success | blocked | failure | running
        ("tier", "string"),  # hot | warm | cold | all
        ("started_at", "timestamp"),
        ("finished_at", "timestamp"),
        ("reason", "string"),
        *((count, "int") for count in KEYS),
    ),
)


# Each source's verdict now (`core/verdict.py`), as `freshness status` and `source_fresh` say it.
VERDICTS = Table(
    "verdicts",
    (
        ("state", "string"),  # fresh | stale | never | blocked | failed
        ("level", "string"),  # ok | warn | error
        ("reason", "string"),
        ("hours_since", "float"),  # since the last success; empty: never refreshed
    ),
)


# The tables the public API reads (`Index.table`, `Index.frames`), by name.
READ = {t.name: t for t in (MANIFEST, HISTORY, GOLDEN, GOLDEN_MISSES, WEAK, RUNS, PAGES_FOR_REVIEW, VERDICTS)}


def utc_minute(seconds: float | None) -> str | None:
    """A timestamp column's value as the catalog and `freshness status` show it."""
    return None if seconds is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(seconds))
