"""Metadata values the assets and checks show in the UI."""

from collections.abc import Sequence

import dagster as dg

# vector_index's metadata besides the run's counts (`runner.summarize` tells them apart)
INDEX_EXTRAS = (
    "stale_share",
    "change_share",
    "run_start_to_searchable_s",
    "namespace",
    "reindex_reason",
    "top_changed_pages",
)


def md_table(rows: Sequence[tuple[str, object]], headers: tuple[str, str]) -> dg.MarkdownMetadataValue:
    """A two-column Markdown table, `(none)` when there is no row."""
    lines = [f"| {headers[0]} | {headers[1]} |", "| --- | --- |"]
    lines += [f"| {a} | {b} |" for a, b in rows] or ["| (none) | |"]
    return dg.MetadataValue.md("\n".join(lines))
