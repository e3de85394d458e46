"""The one resource: where the sources file is, and a per-source context from it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from ..config import Settings, load_settings
from ..pipeline.context import SourceContext


class FreshnessResource(dg.ConfigurableResource):
    """Reads the sources file ($FRESHNESS_SOURCES, default `sources.yaml`) on every use, so
    an edited file takes effect on the next run without a reload."""

    sources_file: str | None = None
    # Service keys, bound to dg.EnvVar in definitions.py: Dagster shows them by variable name only.
    openai_api_key: str | None = None
    pinecone_api_key: str | None = None

    def settings(self) -> Settings:
        return load_settings(self.sources_file)

    @contextmanager
    def open(self, source: str) -> Iterator[SourceContext]:
        ctx = SourceContext.open(
            self.settings(), source, openai_api_key=self.openai_api_key, pinecone_api_key=self.pinecone_api_key
        )
        try:
            yield ctx
        finally:
            ctx.close()
