"""The panel's outputs carry the run's watermark: what `--output window` paints (read back from the
window itself, as a screen capture would) and the panel's recording, which is signed on its own
finishing path naming the run its frames carry."""

from __future__ import annotations

import io
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PyQt6.QtGui import QImage
from pytestqt.qtbot import QtBot

from gui.controller import RunState
from gui.window_sink import WindowSink
from main import main
from realtime.api import ExitCode, Run, Settings, VideoFrame
from realtime.core.watermark.detect import MarkDetector
from tests.engine_fakes import FakeSource
from tests.gui.test_gui_helpers import open_window, run_config
from tests.realtime.core.watermark.marked_clips import real_clip

SIZE = (640, 360)
RUN_ID = "5ca1ab1e"


class PhotoSource(FakeSource):
    """A real photo drifting, paced at about 30 fps so the window paints most frames."""

    def read(self) -> VideoFrame | None:
        if self._next >= self.frames:
            return None
        i = self._next
        self._next += 1
        time.sleep(1 / 30)
        return VideoFrame(real_clip(i + 1, SIZE)[i], i, time.perf_counter(), i / 30.0)


def painted(sink: WindowSink) -> np.ndarray:
    """The window's pixels as BGR, as a screen capture of it sees them."""
    image = sink.window.grab().toImage().convertToFormat(QImage.Format.Format_BGR888)
    h, w = image.height(), image.width()
    data = np.frombuffer(image.constBits().asstring(image.sizeInBytes()), np.uint8)  # type: ignore[union-attr]
    return data.reshape(h, image.bytesPerLine())[:, : w * 3].reshape(h, w, 3).copy()


def test_what_the_window_paints_carries_the_runs_mark(qtbot: QtBot) -> None:
    sink = WindowSink("watermark")
    qtbot.addWidget(sink.ensure_window())
    run = Run(PhotoSource(frames=60, size=SIZE), sink, Settings(), run_id=RUN_ID)
    worker = threading.Thread(target=lambda: (run.start(), run.watch(), run.stop()))
    worker.start()
    detector = MarkDetector()
    seen: set[int] = set()
    try:
        qtbot.waitUntil(lambda: sink.frames_shown > 0, timeout=20_000)
        while worker.is_alive() and len(seen) < 20:
            qtbot.wait(30)
            shown = sink.last_shown_index
            if shown is not None and shown not in seen and sink.window.isVisible():
                seen.add(shown)
                detector.add(painted(sink))
    finally:
        worker.join(30)
    assert len(seen) >= 5
    found = detector.decide(wide=True)
    assert found.marked and found.payload is not None and found.payload.run_id == RUN_ID


def test_the_panels_recording_is_marked_and_signed_naming_its_run(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FACECAST_PROVENANCE_DIR", str(tmp_path / "key"))
    take = tmp_path / "take.mp4"
    config = run_config((), vcam=False)
    config = replace(
        config,
        input=replace(config.input, width=1280, height=720),
        output=replace(config.output, record=True, record_path=str(take)),
    )
    window = open_window(qtbot, tmp_path, models_dir, config)
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.RUNNING, timeout=15_000)
    qtbot.waitUntil(lambda: (s := window.controller.stats()) is not None and s.frames_out >= 70,
                    timeout=60_000)  # fmt: skip
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=30_000)
    takes = sorted(tmp_path.glob("take*.mp4"))
    assert len(takes) == 1, takes
    out = io.StringIO()
    assert main(["verify", str(takes[0])], out=out) == ExitCode.OK, out.getvalue()
    text = out.getvalue()
    assert "FaceCast watermark found: run " in text and "the same run as the watermark" in text, text
