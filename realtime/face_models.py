"""Load the face models a worker needs, once, from the store, through one session factory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from models.arcface import ArcFace
from models.errors import ModelError
from models.inswapper import InSwapper
from models.mtcnn import MTCNN
from models.router import load_detector, load_recognizer, load_swapper
from models.session import SessionFactory
from models.store import ModelStore
from models.types import Detection, ImageBGR
from realtime.settings import DetectorSettings, Settings

CATALOGUE_FILE = {
    "det_10g": "det_10g.onnx",
    "scrfd_2.5g": "scrfd_2.5g.onnx",
    "w600k_r50": "w600k_r50.onnx",
    "inswapper_128": "inswapper_128.onnx",
    "inswapper_128_fp16": "inswapper_128_fp16.onnx",
}


class FaceDetector(Protocol):
    def detect(self, image_bgr: ImageBGR, max_faces: int = 0) -> list[Detection]: ...


@dataclass(frozen=True, slots=True)
class ModelPaths:
    """Where each model comes from: the store (verified) or a file the user named."""

    store: ModelStore
    overrides: tuple[tuple[str, Path], ...] = ()  # (catalogue name, user file)

    def path(self, name: str) -> Path:
        for key, value in self.overrides:
            if key == name:
                return self.store.resolve_user_file(value)[0]
        return self.store.resolve(CATALOGUE_FILE[name])


@dataclass(frozen=True, slots=True)
class AnalysisModels:
    """What the (single, sequential) analyser runs: detector and recogniser."""

    detector: FaceDetector
    recognizer: ArcFace
    detector_name: str


def load_detector_for(paths: ModelPaths, settings: DetectorSettings, factory: SessionFactory) -> FaceDetector:
    if settings.model == "mtcnn":
        return MTCNN(factory=factory)
    return load_detector(
        paths.path(settings.model),
        factory,
        input_size=(settings.size, settings.size),
        score_threshold=settings.threshold,
    )


def load_analysis_models(paths: ModelPaths, settings: Settings, factory: SessionFactory) -> AnalysisModels:
    """Detector + recogniser; a missing/corrupt/wrong model raises ModelError."""
    detector = load_detector_for(paths, settings.detector, factory)
    recognizer = load_recognizer(paths.path("w600k_r50"), factory)
    return AnalysisModels(detector, recognizer, settings.detector.model)


def load_swapper_model(paths: ModelPaths, settings: Settings, factory: SessionFactory) -> InSwapper:
    """One swapper session; each swap worker gets its own."""
    return load_swapper(paths.path(settings.swap.model), factory)


def check_models_present(paths: ModelPaths, settings: Settings) -> None:
    """Fail fast (before opening cameras) with the store's one-line message for the first problem."""
    names = [settings.swap.model, "w600k_r50"]
    if settings.detector.model != "mtcnn":
        names.insert(0, settings.detector.model)
    for name in names:
        paths.path(name)


def embedding_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine distance between two L2-normalised embeddings (0 = same, 2 = opposite)."""
    return float(1.0 - np.dot(a, b))


__all__ = [
    "CATALOGUE_FILE",
    "AnalysisModels",
    "FaceDetector",
    "ModelError",
    "ModelPaths",
    "check_models_present",
    "embedding_distance",
    "load_analysis_models",
    "load_detector_for",
    "load_swapper_model",
]
