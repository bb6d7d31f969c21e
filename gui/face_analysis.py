"""Source photos for the gallery: find the face, crop a thumbnail, embed the identity — off the GUI thread.

PhotoAnalyser is plain Python (one photo in, one FaceResult out); PhotoAnalysisService runs it on a
single background thread and delivers results to the GUI thread through a queued signal.
Without the model files the built-in MTCNN detector still finds the face for the thumbnail, and the
result says which models are missing (the swap itself needs them).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PyQt6.QtCore import QObject, pyqtSignal

from realtime.api import (
    MTCNN,
    AnalysisModels,
    Detection,
    FaceCastError,
    FaceDetector,
    ImageBGR,
    ModelError,
    ModelMissingError,
    ModelOptions,
    SessionConfig,
    SessionFactory,
    Settings,
    SourceIdentity,
    check_models_present,
    load_analysis_models,
    load_identity,
    pick_face,
    read_image,
    told,
)

log = logging.getLogger(__name__)

THUMB_SIZE = 112
_CROP_MARGIN = 1.7  # the thumbnail shows the face box scaled by this, centred on it


@dataclass(frozen=True, slots=True)
class FaceResult:
    """What the gallery shows for one photo.

    thumbnail: a THUMB_SIZE square around the face (the whole photo, letterboxed, when no face).
    identity: the embedding to swap in; None when the photo is unusable or models are missing.
    error: why the photo cannot be used (shown inline under its thumbnail); "" when usable.
    note: something worth knowing that does not stop it being used.
    """

    path: Path
    thumbnail: ImageBGR | None
    identity: SourceIdentity | None
    error: str = ""
    note: str = ""
    models_missing: str = ""  # why a face was found but cannot be swapped in (the models' message)

    @property
    def usable(self) -> bool:
        return not self.error


def face_thumbnail(image: ImageBGR, box: np.ndarray, size: int = THUMB_SIZE) -> ImageBGR:
    """A square crop centred on `box` (x1, y1, x2, y2), padded with grey where it leaves the photo."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    side = max(x2 - x1, y2 - y1) * _CROP_MARGIN
    return _square_crop(image, (x1 + x2) / 2.0, (y1 + y2) / 2.0, side, size)


def photo_thumbnail(image: ImageBGR, size: int = THUMB_SIZE) -> ImageBGR:
    """The whole photo letterboxed into a square (for photos with no usable face)."""
    h, w = image.shape[:2]
    return _square_crop(image, w / 2.0, h / 2.0, float(max(w, h)), size)


def _square_crop(image: ImageBGR, cx: float, cy: float, side: float, size: int) -> ImageBGR:
    scale = size / max(side, 1.0)
    m = np.array([[scale, 0.0, size / 2.0 - cx * scale], [0.0, scale, size / 2.0 - cy * scale]])
    crop = cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_AREA, borderValue=(64, 64, 64))
    return np.asarray(crop, dtype=np.uint8)


class PhotoAnalyser:
    """Loads the detector and recogniser once (CPU: photos are analysed once each), then per photo:
    detect, pick the largest face, embed it, crop the thumbnail."""

    def __init__(self, options: ModelOptions, detector_model: str = "det_10g") -> None:
        self._options = options
        self._detector_model = detector_model
        self._models: AnalysisModels | None = None
        self._fallback: FaceDetector | None = None
        self._models_problem = ""
        # What Start runs: every model it needs is named when some are missing.
        self.run_settings = Settings().with_overrides({"detector.model": detector_model})

    @property
    def detector_model(self) -> str:
        return self._detector_model

    def missing_models(self) -> str:
        """The CLI's check for the run's settings: one message naming every missing model, with one
        `models download` command (a fresh install learnt of them one Start at a time); "" when
        every model is there. A damaged model file is a problem too: its own message."""
        try:
            check_models_present(self._options.paths(), self.run_settings)
        except ModelError as exc:
            return exc.user_message()
        return ""

    def analyse(self, path: Path) -> FaceResult:
        try:
            image = read_image(path)
        except FaceCastError as exc:
            return FaceResult(path, None, None, error=exc.user_message())
        self._ensure_models()
        if self._models is not None:
            try:
                identity = load_identity([path], self._models.detector, self._models.recognizer)
            except FaceCastError as exc:
                return FaceResult(path, photo_thumbnail(image), None, error=exc.user_message())
            detection = identity.photos[0].detection
            note = " ".join(identity.notes)
            return FaceResult(path, face_thumbnail(image, detection.box), identity, note=note)
        return self._thumbnail_only(path, image)

    def _thumbnail_only(self, path: Path, image: ImageBGR) -> FaceResult:
        assert self._fallback is not None
        faces: list[Detection] = self._fallback.detect(image)
        try:
            face, note = pick_face(path, faces)
        except FaceCastError as exc:
            return FaceResult(path, photo_thumbnail(image), None, error=exc.user_message())
        return FaceResult(
            path, face_thumbnail(image, face.box), None, note=note or "", models_missing=self._models_problem
        )

    def _ensure_models(self) -> None:
        """Load the detector and recogniser; until they load, MTCNN finds faces for the thumbnails.
        Tried again for every photo while they are missing: models downloaded while the window is
        open are used from the next photo on (they were ignored until a restart)."""
        if self._models is not None:
            return
        settings = Settings().with_overrides({"detector.model": self._detector_model})
        # One thread per session: a photo is analysed once, and the engine and GUI need the cores.
        factory = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=1))
        try:
            self._models = load_analysis_models(self._options.paths(), settings, factory)
        except ModelError as exc:
            log.info("photo analysis without models: %s", exc.user_message())
            # Named all at once when several are missing; other problems (a model that does not
            # fit) are not the check's business, so their own message stays.
            every = self.missing_models() if isinstance(exc, ModelMissingError) else ""
            self._models_problem = every or exc.user_message()
            if self._fallback is None:
                self._fallback = MTCNN(factory=factory)
            return
        self._fallback = None
        self._models_problem = ""


class PhotoAnalysisService(QObject):
    """Analyses photos one at a time on a background thread; `analysed(FaceResult)` on the GUI thread.
    `models_checked(str)`: check_models()'s answer, the missing models' message ("" when none)."""

    analysed = pyqtSignal(object)
    models_checked = pyqtSignal(str)

    def __init__(self, options: ModelOptions, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._options = options
        self._lock = threading.Lock()
        self._analyser = PhotoAnalyser(options, settings.detector.model)
        self._analyser.run_settings = settings
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="photo-analysis")

    def set_settings(self, settings: Settings) -> None:
        """The run's settings: later photos use its detector (the models load again, lazily, on the
        analysis thread), and a missing-models message names what it needs."""
        with self._lock:
            if settings.detector.model != self._analyser.detector_model:
                self._analyser = PhotoAnalyser(self._options, settings.detector.model)
            self._analyser.run_settings = settings

    def set_model_options(self, options: ModelOptions) -> None:
        """Another models folder: later photos and checks look there."""
        with self._lock:
            settings = self._analyser.run_settings
            self._options = options
            self._analyser = PhotoAnalyser(options, settings.detector.model)
            self._analyser.run_settings = settings

    def submit(self, path: Path) -> None:
        self._executor.submit(self._run, path)

    def check_models(self) -> None:
        """Whether the run's models are all there, answered by `models_checked` (off the GUI
        thread: an unverified file is hashed first)."""
        self._executor.submit(self._check)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _run(self, path: Path) -> None:
        with self._lock:
            analyser = self._analyser
        try:
            result = analyser.analyse(path)
        except OSError as exc:  # a photo or models folder that may not be read: no crash to log
            result = FaceResult(path, None, None, error=f"Could not analyse this photo: {told(exc).message}")
        except Exception as exc:
            log.exception("analysing %s failed", path)
            result = FaceResult(path, None, None, error=f"Could not analyse this photo: {exc}")
        try:
            self.analysed.emit(result)
        except RuntimeError as exc:  # the window closed while this photo was being analysed
            log.debug("photo analysis result dropped: %s", exc)

    def _check(self) -> None:
        with self._lock:
            analyser = self._analyser
        try:
            text = analyser.missing_models()
        except OSError as exc:  # a folder this user may not read: said, not logged as a crash
            text = f"The models cannot be checked: {told(exc).message}"
        except Exception:  # a bug here must not pass for "all models present": logged, nothing shown
            log.exception("checking the models failed")
            return
        try:
            self.models_checked.emit(text)
        except RuntimeError as exc:  # the window closed meanwhile
            log.debug("models check dropped: %s", exc)
