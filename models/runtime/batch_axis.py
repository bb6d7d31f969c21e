"""A model published with a fixed batch of 1, given a batch axis, once at load time, and proven.

Most face models are exported with every dimension static, batch 1 included (inswapper, HyperSwap,
CrossFace, ReSwapper, the restorers). Batching faces then needs the batch axis back:

1. every graph input and output whose first dimension is 1 gets a symbolic first dimension `N`;
2. the stored intermediate shapes are dropped (ONNX Runtime infers them again);
3. a Reshape whose target shape is a constant starting with 1 keeps the input's first dimension
   instead (ONNX's 0 = "copy this dimension"): the per-sample reshapes the swappers use (an AdaIN
   style vector to [1,C,1,1], a colour to [1,3,1,1]).

A graph can hide its batch size elsewhere (a constant Expand, a Slice over the batch), so the
rewritten model is not trusted as is: `prove_batching` runs one batch-N call and N batch-1 calls of
the original on the same random inputs and compares them. `open_batched` keeps the rewrite only
when it passes, else it opens the original with a batch of 1 and says why. The verdict is cached
per file (name, size, mtime), so a large model is checked once, not at every start.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from models.runtime.session import BatchProfile

log = logging.getLogger(__name__)

BATCH_DIM = "N"
PROOF_BATCH = 3  # faces in the proving call: more than 2, so an off-by-one cannot hide
PROOF_TOLERANCE = 1e-3  # of the outputs' range: float reassociation across a batch, not an error


def _fixed_batch(value_info: onnx.ValueInfoProto) -> bool:
    dims = value_info.type.tensor_type.shape.dim
    return len(dims) > 0 and dims[0].HasField("dim_value") and dims[0].dim_value == 1


def has_fixed_batch(model: onnx.ModelProto) -> bool:
    """Whether any graph input is fixed at batch 1."""
    inits = {i.name for i in model.graph.initializer}
    return any(_fixed_batch(i) for i in model.graph.input if i.name not in inits)


def with_dynamic_batch(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose batch-1 inputs and outputs take any batch (module doc, steps 1-3)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    for value in [*graph.input, *graph.output]:
        if _fixed_batch(value):
            dim = value.type.tensor_type.shape.dim[0]
            dim.Clear()
            dim.dim_param = BATCH_DIM
    del graph.value_info[:]
    constants = {init.name: init for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = node.attribute[0].t
    rewritten: dict[str, onnx.TensorProto] = {}
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in constants:
            continue
        shape = numpy_helper.to_array(constants[node.input[1]])
        if shape.ndim != 1 or shape.size < 2 or int(shape[0]) != 1:
            continue
        batched = shape.copy()
        batched[0] = 0  # copy the input's batch dimension
        new_name = f"{node.input[1]}__batched"
        if new_name not in rewritten:
            rewritten[new_name] = numpy_helper.from_array(batched.astype(np.int64), new_name)
        node.input[1] = new_name
    graph.initializer.extend(rewritten.values())
    return out


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One graph input as the proof feeds it: its name, per-sample shape and dtype."""

    name: str
    shape: tuple[int, ...]  # without the batch dimension
    dtype: npt.DTypeLike


def input_specs(session: Any) -> list[InputSpec]:
    specs = []
    for node in session.get_inputs():
        dims = [int(d) if isinstance(d, int) and d > 0 else 1 for d in list(node.shape)[1:]]
        dtype = np.float16 if node.type == "tensor(float16)" else np.float32
        specs.append(InputSpec(node.name, tuple(dims), dtype))
    return specs


def prove_batching(original: Any, batched: Any, n: int = PROOF_BATCH, seed: int = 0) -> tuple[bool, str]:
    """One batch-`n` call of `batched` against `n` batch-1 calls of `original` on the same random
    inputs: (equal within PROOF_TOLERANCE of the outputs' range, what differed)."""
    rng = np.random.default_rng(seed)
    feeds = {s.name: rng.uniform(-1.0, 1.0, (n, *s.shape)).astype(s.dtype) for s in input_specs(original)}
    names = [o.name for o in original.get_outputs()]
    try:
        together = batched.run(names, feeds)
    except Exception as exc:
        return False, f"the batched graph does not run ({type(exc).__name__}: {exc})"
    for k in range(n):
        one = original.run(names, {name: value[k : k + 1] for name, value in feeds.items()})
        for name, single, batch in zip(names, one, together, strict=True):
            single = np.asarray(single, dtype=np.float64)
            row = np.asarray(batch, dtype=np.float64)[k : k + 1]
            if row.shape != single.shape:
                return False, f"output {name} has shape {row.shape[1:]} per sample, not {single.shape[1:]}"
            scale = max(float(np.abs(single).max()), 1e-6)
            worst = float(np.abs(row - single).max()) / scale
            if not worst <= PROOF_TOLERANCE:
                return False, f"output {name} of sample {k} differs by {worst:.2e} of its range"
    return True, ""


@dataclass(frozen=True, slots=True)
class Batched:
    """A session and the largest batch it may be called with (1: the rewrite did not hold)."""

    session: ort.InferenceSession
    max_batch: int
    note: str = ""  # why batching is off, when it is


def open_batched(
    path: Path,
    open_session: Callable[[Path | bytes], ort.InferenceSession],
    max_batch: int,
    verdicts: Path | None = None,
    check: Callable[[ort.InferenceSession], None] | None = None,
    open_profiled: Callable[[bytes, BatchProfile], ort.InferenceSession] | None = None,
) -> Batched:
    """The model in `path`, able to take batches of up to `max_batch` where its graph allows.

    A model with a batch axis already is opened as is. One fixed at batch 1 is rewritten and proven
    (`verdicts`: a JSON file remembering each file's proof); where the proof fails it is opened as
    published, with a batch of 1, and the log says why. check: run on the published session first
    (a wrong file is refused before anything is done with it). open_profiled: how to open the
    rewritten model with its batch profile (TensorRT builds one engine for every batch size).
    """
    original = open_session(path)
    if check is not None:
        check(original)
    if max_batch <= 1:
        return Batched(original, 1)
    model = onnx.load(str(path))
    if not has_fixed_batch(model):
        return Batched(original, max_batch)
    key = _verdict_key(path)
    known = _read_verdicts(verdicts).get(key)
    batched = with_dynamic_batch(model)
    data = batched.SerializeToString()
    rewritten = (
        open_session(data) if open_profiled is None else open_profiled(data, profile_of(batched, max_batch))
    )
    if known is None:
        ok, why = prove_batching(original, rewritten)
        _write_verdict(verdicts, key, ok, why)
    else:
        ok, why = bool(known.get("ok")), str(known.get("why", ""))
    if not ok:
        log.warning("%s keeps its published batch of 1: %s", path.name, why)
        return Batched(original, 1, f"batch of 1 ({why})")
    return Batched(rewritten, max_batch)


def profile_of(model: onnx.ModelProto, max_batch: int) -> BatchProfile:
    """The batched model's inputs (one sample's shape each) with the largest batch."""
    inits = {i.name for i in model.graph.initializer}
    rows = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        dims = value.type.tensor_type.shape.dim[1:]
        rows.append((value.name, tuple(int(d.dim_value) if d.HasField("dim_value") else 1 for d in dims)))
    return BatchProfile(tuple(rows), max_batch)


def _verdict_key(path: Path) -> str:
    st = path.stat()
    return f"{path.name}-{st.st_size}-{st.st_mtime_ns}"


def _read_verdicts(path: Path | None) -> Mapping[str, Any]:
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_verdict(path: Path | None, key: str, ok: bool, why: str) -> None:
    if path is None:
        return
    data = dict(_read_verdicts(path))
    data[key] = {"ok": ok, "why": why}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(part, path)
    except OSError as exc:  # a read-only folder only costs the proof at the next start
        log.info("Cannot keep the batching verdict in %s (%s)", path, exc)


__all__ = [
    "BATCH_DIM",
    "Batched",
    "InputSpec",
    "has_fixed_batch",
    "input_specs",
    "open_batched",
    "profile_of",
    "prove_batching",
    "with_dynamic_batch",
]
