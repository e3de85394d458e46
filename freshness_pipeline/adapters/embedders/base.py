"""The embedder contract: hashing (tests, benchmarks), local (default) and OpenAI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # numpy loads with the first embedder that runs, not with the code location
    import numpy as np


class Embedder(Protocol):
    model: str  # recorded in the manifest; a change triggers a full re-index
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalized float32 row per text, in order."""
