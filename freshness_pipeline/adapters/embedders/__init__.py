"""Embedders: `make_embedder` builds the one a sources file's `embedder` section names."""

from __future__ import annotations

import os

from freshness_pipeline.adapters.embedders.base import Embedder
from freshness_pipeline.config import ConfigError, EmbedderConfig
from freshness_pipeline.core.embedding_models import DEFAULT_MODELS, HASHING_DIMS, resolve_local

__all__ = ["Embedder", "make_embedder", "openai_key"]


def make_embedder(cfg: EmbedderConfig, *, api_key: str | None = None) -> Embedder:
    """The configured embedder; OpenAI's key is `api_key` or else `$OPENAI_API_KEY`."""
    if cfg.provider == "hashing":
        from freshness_pipeline.adapters.embedders.hashing import HashingEmbedder

        return HashingEmbedder(cfg.dimensions or HASHING_DIMS)
    if cfg.provider == "openai":
        from freshness_pipeline.adapters.embedders.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(
            cfg.model or DEFAULT_MODELS["openai"],
            cfg.dimensions,
            api_key=openai_key(api_key),
            base_url=cfg.base_url,
            max_batch_inputs=min(cfg.batch_size, 2048),
            max_batch_tokens=cfg.max_batch_tokens,
            timeout=cfg.timeout_s,
        )
    from freshness_pipeline.adapters.embedders.local import LocalEmbedder

    if cfg.dimensions is not None:
        raise ConfigError("embedder.dimensions cannot be set for provider local")
    model, backend = resolve_local(cfg.model, cfg.backend)
    return LocalEmbedder(model, batch_size=cfg.batch_size, backend=backend)


def openai_key(api_key: str | None) -> str:
    """OpenAI's key: `api_key`, else `$OPENAI_API_KEY`; a `ConfigError` when neither is set."""
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise ConfigError("embedder.provider is openai but OPENAI_API_KEY is not set")
    return key
