"""all-MiniLM-L6-v2 for one query at a time, in numpy: what `freshness search` needs to
start in a second or two. sentence-transformers pulls in torch, transformers, scikit-learn
and scipy (~10 s of imports before the model loads); this reads the same safetensors
weights and runs the same BERT forward pass, mean pooling and normalization. Its vectors
equal sentence-transformers' to float32 rounding (adapters/test_minilm_numpy.py). Batches
of documents still go through sentence-transformers (LocalEmbedder.embed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer



def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (error under 1.5e-7): numpy has no erf, and scipy's
    import costs more than the whole query."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


class MiniLMQuery:
    """`embed(text)` -> the unit vector sentence-transformers would give for `text`."""

    def __init__(self, path: Path) -> None:
        cfg = json.loads((path / "config.json").read_text())
        self.heads = cfg["num_attention_heads"]
        self.layers = cfg["num_hidden_layers"]
        self.eps = cfg["layer_norm_eps"]
        window = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.w = load_file(str(path / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()  # the file pads to 128; sentence-transformers does not
        self.tokenizer.enable_truncation(window)

    def embed(self, text: str) -> np.ndarray:
        ids = np.asarray(self.tokenizer.encode(text).ids)
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        for i in range(self.layers):
            x = self._layer(x, f"encoder.layer.{i}.")
        pooled = x.mean(axis=0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)

    def _layer(self, x: np.ndarray, p: str) -> np.ndarray:
        n, d = x.shape
        h = d // self.heads

        def heads(name: str) -> np.ndarray:
            return self._dense(x, f"{p}attention.self.{name}").reshape(n, self.heads, h).transpose(1, 0, 2)

        q, k, v = heads("query"), heads("key"), heads("value")
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(h)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        ctx = (scores / scores.sum(axis=-1, keepdims=True)) @ v
        attended = self._dense(ctx.transpose(1, 0, 2).reshape(n, d), f"{p}attention.output.dense")
        x = self._norm(x + attended, f"{p}attention.output.LayerNorm")
        inner = self._dense(x, f"{p}intermediate.dense")
        inner = 0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)))  # exact GELU, as BERT's "gelu"
        return self._norm(x + self._dense(inner, f"{p}output.dense"), f"{p}output.LayerNorm")

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]
