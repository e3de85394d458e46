"""OpenAI (or OpenAI-compatible) embeddings through the official SDK.

Requests are bounded by input count and by tokens, counted offline with the model's
tiktoken encoding. An input over the per-input limit is an error, never truncated: the
pipeline splits sections upstream. The SDK retries 408/409/429/5xx and timeouts itself,
honouring Retry-After, up to `max_retries` times.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence

import numpy as np
import tiktoken
from openai import OpenAI, omit

from freshness_pipeline.core.embedding_models import model_and_dims
from freshness_pipeline.core.tokens import get_encoding


def _encoding_name(model: str) -> str:
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:  # a model of an OpenAI-compatible server
        return "cl100k_base"


class OpenAIEmbedder:
    """`Embedder` on the OpenAI embeddings API; `calls` and `texts_embedded` count its use."""

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        *,
        api_key: str,
        base_url: str | None = None,
        max_batch_inputs: int = 2048,
        max_batch_tokens: int = 300_000,
        max_input_tokens: int = 8191,
        max_retries: int = 5,
        timeout: float = 60.0,
    ) -> None:
        self.model, self.dimensions = model_and_dims("openai", model, dimensions)
        self._send_dimensions = dimensions
        self.max_batch_inputs = max_batch_inputs
        self.max_batch_tokens = max_batch_tokens
        self.max_input_tokens = max_input_tokens
        self.calls = 0
        self.texts_embedded = 0
        self._encoding = get_encoding(_encoding_name(model))
        self._client = OpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for start, stop in self._batches(texts):
            out[start:stop] = self._request(list(texts[start:stop]))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def _batches(self, texts: Sequence[str]) -> Iterator[tuple[int, int]]:
        """Consecutive [start, stop) ranges within both batch limits."""
        counts = [len(t) for t in self._encoding.encode_ordinary_batch(list(texts))]
        for i, count in enumerate(counts):
            if count > self.max_input_tokens:
                raise ValueError(
                    f"input {i} has {count} tokens, over the {self.max_input_tokens}-token limit "
                    f"of {self.model}; split it before embedding"
                )
            if count == 0:
                raise ValueError(f"input {i} is empty; the embeddings API rejects empty inputs")
        start, tokens = 0, 0
        for i, count in enumerate(counts):
            if i > start and (i - start >= self.max_batch_inputs or tokens + count > self.max_batch_tokens):
                yield start, i
                start, tokens = i, 0
            tokens += count
        if start < len(counts):
            yield start, len(counts)

    def _request(self, batch: list[str]) -> np.ndarray:
        response = self._client.embeddings.create(
            model=self.model,
            input=batch,
            dimensions=self._send_dimensions or omit,
            encoding_format="base64",
        )
        if len(response.data) != len(batch):
            raise RuntimeError(f"asked for {len(batch)} embeddings, got {len(response.data)}")
        rows = np.empty((len(batch), self.dimensions), dtype=np.float32)
        for item in response.data:
            raw = item.embedding
            rows[item.index] = (
                np.frombuffer(base64.b64decode(raw), dtype="<f4")
                if isinstance(raw, str)  # a compatible server may ignore base64
                else raw
            )
        return rows
