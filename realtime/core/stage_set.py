"""The stages a run's models make: one analyser and one swap worker per frame in flight."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from realtime.core.contracts import Analyser, FrameStage, PassthroughAnalyser, PassthroughWorker, SwapWorker
from realtime.core.settings import Provider, Settings


@dataclass(frozen=True, slots=True)
class StageSet:
    """What a (re)load produces: one analyser and one worker per frame in flight, and each
    worker's whole-picture stages after its faces (its own buffers; none: the picture goes on)."""

    analyser: Analyser
    workers: tuple[SwapWorker, ...]
    label: str = "passthrough"
    # What the provider "auto" runs on where these stages were built (None: not known). The
    # builder resolves it, so the engine needs nothing from the model runtime to compare settings.
    auto_provider: Provider | None = None
    frame_stages: tuple[FrameStage, ...] = ()  # one per worker, in the workers' order, or none


StageFactory = Callable[[Settings], StageSet]


def passthrough_stages(settings: Settings) -> StageSet:
    n = settings.pipeline.frames_in_flight
    return StageSet(PassthroughAnalyser(), tuple(PassthroughWorker() for _ in range(n)), "passthrough")
