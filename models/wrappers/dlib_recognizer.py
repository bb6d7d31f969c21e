"""dlib's face recogniser (ResNet v1, 128-d): the identity check behind reference lock and --map.

ArcFace stays the swapper's identity (inswapper is trained on its embedding); this recogniser only
decides who is who. dlib's model aligns its 150 px chip from its own 5-point shape predictor (eye
corners and the base of the nose, not our landmarks), so the predictor runs inside a box built from
our five landmarks, sized and placed like dlib's own face detector's box (measured on the astronaut
and the group photo: 2.3x the eye-to-mouth distance, centred 3 % of the box above the eye-mouth
midpoint). Both model files ship in the face-recognition-models package (CC0 model weights).

Distances (cosine, unit vectors): ~0.002-0.02 for the same face across frames, 0.09-0.19 between
different people; dlib's own rule of thumb is Euclidean 0.6, i.e. cosine 0.18.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from models.errors import ModelMissingError
from models.types import FloatArray, ImageBGR

BOX_PER_EYE_MOUTH = 2.3  # dlib's detector box side over the eye-to-mouth distance
BOX_RAISE = 0.03  # the box centre sits this share of its side above the eye-mouth midpoint
CHIP_SIZE = 150  # dlib's aligned chip
CHIP_PADDING = 0.25
CONTEXT = 1.0  # the crop handed to dlib: the box plus this share of its side on each side


def _import_dlib() -> Any:
    try:
        import dlib
    except ImportError as err:  # optional: only this recogniser needs it
        raise ModelMissingError(
            "The dlib recogniser needs the dlib package.",
            hint="pip install dlib-bin==20.0.1.post1 face-recognition-models==0.3.0",
        ) from err
    return dlib


def bundled_model_files() -> tuple[Path, Path]:
    """(recogniser, 5-point shape predictor) from the face-recognition-models package."""
    try:
        import face_recognition_models
    except ImportError as err:
        raise ModelMissingError(
            "The dlib recogniser's model files come with the face-recognition-models package.",
            hint="pip install face-recognition-models==0.3.0",
        ) from err
    return (
        Path(face_recognition_models.face_recognition_model_location()),
        Path(face_recognition_models.pose_predictor_five_point_model_location()),
    )


def dlib_available() -> bool:
    """Whether dlib and its model files can be loaded here (for the GUI's choice and for tests)."""
    try:
        _import_dlib()
        return all(p.is_file() for p in bundled_model_files())
    except ModelMissingError:
        return False


def face_box(kps: npt.ArrayLike) -> tuple[float, float, float, float]:
    """x1, y1, x2, y2 of the box dlib's shape predictor expects, from our five landmarks."""
    k = np.asarray(kps, dtype=np.float64).reshape(5, 2)
    eyes, mouth = (k[0] + k[1]) / 2.0, (k[3] + k[4]) / 2.0
    side = BOX_PER_EYE_MOUTH * max(
        float(np.linalg.norm(mouth - eyes)), 0.5 * float(np.linalg.norm(k[1] - k[0])), 1.0
    )
    cx, cy = (eyes + mouth) / 2.0
    cy -= BOX_RAISE * side
    return cx - side / 2.0, cy - side / 2.0, cx + side / 2.0, cy + side / 2.0


class DlibRecognizer:
    """128-d identity vectors from dlib's ResNet. Same call as ArcFace.embed: (frame, 5 landmarks).

    One instance per thread (dlib's models are not shared across threads here)."""

    embedding_size = 128
    name = "dlib"

    def __init__(self, recognizer_file: Path | None = None, shape_file: Path | None = None) -> None:
        dlib = _import_dlib()
        if recognizer_file is None or shape_file is None:
            bundled = bundled_model_files()
            recognizer_file = recognizer_file or bundled[0]
            shape_file = shape_file or bundled[1]
        for path in (recognizer_file, shape_file):
            if not Path(path).is_file():
                raise ModelMissingError(
                    f"dlib model file not found: {path}", hint="pip install face-recognition-models==0.3.0"
                )
        self._dlib = dlib
        self._net = dlib.face_recognition_model_v1(str(recognizer_file))
        self._shape = dlib.shape_predictor(str(shape_file))

    def embed_raw(self, image_bgr: ImageBGR, kps: npt.ArrayLike) -> FloatArray:
        x1, y1, x2, y2 = face_box(kps)
        side = x2 - x1
        h, w = image_bgr.shape[:2]
        # dlib reads RGB: only the face's neighbourhood is converted, not the whole frame.
        cx1, cy1 = max(int(x1 - CONTEXT * side), 0), max(int(y1 - CONTEXT * side), 0)
        cx2, cy2 = min(int(x2 + CONTEXT * side) + 1, w), min(int(y2 + CONTEXT * side) + 1, h)
        if cx2 - cx1 < 2 or cy2 - cy1 < 2:
            raise ValueError("the face lies outside the frame")
        crop = np.ascontiguousarray(image_bgr[cy1:cy2, cx1:cx2, ::-1])
        rect = self._dlib.rectangle(
            int(round(x1 - cx1)), int(round(y1 - cy1)), int(round(x2 - cx1)), int(round(y2 - cy1))
        )
        shape = self._shape(crop, rect)
        chip = self._dlib.get_face_chip(crop, shape, size=CHIP_SIZE, padding=CHIP_PADDING)
        return np.asarray(self._net.compute_face_descriptor(chip), dtype=np.float32)

    def embed(self, image_bgr: ImageBGR, kps: npt.ArrayLike) -> FloatArray:
        """The L2-normalised (128,) identity vector."""
        v = self.embed_raw(image_bgr, kps)
        norm = float(np.linalg.norm(v))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError(f"cannot normalise an embedding with norm {norm}")
        return np.asarray(v / np.float32(norm), dtype=np.float32)


__all__ = ["DlibRecognizer", "bundled_model_files", "dlib_available", "face_box"]
