"""SCRFD face detector: insightface's det_10g / scrfd_2.5g and FaceFusion's re-exports.

Contract (docs/model-contracts.md, "SCRFD detector"): one NCHW image input, nine 2-D outputs (scores,
box distances and keypoint offsets for strides 8/16/32, two anchors per cell). Everything the
wrapper needs is read from the session; nothing comes from a config file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError
from models.types import Detection, FloatArray, ImageBGR
from models.wrappers.nms import nms

STRIDES: tuple[int, ...] = (8, 16, 32)
ANCHORS_PER_CELL = 2
# Last dimension of the outputs, by group of three: scores, box distances, 5 keypoint offsets.
OUTPUT_WIDTHS: tuple[int, ...] = (1, 4, 10)
_GROUP_NAMES = ("scores", "boxes", "keypoints")
INPUT_MEAN = 127.5
INPUT_STD = 128.0
# FaceFusion's re-export names its input `input` and is fed BGR; insightface's export (`input.1`
# and anything else we do not know) is fed RGB.
_BGR_INPUT_NAMES = frozenset({"input"})
# ORT type string -> the numpy dtype to feed (read-only: no module-level mutable state).
_FLOAT_TYPES: Mapping[str, type[np.floating[Any]]] = MappingProxyType(
    {"tensor(float)": np.float32, "tensor(float16)": np.float16}
)


def _known(dim: Any) -> bool:
    """ORT reports a dimension as an int (static), a str (symbolic) or None (unknown)."""
    return isinstance(dim, int) and dim > 0


def _fmt_shape(shape: Sequence[Any]) -> str:
    return "[" + ",".join(str(d) if _known(d) else "?" for d in shape) + "]"


def anchor_centres(width: int, height: int, stride: int) -> FloatArray:
    """(K, 2) float32 anchor centres (x, y) for one stride, each cell repeated ANCHORS_PER_CELL times.

    Row-major over the feature map, the order in which SCRFD emits its rows.
    """
    gh, gw = height // stride, width // stride
    ys, xs = np.mgrid[:gh, :gw]
    centres = np.stack([xs, ys], axis=-1).reshape(-1, 2).astype(np.float32) * np.float32(stride)
    return np.ascontiguousarray(np.repeat(centres, ANCHORS_PER_CELL, axis=0))


def letterbox_size(img_w: int, img_h: int, in_w: int, in_h: int) -> tuple[int, int, float]:
    """(new_w, new_h, det_scale) exactly as insightface letterboxes: int() truncation, and one scale
    (new_h / img_h) used for both axes when mapping detections back."""
    im_ratio = img_h / img_w
    if im_ratio > in_h / in_w:
        new_h = in_h
        new_w = int(new_h / im_ratio)
    else:
        new_w = in_w
        new_h = int(new_w * im_ratio)
    new_w, new_h = max(new_w, 1), max(new_h, 1)
    return new_w, new_h, new_h / img_h


class SCRFD:
    """Face detector. `detect(frame)` -> faces with boxes and 5-point landmarks, best first.

    input_size is (width, height) of the detector input, multiples of 32. Buffers (letterbox canvas,
    input blob, score masks) are allocated once; one instance must not be used by two threads at once.
    """

    def __init__(
        self,
        session: ort.InferenceSession,
        input_size: tuple[int, int] = (640, 640),
        swap_rb: bool | None = None,
        score_threshold: float = 0.5,
        nms_threshold: float = 0.4,
    ) -> None:
        in_w, in_h = int(input_size[0]), int(input_size[1])
        if in_w <= 0 or in_h <= 0 or in_w % 32 or in_h % 32:
            raise ValueError(f"SCRFD input size must be positive multiples of 32, got {input_size}")
        inputs = session.get_inputs()
        outputs = session.get_outputs()
        self.check_contract(inputs, outputs, in_w, in_h)

        self.session = session
        self.input_name: str = inputs[0].name
        self.output_names: list[str] = [o.name for o in outputs]
        self.input_size = (in_w, in_h)
        self.swap_rb: bool = self.input_name not in _BGR_INPUT_NAMES if swap_rb is None else bool(swap_rb)
        self.score_threshold = float(score_threshold)
        self.nms_threshold = float(nms_threshold)
        self.input_dtype: type[np.floating[Any]] = _FLOAT_TYPES[inputs[0].type]

        # Anchor centres depend only on the input size, which is fixed per instance.
        self._anchors: tuple[FloatArray, ...] = tuple(anchor_centres(in_w, in_h, s) for s in STRIDES)
        self._masks = tuple(np.empty(a.shape[0], dtype=bool) for a in self._anchors)
        self._canvas: ImageBGR = np.zeros((in_h, in_w, 3), dtype=np.uint8)
        self._blob: npt.NDArray[Any] = np.empty((1, 3, in_h, in_w), dtype=self.input_dtype)
        # (img_h, img_w) the canvas/blob padding was last laid out for, and the matching letterbox.
        self._geometry: tuple[int, int] | None = None
        self._letterbox: tuple[int, int, float] = (in_w, in_h, 1.0)
        # The letterboxed image split into B, G, R planes (sized with the letterbox).
        self._planes: list[npt.NDArray[np.uint8]] = []
        self._feeds = {self.input_name: self._blob}

    @staticmethod
    def check_contract(inputs: Sequence[Any], outputs: Sequence[Any], in_w: int, in_h: int) -> None:
        """Raise ModelContractError unless the session looks like an SCRFD detector with keypoints."""
        if len(inputs) != 1:
            raise ModelContractError(
                f"SCRFD detector: expected one image input, the model has {len(inputs)}."
            )
        inp = inputs[0]
        shape = list(inp.shape or [])
        if len(shape) != 4 or (_known(shape[1]) and shape[1] != 3):
            raise ModelContractError(
                f"SCRFD detector: expected an image input [1,3,H,W], got {inp.name}{_fmt_shape(shape)}."
            )
        if inp.type not in _FLOAT_TYPES:
            raise ModelContractError(f"SCRFD detector: expected a float input, got {inp.type}.")
        static_hw = _known(shape[2]) and _known(shape[3])
        if static_hw and (shape[2], shape[3]) != (in_h, in_w):
            raise ModelContractError(
                f"SCRFD detector: the model's input is fixed at {shape[3]}x{shape[2]}, "
                f"but the detector was asked to run at {in_w}x{in_h}.",
                hint=f"Use input_size=({shape[3]}, {shape[2]}).",
            )
        if len(outputs) == 6:
            raise ModelContractError(
                "SCRFD detector without landmark outputs (6 outputs): FaceCast needs the 5 landmarks "
                "to align faces.",
                hint="Use a keypoint model such as det_10g.onnx or scrfd_2.5g.onnx (9 outputs).",
            )
        if len(outputs) != 3 * len(OUTPUT_WIDTHS):
            raise ModelContractError(
                f"SCRFD detector: expected 9 outputs (scores, boxes, keypoints for strides 8/16/32), "
                f"the model has {len(outputs)}."
            )
        for i, out in enumerate(outputs):
            group, stride = divmod(i, len(STRIDES))
            want = OUTPUT_WIDTHS[group]
            oshape = list(out.shape or [])
            if len(oshape) != 2:
                raise ModelContractError(
                    f"SCRFD detector: output {i} ({out.name}) must be 2-D [K,{want}], "
                    f"got {_fmt_shape(oshape)}."
                )
            if _known(oshape[1]) and oshape[1] != want:
                raise ModelContractError(
                    f"SCRFD detector: output {i} ({out.name}) should be {_GROUP_NAMES[group]} "
                    f"[K,{want}] for stride {STRIDES[stride]}, got {_fmt_shape(oshape)} "
                    "(outputs must be ordered scores x3, boxes x3, keypoints x3)."
                )
            # With a dynamic input the declared rows only describe the export size; ORT returns the
            # right count for the real size anyway, and detect() checks it per run.
            rows = (in_h // STRIDES[stride]) * (in_w // STRIDES[stride]) * ANCHORS_PER_CELL
            if static_hw and _known(oshape[0]) and oshape[0] != rows:
                raise ModelContractError(
                    f"SCRFD detector: output {i} ({out.name}) has {oshape[0]} rows, expected {rows} "
                    f"({ANCHORS_PER_CELL} anchors per cell at stride {STRIDES[stride]})."
                )
            if out.type not in _FLOAT_TYPES:
                raise ModelContractError(f"SCRFD detector: output {i} must be float, got {out.type}.")

    def preprocess(self, image_bgr: ImageBGR) -> tuple[npt.NDArray[Any], float]:
        """Letterbox and normalise into the reused input blob; (blob, det_scale).

        The blob is this detector's own buffer: valid until the next call.
        """
        if image_bgr.ndim != 3 or image_bgr.shape[2] != 3 or image_bgr.dtype != np.uint8:
            raise ValueError(
                f"expected an (H, W, 3) uint8 BGR image, got {image_bgr.shape} {image_bgr.dtype}"
            )
        img_h, img_w = int(image_bgr.shape[0]), int(image_bgr.shape[1])
        if img_h == 0 or img_w == 0:
            raise ValueError("empty image")
        in_w, in_h = self.input_size
        if self._geometry != (img_h, img_w):
            # Only on a change of frame size: lay out the padding once. The blob's padding holds the
            # normalised value of a black pixel, so per frame only the image region is converted.
            self._letterbox = letterbox_size(img_w, img_h, in_w, in_h)
            self._canvas.fill(0)
            self._blob.fill((0.0 - INPUT_MEAN) / INPUT_STD)
            new_w, new_h, _ = self._letterbox
            if self._blob.dtype != np.float32:  # fp16 inputs are normalised plane by plane
                self._planes = [np.empty((new_h, new_w), dtype=np.uint8) for _ in range(3)]
            self._geometry = (img_h, img_w)
        new_w, new_h, det_scale = self._letterbox

        if (new_h, new_w) == (img_h, img_w):
            region = image_bgr
        else:
            region = self._canvas[:new_h, :new_w]
            resized = cv2.resize(image_bgr, (new_w, new_h), dst=region)
            if resized is not region:  # OpenCV allocated instead of writing into the view
                np.copyto(region, resized)
        if self._blob.dtype == np.float32:
            # Imported here: numba (1.3 s, ~200 MB) loads only where the CPU path runs this.
            from models.ops.pixel_kernels import normalise_into_blob

            normalise_into_blob(region, self._blob, swap_rb=self.swap_rb, mean=INPUT_MEAN, std=INPUT_STD)
            return self._blob, det_scale
        # fp16 inputs: split into contiguous planes first (normalising plane by plane runs at
        # memory speed, where the same maths through a transposed HWC view takes twice as long).
        bgr = list(cv2.split(region, self._planes))  # into the reused planes
        planes = bgr[::-1] if self.swap_rb else bgr
        for channel, plane in enumerate(planes):
            dst = self._blob[0, channel, :new_h, :new_w]
            np.subtract(plane, np.float32(INPUT_MEAN), out=dst)
            np.multiply(dst, np.float32(1.0 / INPUT_STD), out=dst)
        return self._blob, det_scale

    def detect(self, image_bgr: ImageBGR, max_faces: int = 0) -> list[Detection]:
        """Faces in `image_bgr` pixel coordinates, highest score first; at most `max_faces` if > 0."""
        _, det_scale = self.preprocess(image_bgr)  # fills self._blob, which self._feeds holds
        outs = self.session.run(self.output_names, self._feeds)
        boxes, kps, scores = self._decode(outs)
        if scores.size == 0:
            return []
        boxes /= np.float32(det_scale)
        kps /= np.float32(det_scale)
        keep = nms(boxes, scores, self.nms_threshold)
        if max_faces > 0:
            keep = keep[:max_faces]
        return [Detection(box=boxes[i].copy(), kps=kps[i].copy(), score=float(scores[i])) for i in keep]

    def _decode(self, outs: Sequence[npt.NDArray[Any]]) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Candidates above the score threshold in detector-input pixels: boxes (n,4), kps (n,5,2),
        scores (n,). Only candidates are decoded, not every anchor."""
        n_str = len(STRIDES)
        box_parts: list[FloatArray] = []
        kps_parts: list[FloatArray] = []
        score_parts: list[FloatArray] = []
        for i, stride in enumerate(STRIDES):
            centres = self._anchors[i]
            scores = outs[i].reshape(-1)
            if scores.shape[0] != centres.shape[0]:
                raise ModelContractError(
                    f"SCRFD detector: stride {stride} gave {scores.shape[0]} scores, expected "
                    f"{centres.shape[0]} for a {self.input_size[0]}x{self.input_size[1]} input."
                )
            mask = self._masks[i]
            np.greater_equal(scores, self.score_threshold, out=mask)
            idx = np.flatnonzero(mask)
            if idx.size == 0:
                continue
            c = centres[idx]
            dist = outs[n_str + i][idx].astype(np.float32, copy=False) * np.float32(stride)
            box_parts.append(np.concatenate([c - dist[:, :2], c + dist[:, 2:]], axis=1))
            offs = outs[2 * n_str + i][idx].astype(np.float32, copy=False) * np.float32(stride)
            kps_parts.append(offs.reshape(-1, 5, 2) + c[:, None, :])
            score_parts.append(scores[idx].astype(np.float32, copy=False))
        if not score_parts:
            empty = np.empty(0, dtype=np.float32)
            return empty.reshape(0, 4), empty.reshape(0, 5, 2), empty
        return np.concatenate(box_parts), np.concatenate(kps_parts), np.concatenate(score_parts)
