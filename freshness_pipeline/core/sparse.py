"""Sparse vectors of a text's words, for stores whose full-text part is a sparse-dense
index (Pinecone's `sparse_values`). Pure.

A word is a run of letters and digits, lower-cased, English stop words dropped (so
`allow-unsafe-pr-checkout` is four words, as LanceDB's default tokenizer splits it); its
index is a 32-bit hash of it. A document's weights are BM25's term-frequency part
(k1 = 1.2, b = 0.75, over an assumed average length of `AVERAGE_WORDS`); a query's are 1
per distinct word, so the dot product of the two is BM25 without its IDF factor: a sparse
index keeps no corpus statistics to weigh rare words up, which LanceDB's BM25 index does.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter

__all__ = ["document_vector", "query_vector", "words"]

K1 = 1.2
B = 0.75
AVERAGE_WORDS = 120  # a section's words at the default token budget, roughly
_WORD = re.compile(r"[^\W_]+")
# The stop words of LanceDB's (tantivy's) English filter.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def _index(word: str) -> int:
    return zlib.crc32(word.encode())


def _sparse(weights: dict[int, float]) -> dict[str, list[int] | list[float]]:
    indices = sorted(weights)
    return {"indices": indices, "values": [weights[i] for i in indices]}


def document_vector(text: str) -> dict[str, list[int] | list[float]]:
    """`{"indices": [...], "values": [...]}` of a record's retrieval text (empty for no words)."""
    found = words(text)
    norm = K1 * (1 - B + B * len(found) / AVERAGE_WORDS)
    weights: dict[int, float] = {}
    for word, tf in Counter(found).items():
        i = _index(word)
        weights[i] = weights.get(i, 0.0) + tf * (K1 + 1) / (tf + norm)
    return _sparse(weights)


def query_vector(text: str) -> dict[str, list[int] | list[float]]:
    return _sparse({_index(w): 1.0 for w in set(words(text))})
