"""What a run's outputs are writing, read from the sinks themselves (not from their descriptions).

Two small protocols: a sink that writes something a user looks for reports it (`output_info()`:
the video file its path, the virtual camera its device, size and rate once open), and a sink that
passes frames on to others names them (`inner_sinks`: a fan-out, a background writer, an optional
output, a preview tap). `collect_output_info` walks a sink through both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from realtime.core.contracts import FrameSink


@dataclass(frozen=True, slots=True)
class OutputInfo:
    """record_path: the take being written; vcam: "device, WxH @ fps" while the camera is open."""

    record_path: Path | None = None
    vcam: str | None = None

    def merged(self, other: OutputInfo) -> OutputInfo:
        """This info, its gaps filled from `other` (the first recording and camera found win)."""
        return OutputInfo(
            self.record_path if self.record_path is not None else other.record_path,
            self.vcam if self.vcam is not None else other.vcam,
        )


@runtime_checkable
class ReportsOutput(Protocol):
    """A sink that says what it writes."""

    def output_info(self) -> OutputInfo: ...


@runtime_checkable
class WrapsSinks(Protocol):
    """A sink that sends its frames on to other sinks; only those that receive them are named."""

    @property
    def inner_sinks(self) -> Sequence[FrameSink]: ...


def collect_output_info(sink: FrameSink) -> OutputInfo:
    """What `sink` and every sink inside it write, depth first."""
    info = sink.output_info() if isinstance(sink, ReportsOutput) else OutputInfo()
    if isinstance(sink, WrapsSinks):
        for inner in sink.inner_sinks:
            info = info.merged(collect_output_info(inner))
    return info
