"""The counts a refresh records, named once. `vector_index` writes them (the run's row in the
state store, its Dagster metadata, `freshness run --json`); the run line of the log, the CLI,
`freshness status` and the demo show them in this order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# What the crawl saw, in pages. `held`: answered, its answer not taken (the quarantine, a
# soft 404, a failed extraction), so its records stay; `dead_links`: answered 404/410 and
# not indexed (a link to a page that never was, or to one gone before).
PAGES = ("crawled", "new", "changed", "unchanged", "gone", "errors", "skipped", "held", "dead_links")
# What was written to the vector store, in records ...
RECORDS = ("embedded", "payload_updated", "deleted")
# ... and the records whose vectors stayed or came from the embedding cache.
REUSED = "reused"
# ... and the sections remapped to a moved page or a renamed heading (shown as "moved").
MOVED = "sections_moved"
# The rest of a run's row: the plan's sections and the index before and after.
DETAILS = (
    "flagged",
    "upserted",
    "orphans_removed",
    "sections_new",
    "sections_changed",
    "sections_moved",
    "sections_removed",
    "sections_fuzzy_unchanged",
    "sections_indexed_before",
    "sections_indexed",
)
KEYS = (*PAGES, *RECORDS, REUSED, *DETAILS)  # every count of a committed run


def counts_text(counts: Mapping[str, object], keys: Sequence[str]) -> str:
    """`crawled: 6 new: 1 ...`: a count missing from `counts` is shown as 0."""
    return " ".join(f"{k}: {counts.get(k, 0)}" for k in keys)


def run_line(counts: Mapping[str, object]) -> str:
    """A run in one line, the same in the log, `freshness run` and the demo: its pages, then
    its records (`reused`, and `moved`). A count the run did not produce (a run stopped
    before indexing) is left out, never shown as 0."""
    pages = [f"{k}: {counts[k]}" for k in PAGES if counts.get(k) is not None]
    records = [f"{k}: {counts[k]}" for k in (*RECORDS, REUSED) if counts.get(k) is not None]
    if counts.get(MOVED) is not None:
        records.append(f"moved: {counts[MOVED]}")
    return "  | ".join(part for part in (" ".join(pages), " ".join(records)) if part)
