"""What every ONNX double is written with: the opset, the IR version, and the checked ModelProto."""

from __future__ import annotations

import onnx
from onnx import helper

OPSET = 11  # like the real inswapper_128; every double uses it
IR_VERSION = 6  # the IR version that goes with opset 11


def finish_model(graph: onnx.GraphProto) -> onnx.ModelProto:
    """The double's model: `graph` at OPSET and IR_VERSION, checked by onnx.checker."""
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="facecast-doubles"
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model
