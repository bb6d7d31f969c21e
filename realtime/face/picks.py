"""A face picked in the live preview: "swap this one", no reference photo needed.

The control panel's thread hands over the picture and the clicked face's landmarks; the analysis
thread, which owns the recogniser, embeds it on its next frame and locks onto that person exactly
as `--reference` would (the reference taken from the live frame).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from models.types import FloatArray, ImageBGR


@dataclass(frozen=True, slots=True)
class FacePick:
    """The picture a face was picked in and that face's five landmarks (frame pixels)."""

    image: ImageBGR
    kps: FloatArray


@dataclass(frozen=True, slots=True)
class PickedIdentity:
    """A picked person remembered across restarts: the recogniser that embedded them and the
    embedding (used only by a run with the same recogniser)."""

    recognizer: str
    embedding: tuple[float, ...]


class LivePicks:
    """The latest pick or unpick, from any thread; the analyser takes it once. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: FacePick | PickedIdentity | Literal["unpick"] | None = None
        self._picked = False
        self._remembered: PickedIdentity | None = None

    def pick(self, image: ImageBGR, kps: FloatArray) -> None:
        with self._lock:
            self._pending = FacePick(np.ascontiguousarray(image).copy(), np.asarray(kps, np.float32).copy())
            self._picked = True

    def unpick(self) -> None:
        """Back to the panel's own choice (largest, all)."""
        with self._lock:
            self._pending = "unpick"
            self._picked = False
            self._remembered = None

    def restore(self, identity: PickedIdentity) -> None:
        """Pick a person remembered from an earlier session."""
        with self._lock:
            self._pending = identity
            self._picked = True
            self._remembered = identity

    def remember(self, recognizer: str, embedding: npt.ArrayLike) -> None:
        """The analysis thread: the picked person as embedded (what `remembered` hands back)."""
        vector = tuple(float(v) for v in np.asarray(embedding, dtype=np.float32).ravel())
        with self._lock:
            if self._picked:
                self._remembered = PickedIdentity(recognizer, vector)

    @property
    def remembered(self) -> PickedIdentity | None:
        with self._lock:
            return self._remembered

    @property
    def picked(self) -> bool:
        with self._lock:
            return self._picked

    def take(self) -> FacePick | PickedIdentity | Literal["unpick"] | None:
        with self._lock:
            pending, self._pending = self._pending, None
        return pending


__all__ = ["FacePick", "LivePicks", "PickedIdentity"]
