"""The embedder's own tokenizer and window, for the chunker: nothing is ever truncated.

all-MiniLM-L6-v2 reads at most 256 wordpieces ([CLS] and [SEP] included) and silently drops
the rest; its `tokenizer.json` ships in the model package and the `tokenizers` library
loads it without torch or the model. OpenAI's embedding models count in cl100k_base; a
400-512 token budget keeps chunks focused. The hashing embedder has no window: the
configured encoding and budget apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from freshness_pipeline.config import ChunkPolicy, EmbedderConfig
from freshness_pipeline.core.embedding_models import resolve_local
from freshness_pipeline.core.segment import TARGET_SHARE, TokenCount, tiktoken_counter

__all__ = ["OPENAI_MAX_BUDGET", "TokenizerSpec", "capped_budget", "tokenizer_for"]

OPENAI_MAX_BUDGET = 512
_OPENAI_ENCODING = "cl100k_base"  # text-embedding-3-small/-large and ada-002


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    """How sections are measured: picklable, so it travels to the segment workers."""

    kind: Literal["wordpiece", "tiktoken"]
    name: str  # the local model, or a tiktoken encoding
    budget: int  # tokens per chunk's retrieval text, at most the model's window
    target_share: int = TARGET_SHARE  # `chunking.target_share`: a long section's runs aim at budget/share

    @property
    def label(self) -> str:
        """Part of the chunker version: another tokenizer, budget or target share means a
        re-index (the default share adds nothing, so the shipped label stays as it was)."""
        share = "" if self.target_share == TARGET_SHARE else f"/share-{self.target_share}"
        return f"{self.name}/{self.budget}{share}"

    def counter(self) -> TokenCount:
        return _wordpiece(self.name) if self.kind == "wordpiece" else tiktoken_counter(self.name)


def tokenizer_for(embedder: EmbedderConfig, chunking: ChunkPolicy) -> TokenizerSpec:
    """The tokenizer of the configured embedder, with the budget capped at its window."""
    share = chunking.target_share
    if embedder.provider == "local":
        model, _ = resolve_local(embedder.model, embedder.backend)  # every backend reads the same window
        return TokenizerSpec("wordpiece", model, min(chunking.token_budget, _window(model)), share)
    if embedder.provider == "openai":
        return TokenizerSpec("tiktoken", _OPENAI_ENCODING, min(chunking.token_budget, OPENAI_MAX_BUDGET), share)
    return TokenizerSpec("tiktoken", chunking.encoding, chunking.token_budget, share)


def capped_budget(embedder: EmbedderConfig, chunking: ChunkPolicy) -> str | None:
    """What to tell a user whose `chunking.token_budget` (set in the sources file, not the
    default) is over the embedder's window: it changes nothing above it. None otherwise."""
    if "token_budget" not in chunking.model_fields_set:
        return None
    spec = tokenizer_for(embedder, chunking)
    if spec.budget >= chunking.token_budget:
        return None
    return (
        f"chunking.token_budget {chunking.token_budget} is over the {embedder.provider} embedder's window "
        f"({spec.budget} {spec.name} tokens): sections are cut at {spec.budget}, so set it to {spec.budget} or less"
    )


def _window(model: str) -> int:
    from .shipped import model_path, window

    return window(model_path(model))


@cache
def _wordpiece(model: str) -> TokenCount:
    from tokenizers import Tokenizer

    from .shipped import model_path

    tok = Tokenizer.from_file(str(model_path(model) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return lambda text: len(tok.encode(text).ids)  # [CLS] and [SEP] included
