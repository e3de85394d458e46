"""The known embedding models: which provider serves each, its dimensions and its weak-match
threshold. The one table the versions (manifest, cache keys, `code_version`), the embedders,
search and the weak threshold all read. Pure data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelSpec:
    provider: str  # local | openai
    dims: int  # what the model returns when no `dimensions` are asked for
    weak_threshold: float | None = None  # best cosine under this is a weak match (docs/metrics.md)


MODELS: dict[str, ModelSpec] = {
    "all-MiniLM-L6-v2": ModelSpec("local", 384, 0.25),
    "text-embedding-3-small": ModelSpec("openai", 1536),
    "text-embedding-3-large": ModelSpec("openai", 3072),
    "text-embedding-ada-002": ModelSpec("openai", 1536),
}
DEFAULT_MODELS = {"local": "all-MiniLM-L6-v2", "openai": "text-embedding-3-small"}
HASHING_DIMS = 256  # the hashing embedder's default
# How a local model is run; the fastest within one hit@5 point of torch (docs/benchmarks.md).
LOCAL_BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "onnx-int8"


def local_model_id(model: str, backend: str) -> str:
    """The name recorded in the manifest: the backend is part of the model version, so
    switching it re-indexes (torch keeps the bare name indexes were built with before)."""
    return model if backend == "torch" else f"{model}+{backend}"


def resolve_local(model: str | None, backend: str | None) -> tuple[str, str]:
    """(model, backend) from the settings: a `local_model_id` carries its backend (search
    reads the active index's), else the `backend` setting, else the default."""
    name, plus, suffix = (model or DEFAULT_MODELS["local"]).partition("+")
    return name, suffix if plus else backend or DEFAULT_BACKEND


def hashing_model(dims: int) -> str:
    """The hashing embedder's model name: its dimensions are part of it."""
    return f"hashing-v1-{dims}"


def model_and_dims(
    provider: str, model: str | None, dimensions: int | None, backend: str | None = None
) -> tuple[str, int]:
    """The model (for a local one, its `local_model_id`) and dimensions an embedder
    configured so produces. Raises ValueError for a model whose dimensions are unknown and
    not given."""
    if provider == "hashing":
        dims = dimensions or HASHING_DIMS
        return hashing_model(dims), dims
    if provider == "local":
        name, how = resolve_local(model, backend)
        spec = MODELS.get(name)
        if spec is None:
            raise ValueError(f"unknown dimensions for model {name!r}: set embedder.dimensions")
        return local_model_id(name, how), spec.dims
    name = model or DEFAULT_MODELS[provider]
    if dimensions:
        return name, dimensions
    spec = MODELS.get(name)
    if spec is None:
        raise ValueError(f"unknown dimensions for model {name!r}: set embedder.dimensions")
    return name, spec.dims


def weak_threshold(model: str) -> float | None:
    """Calibrated per model; a local backend (`+onnx-int8`) keeps its model's (docs/metrics.md)."""
    spec = MODELS.get(model.partition("+")[0])
    return spec.weak_threshold if spec else None
