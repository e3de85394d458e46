"""The ONNX graph of a sentence-transformers BERT model, built from its safetensors weights.

No torch: the encoder is written out op by op with the `onnx` package (the same arithmetic
as Hugging Face's `BertModel` in eval mode), followed by the model's mean pooling and L2
normalization, so the graph maps (input_ids, attention_mask) straight to unit sentence
vectors. Exporting through torch would need torch, transformers and sentence-transformers
in every install (GBs); the weights and `config.json` are all the graph needs.

Token type ids are always 0 for one-segment input (what sentence-transformers feeds), so the
graph takes none: the first token-type row is folded into the position table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GRAPH_VERSION", "OPSET", "bert_graph"]

GRAPH_VERSION = 1  # part of the cache key: a change here makes new files
OPSET = 17  # LayerNormalization is a standard op from 17 on
_MASKED = -10000.0  # added to padded positions' scores: exp() of it is 0 in float32


def _check(model_dir: Path, config: dict[str, Any]) -> None:
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens"):
        raise ValueError(f"{model_dir}: only mean-pooling models are supported, got pooling {pooling}")
    modules = [m.get("type", "") for m in json.loads((model_dir / "modules.json").read_text())]
    if not any(m.endswith("Normalize") for m in modules):
        raise ValueError(f"{model_dir}: only models that normalize their vectors are supported ({modules})")
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        raise ValueError(f"{model_dir}: not a BERT model with exact GELU: {config.get('model_type')}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{model_dir}: only absolute position embeddings are supported")


class _Graph:
    """The nodes and initializers of the graph being written, and the ops it is made of."""

    def __init__(self, weights: dict[str, np.ndarray], prefix: str, eps: float) -> None:
        from onnx import helper, numpy_helper

        self._helper, self._numpy = helper, numpy_helper
        self.w, self.prefix, self.eps = weights, prefix, eps
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(self._numpy.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, name: str) -> np.ndarray:
        return self.w[self.prefix + name]

    def op(self, kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        self.nodes.append(self._helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x: str, name: str, out: str) -> str:
        # y = x W^T + b, as torch's Linear: the transposed weight is MatMul's (and the int8
        # quantizer's) right-hand side.
        mm = self.op("MatMul", [x, self.const(f"{name}.weight_t", self.weight(f"{name}.weight").T)], f"{out}.matmul")
        return self.op("Add", [mm, self.const(f"{name}.bias", self.weight(f"{name}.bias"))], out)

    def layer_norm(self, x: str, name: str, out: str) -> str:
        gamma = self.const(f"{name}.weight", self.weight(f"{name}.weight"))
        beta = self.const(f"{name}.bias", self.weight(f"{name}.bias"))
        return self.op("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=self.eps)


def _embeddings(g: _Graph) -> str:
    """Word + position (+ token type 0) embeddings, then LayerNorm."""
    words = g.op(
        "Gather", [g.const("word_embeddings", g.weight("embeddings.word_embeddings.weight")), "input_ids"], "words"
    )
    token_type0 = g.weight("embeddings.token_type_embeddings.weight")[0]
    positions_table = g.weight("embeddings.position_embeddings.weight") + token_type0
    length = g.op("Shape", ["input_ids"], "length", start=1, end=2)  # [tokens]
    table = g.const("positions_table", positions_table)
    positions = g.op("Slice", [table, g.const("zero1", np.array([0], np.int64)), length], "pos")
    return g.layer_norm(g.op("Add", [words, positions], "embedded"), "embeddings.LayerNorm", "h0")


def _mask_bias(g: _Graph) -> tuple[str, str]:
    """The attention mask as floats, and as an additive bias [batch, 1, 1, tokens]: 0 kept,
    _MASKED padding."""
    from onnx import TensorProto

    mask = g.op("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inverted = g.op("Sub", [g.const("one_f", np.array(1.0, np.float32)), mask], "mask_inv")
    bias = g.op("Mul", [inverted, g.const("masked", np.array(_MASKED, np.float32))], "mask_bias_2d")
    return mask, g.op("Unsqueeze", [bias, g.const("axes12", np.array([1, 2], np.int64))], "mask_bias")


def _layers(g: _Graph, x: str, bias: str, config: dict[str, Any]) -> str:
    """The encoder layers: self-attention, then the feed-forward block, each with its residual
    and LayerNorm."""
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head = hidden // heads
    split_heads = g.const("split_heads", np.array([0, 0, heads, head], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(1.0 / math.sqrt(head), np.float32))
    half, one_f = g.const("half", np.array(0.5, np.float32)), "one_f"
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    for i in range(int(config["num_hidden_layers"])):
        p, n = f"encoder.layer.{i}.", f"l{i}"

        def heads_of(kind: str, perm: list[int], p: str = p, n: str = n, x: str = x) -> str:
            y = g.linear(x, f"{p}attention.self.{kind}", f"{n}.{kind}")
            split = g.op("Reshape", [y, split_heads], f"{n}.{kind}.split")
            return g.op("Transpose", [split], f"{n}.{kind}.t", perm=perm)

        q = heads_of("query", [0, 2, 1, 3])  # [batch, heads, tokens, head]
        k = heads_of("key", [0, 2, 3, 1])  # [batch, heads, head, tokens]
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Mul", [g.op("MatMul", [q, k], f"{n}.qk"), scale], f"{n}.scores")
        probs = g.op("Softmax", [g.op("Add", [scores, bias], f"{n}.masked")], f"{n}.probs", axis=-1)
        context = g.op("Transpose", [g.op("MatMul", [probs, v], f"{n}.ctx")], f"{n}.ctx.t", perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, merge_heads], f"{n}.ctx.merged")
        attended = g.linear(context, f"{p}attention.output.dense", f"{n}.attn_out")
        x = g.layer_norm(g.op("Add", [attended, x], f"{n}.attn_res"), f"{p}attention.output.LayerNorm", f"{n}.h_attn")
        inner = g.linear(x, f"{p}intermediate.dense", f"{n}.inter")
        # GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2)), the form onnxruntime fuses into one op.
        erf = g.op("Erf", [g.op("Div", [inner, sqrt2], f"{n}.gelu.div")], f"{n}.gelu.erf")
        scaled = g.op("Mul", [inner, g.op("Add", [erf, one_f], f"{n}.gelu.add")], f"{n}.gelu.mul")
        gelu = g.op("Mul", [scaled, half], f"{n}.gelu")
        out = g.linear(gelu, f"{p}output.dense", f"{n}.out")
        x = g.layer_norm(g.op("Add", [out, x], f"{n}.out_res"), f"{p}output.LayerNorm", f"{n}.h")
    return x


def _sentence_vector(g: _Graph, x: str, mask: str) -> None:
    """Mean pooling over the real tokens, then L2 normalization (sentence-transformers' eps)."""
    weights = g.op("Unsqueeze", [mask, g.const("axis_last", np.array([-1], np.int64))], "mask_3d")
    axis1 = g.const("axis1", np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, weights], "masked_h"), axis1], "summed", keepdims=0)
    counts = g.op("ReduceSum", [weights, "axis1"], "counts", keepdims=0)
    counts = g.op("Max", [counts, g.const("min_count", np.array(1e-9, np.float32))], "counts_clamped")
    mean = g.op("Div", [summed, counts], "mean")
    norm = g.op("ReduceL2", [mean], "norm", axes=[1], keepdims=1)
    norm = g.op("Max", [norm, g.const("min_norm", np.array(1e-12, np.float32))], "norm_clamped")
    g.op("Div", [mean, norm], "embedding")


def bert_graph(model_dir: Path) -> Any:
    """The `onnx.ModelProto`: inputs `input_ids`, `attention_mask` (int64, [batch, tokens]),
    output `embedding` (float32, [batch, hidden], unit rows)."""
    import onnx
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    _check(model_dir, config)
    w = load_file(str(model_dir / "model.safetensors"))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    g = _Graph(w, prefix, float(config.get("layer_norm_eps", 1e-12)))
    x = _embeddings(g)
    mask, bias = _mask_bias(g)
    _sentence_vector(g, _layers(g, x, bias, config), mask)

    graph = helper.make_graph(
        g.nodes,
        f"{model_dir.name}-sentence-embedding",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", int(config["hidden_size"])])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="freshness_pipeline")
    model.ir_version = 8  # what onnxruntime 1.x reads for opset 17
    onnx.checker.check_model(model)
    return model
