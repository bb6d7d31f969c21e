"""What the running outputs are doing, said in the window: the REC indicator, and the preview's
badge while a local run passes frames through unswapped.

The recording's file comes from the sinks themselves (the controller sends their OutputInfo with
the start); the indicator shows how long and how much has been written to it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QLabel, QWidget

from gui.controller import ModelsState

TICK_MS = 500


def local_badge(models: ModelsState, previous_running: bool, has_face: bool, models_missing: bool) -> str:
    """The preview's badge for a running local engine: why frames pass through unswapped, or
    that new models are on their way; "" while it swaps."""
    if previous_running:
        if models == ModelsState.LOADING:
            return "Loading new models… (the previous ones are still swapping)"
        return "New models did not load: the previous ones keep swapping (see the message above)"
    if models in (ModelsState.NONE, ModelsState.LOADING):
        return "Passthrough: loading models…"
    if models == ModelsState.FAILED:
        return "Passthrough: the models did not load (see the message above)"
    if has_face:
        return ""
    if models_missing:
        return "Passthrough: swapping needs the face models (see the message above)"
    return "Passthrough: no usable source face chosen (Faces tab)"


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
