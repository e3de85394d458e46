"""Questions about a docs index's sections, built from its records deterministically (a
generator seeded by each section's URL path and heading path), for the retrieval
benchmark (`bench/retrieval.py`) and the corpus tests:

  sentence  one sentence of the section's retrieval text (at least 8 words, found in no
            other section), about a third of its words dropped, lower-cased
  heading   the section's heading and its parent's, lower-cased (a heading pair that two
            sections share is left out)
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NAMESAKE = re.compile(r" \[\d+\]$")


@dataclass(frozen=True)
class Question:
    kind: str  # "sentence" or "heading"
    text: str
    key: str  # the section that answers it


def questions(records: list[dict[str, Any]]) -> list[Question]:
    """Sentence and heading questions of the index's sections, the same on every run."""
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r["key"], r["chunk_index"])):
        by_key[r["key"]].append(r)
    bodies = {key: "\n".join(_body(c["retrieval_text"]) for c in chunks) for key, chunks in by_key.items()}
    out: list[Question] = []
    for key in sorted(by_key):
        rng = random.Random(int.from_bytes(hashlib.sha256(_place(by_key[key][0]).encode()).digest()[:8], "big"))
        sentences = [s for s in _sentences(bodies[key]) if not any(s in b for k, b in bodies.items() if k != key)]
        if sentences:
            words = rng.choice(sentences).split()
            dropped = set(rng.sample(range(len(words)), round(len(words) / 3)))
            out.append(Question("sentence", " ".join(w for i, w in enumerate(words) if i not in dropped).lower(), key))
    headings: dict[str, set[str]] = defaultdict(set)
    for key, chunks in by_key.items():
        parts = [_NAMESAKE.sub("", p) for p in (chunks[0]["heading_path"] or "").split(" > ") if p]
        if parts:
            headings[" ".join(parts[-2:]).lower()].add(key)
    out += [Question("heading", q, next(iter(keys))) for q, keys in sorted(headings.items()) if len(keys) == 1]
    return out


def _place(record: dict[str, Any]) -> str:
    """A section's URL path and heading path: its key without the site's host and port (a
    loopback site's port differs per run), so every run asks the same questions."""
    return f"{urlsplit(record['url']).path}#{record['heading_path']}"


def _body(retrieval_text: str) -> str:
    """The retrieval text without its first line (the heading path)."""
    return retrieval_text.partition("\n")[2]


def _sentences(body: str) -> Iterator[str]:
    for line in body.split("\n"):
        for s in _SENTENCE.split(line):
            words = s.split()
            if 8 <= len(words) <= 60 and sum(any(c.isalpha() for c in w) for w in words) >= len(words) / 2:
                yield " ".join(words)
