"""Vector stores: `make_vector_store` builds the one a sources file's `vector_store` names."""

from __future__ import annotations

import os
from pathlib import Path

from freshness_pipeline.adapters.vectorstores.base import Hit, VectorRecord, VectorStore
from freshness_pipeline.config import ConfigError, VectorStoreConfig

__all__ = ["Hit", "VectorRecord", "VectorStore", "make_vector_store", "pinecone_access"]


def make_vector_store(cfg: VectorStoreConfig, *, default_path: Path, api_key: str | None = None) -> VectorStore:
    """The configured store; Pinecone's key is `api_key` or else `$PINECONE_API_KEY`."""
    if cfg.provider == "pinecone":
        from freshness_pipeline.adapters.vectorstores.pinecone_store import PineconeStore

        key, host = pinecone_access(cfg, api_key)
        return PineconeStore(key, host, timeout=cfg.timeout_s, sparse=cfg.sparse)
    from freshness_pipeline.adapters.vectorstores.lancedb_store import LanceDBStore

    return LanceDBStore(cfg.path or default_path)


def pinecone_access(cfg: VectorStoreConfig, api_key: str | None) -> tuple[str, str]:
    """Pinecone's key (`api_key`, else `$PINECONE_API_KEY`) and the index's host; a
    `ConfigError` naming the one that is not set."""
    if not cfg.host:
        raise ConfigError("vector_store.host is required for provider pinecone (the index's data-plane host)")
    key = api_key or os.environ.get("PINECONE_API_KEY")
    if not key:
        raise ConfigError("vector_store.provider is pinecone but PINECONE_API_KEY is not set")
    return key, cfg.host
