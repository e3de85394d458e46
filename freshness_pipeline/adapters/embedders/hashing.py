"""A deterministic feature-hashing embedder, for tests and benchmarks (no model, no network).

Features are the lowercased word unigrams (`\\w+`) and adjacent-word bigrams of a text.
Each word is hashed with blake2b (64 bits, so the same on every run and machine, unlike
`hash()`); a bigram's hash is a fixed 64-bit mix of its two words' hashes. A feature adds
+1 or -1 (one hash bit) to bucket `hash % dimensions`; rows are then L2-normalized.
Texts sharing words therefore get a positive cosine similarity, as with a real model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from freshness_pipeline.core.embedding_models import HASHING_DIMS, hashing_model

_WORD = re.compile(r"\w+")
_EMPTY = "\x00empty"  # an empty text still gets a unit vector (Pinecone rejects all zeros)
_CACHE_LIMIT = 1_000_000
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


class _WordHashes(dict[str, int]):
    """Word -> 64-bit blake2b hash, computed once per distinct word."""

    def __missing__(self, word: str) -> int:
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        value = self[word] = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        return value


def _mix(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer over the pair: order-sensitive, stable, wraps mod 2**64."""
    h = left * _M1 ^ right
    h ^= h >> np.uint64(30)
    h *= _M2
    h ^= h >> np.uint64(27)
    h *= _M3
    return h ^ (h >> np.uint64(31))


class HashingEmbedder:
    """`Embedder` by feature hashing; `calls` and `texts_embedded` count its use."""

    def __init__(self, dimensions: int = HASHING_DIMS) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be positive")
        self.dimensions = dimensions
        self.model = hashing_model(dimensions)
        self.calls = 0
        self.texts_embedded = 0
        self._hashes = _WordHashes()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        n = len(texts)
        words: list[str] = []
        lengths = np.empty(n, dtype=np.int64)
        for i, text in enumerate(texts):
            found = _WORD.findall(text.lower()) or [_EMPTY]
            words.extend(found)
            lengths[i] = len(found)
        unigrams = np.fromiter(map(self._hashes.__getitem__, words), np.uint64, len(words))
        rows = np.repeat(np.arange(n), lengths)
        same_text = rows[1:] == rows[:-1]  # a bigram never spans two texts
        features = np.concatenate([unigrams, _mix(unigrams[:-1], unigrams[1:])[same_text]])
        owners = np.concatenate([rows, rows[1:][same_text]])
        buckets = (features % np.uint64(self.dimensions)).astype(np.int64)
        signs = np.where(features >> np.uint64(63), 1.0, -1.0)
        flat = np.bincount(owners * self.dimensions + buckets, weights=signs, minlength=n * self.dimensions)
        out = flat.reshape(n, self.dimensions).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)
