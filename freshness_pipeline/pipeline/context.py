"""Everything one refresh of one source needs, built once from the settings."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from ..adapters.embedders import make_embedder, openai_key
from ..adapters.embedders.base import Embedder
from ..adapters.embedders.tokenizer import TokenizerSpec, tokenizer_for
from ..adapters.state.store import StateStore
from ..adapters.vectorstores import make_vector_store, pinecone_access
from ..adapters.vectorstores.base import VectorStore
from ..config import NoisePolicy, Settings, Source, state_url
from ..core.embedding_models import model_and_dims
from ..core.noise import NORMALIZER_VERSION
from ..core.segment import CHUNKER_VERSION
from ..core.versions import Versions
from .ports import State


def versions_for(settings: Settings, source: Source) -> Versions:
    """The versions a refresh would build with now, without loading any model."""
    cfg = settings.embedder
    model, dims = model_and_dims(cfg.provider, cfg.model, cfg.dimensions, cfg.backend)  # checked at load
    # The source's own rule settings are part of its normalizer: turning a rule off must
    # re-extract and re-index like a new release of the rules would.
    noise = source.noise
    tuned = sorted(noise.disabled_rules), noise.repeated_block_share
    normalizer = NORMALIZER_VERSION
    if tuned != ([], NoisePolicy().repeated_block_share):
        normalizer += "/" + hashlib.sha1(repr(tuned).encode()).hexdigest()[:8]
    return Versions(
        normalizer=normalizer,
        chunker=f"{CHUNKER_VERSION}/{tokenizer_for(cfg, source.chunking).label}",
        model=model,
        dims=dims,
    )


def vector_store(settings: Settings, pinecone_api_key: str | None = None) -> VectorStore:
    """The vector store the settings name (LanceDB under the home's `vectors/` by default)."""
    return make_vector_store(settings.vector_store, default_path=settings.home / "vectors", api_key=pinecone_api_key)


@dataclass
class SourceContext:
    settings: Settings
    source: Source
    store: State
    owns_store: bool = True  # False: a store shared by the run (closed by its owner)
    _vectors: VectorStore | None = field(default=None, repr=False)
    _embedder: Embedder | None = field(default=None, repr=False)
    openai_api_key: str | None = field(default=None, repr=False)  # else $OPENAI_API_KEY
    pinecone_api_key: str | None = field(default=None, repr=False)  # else $PINECONE_API_KEY

    @classmethod
    def open(
        cls,
        settings: Settings,
        source_name: str,
        *,
        read_only: bool = False,
        openai_api_key: str | None = None,
        pinecone_api_key: str | None = None,
    ) -> SourceContext:
        """A context with a store of its own. `read_only`: for commands that only read (see `StateStore`)."""
        store = StateStore(state_url(settings), read_only=read_only)
        return cls(
            settings,
            settings.source(source_name),
            store,
            openai_api_key=openai_api_key,
            pinecone_api_key=pinecone_api_key,
        )

    @property
    def name(self) -> str:
        return self.source.name

    @cached_property
    def versions(self) -> Versions:
        return versions_for(self.settings, self.source)

    @cached_property
    def tokenizer(self) -> TokenizerSpec:
        """How sections are measured: the embedder's tokenizer, capped at its window."""
        return tokenizer_for(self.settings.embedder, self.source.chunking)

    @property
    def vectors(self) -> VectorStore:
        if self._vectors is None:
            self._vectors = vector_store(self.settings, self.pinecone_api_key)
        return self._vectors

    def require_keys(self) -> None:
        """The service keys the embedder and the vector store will need, checked before a page
        is fetched rather than once the crawl is done: a `ConfigError` naming the one missing."""
        if self.settings.embedder.provider == "openai":
            openai_key(self.openai_api_key)
        if self.settings.vector_store.provider == "pinecone":
            pinecone_access(self.settings.vector_store, self.pinecone_api_key)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.settings.embedder, api_key=self.openai_api_key)
        return self._embedder

    def close(self) -> None:
        if self.owns_store:
            self.store.close()
