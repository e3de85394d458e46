"""The public entry point: open an index by its home and sources file, then refresh it,
search it, resolve a citation, read its status.

    from freshness_pipeline import open_index

    index = open_index("dagster_home", "sources.yaml")
    for name, outcome in index.refresh_all():  # every source, through Dagster
        print(name, outcome["status"])
    for hit in index.search("how do I retry an upload?", k=3):
        print(hit.score, hit.url, hit.heading_path, hit.key, hit.as_of)
    index.resolve(hit.key)                # the cited section's current text, after redirects
    index.status()                        # per source: the index, the last attempt and success
    index.frames.manifest()               # the tables as pandas DataFrames (the [pandas] extra)

The work of each method is imported when it is first called, so that opening an index
and searching it never imports Dagster, and reading the status imports neither Dagster
nor the embedding model. The home and the sources file are passed to the pipeline as
arguments (the settings know their home; the runs' resource is configured with both), so
several `Index` objects on several homes can be used in one process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from .config import ConfigError, Settings, load_settings, sources_path
from .core.alerts import alert_reasons
from .core.run_counts import PAGES, counts_text, run_line
from .core.tables import READ
from .pipeline.errors import Interrupted

if TYPE_CHECKING:
    import pyarrow as pa

    from .adapters.webhooks import Delivery
    from .frames import Frames
    from .pipeline.reconcile import ReconcileReport
    from .pipeline.retire import Unlisted
    from .pipeline.search import Result as Hit

__all__ = [
    "PAGES",
    "TABLES",
    "ConfigError",
    "HomeNotFound",
    "Hit",
    "Index",
    "Interrupted",
    "alert_reasons",
    "counts_text",
    "history_rows",
    "open_index",
    "reported_errors",
    "run_line",
]

Tier = Literal["hot", "warm", "cold"]
TABLES = tuple(READ)  # the tables `Index.table` reads, by name
HOME_ENV = "DAGSTER_HOME"


class HomeNotFound(ConfigError):
    """A read of an index whose home folder does not exist (a mistyped `DAGSTER_HOME`), or a
    home that is a file or would be made under one."""


def reported_errors() -> tuple[type[Exception], ...]:
    """The errors a command reports as one line (a bad sources file, damaged state)."""
    from .pipeline.errors import REPORTED

    return REPORTED


def history_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A status row's `freshness_history` as people read it (UTC times, hours, rounded)."""
    from .pipeline.history import history_rows as readable

    return readable(rows)


def open_index(
    home: str | os.PathLike[str] | None = None,
    sources: str | os.PathLike[str] | None = None,
    *,
    create: bool = False,
) -> Index:
    """The index kept in `home` (default `$DAGSTER_HOME`, else `./dagster_home`) for the
    sources file `sources` (default `$FRESHNESS_SOURCES`, else `sources.yaml`). A home that
    does not exist is a `HomeNotFound` error unless `create` (a refresh makes it); a file, or
    a path under one, is one either way."""
    chosen = home if home is not None else os.environ.get(HOME_ENV) or "dagster_home"
    root = Path(chosen).expanduser().resolve()
    named = "$DAGSTER_HOME" if home is not None or os.environ.get(HOME_ENV) else "$DAGSTER_HOME is not set"
    made = next(p for p in (root, *root.parents) if p.exists())  # the home, or where it would be made
    if not made.is_dir():
        where = "is a file" if made == root else f"would be made under a file, {made}"
        raise HomeNotFound(f"the state folder {root} {where} ({named}): point it at a folder")
    if not root.exists() and not create:
        raise HomeNotFound(
            f"the state folder {root} does not exist ({named}); nothing is indexed there. "
            "Check the path, or run `freshness run` to make it"
        )
    path = sources_path(sources).expanduser().resolve()
    return Index(root, path, load_settings(path, root))


@dataclass(frozen=True)
class Index:
    """One home (state store, vector store, Dagster instance) and its sources file."""

    home: Path
    sources_file: Path
    settings: Settings

    @property
    def source_names(self) -> list[str]:
        return [s.name for s in self.settings.sources]

    def names(self, source: str | None = None) -> list[str]:
        """`[source]` checked against the sources file, or every source's name."""
        return [self.settings.source(source).name] if source else self.source_names

    # -- writing ----------------------------------------------------------------------

    def refresh(
        self,
        source: str,
        *,
        tier: Tier | None = None,
        allow_spike: bool = False,
        verbose: bool = False,
    ) -> dict[str, Any]:
        """Refresh one source through Dagster and say how it went (`status` "success",
        "blocked" or "failure", `message`, the counts, the checks that did not pass, the
        pages in error). The outcome is also kept as the source's last attempt, which
        `status` shows beside its last success."""
        return dict(self.refresh_all([source], tier=tier, allow_spike=allow_spike, verbose=verbose))[
            self.settings.source(source).name
        ]

    def refresh_all(
        self,
        sources: list[str] | None = None,
        *,
        tier: Tier | None = None,
        allow_spike: bool = False,
        verbose: bool = False,
        submit: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Refresh several sources (default: every one), yielding (source, what `refresh`
        returns) as each run ends: one run of the `refresh` job after the other, each in this
        process and recorded in the instance (`defs/runner.py`). A Ctrl-C raises
        `Interrupted`, which says whether the run's commit had landed.
        `submit`: a deployment's webserver URL (default `$FRESHNESS_DAGSTER_URL`): the runs
        are submitted to it and waited for (`defs/remote.py`). `tags`: more run tags."""
        names = [self.settings.source(s).name for s in sources] if sources else self.source_names
        from .adapters.memory import collections_paused

        url = submit or os.environ.get("FRESHNESS_DAGSTER_URL")
        if url:
            from .defs.remote import submit_refreshes

            yield from submit_refreshes(url, names, self.settings, tier=tier, tags=_tags(allow_spike, tags))
            return

        with collections_paused():  # Dagster's import and the state store's (`memory.py`)
            from .defs.instance import write_instance_config
            from .defs.runner import run_refreshes
            from .pipeline.attempts import record_attempt
            from .pipeline.maintenance import require_writable_home

        level = "INFO" if verbose else "CRITICAL"
        require_writable_home(self.home)  # one clear line before Dagster writes its storage there
        write_instance_config(self.home)  # the queue, pools and monitoring of docs/dagster.md
        refreshes = run_refreshes(
            self.settings,
            names,
            tier=tier,
            tags=_tags(allow_spike, tags),
            log_level=level,
            sources_file=str(self.sources_file),
        )
        for name, outcome in refreshes:
            try:
                record_attempt(self.settings, name, outcome)
            except KeyboardInterrupt:  # a Ctrl-C once the run had ended: it is said as it ended
                landed = outcome.get("status") == "success" or bool(outcome.get("committed"))
                if landed:
                    yield name, outcome
                raise Interrupted(name, landed, names[names.index(name) + 1 :]) from None
            yield name, outcome

    def release(
        self,
        sources: list[str] | None = None,
        *,
        kinds: list[str] | None = None,
        pages: list[str] | None = None,
        allow_spike: bool = False,
        verbose: bool = False,
        submit: str | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Refresh with an operator's release (and `allow_spike`, the change spike what it
        takes makes let through): the pages the quarantine holds that are of
        `kinds` or among `pages` (neither: every held page of the sources) are taken, when
        their kind's rule lets a release take them (`core/quarantine.py`). Yields what
        `refresh_all` yields; the run is tagged `freshness/release`."""
        from .core.quarantine import Kind
        from .defs.tags import RELEASE_TAG

        unknown = sorted(set(kinds or ()) - {k.value for k in Kind})
        if unknown:
            raise ConfigError(f"no quarantine kind {', '.join(unknown)}; known: {', '.join(k.value for k in Kind)}")
        what = ",".join([*(kinds or ()), *(pages or ())]) or "all"
        tags = {RELEASE_TAG: what}
        yield from self.refresh_all(sources, allow_spike=allow_spike, verbose=verbose, submit=submit, tags=tags)

    def deliver(self) -> list[Delivery]:
        """Send waiting change events to the configured webhooks, one `Delivery` each."""
        from .pipeline.delivery import deliver_all

        return deliver_all(self.settings)

    def reconcile(self, source: str, *, fix: bool = False) -> tuple[ReconcileReport, bool]:
        """Compare the manifest with the vector store (and repair with `fix`): the report and
        whether the source is clean now."""
        from .pipeline.reconcile import reconcile_source

        return reconcile_source(self.settings, self.settings.source(source).name, fix=fix)

    def migrate(self) -> str:
        """Bring the state store's schema to the newest revision, and the settings `freshness`
        manages in the home's dagster.yaml to this release's; one line per change."""
        from .defs.instance import write_instance_config
        from .pipeline.maintenance import migrate

        return "\n".join([*write_instance_config(self.home), migrate(self.settings)])

    def retire(self, source: str) -> dict[str, Any]:
        """Drop, for good, what a source taken out of the sources file left: its namespaces in
        the vector store, its rows in the state store and its Dagster partition (its runs stay
        in Dagster's history); what was dropped. A `ConfigError` when the file still names it,
        or when nothing of it is left."""
        if source in self.source_names:
            raise ConfigError(
                f"{source} is in the sources file {self.sources_file}: take it out of the file first "
                "(retire drops its vectors and state for good)"
            )
        from .defs.retirement import retire

        done = retire(self.settings, source)
        if not done.dropped.rows and not done.partition:
            unlisted = ", ".join(u.source for u in self.unlisted()) or "none"
            raise ConfigError(
                f"nothing of {source} is left to retire: the state store has no rows of it and Dagster no "
                f"partition; sources the state store holds that the sources file does not name: {unlisted}"
            )
        d = done.dropped
        return {
            "source": source,
            "namespaces": d.namespaces,
            "sections": d.sections,
            "rows": d.rows,
            "partition": done.partition,
        }

    # -- reading ----------------------------------------------------------------------

    def indexed(self, names: list[str] | None = None) -> list[str]:
        """The sources (of `names`, default all) that have committed an index."""
        from .pipeline.search import indexed_sources

        return indexed_sources(self.settings, names or self.source_names)

    def search(
        self, query: str, *, k: int = 5, source: str | None = None, record: bool = True, explain: bool = False
    ) -> list[Hit]:
        """The top `k` sections for `query` (vector and full-text search fused), each with
        its citation: `url`, `heading_path`, `key` (for `resolve`), `start`/`end` in the
        live page text, and `as_of`, the date an answer can say it is true as of. With
        `record`, the search counts for `weak()` and the citation resolution rate; with
        `explain`, each hit says which part (vector, full-text or both) found it."""
        from .pipeline.search import search

        return search(self.settings, query, k=k, source=source, record=record, explain=explain)

    def weak_threshold(self) -> float | None:
        """The best-match score under which a search is weak, for the configured model."""
        from .pipeline.search import weak_threshold

        return weak_threshold(self.settings)

    def resolve(self, key: str, *, source: str | None = None) -> dict[str, Any] | None:
        """A section key (from a citation) followed through renamed headings and moved pages
        to the section's current text; None when unknown or its page is gone."""
        if not key.strip():
            raise ValueError("an empty key names no section; pass a key from a search result or citation")
        from .pipeline.search import resolve

        return resolve(self.settings, key, source=source)

    def status(self, source: str | None = None) -> list[dict[str, Any]]:
        """Per source: pages and sections indexed, the last attempt and the last success,
        the index's health, the freshness score and why it alerts."""
        from .pipeline.source_status import source_status

        return [source_status(self.settings, name) for name in self.names(source)]

    def unlisted(self) -> list[Unlisted]:
        """The sources the state store holds that the sources file no longer names, each with
        the sections its committed index still holds (`retire` drops them)."""
        from .pipeline.retire import unlisted_sources

        return unlisted_sources(self.settings)

    def records(self, source: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record of the committed index (of one source, or of every source)."""
        from .pipeline.search import dump

        for name in self.names(source):
            yield from dump(self.settings, name)

    def table(self, name: str, source: str | None = None, **options: Any) -> pa.Table:
        """A table of `core/tables.py` (`manifest`, `history`, `golden`, `golden_misses`,
        `weak`, `runs`, `review`, `verdicts`; see `frames.py`) as an Arrow table of typed columns, of one
        source or of every source (a `source` column first; `weak` is every source's).
        `options`: `limit` (history, runs) or `days` (weak)."""
        if name not in READ:
            raise ValueError(f"no table {name!r}: one of {', '.join(READ)}")
        from .adapters.arrow_tables import arrow_table
        from .pipeline.tables import read_all

        table, rows = read_all(self.settings, self.names(source), READ[name], **options)
        return arrow_table(rows, table)

    def dump_table(
        self, out: BinaryIO, name: str, fmt: Literal["jsonl", "parquet", "csv"], source: str | None = None
    ) -> int:
        """Write `table(name)` to `out` as JSON lines, Parquet or CSV; the rows written."""
        from .adapters.arrow_tables import write

        data = self.table(name, source)
        write(data, out, fmt)
        return data.num_rows

    @property
    def frames(self) -> Frames:
        """The tables as pandas DataFrames (the `[pandas]` extra): `frames.py`."""
        from .frames import Frames

        return Frames(self)

    def weak(self, days: float = 90) -> list[dict[str, Any]]:
        """Searches of the last `days` whose best match was weak, newest first."""
        if not days >= 1:  # also refuses NaN
            raise ValueError(f"days must be at least 1, not {days}")
        from .pipeline.history import weak_searches

        return weak_searches(self.settings, days=days)


def __getattr__(name: str) -> Any:
    if name == "Hit":  # the search result type, loaded with the search
        from .pipeline.search import Result

        return Result
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _tags(allow_spike: bool, tags: dict[str, str] | None) -> dict[str, str] | None:
    """The run tags of a refresh: the caller's and the spike override."""
    from .defs.tags import ALLOW_SPIKE_TAG

    out = {**(tags or {}), **({ALLOW_SPIKE_TAG: "true"} if allow_spike else {})}
    return out or None
