"""What the crawl stages: each page's extract until the crawl applied it
(`staged_extracts`), the page rows it decided (`staged_page_rows`) and the template blocks
it learned (`staged_runs.template_blocks`), the last two until the commit promotes them."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy import Connection, Engine, delete, select, update

from ....core.state import PageRow
from .. import schema
from ..dialect import chunks, upsert_rows, upsert_select
from ..pages import split_by_text
from .rows import BATCH, write_rows

# A staged page row holds every column of `pages` but the commit's own (`indexed_signature`,
# `cut_blocks`).
_STAGED_PAGE_FIELDS = tuple(n for n in PageRow.__dataclass_fields__ if n not in ("indexed_signature", "cut_blocks"))
Extract = tuple[str, str | None, str | None, str | None]  # markdown, title, date, error


class CrawlStaging:
    """The crawl's staged work (`StateStore.crawl_staging`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add_extracts(
        self, source: str, run_id: str, items: Iterable[tuple[str, str, str | None, str | None, str | None]]
    ) -> int:
        """(url, markdown, title, date, error) of pages extracted this run; returns how many."""
        rows = (
            {"source": source, "run_id": run_id, "url": u, "markdown": m, "title": t, "date": d, "error": e}
            for u, m, t, d, e in items
        )
        return write_rows(self.engine, schema.staged_extracts, rows)

    def extracts(self, source: str, run_id: str, urls: Collection[str]) -> dict[str, Extract]:
        t = schema.staged_extracts
        out: dict[str, Extract] = {}
        with self.engine.connect() as conn:
            for part in chunks(urls):
                q = select(t.c.url, t.c.markdown, t.c.title, t.c.date, t.c.error).where(
                    t.c.source == source, t.c.run_id == run_id, t.c.url.in_(part)
                )
                out.update((r.url, (r.markdown, r.title, r.date, r.error)) for r in conn.execute(q))
        return out

    def drop_extracts(self, source: str, run_id: str) -> None:
        t = schema.staged_extracts
        with self.engine.begin() as conn:
            conn.execute(delete(t).where(t.c.source == source, t.c.run_id == run_id))

    def save_page_rows(self, source: str, run_id: str, rows: Iterable[PageRow]) -> None:
        """Stage the crawl's page rows (upserted: a page saved again replaces its row). A
        row whose `markdown` is None keeps the text staged before, else the committed one."""
        records = (
            {"run_id": run_id, **{n: getattr(r, n) for n in _STAGED_PAGE_FIELDS}, "source": source} for r in rows
        )
        with self.engine.begin() as conn:
            for dicts in split_by_text(records):
                for i in range(0, len(dicts), BATCH):
                    upsert_rows(conn, schema.staged_page_rows, dicts[i : i + BATCH], ["source", "run_id", "url"])

    def save_template_blocks(self, source: str, run_id: str, blocks: list[str]) -> None:
        """The template blocks the crawl learned, for this run's section stage and commit."""
        r = schema.staged_runs
        with self.engine.begin() as conn:
            conn.execute(update(r).where(r.c.source == source, r.c.run_id == run_id).values(template_blocks=blocks))

    def template_blocks(self, source: str, run_id: str) -> list[str] | None:
        """The template blocks `run_id`'s crawl learned; None when it kept the source's."""
        r = schema.staged_runs
        with self.engine.connect() as conn:
            q = select(r.c.template_blocks).where(r.c.source == source, r.c.run_id == run_id)
            return conn.execute(q).scalar()


def promote_page_rows(conn: Connection, source: str, run_id: str) -> list[str] | None:
    """Inside the commit's transaction `conn`: `run_id`'s staged page rows become the
    source's `pages` rows, in one statement (a NULL staged text keeps the committed one; the
    signature stays the commit's). Returns the template blocks its crawl learned, None when
    it kept them."""
    t, names = schema.staged_page_rows, list(_STAGED_PAGE_FIELDS)
    rows = select(*(t.c[n] for n in names)).where(t.c.source == source, t.c.run_id == run_id)
    upsert_select(conn, schema.pages, names, rows, ["source", "url"], keep_stored=("markdown",))
    r = schema.staged_runs
    return conn.execute(select(r.c.template_blocks).where(r.c.source == source, r.c.run_id == run_id)).scalar()
