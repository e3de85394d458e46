"""The one resource: where the sources file is, and a per-source context from it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from pydantic import PrivateAttr

from .. import progress
from ..adapters.memory import release_freed_memory
from ..adapters.state.store import StateStore
from ..config import Settings, load_settings, state_url
from ..pipeline.context import SourceContext
from ..pipeline.maintenance import migrate

# A step's progress lines go to Dagster's logger, so they land in the run's event log.
progress.log_to(dg.get_dagster_logger("freshness"))


class FreshnessResource(dg.ConfigurableResource):
    """Reads the sources file ($FRESHNESS_SOURCES, default `sources.yaml`) on every use, so
    an edited file takes effect on the next run without a reload.

    The state store is opened once per process that executes steps (once per run with the
    in-process executor, the default; once per step process with the multiprocess or Celery one) and
    closed when the execution ends. Opening it checks the schema; the first stage migrates."""

    sources_file: str | None = None
    home: str | None = None  # the state folder; unset, $DAGSTER_HOME (`Settings.home`)
    # Service keys; unset, the embedder and the store read $OPENAI_API_KEY / $PINECONE_API_KEY
    # (a deployment may bind them to `dg.EnvVar`s: Dagster then shows the variable's name only).
    openai_api_key: str | None = None
    pinecone_api_key: str | None = None
    _stores: dict[str, StateStore] = PrivateAttr(default_factory=dict)

    def settings(self) -> Settings:
        return load_settings(self.sources_file, self.home)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    def migrate(self) -> None:
        """Bring the state database to the newest schema: the first stage of a run does, once."""
        migrate(self.settings())

    def store(self, settings: Settings) -> StateStore:
        """The state store `settings` name, opened once per process."""
        url = state_url(settings)
        if url not in self._stores:
            self._stores[url] = StateStore(url)
        return self._stores[url]

    @contextmanager
    def open(self, source: str) -> Iterator[SourceContext]:
        settings = self.settings()
        ctx = SourceContext(
            settings,
            settings.source(source),
            self.store(settings),
            owns_store=False,
            openai_api_key=self.openai_api_key,
            pinecone_api_key=self.pinecone_api_key,
        )
        try:
            yield ctx
        finally:
            ctx.close()
            release_freed_memory()  # the step's heap, before the next step of this process grows its own
