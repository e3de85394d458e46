"""A stand-in for OpenAI's embeddings endpoint, for tests. Not OpenAI.

Mimics `POST /v1/embeddings` as the real `openai` SDK uses it: a bearer key (401), known
models only (404), `input` a string or a list of strings or token arrays, at most 2048
inputs, none empty, none over 8191 tokens and at most 300,000 tokens in one request (400,
with the service's error shape and wording), `dimensions` only for text-embedding-3-*
(400 otherwise), and `encoding_format` "float" (the service default) or "base64" (what
the SDK asks for by default: little-endian float32 bytes). Tokens are counted with
cl100k_base from `bpe_openai`, an implementation independent of tiktoken.

Vectors are deterministic: seeded by a hash of (model, input), unit length; with
`dimensions` they are the leading components renormalized, as text-embedding-3 shortens.
Counters: `embedding_requests`, `inputs_embedded`, `batches` (inputs, tokens) per request.
Faults (see `_server`): an injected 429 carries `Retry-After: <retry_after>`.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import bpe_openai
import numpy as np

from freshness_pipeline_tests.standins._server import (
    ApiFailure,
    LoopbackStandIn,
    Reply,
    Request,
)

MODELS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
MAX_INPUTS = 2048
MAX_INPUT_TOKENS = 8191
MAX_REQUEST_TOKENS = 300_000


def _error(status: int, message: str, type_: str = "invalid_request_error", code: str | None = None) -> ApiFailure:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return ApiFailure(Reply(status, body))


class OpenAIStandIn(LoopbackStandIn):
    """Stand-in OpenAI embeddings API; point the SDK's `base_url` at `.base_url`."""

    def __init__(self, *, api_key: str = "standin-key", retry_after: float = 1.0, hang_s: float = 5.0) -> None:
        super().__init__(hang_s=hang_s)
        self.api_key = api_key
        self.retry_after = retry_after
        self.embedding_requests = 0
        self.inputs_embedded = 0
        self.batches: list[tuple[int, int]] = []  # (inputs, tokens) of each served request
        self._encoding = bpe_openai.get_encoding("cl100k_base")

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def fault_reply(self, status: int) -> Reply:
        if status == 429:
            body = _error(429, "Rate limit reached", "requests", "rate_limit_exceeded").reply.body
            return Reply(429, body, {"Retry-After": str(self.retry_after)})
        return _error(status, "The server had an error while processing your request.", "server_error").reply

    def handle(self, request: Request, action: str | None) -> Reply:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            raise _error(401, "Incorrect API key provided.", code="invalid_api_key")
        if (request.method, request.path) != ("POST", "/v1/embeddings"):
            raise _error(404, f"Invalid URL ({request.method} {request.path})")
        body = request.json()
        model = body.get("model")
        if model not in MODELS:
            raise _error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(inputs, list) or not inputs or len(inputs) > MAX_INPUTS:
            raise _error(400, "'$.input' is invalid. Please check the API reference.")
        tokens = [self._count(item) for item in inputs]
        for count in tokens:
            if count > MAX_INPUT_TOKENS:
                raise _error(
                    400,
                    f"This model's maximum context length is {MAX_INPUT_TOKENS} tokens, however "
                    f"you requested {count} tokens ({count} in your prompt; 0 for the "
                    "completion). Please reduce your prompt; or completion length.",
                )
        if sum(tokens) > MAX_REQUEST_TOKENS:
            raise _error(
                400,
                f"Requested {sum(tokens)} tokens, max {MAX_REQUEST_TOKENS} tokens per request",
                code="max_tokens_per_request",
            )
        dimensions = body.get("dimensions")
        if dimensions is not None and not model.startswith("text-embedding-3"):
            raise _error(400, "This model does not support specifying dimensions.")
        full = MODELS[model]
        if dimensions is not None and not 1 <= dimensions <= full:
            raise _error(400, f"dimensions must be between 1 and {full}")
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            raise _error(400, "encoding_format must be 'float' or 'base64'")
        data = []
        for index, item in enumerate(inputs):
            vector = self.vector(model, item, dimensions)
            embedding: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode() if encoding == "base64" else vector.tolist()
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        with self.lock:
            self.embedding_requests += 1
            self.inputs_embedded += len(inputs)
            self.batches.append((len(inputs), sum(tokens)))
        usage = {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens)}
        return Reply(200, {"object": "list", "data": data, "model": model, "usage": usage})

    def _count(self, item: Any) -> int:
        if isinstance(item, str):
            if not item:
                raise _error(400, "'$.input' is invalid: inputs must not be empty strings.")
            return len(self._encoding.encode_ordinary(item))
        if isinstance(item, list) and item and all(isinstance(t, int) for t in item):
            return len(item)
        raise _error(400, "'$.input' is invalid. Please check the API reference.")

    @staticmethod
    def vector(model: str, item: str | list[int], dimensions: int | None = None) -> np.ndarray:
        """The embedding this stand-in returns for `item`, for tests to compare against."""
        seed = hashlib.blake2b(f"{model}\x00{item}".encode(), digest_size=8).digest()
        full = np.random.default_rng(int.from_bytes(seed, "little")).standard_normal(MODELS[model])
        vector = full[:dimensions] if dimensions else full
        return (vector / np.linalg.norm(vector)).astype(np.float32)
