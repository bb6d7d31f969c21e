"""Mask models: the xseg occluder and the BiSeNet face parser. One small class per contract.

Contracts (docs/model-contracts.md, "Masks"):
* xseg: `input` NHWC [1,256,256,3], BGR, x/255 -> [1,256,256,1] in [0,1], 1 = face (0 where a hand,
  hair or a microphone covers it).
* BiSeNet: `input` [N,3,512,512], RGB, ImageNet mean/std -> [N,19,512,512] logits; the label of a
  pixel is the argmax (skin 1, brows 2/3, eyes 4/5, glasses 6, nose 10, mouth 11, lips 12/13, ...).

Both take a square crop of the face in the swap's aligned space (realtime/face/steps/masks.py makes it), with
the session injected and its signature checked at load time. Blobs are reused: one instance per
worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError
from models.runtime.served import ServedModel
from models.runtime.session import SessionFactory, open_wrapped, wrap_checked
from models.types import FloatArray, ImageBGR

OCCLUDER_SIZE = 256
PARSER_SIZE = 512
PARSER_CLASSES = 19
IMAGENET_MEAN = (0.485, 0.456, 0.406)  # RGB
IMAGENET_STD = (0.229, 0.224, 0.225)

LabelArray = npt.NDArray[np.uint8]


def _fmt(shape: Sequence[Any] | None) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) else "?" for d in (shape or [])) + "]"


def _fits(got: Sequence[Any] | None, want: Sequence[int | None]) -> bool:
    """Static dims must match `want`; None in `want` or a symbolic dim in the file matches anything."""
    dims = list(got or [])
    if len(dims) != len(want):
        return False
    return all(
        w is None or not isinstance(d, int) or d <= 0 or d == w for d, w in zip(dims, want, strict=True)
    )


def _signature(inputs: Sequence[Any], outputs: Sequence[Any]) -> str:
    return (
        " + ".join(f"{i.name}{_fmt(i.shape)}" for i in inputs)
        + " -> "
        + ", ".join(_fmt(o.shape) for o in outputs)
    )


def _check_float(label: str, nodes: Sequence[Any]) -> None:
    for node in nodes:
        if node.type != "tensor(float)":
            raise ModelContractError(f"{label}: {node.name} must be float32, got {node.type}.")


class Occluder:
    """xseg occlusion mask: `mask(crop)` -> (256, 256) float32 in [0, 1], 1 = visible face."""

    label = "xseg occluder"
    size = OCCLUDER_SIZE
    contract_text = (
        f"input[1,{OCCLUDER_SIZE},{OCCLUDER_SIZE},3] (NHWC) -> [1,{OCCLUDER_SIZE},{OCCLUDER_SIZE},1]"
    )

    def __init__(self, session: ort.InferenceSession) -> None:
        self.check_contract(session.get_inputs(), session.get_outputs())
        self.session = session
        self.input_name: str = session.get_inputs()[0].name
        self.output_name: str = session.get_outputs()[0].name
        self.served = ServedModel(session, self.output_name, self.label)  # shared once attached
        s = self.size
        self._blob: FloatArray = np.zeros((1, s, s, 3), dtype=np.float32)
        self._feeds = {self.input_name: self._blob}

    @classmethod
    def check_contract(cls, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        s = cls.size
        ok = (
            len(inputs) == 1
            and len(outputs) == 1
            and _fits(inputs[0].shape, [1, s, s, 3])
            and _fits(outputs[0].shape, [1, s, s, 1])
        )
        if not ok:
            raise ModelContractError(
                f"not an xseg occluder: expected {cls.contract_text}, got {_signature(inputs, outputs)}."
            )
        _check_float(cls.label, [inputs[0], outputs[0]])

    @classmethod
    def from_file(cls, path: Path | str, factory: SessionFactory, session: Any = None) -> Occluder:
        """The occluder in `path` (session: its session opened already, a shared service's)."""
        return open_wrapped(path, factory, cls) if session is None else wrap_checked(Path(path), session, cls)

    def mask(self, crop_bgr: ImageBGR) -> FloatArray:
        """(256, 256) float32 face visibility, clipped to [0, 1] (a view of the output: copy to keep)."""
        s = self.size
        if crop_bgr.shape != (s, s, 3) or crop_bgr.dtype != np.uint8:
            raise ValueError(f"expected a ({s}, {s}, 3) uint8 crop, got {crop_bgr.shape} {crop_bgr.dtype}")
        # NHWC, BGR as it comes from OpenCV, x / 255: no transpose, no channel swap.
        np.multiply(crop_bgr, np.float32(1.0 / 255.0), out=self._blob[0])
        pred = self.served.run(self._feeds)
        if pred.shape != (1, s, s, 1):
            raise ModelContractError(
                f"{self.label}: output has shape {pred.shape}, expected (1, {s}, {s}, 1)."
            )
        out = np.asarray(pred[0, :, :, 0], dtype=np.float32)
        return np.clip(out, 0.0, 1.0, out=out)


class FaceParser:
    """BiSeNet face parser: `labels(crop)` -> (512, 512) uint8 class per pixel (argmax of 19 logits)."""

    label = "BiSeNet face parser"
    size = PARSER_SIZE
    contract_text = (
        f"input[N,3,{PARSER_SIZE},{PARSER_SIZE}] -> [N,{PARSER_CLASSES},{PARSER_SIZE},{PARSER_SIZE}]"
    )

    def __init__(self, session: ort.InferenceSession) -> None:
        self.check_contract(session.get_inputs(), session.get_outputs())
        self.session = session
        self.input_name: str = session.get_inputs()[0].name
        self.output_name: str = session.get_outputs()[0].name
        self.served = ServedModel(session, self.output_name, self.label)  # shared once attached
        s = self.size
        self._blob: FloatArray = np.zeros((1, 3, s, s), dtype=np.float32)
        self._feeds = {self.input_name: self._blob}
        # (x/255 - mean)/std = x * (1/(255 std)) - mean/std, per RGB channel, shaped for CHW.
        std = np.asarray(IMAGENET_STD, dtype=np.float64)
        self._scale = (1.0 / (255.0 * std)).astype(np.float32).reshape(3, 1, 1)
        self._shift = (np.asarray(IMAGENET_MEAN, dtype=np.float64) / std).astype(np.float32).reshape(3, 1, 1)
        self._labels: npt.NDArray[np.intp] = np.zeros((s, s), dtype=np.intp)
        self._labels_u8: LabelArray = np.zeros((s, s), dtype=np.uint8)

    @classmethod
    def check_contract(cls, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        s = cls.size
        ok = (
            len(inputs) == 1
            and len(outputs) >= 1
            and _fits(inputs[0].shape, [None, 3, s, s])
            and _fits(outputs[0].shape, [None, PARSER_CLASSES, s, s])
        )
        if not ok:
            raise ModelContractError(
                f"not a BiSeNet face parser: expected {cls.contract_text}, got {_signature(inputs, outputs)}."
            )
        _check_float(cls.label, [inputs[0], outputs[0]])

    @classmethod
    def from_file(cls, path: Path | str, factory: SessionFactory, session: Any = None) -> FaceParser:
        """The parser in `path` (session: its session opened already, a shared service's)."""
        return open_wrapped(path, factory, cls) if session is None else wrap_checked(Path(path), session, cls)

    def logits(self, crop_bgr: ImageBGR) -> FloatArray:
        """(19, 512, 512) float32 class logits for one crop."""
        s = self.size
        if crop_bgr.shape != (s, s, 3) or crop_bgr.dtype != np.uint8:
            raise ValueError(f"expected a ({s}, {s}, 3) uint8 crop, got {crop_bgr.shape} {crop_bgr.dtype}")
        blob = self._blob[0]
        np.multiply(crop_bgr[:, :, ::-1].transpose(2, 0, 1), self._scale, out=blob)
        np.subtract(blob, self._shift, out=blob)
        pred = self.served.run(self._feeds)
        if pred.shape != (1, PARSER_CLASSES, s, s):
            raise ModelContractError(
                f"{self.label}: output has shape {pred.shape}, expected (1, {PARSER_CLASSES}, {s}, {s})."
            )
        return np.asarray(pred[0], dtype=np.float32)

    def labels(self, crop_bgr: ImageBGR) -> LabelArray:
        """(512, 512) uint8 class labels (argmax over the 19 logits). Reused buffer: copy to keep."""
        np.argmax(self.logits(crop_bgr), axis=0, out=self._labels)
        np.copyto(self._labels_u8, self._labels, casting="unsafe")
        return self._labels_u8


__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "PARSER_CLASSES", "FaceParser", "Occluder"]
