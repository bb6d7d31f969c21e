"""What flows between the engine's stages, and the stage interfaces (no model code here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from models.types import FloatArray, ImageBGR
from realtime.core.frames import VideoFrame
from realtime.core.settings import Settings
from realtime.core.watermark.embed import MarkRequest


@dataclass(frozen=True, slots=True)
class SwapTarget:
    """One face to swap in one frame: its (smoothed) landmarks, how strongly to blend it and who
    it becomes.

    identity: index into the run's source identities (FaceSwapStages.identities): 0 is the
    `--source` person, k >= 1 the k-th `--map REF=SOURCE` entry.
    previous_identity, mix: a face changing identity (mapped mode) cross-fades from `previous_identity`
    to `identity` over a few frames; `mix` is the new identity's share (1: the change is done).
    mapped: the identity is the person's own, from the live map (realtime/face/picks.py): the
    panel's active face does not replace it.
    """

    kps: FloatArray
    weight: float  # 0..1; below 1 while fading in or out
    track_id: int = -1
    identity: int = 0
    previous_identity: int | None = None
    mix: float = 1.0
    mapped: bool = False

    @property
    def cross_fading(self) -> bool:
        return self.previous_identity is not None and self.mix < 1.0


def check_identity(target: SwapTarget, count: int, identity: int | None = None) -> int:
    """`identity` (default: the target's) if the run has it, else a ValueError naming it."""
    k = target.identity if identity is None else identity
    if not 0 <= k < count:
        raise ValueError(f"swap target asks for identity {k}; this run has {count}")
    return k


@dataclass(slots=True)
class FramePlan:
    targets: list[SwapTarget] = field(default_factory=list)
    passthrough: int = 0  # faces seen but left unswapped (low confidence / quality)
    faces: int = 0  # faces seen in the frame, swapped or not (targets not chosen included)
    # Per-stage ms of the analysis; the worker returns its own (swap, mask.*, enhance, paste ...).
    timings: dict[str, float] = field(default_factory=dict)

    def fallbacks(self) -> tuple[str, ...]:
        """Why each face in the privacy fallback this frame is in it ("not confirmed yet", ...)."""
        return ()


class Analyser(Protocol):
    def analyse(self, image: ImageBGR, timestamp: float, settings: Settings) -> FramePlan: ...


@runtime_checkable
class PreparingAnalyser(Protocol):
    """An analyser with per-picture work that needs no state (the flow's small grey copy): the
    engine's capture thread does it with `prepare` while the analysis, the pipeline's one serial
    stage, works on the frame before, and hands the result to `analyse` with the frame."""

    def prepare(self, image: ImageBGR) -> object | None: ...

    def analyse(
        self, image: ImageBGR, timestamp: float, settings: Settings, *, prepared: object | None = None
    ) -> FramePlan: ...


class SwapWorker(Protocol):
    """Swaps a frame's planned faces into `image` in place. `device_picture`: the same picture still
    on the GPU (NVDEC frames), which a GPU worker may use instead of uploading `image`."""

    def apply(
        self, image: ImageBGR, plan: FramePlan, settings: Settings, *, device_picture: object | None = None
    ) -> dict[str, float]: ...


@runtime_checkable
class DeviceMarkingWorker(Protocol):
    """A swap worker that can add the run's watermark where its frame is (the GPU path): the engine
    offers it each frame's MarkRequest when nothing after the worker changes the picture's pixels
    but the label, and marks on the host only the frames it did not take."""

    @property
    def marks_on_device(self) -> bool: ...

    def apply(
        self,
        image: ImageBGR,
        plan: FramePlan,
        settings: Settings,
        *,
        device_picture: object | None = None,
        mark: MarkRequest | None = None,
    ) -> dict[str, float]: ...


class FrameStage(Protocol):
    """A whole-picture step after the faces (super-resolution): the picture to send on, either
    `image` edited in place or a new array (another size), and its ms by name."""

    def process(self, image: ImageBGR, settings: Settings) -> tuple[ImageBGR, dict[str, float]]: ...


class PassthroughAnalyser:
    """Finds nothing: frames flow unchanged (no models loaded yet, or models failed)."""

    def analyse(self, image: ImageBGR, timestamp: float, settings: Settings) -> FramePlan:
        return FramePlan()


class PassthroughWorker:
    def apply(
        self, image: ImageBGR, plan: FramePlan, settings: Settings, *, device_picture: object | None = None
    ) -> dict[str, float]:
        return {}


Notify = Callable[[str, str], None]  # (level "info" | "warning", message), for a source's news


@runtime_checkable
class BasicSource(Protocol):
    """The least a source must do. `size`/`fps` are what the input really gives, valid after open().
    The engine takes such a source as it is and gives it the rest of FrameSource (see
    realtime.core.source_base.complete_source)."""

    def open(self) -> None: ...

    def read(self) -> VideoFrame | None:
        """The next frame, or None at the end of the stream. Raises SourceError on failure."""
        ...

    def close(self) -> None: ...

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        ...

    @property
    def fps(self) -> float: ...

    @property
    def is_live(self) -> bool:
        """True when frames arrive on their own clock (camera, paced file or repeated image)."""
        ...

    @property
    def description(self) -> str: ...


@runtime_checkable
class FrameSource(BasicSource, Protocol):
    """Where frames come from (every source in realtime.io is one).

    notify: told (level, message) of the source's news while it runs (a camera looking for itself
    after an unplug says so while it looks, not only when it gives up); the engine sets it.
    interrupt(): from another thread, end any wait inside read() at once (a reconnect, a paced
    frame): the run is stopping. A no-op where nothing waits.
    """

    notify: Notify | None

    def interrupt(self) -> None: ...


@runtime_checkable
class FrameSink(Protocol):
    """Where frames go. open() fixes the size and rate; close() finalises, abort() discards."""

    def open(self, width: int, height: int, fps: float) -> None: ...

    def send(self, frame: VideoFrame) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...

    @property
    def description(self) -> str: ...
