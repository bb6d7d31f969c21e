"""The two face stages of a frame: analyse (sequential) and swap + composite (parallel workers).

Analysis — detection, tracking, smoothing, target choice — needs frames in order and carries state
from one frame to the next, so one analyser sees every frame. Swapping and paste-back are
stateless per frame and expensive, so several workers (each with its own swapper session) run
them on consecutive frames at once.
"""

from __future__ import annotations

import time

import cv2
import numpy as np
import numpy.typing as npt

from models.align import estimate_norm
from models.inswapper import InSwapper
from models.types import Detection, ImageBGR
from realtime.compositor import Compositor, MaskSettings
from realtime.face_models import AnalysisModels, FaceDetector, embedding_distance
from realtime.settings import Settings
from realtime.source_face import SourceIdentity
from realtime.stage_api import FramePlan, SwapTarget
from realtime.targets import TargetSelector
from realtime.tracker import FaceTracker, TrackedFace


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


class FaceAnalyser:
    """Detect every K frames, track and smooth in between, choose the target faces."""

    def __init__(
        self,
        models: AnalysisModels,
        settings: Settings,
        reference_embedding: npt.NDArray[np.float32] | None = None,
    ) -> None:
        self._models = models
        self._reference = reference_embedding
        self._settings = settings
        self._detector: FaceDetector = models.detector
        self._tracker = self._new_tracker(settings)
        self._selector = self._new_selector(settings)
        self._embeddings: dict[int, npt.NDArray[np.float32]] = {}
        self._timings: dict[str, float] = {}
        self._current_image: ImageBGR = np.zeros((1, 1, 3), dtype=np.uint8)

    def _new_tracker(self, settings: Settings) -> FaceTracker:
        return FaceTracker.from_settings(self._timed_detect, settings)

    def _new_selector(self, settings: Settings) -> TargetSelector:
        return TargetSelector(
            settings.swap.target,
            reference_embedding=self._reference,
            threshold=settings.swap.reference_threshold,
            max_missed=settings.tracker.max_missed,
        )

    def _timed_detect(self, image: ImageBGR) -> list[Detection]:
        t0 = time.perf_counter()
        faces = self._detector.detect(image, max_faces=self._settings.detector.max_faces)
        self._timings["detect"] = _ms(t0)
        return faces

    def _embed(self, face: TrackedFace) -> npt.NDArray[np.float32]:
        cached = self._embeddings.get(face.track_id)
        if cached is None or face.detected:
            image = self._current_image
            cached = self._models.recognizer.embed(image, face.raw_kps)
            self._embeddings[face.track_id] = cached
        return cached

    def reconfigure(self, settings: Settings) -> None:
        """Apply a live settings change that needs no model reload."""
        old = self._settings
        self._settings = settings
        if old.tracker != settings.tracker or old.detector.interval != settings.detector.interval:
            # Keeps the tracks (ids, smoothing state): a slider move must not re-lock the target.
            self._tracker.reconfigure(settings.tracker, settings.detector.interval)
        if old.swap != settings.swap:
            self._selector = self._new_selector(settings)

    def analyse(self, image: ImageBGR, timestamp: float, settings: Settings) -> FramePlan:
        if settings is not self._settings:
            self.reconfigure(settings)
        self._timings = {}
        self._current_image = image
        t0 = time.perf_counter()
        faces = self._tracker.update(image, timestamp)
        track_ms = _ms(t0) - self._timings.get("detect", 0.0)
        t1 = time.perf_counter()
        chosen = self._selector.select(faces, self._embed)
        live_ids = {f.track_id for f in faces}
        for stale in [k for k in self._embeddings if k not in live_ids]:
            del self._embeddings[stale]
        plan = FramePlan(timings=dict(self._timings))
        plan.timings["track"] = track_ms
        plan.timings["select"] = _ms(t1)
        for face in chosen:
            if face.swap_weight > 0.0:
                plan.targets.append(SwapTarget(face.kps, face.swap_weight, face.track_id))
            else:
                plan.passthrough += 1
        return plan


class FaceSwapWorker:
    """Swap each planned face and paste it back, in place, inside the face's region only."""

    def __init__(self, swapper: InSwapper, identity: SourceIdentity, settings: Settings) -> None:
        self._swapper = swapper
        self._latent = self._swapper.latent(identity.embedding)
        size = self._swapper.input_size
        self._size = size
        self._crop = np.zeros((size, size, 3), dtype=np.uint8)  # reused every face
        self._mask_settings = _mask_settings(settings)
        self._compositor = Compositor(self._mask_settings)

    def apply(self, image: ImageBGR, plan: FramePlan, settings: Settings) -> dict[str, float]:
        mask_settings = _mask_settings(settings)
        if mask_settings != self._mask_settings:
            self._mask_settings = mask_settings
            self._compositor = Compositor(mask_settings)
        timings = {"swap": 0.0, "paste": 0.0}
        for target in plan.targets:
            t0 = time.perf_counter()
            m = estimate_norm(target.kps, self._size)
            cv2.warpAffine(image, m, (self._size, self._size), dst=self._crop, borderValue=0.0)
            swapped = self._swapper.swap(self._crop, self._latent)
            t1 = time.perf_counter()
            self._compositor.paste(
                image,
                swapped,
                m,
                colour_match=settings.composite.colour_match,
                opacity=settings.composite.opacity * target.weight,
                inplace=True,
            )
            timings["swap"] += (t1 - t0) * 1000.0
            timings["paste"] += _ms(t1)
        return timings


def _mask_settings(settings: Settings) -> MaskSettings:
    return MaskSettings(erode_ratio=settings.composite.erode_ratio, blur_ratio=settings.composite.blur_ratio)


__all__ = ["FaceAnalyser", "FaceSwapWorker", "embedding_distance"]
