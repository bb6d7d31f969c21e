"""Batches of device tensors for the inference service: requests whose inputs already live on the
session's device (a crop graph's output, an identity uploaded once) are run together without a
round trip through the host.

One request runs as it is (its tensors bound by IOBinding). Several: each input's tensors are
gathered into one [N,...] tensor by a tiny Concat graph, the model runs once, and each output is
split back into one tensor per request by a Split graph, all on the device (on a GPU: one
device-to-device copy of a few hundred kB per face each way). Every result is a tensor of its own,
allocated by its run: it stays valid while its caller holds it, whatever runs next.

The Concat and Split graphs run through the same SessionFactory as the model, so on CUDA they
share its device (and its stream, when the instance has one); on the CPU provider they are the
same graphs CI runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from models.runtime.inference_service import Feeds
from models.runtime.iobinding import BoundSession, numpy_dtype
from models.runtime.session import SessionFactory

_OPSET = 11
_TENSOR_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}


def _shape_of(value: Any) -> tuple[int, ...]:
    shape = value.shape if isinstance(value, np.ndarray) else value.shape()
    return tuple(int(d) for d in shape)


def _dtype_of(value: Any) -> np.dtype[Any]:
    return value.dtype if isinstance(value, np.ndarray) else numpy_dtype(value)


def build_concat(count: int, row: Sequence[int], dtype: np.dtype[Any]) -> onnx.ModelProto:
    """`count` inputs x0..x{count-1} of shape [1, *row] -> `batch` [count, *row]."""
    kind = _TENSOR_TYPES[np.dtype(dtype)]
    names = [f"x{k}" for k in range(count)]
    graph = helper.make_graph(
        [helper.make_node("Concat", names, ["batch"], axis=0)],
        f"gather_{count}",
        [helper.make_tensor_value_info(n, kind, [1, *row]) for n in names],
        [helper.make_tensor_value_info("batch", kind, [count, *row])],
    )
    return _finish(graph)


def build_split(count: int, row: Sequence[int], dtype: np.dtype[Any]) -> onnx.ModelProto:
    """`batch` [count, *row] -> `count` outputs y0..y{count-1} of shape [1, *row]."""
    kind = _TENSOR_TYPES[np.dtype(dtype)]
    names = [f"y{k}" for k in range(count)]
    graph = helper.make_graph(
        [helper.make_node("Split", ["batch"], names, axis=0, split=[1] * count)],
        f"scatter_{count}",
        [helper.make_tensor_value_info("batch", kind, [count, *row])],
        [helper.make_tensor_value_info(n, kind, [1, *row]) for n in names],
    )
    return _finish(graph)


def _finish(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 6
    onnx.checker.check_model(model)
    return model


class DeviceBatchRunner:
    """A BatchRunner for requests of device tensors, on one model session (module doc)."""

    def __init__(
        self,
        session: Any,
        factory: SessionFactory,
        outputs: Sequence[str],
        *,
        cuda_stream: int | None = None,
    ) -> None:
        self.model = BoundSession(session, factory.device_type, factory.config.device_id, fresh_outputs=True)
        self.device_type = self.model.device_type
        self._factory = factory
        self._stream = cuda_stream
        self._outputs = list(outputs)
        self._gathers: dict[tuple[int, tuple[int, ...], str], BoundSession] = {}
        self._splits: dict[tuple[int, tuple[int, ...], str], BoundSession] = {}

    def run(self, feeds: Sequence[Feeds]) -> list[tuple[Any, ...]]:
        n = len(feeds)
        if n == 1:
            produced = dict(zip(self.model.output_names, self.model.run(feeds[0]), strict=True))
            return [tuple(produced[name] for name in self._outputs)]
        batched = {name: self._gather([f[name] for f in feeds]) for name in feeds[0]}
        produced = dict(zip(self.model.output_names, self.model.run(batched), strict=True))
        per_output = [self._split(produced[name], n) for name in self._outputs]
        return [tuple(rows[k] for rows in per_output) for k in range(n)]

    def _gather(self, values: list[Any]) -> Any:
        shape, dtype = _shape_of(values[0]), _dtype_of(values[0])
        key = (len(values), shape[1:], dtype.str)
        bound = self._gathers.get(key)
        if bound is None:
            bound = self._gathers[key] = self._open(build_concat(len(values), shape[1:], dtype), "gather")
        return bound.run({f"x{k}": v for k, v in enumerate(values)})[0]

    def _split(self, value: Any, n: int) -> list[Any]:
        shape, dtype = _shape_of(value), _dtype_of(value)
        key = (n, shape[1:], dtype.str)
        bound = self._splits.get(key)
        if bound is None:
            bound = self._splits[key] = self._open(build_split(n, shape[1:], dtype), "scatter", fresh=True)
        return list(bound.run({"batch": value}))

    def _open(self, model: onnx.ModelProto, label: str, fresh: bool = False) -> BoundSession:
        session = self._factory.create(model.SerializeToString(), label=label, cuda_stream=self._stream)
        return BoundSession(
            session, self._factory.device_type, self._factory.config.device_id, fresh_outputs=fresh
        )


__all__ = ["DeviceBatchRunner", "build_concat", "build_split"]
