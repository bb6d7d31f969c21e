"""The engine's stage factory for the control panel: every usable gallery face loaded at once, and
the active one chosen per frame, so switching faces (F2 / Ctrl+Tab) is instant.

It is realtime.wiring.face_swap.FaceSwapStages — the very factory the CLI uses — given the
gallery's faces as the run's identities (SwapTarget.identity indexes them), with its analyser
wrapped so each planned face gets the active identity, or none (passthrough) while no face is
chosen; a person mapped to a gallery face in the preview (realtime/face/picks.py) keeps that face.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from models.types import ImageBGR
from realtime.core.contracts import Analyser, FramePlan, PreparingAnalyser
from realtime.core.settings import Settings
from realtime.core.stage_set import StageSet
from realtime.face.source_face import SourceIdentity
from realtime.wiring.face_swap import FaceSwapStages, IdentityMapping, ModelOptions
from realtime.wiring.model_loading import check_models_present


class ActiveFace:
    """Index of the face to swap in (into the run's identities); None = swap nobody.
    Set on the GUI thread, read by the analyser at every frame."""

    def __init__(self, index: int | None = 0) -> None:
        self._lock = threading.Lock()
        self._index = index

    def set(self, index: int | None) -> None:
        with self._lock:
            self._index = index

    def get(self) -> int | None:
        with self._lock:
            return self._index


class ActiveFaceAnalyser:
    """An Analyser that gives every planned face the active identity (the next frame after a switch),
    but for the people of the live map, who keep theirs."""

    def __init__(self, inner: Analyser, active: ActiveFace) -> None:
        self._inner = inner
        self._active = active

    def prepare(self, image: ImageBGR) -> object | None:
        """The inner analyser's capture-thread work (see realtime.core.contracts.PreparingAnalyser)."""
        inner = self._inner
        return inner.prepare(image) if isinstance(inner, PreparingAnalyser) else None

    def analyse(
        self, image: ImageBGR, timestamp: float, settings: Settings, *, prepared: object | None = None
    ) -> FramePlan:
        inner = self._inner
        if prepared is not None and isinstance(inner, PreparingAnalyser):
            plan = inner.analyse(image, timestamp, settings, prepared=prepared)
        else:
            plan = inner.analyse(image, timestamp, settings)
        # A mapped person keeps their own identity (the live map); everyone else gets the active one.
        index = self._active.get()
        if index is None:
            plan.passthrough += sum(1 for t in plan.targets if not t.mapped)
            plan.targets = [t for t in plan.targets if t.mapped]
        else:
            plan.targets = [t if t.mapped else replace(t, identity=index) for t in plan.targets]
        return plan


class GalleryFaceSwap:
    """StageFactory over FaceSwapStages with `faces` as identities 0..n-1.

    Model errors surface as the store's FaceCastError; the engine (loading in the background)
    reports them as "error" events and keeps the preview running in passthrough.
    `on_note` receives provider fallback notes (e.g. CUDA did not load), from the loading thread.
    """

    def __init__(
        self,
        options: ModelOptions,
        faces: Sequence[SourceIdentity],
        active: ActiveFace,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        if not faces:
            raise ValueError("GalleryFaceSwap needs at least one face")
        first, *others = faces
        # The identities ride on FaceSwapStages' mappings; their references matter only to the
        # "mapped" target mode, which the control panel never selects.
        mappings = tuple(IdentityMapping(face.embedding, face) for face in others)
        self._stages = FaceSwapStages(options, first, mappings=mappings)
        self._options = options
        self._active = active
        self._on_note = on_note
        self._noted: set[str] = set()

    @property
    def identities(self) -> int:
        return len(self._stages.identities)

    def __call__(self, settings: Settings) -> StageSet:
        # Every missing model named at once, with one download command, as the CLI does (loading
        # stopped at the first, so each model cost the user another Start).
        check_models_present(self._options.paths(), settings)
        inner = self._stages(settings)
        if self._on_note is not None:
            for note in self._stages.fallbacks:
                if note not in self._noted:
                    self._noted.add(note)
                    self._on_note(note)
        # replace() keeps the provider the builder resolved, so switching between "auto" and the
        # provider it picks reloads nothing.
        return replace(inner, analyser=ActiveFaceAnalyser(inner.analyser, self._active))
