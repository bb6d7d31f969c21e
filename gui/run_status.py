"""What the running outputs are doing, said in the window: the REC indicator and the outputs' names.

The controller describes a started run as "<source> → <sinks>"; the recording's file and the
virtual camera's device are read from there (the sinks name them in their descriptions).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QLabel, QWidget

TICK_MS = 500
_RECORDING = re.compile(r"video file (?P<path>.+?) \((?P<codec>[^()]+)\)(?= \+ |$)")
_VCAM = re.compile(r"virtual camera (?P<device>.+?) \((?P<size>\d+x\d+) @ (?P<fps>[\d.]+) fps\)")


@dataclass(frozen=True, slots=True)
class RunOutputs:
    """record_path: the take being written; vcam: "device, WxH @ fps" when the camera is open."""

    record_path: Path | None = None
    vcam: str | None = None


def parse_outputs(description: str) -> RunOutputs:
    sinks = description.split(" → ", 1)[-1]
    recording = _RECORDING.search(sinks)
    vcam = _VCAM.search(sinks)
    return RunOutputs(
        Path(recording["path"]) if recording else None,
        f"{vcam['device']}, {vcam['size']} @ {vcam['fps']}" if vcam else None,
    )


def recording_size(path: Path) -> int:
    """Bytes written so far: the recorder writes a hidden `.NAME.PID-TAG.partial.EXT` beside the
    file until it is finalised, then renames it."""
    if path.is_file():
        return path.stat().st_size
    prefix, suffix = f".{path.stem}.{os.getpid()}-", f".partial{path.suffix}"
    try:
        parts = [p for p in path.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(suffix)]
    except OSError:
        return 0
    return max((p.stat().st_size for p in parts if p.is_file()), default=0)


def duration_text(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class RecIndicator(QLabel):
    """ "● REC 0:12 · 3.4 MB" while a take is written; hidden otherwise."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setStyleSheet("color:#ff5050; font-weight:bold; padding:0 6px;")
        self._path: Path | None = None
        self._since = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self.tick)
        self.hide()

    @property
    def path(self) -> Path | None:
        return self._path

    def start(self, path: Path) -> None:
        if path != self._path:
            self._since = time.monotonic()
        self._path = path
        self.setToolTip(f"Recording to {path}")
        self.tick()
        self.show()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._path = None
        self.hide()

    def tick(self) -> None:
        if self._path is None:
            return
        size = recording_size(self._path)
        elapsed = duration_text(time.monotonic() - self._since)
        self.setText(f"● REC {elapsed} · {size / 1e6:,.1f} MB")
