"""Frame sinks: the virtual camera, a video or image file, or nothing, behind one small Protocol.

The sinks live in their own modules (vcam_sink, file_sinks, partial_files, frame_fit) and the
router that picks one for an output name in realtime/io/outputs.py; this module keeps the names
the rest of the code imports from here, and the null sink.
"""

from __future__ import annotations

from realtime.core.frames import VideoFrame

__all__ = [
    "NullSink",
]


class NullSink:
    """Discards frames and counts them (benchmarks, dry runs)."""

    def __init__(self) -> None:
        self.frames_sent = 0
        self.size = (0, 0)

    @property
    def description(self) -> str:
        return "null (frames discarded)"

    def open(self, width: int, height: int, fps: float) -> None:
        self.size = (width, height)
        self.frames_sent = 0

    def send(self, frame: VideoFrame) -> None:
        self.frames_sent += 1

    def close(self) -> None:
        """Nothing to finalise."""

    def abort(self) -> None:
        """Nothing to discard."""
