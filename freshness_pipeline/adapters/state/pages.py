"""The `pages` table: the latest observation of every page (the crawl state)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Any

from sqlalchemy import Engine, select

from ...core.state import PageRow
from . import schema
from .dialect import chunks, upsert_rows

_PAGE_FIELDS = tuple(PageRow.__dataclass_fields__)


class Pages:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def load(self, source: str, *, with_markdown: bool = True) -> dict[str, PageRow]:
        names = [n for n in _PAGE_FIELDS if with_markdown or n != "markdown"]
        with self.engine.connect() as conn:
            rows = conn.execute(select(*(schema.pages.c[n] for n in names)).where(schema.pages.c.source == source))
            # zip over plain tuples: Row._asdict() costs several times as much per row
            return {r.url: r for r in (PageRow(**dict(zip(names, t, strict=True))) for t in rows)}

    def markdown(self, source: str, urls: Collection[str]) -> dict[str, str]:
        return dict(self.iter_markdown(source, urls))

    def iter_markdown(self, source: str, urls: Collection[str]) -> Iterator[tuple[str, str]]:
        """(url, markdown) read by chunks of URLs, for a pass over every page's text."""
        with self.engine.connect() as conn:
            for part in chunks(urls):
                q = select(schema.pages.c.url, schema.pages.c.markdown).where(
                    schema.pages.c.source == source, schema.pages.c.url.in_(part)
                )
                yield from ((r.url, r.markdown or "") for r in conn.execute(q))

    def save(self, rows: Iterable[PageRow]) -> None:
        """Upsert page rows. A row whose `markdown` is None (loaded without it) keeps the
        stored text: only fetched content ever replaces it."""
        with_text: list[dict[str, Any]] = []
        without_text: list[dict[str, Any]] = []
        for r in rows:
            d = {name: getattr(r, name) for name in _PAGE_FIELDS}  # asdict's deep copy is slow
            if d["markdown"] is None:
                del d["markdown"]
                without_text.append(d)
            else:
                with_text.append(d)
        with self.engine.begin() as conn:
            for dicts in (with_text, without_text):
                upsert_rows(conn, schema.pages, dicts, ["source", "url"])
