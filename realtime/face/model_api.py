"""What the face stages need of their models: the detector, the analysis set, the quality models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from models.types import Detection, FloatArray, ImageBGR
from models.wrappers.enhancers import FaceRestorer, RestorerName
from models.wrappers.maskers import FaceParser, Occluder


class FaceDetector(Protocol):
    def detect(self, image_bgr: ImageBGR, max_faces: int = 0) -> list[Detection]: ...


class Recognizer(Protocol):
    """An identity embedder: ArcFace, or dlib's ResNet (who is who only, never the swap's identity)."""

    def embed(self, image_bgr: ImageBGR, kps: npt.ArrayLike) -> FloatArray: ...


@runtime_checkable
class RawEmbedder(Recognizer, Protocol):
    """A recogniser whose raw (not normalised) embedding means something: ArcFace's, which the
    embedding converters of some swap families take."""

    def embed_raw(self, image_bgr: ImageBGR, kps: npt.ArrayLike) -> FloatArray: ...


@dataclass(frozen=True, slots=True)
class AnalysisModels:
    """What the (single, sequential) analyser runs: detector and recogniser.

    recognizer: ArcFace, whose embedding of the source photos the swapper takes.
    identifier: what tells people apart for reference lock and --map (None: ArcFace).
    """

    detector: FaceDetector
    recognizer: Recognizer
    detector_name: str
    identifier: Recognizer | None = None

    @property
    def identity(self) -> Recognizer:
        return self.recognizer if self.identifier is None else self.identifier


class QualityModels(Protocol):
    """Where a swap worker gets its enhancer and mask models (each loaded once, then cached)."""

    def restorer(self, name: RestorerName) -> FaceRestorer: ...

    def occluder(self) -> Occluder: ...

    def parser(self) -> FaceParser: ...


def embedding_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine distance between two L2-normalised embeddings (0 = same, 2 = opposite)."""
    return float(1.0 - np.dot(a, b))
