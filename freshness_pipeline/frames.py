"""The index's tables as pandas DataFrames, for notebooks: `open_index(...).frames`.

    frames = open_index("dagster_home", "sources.yaml").frames
    frames.manifest()        # one row per section of the active index
    frames.history()         # the freshness measurements per source, oldest first
    frames.golden()          # the golden set run against the index now, one row per query
    frames.golden_misses()   # consecutive and total misses per golden query and expected section
    frames.weak()            # the searches whose best match was weak, newest first
    frames.runs()            # the last runs, how each ended, and their counts, newest first
    frames.review()          # the pages flagged for review
    frames.verdicts()        # each source's verdict now: fresh, stale, never, blocked, failed

Each frame has the columns of its table in `core/tables.py` (the catalog's tables have the
same), after a `source` column for those kept per source, typed: pandas' nullable string,
Int64, Float64 and boolean dtypes, UTC timestamps, and dates as `date32[day][pyarrow]`. The
same thing has the same name in every frame, so frames join on it: `source`, `url` (a
page), `run_id` (a Dagster run: `history` and `runs`). The columns:

    manifest       key (the section's stable key), url, heading_path (the headings joined by
                   " > "), title, content_hash (the chunk's, or sha256 of its chunks' in
                   order), as_of (date: the day the text is true as of; a month's first day
                   when only its month is known), chunks, tokens, changed_at (first seen
                   with this text), indexed_at (last written to the index)
    history        run_id, measured_at, score (the composite, docs/metrics.md), stale_share
                   (the drift the run found and repaired), error_share (live pages whose
                   last fetch failed, was flagged or skipped; empty before it was kept),
                   age_median_h, lag_p90_h, stale_retrieval_rate, hit_at_5, mrr
    golden         query, expect, stale_prone, rank (empty: not in the first 10), stale (the
                   top 5 held stale text), top (the first URL)
    golden_misses  kind (query | section), subject, consecutive, total, runs
    weak           source (the best match's), created_at, best_score (empty: nothing
                   matched), query, best_url, model
    runs           run_id, status (success | blocked | failure, a canceled run's too;
                   running: not ended, or ended unseen), tier (the pages it fetched: hot | warm | cold |
                   all; empty: not recorded), started_at, finished_at (when it committed;
                   for a run that did not, when it ended), reason (why a full re-index
                   happened), then every count of core/run_counts.py (pages: crawled, new,
                   changed, unchanged, gone, errors, skipped, held, dead_links; records: embedded,
                   payload_updated, deleted, reused; the plan's sections_*), empty for a run
                   that did not commit
    review         url, why
    verdicts       state (fresh | stale | never | blocked | failed), level (ok | warn |
                   error), reason, hours_since (the last success; empty: never): the verdict
                   of `freshness status` and the `source_fresh` check (`core/verdict.py`)

pandas is the `[pandas]` extra; this module imports it only when a frame is asked for
(never on a refresh's path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import ConfigError, require_extra

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from .api import Index


class Frames:
    def __init__(self, index: Index) -> None:
        self._index = index

    def manifest(self, source: str | None = None) -> pd.DataFrame:
        """One row per section of the active index (its columns: the module's docstring)."""
        return self._frame("manifest", source)

    def history(self, source: str | None = None, limit: int | None = None) -> pd.DataFrame:
        """The freshness measurements (`limit` latest per source, default every one), oldest
        first, each with the run it measured (`run_id`, as in `runs()`)."""
        return self._frame("history", source, limit=limit)

    def golden(self, source: str | None = None) -> pd.DataFrame:
        """Each source's golden set run against its active index now (the search a user gets,
        as after every refresh; misses are not counted): query, expect, stale_prone, rank
        (empty: not in the first 10), stale (the top 5 held stale text), top (the first URL)."""
        return self._frame("golden", source)

    def golden_misses(self, source: str | None = None) -> pd.DataFrame:
        """The miss counters: per golden query and per expected section, the consecutive and
        total misses and the runs counted."""
        return self._frame("golden_misses", source)

    def weak(self, days: float = 90) -> pd.DataFrame:
        """The searches of the last `days` whose best match was weak, newest first."""
        return self._frame("weak", None, days=days)

    def runs(self, source: str | None = None, limit: int = 20) -> pd.DataFrame:
        """The `limit` last runs per source, newest first: how each ended, its tier, and the
        counts of those that committed."""
        return self._frame("runs", source, limit=limit)

    def review(self, source: str | None = None) -> pd.DataFrame:
        """The pages flagged for review (soft 404s, bot walls, repeated errors) and why."""
        return self._frame("review", source)

    def verdicts(self, source: str | None = None) -> pd.DataFrame:
        """Each source's freshness verdict now, as `freshness status` and `source_fresh` say it."""
        return self._frame("verdicts", source)

    def _frame(self, table: str, source: str | None, **options: Any) -> pd.DataFrame:
        require_pandas()
        return to_frame(self._index.table(table, source, **options))


def require_pandas() -> None:
    """The one-line error of a frame asked for without the `[pandas]` extra."""
    try:
        require_extra("pandas", "a DataFrame")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def to_frame(data: pa.Table) -> pd.DataFrame:
    """An Arrow table as a DataFrame of pandas' nullable dtypes (timestamps stay UTC, dates
    stay dates)."""
    import pandas as pd
    import pyarrow as pa

    types = {pa.string(): pd.StringDtype(), pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype()}
    types[pa.bool_()] = pd.BooleanDtype()
    types[pa.date32()] = pd.ArrowDtype(pa.date32())
    return data.to_pandas(types_mapper=types.get)
