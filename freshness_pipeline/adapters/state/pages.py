"""The `pages` table: every page as of the last committed run (the crawl state). A run's
own stages read it with their crawl's staged rows over it (`run_id`): what the crawl saw
becomes the page's stored text only when the run commits (`staging.promote_page_rows`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Any

from sqlalchemy import Engine, Table, select

from ...core.state import PageRow
from . import schema
from .dialect import chunks, upsert_rows

_PAGE_FIELDS = tuple(PageRow.__dataclass_fields__)


class Pages:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def load(self, source: str, *, with_markdown: bool = True, run_id: str | None = None) -> dict[str, PageRow]:
        """Every page of `source`; with `run_id`, as that run's stages see them: its
        crawl's staged rows over the committed ones (keeping their `indexed_signature` and
        `cut_blocks`)."""
        out = self._load(schema.pages, source, with_markdown=with_markdown)
        if run_id is not None:
            staged = self._load(schema.staged_page_rows, source, with_markdown=with_markdown, run_id=run_id)
            for url, row in staged.items():
                committed = out.get(url)
                if committed is not None:
                    row.indexed_signature, row.cut_blocks = committed.indexed_signature, committed.cut_blocks
                if with_markdown and row.markdown is None and committed is not None:
                    row.markdown = committed.markdown
                out[url] = row
        return out

    def _load(self, table: Table, source: str, *, with_markdown: bool, run_id: str | None = None) -> dict[str, PageRow]:
        names = [n for n in _PAGE_FIELDS if (with_markdown or n != "markdown") and n in table.c]
        q = select(*(table.c[n] for n in names)).where(table.c.source == source)
        if run_id is not None:
            q = q.where(table.c.run_id == run_id)
        with self.engine.connect() as conn:
            # zip over plain tuples: Row._asdict() costs several times as much per row
            return {r.url: r for r in (PageRow(**dict(zip(names, t, strict=True))) for t in conn.execute(q))}

    def markdown(self, source: str, urls: Collection[str], *, run_id: str | None = None) -> dict[str, str]:
        return dict(self.iter_markdown(source, urls, run_id=run_id))

    def iter_markdown(
        self, source: str, urls: Collection[str], *, run_id: str | None = None
    ) -> Iterator[tuple[str, str]]:
        """(url, markdown) read by chunks of URLs, for a pass over every page's text; with
        `run_id`, the text that run's crawl staged where it staged one."""
        p, s = schema.pages, schema.staged_page_rows
        with self.engine.connect() as conn:
            for part in chunks(urls):
                staged: dict[str, str] = {}
                if run_id is not None:
                    q = select(s.c.url, s.c.markdown).where(
                        s.c.source == source, s.c.run_id == run_id, s.c.url.in_(part), s.c.markdown.is_not(None)
                    )
                    staged = {r.url: r.markdown for r in conn.execute(q)}
                    yield from staged.items()
                rest = [u for u in part if u not in staged]
                if rest:
                    q = select(p.c.url, p.c.markdown).where(p.c.source == source, p.c.url.in_(rest))
                    yield from ((r.url, r.markdown or "") for r in conn.execute(q))

    def save(self, rows: Iterable[PageRow]) -> None:
        """Upsert page rows. A row whose `markdown` is None (loaded without it) keeps the
        stored text: only fetched content ever replaces it."""
        records = ({name: getattr(r, name) for name in _PAGE_FIELDS} for r in rows)  # asdict's deep copy is slow
        with self.engine.begin() as conn:
            for dicts in split_by_text(records):
                upsert_rows(conn, schema.pages, dicts, ["source", "url"])


def split_by_text(rows: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Page rows with a `markdown`, and those without one, the key dropped: an upsert of the
    second kind keeps the stored text (only fetched content ever replaces it)."""
    with_text: list[dict[str, Any]] = []
    without_text: list[dict[str, Any]] = []
    for d in rows:
        if d["markdown"] is None:
            del d["markdown"]
            without_text.append(d)
        else:
            with_text.append(d)
    return with_text, without_text
