"""Builds the ONNX graphs: the pooled sentence encoder, the one-graph sequence classifier and
the one-graph token classifier.

The classifier is the MiniLM encoder graph with two small stages appended by the `onnx` helper
API — attention-masked mean pooling with L2 normalisation, then a linear head — so a runtime
loads one file with the usual `input_ids`/`attention_mask`/`token_type_ids` inputs and reads
`logits` [batch, labels], exactly like a sequence classifier exported from a training framework.
The pooling stage is also used on its own (output `sentence_embedding`) to embed the training
sets, so the head is trained on the very numbers the exported graph computes. The token
classifier puts a linear head on each token's hidden states (a middle layer and the last one,
with its neighbours) and reads `logits` [batch, seq, labels], as a token-classification model
exported from a training framework does.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

EMBEDDING = "sentence_embedding"
LOGITS = "logits"
HIDDEN = "last_hidden_state"
# The output of the third of MiniLM's six layers in the int8 graph: word identity survives
# better there than in the last layer, which is trained for whole-sentence similarity.
MIDDLE = "layer_norm_6"


def _const(graph: onnx.GraphProto, name: str, value: np.ndarray) -> str:
    graph.initializer.append(numpy_helper.from_array(value, name=name))
    return name


def _output(name: str, dims: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _copy(encoder: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the encoder's graph to append stages to; the encoder itself is left as it is."""
    model = onnx.ModelProto()
    model.CopyFrom(encoder)
    return model


def _only_output(graph: onnx.GraphProto, name: str, dims: list) -> None:
    """Makes `name` the graph's one output, in place of the encoder's."""
    del graph.output[:]
    graph.output.append(_output(name, dims))


def _labelled(model: onnx.ModelProto, name: str, description: str, labels: list[str]) -> onnx.ModelProto:
    """Names a classifier graph, describes it and lists its labels (`id2label.N`), then checks it."""
    model.graph.name = name
    model.doc_string = description
    model.producer_name = "src scripts/models"
    del model.metadata_props[:]
    for i, label in enumerate(labels):
        entry = model.metadata_props.add()
        entry.key = f"id2label.{i}"
        entry.value = label
    onnx.checker.check_model(model)
    return model


def _append_pooling(graph: onnx.GraphProto) -> str:
    """Adds masked mean pooling + L2 normalisation after `last_hidden_state`; returns its output."""
    p = "pool/"
    axes_seq = _const(graph, p + "axes_seq", np.array([1], dtype=np.int64))
    axes_last = _const(graph, p + "axes_last", np.array([2], dtype=np.int64))
    count_floor = _const(graph, p + "count_floor", np.array(1e-9, dtype=np.float32))
    norm_floor = _const(graph, p + "norm_floor", np.array(1e-12, dtype=np.float32))
    nodes = [
        helper.make_node("Cast", ["attention_mask"], [p + "mask_f"], to=TensorProto.FLOAT, name=p + "cast"),
        helper.make_node("Unsqueeze", [p + "mask_f", axes_last], [p + "mask3"], name=p + "unsqueeze"),
        helper.make_node("Mul", [HIDDEN, p + "mask3"], [p + "masked"], name=p + "mask_hidden"),
        helper.make_node("ReduceSum", [p + "masked", axes_seq], [p + "sum"], keepdims=0, name=p + "sum"),
        helper.make_node("ReduceSum", [p + "mask3", axes_seq], [p + "count"], keepdims=0, name=p + "count"),
        helper.make_node("Max", [p + "count", count_floor], [p + "count_safe"], name=p + "count_floor"),
        helper.make_node("Div", [p + "sum", p + "count_safe"], [p + "mean"], name=p + "mean"),
        helper.make_node("Mul", [p + "mean", p + "mean"], [p + "sq"], name=p + "square"),
        helper.make_node("ReduceSum", [p + "sq", axes_seq], [p + "sqsum"], keepdims=1, name=p + "sqsum"),
        helper.make_node("Sqrt", [p + "sqsum"], [p + "norm"], name=p + "norm"),
        helper.make_node("Max", [p + "norm", norm_floor], [p + "norm_safe"], name=p + "norm_floor"),
        helper.make_node("Div", [p + "mean", p + "norm_safe"], [EMBEDDING], name=p + "normalise"),
    ]
    graph.node.extend(nodes)
    return EMBEDDING


def _hidden_size(encoder: onnx.ModelProto) -> int:
    for out in encoder.graph.output:
        if out.name == HIDDEN:
            dims = out.type.tensor_type.shape.dim
            if len(dims) == 3 and dims[2].dim_value > 0:
                return dims[2].dim_value
    raise ValueError(f"encoder graph has no `{HIDDEN}` output of shape [batch, seq, hidden]")


def pooled_encoder(encoder: onnx.ModelProto) -> onnx.ModelProto:
    """The encoder with pooling appended; output `sentence_embedding` [batch, hidden]."""
    hidden = _hidden_size(encoder)
    model = _copy(encoder)
    _append_pooling(model.graph)
    _only_output(model.graph, EMBEDDING, ["batch", hidden])
    onnx.checker.check_model(model)
    return model


def sequence_classifier(
    encoder: onnx.ModelProto,
    weight: np.ndarray,
    bias: np.ndarray,
    labels: list[str],
    description: str,
) -> onnx.ModelProto:
    """Encoder + pooling + `logits = embedding @ weight + bias` as one graph.

    `weight` is [hidden, labels] and `bias` [labels], both float32.
    """
    hidden = _hidden_size(encoder)
    if weight.shape != (hidden, len(labels)) or bias.shape != (len(labels),):
        raise ValueError(f"head shape {weight.shape}/{bias.shape} does not fit {hidden}x{len(labels)}")
    model = _copy(encoder)
    graph = model.graph
    pooled = _append_pooling(graph)
    w = _const(graph, "head/weight", weight.astype(np.float32))
    b = _const(graph, "head/bias", bias.astype(np.float32))
    graph.node.extend(
        [
            helper.make_node("MatMul", [pooled, w], ["head/scores"], name="head/matmul"),
            helper.make_node("Add", ["head/scores", b], [LOGITS], name="head/bias"),
        ]
    )
    _only_output(graph, LOGITS, ["batch", len(labels)])
    return _labelled(model, "minilm_mean_pool_linear", description, labels)


def token_classifier(
    encoder: onnx.ModelProto,
    weight: np.ndarray,
    bias: np.ndarray,
    labels: list[str],
    description: str,
) -> onnx.ModelProto:
    """Encoder + a linear head per token, as one graph with output `logits` [batch, seq, labels].

    The head reads, for token t, the middle layer's vector at t (`MIDDLE`) and the last layer's
    vectors at t-1, t and t+1: `weight` is [4 * hidden, labels], rows in that order, `bias`
    [labels]. The last-layer part is a width-3 convolution over the sequence (zero beyond the
    ends, which only [CLS] and [SEP] ever see). Raw scores: the reader applies the softmax.
    """
    hidden = _hidden_size(encoder)
    if weight.shape != (4 * hidden, len(labels)) or bias.shape != (len(labels),):
        raise ValueError(f"head shape {weight.shape}/{bias.shape} does not fit {4 * hidden}x{len(labels)}")
    if MIDDLE not in {o for node in encoder.graph.node for o in node.output}:
        raise ValueError(f"encoder graph has no `{MIDDLE}` value")
    model = _copy(encoder)
    graph = model.graph
    middle = _const(graph, "head/middle_weight", weight[:hidden].astype(np.float32))
    # Conv weight [labels, hidden, 3]: tap k reads position t + k - 1.
    taps = weight[hidden:].reshape(3, hidden, len(labels)).transpose(2, 1, 0)
    context = _const(graph, "head/context_weight", np.ascontiguousarray(taps, dtype=np.float32))
    b = _const(graph, "head/bias", bias.astype(np.float32))
    graph.node.extend(
        [
            helper.make_node("Transpose", [HIDDEN], ["head/channels"], perm=[0, 2, 1], name="head/channels"),
            helper.make_node("Conv", ["head/channels", context], ["head/ctx_t"], pads=[1, 1], name="head/cv"),
            helper.make_node("Transpose", ["head/ctx_t"], ["head/context"], perm=[0, 2, 1], name="head/back"),
            helper.make_node("MatMul", [MIDDLE, middle], ["head/middle"], name="head/matmul"),
            helper.make_node("Add", ["head/context", "head/middle"], ["head/scores"], name="head/sum"),
            helper.make_node("Add", ["head/scores", b], [LOGITS], name="head/bias"),
        ]
    )
    _only_output(graph, LOGITS, ["batch", "sequence", len(labels)])
    return _labelled(model, "minilm_token_linear", description, labels)
