"""Typed records that travel through the engine: timestamps travel with the frame."""

from __future__ import annotations

from dataclasses import dataclass

from models.types import ImageBGR


@dataclass(slots=True)
class VideoFrame:
    """One picture on its way from a source to a sink.

    image: (H, W, 3) uint8 BGR, owned by the frame (sources never hand out a buffer they reuse).
    index: the source's frame number, counting from 0 (used to restore order before the sink).
    capture_ts: time.perf_counter() when the frame was captured or decoded; the sink measures
        glass-to-glass latency from it.
    pts: position in the media timeline in seconds (video files), or None for live sources.
    """

    image: ImageBGR
    index: int
    capture_ts: float
    pts: float | None = None

    @property
    def device_picture(self) -> object | None:
        """The same picture still on the GPU (NVDEC sources), or None for a host-only frame."""
        return None

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def height(self) -> int:
        return int(self.image.shape[0])
