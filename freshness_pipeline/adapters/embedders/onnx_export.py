"""Export the shipped sentence-transformers model to ONNX, once, into a cache folder.

sentence-transformers has an ONNX backend of its own, but it exports through optimum-onnx,
whose releases (0.1) require transformers < 4.58 while sentence-transformers 6.2 requires
transformers 5: the two cannot be installed together. The export is therefore done here with
`torch.onnx.export` (the TorchScript exporter: the dynamo one needs onnxscript) and int8
weights (per channel) with onnxruntime's own `quantize_dynamic`. Mean pooling and L2 normalization are part
of the exported graph, so running it needs only onnxruntime and the `tokenizers` library.

The files are keyed by the model's weights (sha256 of `model.safetensors`), made by one
process at a time (a file lock), written to a temporary name and renamed, so a concurrent
or interrupted export never leaves a half file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["cache_dir", "exported_model"]

_OPSET = 17

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


def exported_model(model_dir: Path, backend: str) -> Path:
    """The ONNX file for `backend` ("onnx" or "onnx-int8"), exported on first use."""
    if backend not in ("onnx", "onnx-int8"):
        raise ValueError(f"not an ONNX backend: {backend!r}")
    folder = cache_dir() / "onnx" / f"{model_dir.name}-{_weights_id(model_dir)}"
    fp32, int8 = folder / "model.onnx", folder / "model.int8-per-channel.onnx"
    want = int8 if backend == "onnx-int8" else fp32
    if want.is_file():
        return want
    folder.mkdir(parents=True, exist_ok=True)
    # One export at a time per folder: the quantizer writes side files (`model-inferred.onnx`)
    # beside its input, which a second process exporting at once (two test or Celery
    # workers on a new machine) would read half-written or see deleted.
    with open(folder / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not fp32.is_file():
            _export(model_dir, fp32)
        if backend == "onnx-int8" and not int8.is_file():
            _quantize(fp32, int8)
    return want


def _check_mean_pooling(model_dir: Path) -> None:
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens"):
        raise ValueError(f"{model_dir}: only mean-pooling models can be exported, got {pooling}")


def _export(model_dir: Path, out: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    _check_mean_pooling(model_dir)
    st = SentenceTransformer(str(model_dir), local_files_only=True, device="cpu")
    bert = st[0].auto_model.eval()  # type: ignore[union-attr]  # sentence-transformers types it Tensor | Module

    class Pooled(torch.nn.Module):
        """The transformer, then mean pooling over the attention mask, then L2 norm."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    sample = st.tokenizer(["an example", "a second, longer example"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    out.parent.mkdir(parents=True, exist_ok=True)
    log.info("exporting %s to ONNX, once, into %s", model_dir.name, out.parent)
    # The exporter warns about tracing details of the transformer that do not apply here.
    with _atomic(out) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pooled(),
            tuple(sample[n] for n in names),
            str(tmp),
            input_names=names,
            output_names=["embedding"],
            dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "embedding": {0: "batch"}},
            opset_version=_OPSET,
            dynamo=False,
        )


def _quantize(fp32: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _atomic(out) as tmp:
        # Per-channel scales: per-tensor ones cost MiniLM ~0.05 of cosine to torch (0.95 mean),
        # per-channel ~0.006 (docs/benchmarks.md).
        quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)


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
