"""A long file cut into keyframe-aligned chunks of a few seconds, each processed on its own.

Each chunk starts at a keyframe, so it decodes alone and its encoded frames do not depend on
another chunk's. The tracker starts cold in each chunk: a few frames before its start are run
through the engine first (warm-up) and not written, so the face is already tracked and smoothed
at the seam and does not jump there.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from realtime.jobs.probe import MediaInfo

DEFAULT_CHUNK_S = 4.0
DEFAULT_WARMUP_FRAMES = 8  # more than the tracker's fade-in (4) and the smoother's settling


@dataclass(frozen=True, slots=True)
class Chunk:
    """Frames with start_pts <= pts < end_pts are written (end_pts None: to the end); frames from
    warm_pts on are processed, the ones before start_pts only to warm the tracker up."""

    index: int
    start_pts: int
    end_pts: int | None
    warm_pts: int
    frames: int

    @property
    def name(self) -> str:
        return f"chunk-{self.index:05d}.nut"  # NUT keeps any time base exactly


def plan_chunks(
    info: MediaInfo, chunk_s: float = DEFAULT_CHUNK_S, warmup_frames: int = DEFAULT_WARMUP_FRAMES
) -> list[Chunk]:
    """Chunks of at least `chunk_s` seconds (0: the whole file in one), cut at keyframes."""
    pts = info.frame_pts
    if chunk_s <= 0:
        return [Chunk(0, pts[0], None, pts[0], len(pts))]
    starts = [info.keyframes[0]]
    for key in info.keyframes[1:]:
        if info.seconds(key - starts[-1]) >= chunk_s:
            starts.append(key)
    chunks: list[Chunk] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else None
        first = bisect.bisect_left(pts, start)
        last = bisect.bisect_left(pts, end) if end is not None else len(pts)
        warm = pts[max(first - warmup_frames, 0)] if i > 0 else start
        chunks.append(Chunk(i, start, end, warm, last - first))
    return chunks
