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


def bert_graph(model_dir: Path) -> Any:
    """The `onnx.ModelProto`: inputs `input_ids`, `attention_mask` (int64, [batch, tokens]),
    output `embedding` (float32, [batch, hidden], unit rows)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    _check(model_dir, config)
    w = load_file(str(model_dir / "model.safetensors"))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(name: str) -> np.ndarray:
        return w[prefix + name]

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, name: str, out: str) -> str:
        # y = x W^T + b, as torch's Linear: the transposed weight is MatMul's (and the int8
        # quantizer's) right-hand side.
        mm = op("MatMul", [x, const(f"{name}.weight_t", weight(f"{name}.weight").T)], f"{out}.matmul")
        return op("Add", [mm, const(f"{name}.bias", weight(f"{name}.bias"))], out)

    def layer_norm(x: str, name: str, out: str) -> str:
        gamma, beta = const(f"{name}.weight", weight(f"{name}.weight")), const(f"{name}.bias", weight(f"{name}.bias"))
        return op("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=eps)

    # Embeddings: word + position (+ token type 0), then LayerNorm.
    words = op("Gather", [const("word_embeddings", weight("embeddings.word_embeddings.weight")), "input_ids"], "words")
    token_type0 = weight("embeddings.token_type_embeddings.weight")[0]
    positions_table = weight("embeddings.position_embeddings.weight") + token_type0
    length = op("Shape", ["input_ids"], "length", start=1, end=2)  # [tokens]
    positions = op(
        "Slice", [const("positions_table", positions_table), const("zero1", np.array([0], np.int64)), length], "pos"
    )
    x = layer_norm(op("Add", [words, positions], "embedded"), "embeddings.LayerNorm", "h0")

    # The attention mask as an additive bias [batch, 1, 1, tokens]: 0 kept, _MASKED padding.
    mask = op("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inverted = op("Sub", [const("one_f", np.array(1.0, np.float32)), mask], "mask_inv")
    bias = op("Mul", [inverted, const("masked", np.array(_MASKED, np.float32))], "mask_bias_2d")
    bias = op("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "mask_bias")
    split_heads = const("split_heads", np.array([0, 0, heads, head], np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(head), np.float32))
    half, one_f = const("half", np.array(0.5, np.float32)), "one_f"
    sqrt2 = const("sqrt2", np.array(math.sqrt(2.0), np.float32))

    for i in range(int(config["num_hidden_layers"])):
        p, n = f"encoder.layer.{i}.", f"l{i}"

        def heads_of(kind: str, perm: list[int], p: str = p, n: str = n, x: str = x) -> str:
            y = linear(x, f"{p}attention.self.{kind}", f"{n}.{kind}")
            return op("Transpose", [op("Reshape", [y, split_heads], f"{n}.{kind}.split")], f"{n}.{kind}.t", perm=perm)

        q = heads_of("query", [0, 2, 1, 3])  # [batch, heads, tokens, head]
        k = heads_of("key", [0, 2, 3, 1])  # [batch, heads, head, tokens]
        v = heads_of("value", [0, 2, 1, 3])
        scores = op("Mul", [op("MatMul", [q, k], f"{n}.qk"), scale], f"{n}.scores")
        probs = op("Softmax", [op("Add", [scores, bias], f"{n}.masked")], f"{n}.probs", axis=-1)
        context = op("Transpose", [op("MatMul", [probs, v], f"{n}.ctx")], f"{n}.ctx.t", perm=[0, 2, 1, 3])
        context = op("Reshape", [context, merge_heads], f"{n}.ctx.merged")
        attended = linear(context, f"{p}attention.output.dense", f"{n}.attn_out")
        x = layer_norm(op("Add", [attended, x], f"{n}.attn_res"), f"{p}attention.output.LayerNorm", f"{n}.h_attn")
        inner = linear(x, f"{p}intermediate.dense", f"{n}.inter")
        # GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2)), the form onnxruntime fuses into one op.
        erf = op("Erf", [op("Div", [inner, sqrt2], f"{n}.gelu.div")], f"{n}.gelu.erf")
        scaled = op("Mul", [inner, op("Add", [erf, one_f], f"{n}.gelu.add")], f"{n}.gelu.mul")
        gelu = op("Mul", [scaled, half], f"{n}.gelu")
        out = linear(gelu, f"{p}output.dense", f"{n}.out")
        x = layer_norm(op("Add", [out, x], f"{n}.out_res"), f"{p}output.LayerNorm", f"{n}.h")

    # Mean pooling over the real tokens, then L2 normalization (sentence-transformers' eps).
    weights = op("Unsqueeze", [mask, const("axis_last", np.array([-1], np.int64))], "mask_3d")
    axis1 = const("axis1", np.array([1], np.int64))
    summed = op("ReduceSum", [op("Mul", [x, weights], "masked_h"), axis1], "summed", keepdims=0)
    counts = op("ReduceSum", [weights, "axis1"], "counts", keepdims=0)
    counts = op("Max", [counts, const("min_count", np.array(1e-9, np.float32))], "counts_clamped")
    mean = op("Div", [summed, counts], "mean")
    norm = op("ReduceL2", [mean], "norm", axes=[1], keepdims=1)
    norm = op("Max", [norm, const("min_norm", np.array(1e-12, np.float32))], "norm_clamped")
    op("Div", [mean, norm], "embedding")

    graph = helper.make_graph(
        nodes,
        f"{model_dir.name}-sentence-embedding",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="freshness_pipeline")
    model.ir_version = 8  # what onnxruntime 1.x reads for opset 17
    onnx.checker.check_model(model)
    return model
