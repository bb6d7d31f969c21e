"""GPU legality of the device graphs: what keeps them CUDA/TensorRT-legal without a GPU to try
them on (docs/gpu-api-facts.md §5), checked by `device_graph_problems`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import onnx
from onnx import TensorProto, helper

# Ops these graphs may use: each has a CUDA kernel for the float32/int64 tensors used here
# (ORT 1.31 cuda_execution_provider.cc) and a TensorRT importer.
DEVICE_OPS: frozenset[str] = frozenset(
    {
        "Add", "Cast", "Clip", "Concat", "Conv", "Div", "Floor", "Gather", "GridSample", "Identity",
        "MatMul", "Mul", "Neg", "Range", "Reshape", "Resize", "Round", "Shape", "Slice", "Split",
        "Squeeze", "Sub", "Transpose", "Unsqueeze",
    }
)  # fmt: skip
# Inputs a CUDA kernel reads on the host (OrtMemTypeCPUInput). If computed from device data, ORT
# copies them back first and the stream stalls (and CUDA graphs break).
HOST_INPUTS: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {
        "Reshape": (1,), "Unsqueeze": (1,), "Squeeze": (1,), "Expand": (1,), "Tile": (1,),
        "ConstantOfShape": (0,), "Range": (0, 1, 2), "Clip": (1, 2), "Split": (1,),
        "Slice": (1, 2, 3, 4), "Resize": (1, 2, 3), "Pad": (1, 2, 3), "TopK": (1,),
        "CumSum": (1,), "ReduceSum": (1,), "OneHot": (1,),
    }
)  # fmt: skip
# TensorRT wants these constant (onnx-tensorrt operators.md: axes must be initializers).
INITIALIZER_INPUTS: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {"Slice": (1, 2, 3, 4), "Resize": (1, 2, 3)}
)
_PAD_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BOOL})


def device_graph_problems(model: onnx.ModelProto) -> list[str]:
    """Why `model` would not run well on the CUDA/TensorRT providers; [] when it is legal.

    Parses the graph (with ONNX type inference) against docs/gpu-api-facts.md §5.
    """
    problems: list[str] = []
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    try:
        graph = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    except onnx.shape_inference.InferenceError as err:
        # Report it and check what can be checked with the types that did infer.
        problems.append(f"ONNX type inference fails: {str(err).splitlines()[0]}")
        graph = onnx.shape_inference.infer_shapes(model).graph
    types: dict[str, int] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        types[vi.name] = vi.type.tensor_type.elem_type
    constants = {t.name for t in graph.initializer}
    for t in graph.initializer:
        types[t.name] = t.data_type
    for node in graph.node:
        if node.op_type == "Constant":
            constants.update(node.output)
    graph_inputs = {i.name for i in graph.input} - constants
    producer = {out: node for node in graph.node for out in node.output}
    host_memo: dict[str, bool] = {}

    def host_side(name: str) -> bool:
        """True when `name` is known on the host without reading device data."""
        if name in host_memo:
            return host_memo[name]
        if name in constants:
            ok = True
        elif name in graph_inputs or name not in producer:
            ok = False
        else:
            node = producer[name]
            ok = node.op_type in ("Shape", "Size") or all(host_side(i) for i in node.input if i)
        host_memo[name] = ok
        return ok

    for node in graph.node:
        where = f"{node.op_type} '{node.name or node.output[0]}'"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.domain not in ("", "ai.onnx"):
            problems.append(f"{where}: custom domain {node.domain!r} has no CUDA/TensorRT kernel")
        if node.op_type == "AffineGrid":
            problems.append(f"{where}: AffineGrid has no CUDA kernel (build the grid with MatMul)")
        elif node.op_type not in DEVICE_OPS:
            problems.append(f"{where}: not in the checked CUDA/TensorRT op list")
        if node.op_type == "GridSample":
            if opset > 19:
                problems.append(f"{where}: opset {opset} > 19 (TensorRT reads only the opset<=19 modes)")
            mode = attrs.get("mode", b"bilinear")
            if mode != b"bilinear":
                problems.append(f"{where}: mode {mode!r}, TensorRT needs 'bilinear'")
            for i in node.input[:2]:
                if types.get(i) != TensorProto.FLOAT:
                    problems.append(f"{where}: input {i!r} is not float32 (the CUDA kernel is float32 only)")
        if node.op_type == "Resize" and (
            attrs.get("mode", b"nearest") not in (b"nearest", b"linear") or attrs.get("antialias", 0)
        ):
            problems.append(f"{where}: TensorRT resizes only nearest/linear, without antialias")
        if node.op_type == "Pad" and types.get(node.input[0]) not in _PAD_TYPES:
            problems.append(f"{where}: Pad has no CUDA kernel for this type (none for uint8)")
        if node.op_type != "Cast":
            for i in node.input:
                if i and types.get(i) == TensorProto.UINT8:
                    problems.append(f"{where}: reads uint8 {i!r}; TensorRT takes uint8 only through Cast")
        for idx in INITIALIZER_INPUTS.get(node.op_type, ()):
            if idx < len(node.input) and node.input[idx] and node.input[idx] not in constants:
                problems.append(f"{where}: input {idx} ({node.input[idx]!r}) must be an initializer")
        for idx in HOST_INPUTS.get(node.op_type, ()):
            if idx < len(node.input) and node.input[idx] and not host_side(node.input[idx]):
                problems.append(
                    f"{where}: host input {idx} ({node.input[idx]!r}) is computed from device data "
                    "(a device->host copy that stalls the stream)"
                )
    return problems


__all__ = ["DEVICE_OPS", "HOST_INPUTS", "INITIALIZER_INPUTS", "device_graph_problems"]
