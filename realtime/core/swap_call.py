"""How the engine calls a swap worker on one frame: with what the worker can take.

A worker gets the frame's picture still on the GPU where there is one (NVDEC frames), and the
frame's watermark where it adds it on the GPU before the frame's one download (the sink then
leaves that frame alone; docs/PROVENANCE.md). Workers that take neither keep the plain call.
"""

from __future__ import annotations

from models.types import ImageBGR
from realtime.core.contracts import DeviceMarkingWorker, FramePlan, SwapWorker
from realtime.core.frames import VideoFrame
from realtime.core.settings import Settings
from realtime.core.stage_set import StageSet
from realtime.core.watermark.embed import MarkRequest, Watermarker


def marking_worker(worker: SwapWorker, stages: StageSet, settings: Settings) -> DeviceMarkingWorker | None:
    """`worker`, where it adds the frame's mark on the GPU before its download; None where the
    sink marks the frame on the host (no GPU worker, or a frame stage still to change it)."""
    if not settings.watermark.enabled or stages.frame_stages:
        return None
    if not isinstance(worker, DeviceMarkingWorker) or not worker.marks_on_device:
        return None
    return worker


def swap_frame(
    worker: SwapWorker,
    frame: VideoFrame,
    plan: FramePlan,
    settings: Settings,
    stages: StageSet,
    marker: Watermarker,
) -> dict[str, float]:
    """Swap `plan`'s faces into `frame` in place (setting `frame.marked` where the worker marked
    it); the ms of each step, as the worker reports them."""
    image: ImageBGR = frame.image
    picture = frame.device_picture
    marking = marking_worker(worker, stages, settings)
    if marking is not None:
        request = MarkRequest(marker.cell_offsets)
        timings = marking.apply(image, plan, settings, device_picture=picture, mark=request)
        frame.marked = request.done
        return timings
    if picture is None:
        return worker.apply(image, plan, settings)
    return worker.apply(image, plan, settings, device_picture=picture)
