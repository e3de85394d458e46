"""The shipped model as ONNX files, made once into a cache folder, without torch.

`bert_graph.py` builds the fp32 graph from the model's safetensors weights; the int8 file
is that graph with per-channel int8 weights from onnxruntime's own `quantize_dynamic`. Mean
pooling and L2 normalization are part of the graph, so running it needs only onnxruntime
and the `tokenizers` library.

The files are keyed by the model's weights (sha256 of `model.safetensors`) and the graph's
version, made by one process at a time (a file lock), written to a temporary name and
renamed, so a concurrent or interrupted build never leaves a half file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from freshness_pipeline.adapters.embedders.bert_graph import GRAPH_VERSION, bert_graph

__all__ = ["cache_dir", "model_file"]

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """`$FRESHNESS_MODEL_CACHE`, else `$XDG_CACHE_HOME/freshness_pipeline`, else ~/.cache/…"""
    explicit = os.environ.get("FRESHNESS_MODEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "freshness_pipeline"


def _weights_id(model_dir: Path) -> str:
    digest = hashlib.sha256()
    with open(model_dir / "model.safetensors", "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def model_file(model_dir: Path, backend: str) -> Path:
    """The ONNX file for `backend` ("onnx" or "onnx-int8"), made on first use."""
    if backend not in ("onnx", "onnx-int8"):
        raise ValueError(f"not an ONNX backend: {backend!r}")
    folder = cache_dir() / "onnx" / f"{model_dir.name}-{_weights_id(model_dir)}-g{GRAPH_VERSION}"
    fp32, int8 = folder / "model.onnx", folder / "model.int8-per-channel.onnx"
    want = int8 if backend == "onnx-int8" else fp32
    if want.is_file():
        return want
    folder.mkdir(parents=True, exist_ok=True)
    # One build at a time per folder: the quantizer writes side files (`model-inferred.onnx`)
    # beside its input, which a second process building at once (two test or Celery
    # workers on a new machine) would read half-written or see deleted.
    with FileLock(folder / ".build.lock"):
        if not fp32.is_file():
            log.info("building the ONNX graph of %s, once, into %s", model_dir.name, folder)
            with _atomic(fp32) as tmp:
                tmp.write_bytes(bert_graph(model_dir).SerializeToString())
        if backend == "onnx-int8" and not int8.is_file():
            _quantize(fp32, int8)
    return want


def _quantize(fp32: Path, out: Path) -> None:
    with _root_logger_kept():
        from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    with _root_logger_kept(), _atomic(out) as tmp, tempfile.TemporaryDirectory(dir=out.parent) as work:
        # onnxruntime's pre-processing (shape inference; no graph optimization, so the graph's
        # arithmetic stays as built), which quantize_dynamic asks for otherwise on stderr.
        shaped = Path(work) / "model.shaped.onnx"
        quant_pre_process(str(fp32), str(shaped), skip_optimization=True, skip_symbolic_shape=True)
        # Per-channel scales: per-tensor ones move MiniLM's vectors several times further from
        # torch's (docs/benchmarks.md, "Local embedders").
        quantize_dynamic(str(shaped), str(tmp), weight_type=QuantType.QInt8, per_channel=True)


@contextmanager
def _root_logger_kept() -> Iterator[None]:
    """The root logger as it was before the block. onnxruntime's quantizer configures it as
    it loads and as it logs (`logging.basicConfig`, `logging.warning`): a handler left there
    would print every later line of the process's loggers a second time (Dagster's among them)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


@contextmanager
def _atomic(target: Path) -> Iterator[Path]:
    """A temporary path beside `target`, renamed onto it when the block succeeds."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
