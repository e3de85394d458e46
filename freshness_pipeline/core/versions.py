"""What an index and a page's sections are built with, and where an index version lives. Pure."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .state import SourceState


@dataclass(frozen=True, slots=True)
class Versions:
    """What an index was built with. Any difference means a full re-index."""

    normalizer: str
    chunker: str
    model: str
    dims: int

    def differences(self, state: SourceState) -> list[str]:
        pairs = [
            ("normalizer", state.normalizer_version, self.normalizer),
            ("chunker", state.chunker_version, self.chunker),
            ("embedding model", state.embed_model, self.model),
            ("dimensions", str(state.embed_dims), str(self.dims)),
        ]
        return [f"{what} {old} -> {new}" for what, old, new in pairs if old != new]


def namespace(source: str, version: int) -> str:
    """The vector-store namespace (or LanceDB table) of one index version of a source."""
    return f"{source}-v{version}"


def page_signature(text_hash: str | None, title: str | None, template_hash: str, v: Versions) -> str:
    """What a page's sections depend on: its text, its title (payload), the rules and the
    chunker. Never its date: a date is payload that changes only with a section's text."""
    parts = [text_hash or "", title or "", template_hash, v.normalizer, v.chunker]
    return hashlib.sha1("|".join(parts).encode()).hexdigest()


def template_hash(blocks: list[str]) -> str:
    return hashlib.sha1("\n".join(sorted(blocks)).encode()).hexdigest()
