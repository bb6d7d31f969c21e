"""The control panel driving the real engine: Start/Stop with model doubles and a recording virtual
camera, live preset changes, a missing virtual-camera driver, model errors, and a GUI thread that is
never blocked for more than 50 ms while devices open and close and models reload."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

import gc
import time
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest
from PyQt6.QtCore import QObject, Qt, QTimer
from PyQt6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

import gui.controller as controller_module
from gui.app import freeze_startup_heap
from gui.config import ConfigStore
from gui.controller import ModelsState, RunState
from gui.main_window import MainWindow
from models.fakes.doubles import write_all
from realtime.core.contracts import FrameSource
from realtime.core.frames import VideoFrame
from tests.gui.test_gui_helpers import (
    SIZE,
    open_window,
    run_config,
    wait_for_face,
)
from tests.vcam_recorder import RecordingBackendHandle

MAX_GUI_BLOCK_MS = 50.0
SLOW_DEVICE_S = 0.4


# ---- fixtures and helpers -------------------------------------------------------------------------------


def frames_out(window: MainWindow) -> int:
    stats = window.controller.stats()
    return stats.frames_out if stats is not None else 0


class Heartbeat(QObject):
    """A 5 ms timer on the GUI thread; the longest gap between its ticks is the longest time the event
    loop was kept from running (by our code or by the GIL held elsewhere)."""

    def __init__(self, interval_ms: int = 5) -> None:
        super().__init__()
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._last = 0.0
        self.max_gap_ms = 0.0
        self.ticks = 0

    def start(self) -> None:
        self.reset()
        self._timer.start()

    def reset(self) -> None:
        self._last = time.perf_counter()
        self.max_gap_ms = 0.0

    def stop(self) -> None:
        self._timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.max_gap_ms = max(self.max_gap_ms, (now - self._last) * 1000.0)
        self._last = now
        self.ticks += 1


# ---- tests ----------------------------------------------------------------------------------------------


def test_start_sends_swapped_frames_to_the_virtual_camera_and_stop_releases_it(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, vcam_recorder: RecordingBackendHandle
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config(face_photo, vcam=True), vcam_recorder.name)
    wait_for_face(qtbot, window)

    qtbot.mouseClick(window.start_button, Qt.MouseButton.LeftButton)
    assert window.controller.state == RunState.STARTING  # the click returned before devices opened

    def swapping() -> None:
        assert window.controller.state == RunState.RUNNING
        assert window.controller.models == ModelsState.READY
        stats = window.controller.stats()
        assert stats is not None and stats.faces_swapped >= 3
        assert len(vcam_recorder.frames) >= 10
        assert window.preview.frames_shown >= 3

    qtbot.waitUntil(swapping, timeout=20_000)
    opened = vcam_recorder.opens[0]
    assert (opened.width, opened.height, opened.fps) == (SIZE[0], SIZE[1], 30.0)
    assert vcam_recorder.frames[-1].shape == (SIZE[1], SIZE[0], 3)
    assert window.start_button.text() == "Stop"
    # Refresh and Probe open cameras: a second open of the live camera disturbs the capture.
    assert (
        not window.input_panel.refresh_button.isEnabled() and not window.input_panel.probe_button.isEnabled()
    )
    # The labels refresh on a timer: on a loaded machine the first refresh may still be due.
    qtbot.waitUntil(lambda: "p99" in window.numbers.latency_label.text(), timeout=5_000)
    assert window.numbers.fps_label.text().split()[0].replace(".", "").isdigit()  # "29.8 fps", not "– fps"

    def shows_a_swap() -> None:
        shown = window.preview.last_frame
        assert window.preview.mode == "side_by_side" and shown is not None
        assert shown.original is not None  # side by side pairs each output with the input it came from
        # Swapped means the picture changed where the face is (a counter alone passed with the
        # pasted frame thrown away), and only there.
        changed = np.abs(shown.output.astype(np.int16) - shown.original).max(axis=2) > 20
        assert changed.sum() > 500 and changed.mean() < 0.5

    qtbot.waitUntil(shows_a_swap, timeout=10_000)  # (a frame fading in may be shown first)

    qtbot.mouseClick(window.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)
    assert vcam_recorder.closes == 1  # the virtual camera was released
    sent = len(vcam_recorder.frames)
    qtbot.wait(200)
    assert len(vcam_recorder.frames) == sent  # nothing sent after Stop
    assert window.start_button.text() == "Start"
    assert window.input_panel.refresh_button.isEnabled() and window.input_panel.probe_button.isEnabled()
    assert window.messages.texts() == []  # a clean run reports nothing


def test_a_preset_chosen_while_running_applies_live_without_a_restart(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config(face_photo, vcam=False))
    wait_for_face(qtbot, window)
    window.toggle_running()
    qtbot.waitUntil(lambda: frames_out(window) >= 5, timeout=15_000)
    settings = window.controller.engine_settings
    assert settings is not None and settings.detector.interval == 3  # balanced
    states: list[str] = []
    window.controller.state_changed.connect(states.append)
    before = frames_out(window)

    window.stage_panel.preset_combo.setCurrentText("ultra-low-latency")

    def applied() -> None:
        live = window.controller.engine_settings
        assert live is not None
        assert (live.detector.interval, live.detector.size) == (6, 320)  # the preset's values
        assert live.detector.model == "mtcnn"  # the user's own choice outlives the preset change
        assert (live.tracker.min_cutoff, live.tracker.beta) == (
            1.5,
            0.1,
        )  # ... the preset's keys are the preset's
        assert live.composite.disclosure_label  # the label checkbox survives a preset change

    qtbot.waitUntil(applied, timeout=5_000)
    # Advanced control, live too: one stage setting over the preset.
    window.stage_panel.widget_for("tracker.min_cutoff").setValue(0.4)  # type: ignore[attr-defined]
    qtbot.waitUntil(
        lambda: (
            window.controller.engine_settings is not None
            and window.controller.engine_settings.tracker.min_cutoff == pytest.approx(0.4)
        ),
        timeout=5_000,
    )
    qtbot.waitUntil(lambda: frames_out(window) > before + 5, timeout=5_000)
    assert states == []  # never stopped or restarted: the same engine kept running
    assert window.controller.state == RunState.RUNNING
    assert window.stage_panel.widget_for("detector.interval").value() == 6  # type: ignore[attr-defined]
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)


class SlowSource:
    """The test pattern behind a device that takes 0.4 s to open and 0.4 s to close, like a webcam."""

    def __init__(self, inner: FrameSource) -> None:
        self.inner = inner

    size = property(lambda self: self.inner.size)
    fps = property(lambda self: self.inner.fps)
    is_live = property(lambda self: self.inner.is_live)
    description = property(lambda self: self.inner.description)

    def open(self) -> None:
        time.sleep(SLOW_DEVICE_S)
        self.inner.open()

    def read(self) -> VideoFrame | None:
        return self.inner.read()

    def close(self) -> None:
        time.sleep(SLOW_DEVICE_S)
        self.inner.close()


def measure_start_reload_stop(
    qtbot: QtBot, window: MainWindow, beat: Heartbeat, swap_model: str
) -> dict[str, float]:
    gaps: dict[str, float] = {}
    beat.reset()
    qtbot.mouseClick(window.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: window.controller.models == ModelsState.READY and window.preview.frames_shown >= 5,
        timeout=20_000,
    )
    gaps["start"] = beat.max_gap_ms

    beat.reset()
    states: list[str] = []
    window.controller.models_changed.connect(lambda state, _text: states.append(state))
    # A swap model change needs new model sessions: the engine reloads them in the background.
    window.stage_panel.widget_for("swap.model").setCurrentText(swap_model)  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: states[-2:] == ["loading", "ready"], timeout=20_000)
    shown = window.preview.frames_shown
    qtbot.waitUntil(lambda: window.preview.frames_shown >= shown + 5, timeout=5_000)
    gaps["reload"] = beat.max_gap_ms

    beat.reset()
    qtbot.mouseClick(window.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)
    qtbot.wait(50)
    gaps["stop"] = beat.max_gap_ms
    return gaps


def test_gui_thread_is_never_blocked_over_50ms_by_start_stop_or_a_model_reload(
    qtbot: QtBot,
    tmp_path: Path,
    models_dir: Path,
    face_photo: Path,
    vcam_recorder: RecordingBackendHandle,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Opening and closing the input takes 0.4 s each here and the models reload on a swap model change;
    done on the GUI thread, any of them would stall it for hundreds of ms. (The detector is the
    near-free det_10g double and the pattern runs at 15 fps, so CPU-bound detection does not compete
    with the GUI for a small test machine's cores: on a real machine the models run on the GPU.)

    A design block repeats on every run; a scheduling hiccup (other processes on a busy test machine
    preempting a thread that holds the GIL) does not. So the cycle runs up to five times, and each
    phase's best run must stay under 50 ms.
    """
    real_make_source = controller_module.make_source
    monkeypatch.setattr(
        controller_module,
        "make_source",
        lambda cfg, provider="cpu": SlowSource(real_make_source(cfg, provider)),
    )
    config = run_config(face_photo, vcam=True, detector="det_10g", fps=15.0)
    window = open_window(qtbot, tmp_path, models_dir, config, vcam_recorder.name)
    wait_for_face(qtbot, window)
    freeze_startup_heap()  # as run_gui does once the window is up
    beat = Heartbeat()
    beat.start()
    rounds: list[dict[str, float]] = []
    for swap_model in ("inswapper_128_fp16", "inswapper_128") * 2 + ("inswapper_128_fp16",):
        rounds.append(measure_start_reload_stop(qtbot, window, beat, swap_model))
        if all(gap < MAX_GUI_BLOCK_MS for gap in rounds[-1].values()):
            break
    beat.stop()
    gc.unfreeze()

    best = {phase: min(r[phase] for r in rounds) for phase in rounds[0]}
    with capsys.disabled():
        shown = "; ".join(", ".join(f"{k} {v:.1f}" for k, v in r.items()) for r in rounds)
        print(f"\nlongest GUI-thread gap per run (ms): {shown}")
    assert beat.ticks > 100
    for phase, gap in best.items():
        assert gap < MAX_GUI_BLOCK_MS, f"GUI thread blocked {gap:.0f} ms during {phase} in every run"


def test_missing_virtual_camera_driver_shows_how_to_install_it_and_the_app_keeps_running(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, failing_vcam_backend: str
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config(face_photo, vcam=True), failing_vcam_backend)
    # The face is analysed in the background; a face that becomes usable mid-run restarts the run
    # (by design), so let it settle before starting.
    wait_for_face(qtbot, window)
    panel = window.output_panel.help_panel
    assert panel.isHidden()
    window.toggle_running()

    qtbot.waitUntil(lambda: not panel.isHidden(), timeout=10_000)
    fix = panel.fix_label.text()
    assert "sudo modprobe v4l2loopback" in fix and "v4l2loopback-dkms" in fix
    assert not panel.copy_button.isHidden()
    assert any("Virtual camera unavailable" in t for t in window.messages.texts())
    assert QApplication.activeModalWidget() is None  # told in the window, not in a dialog

    # Still usable: the preview runs, and Stop / Start work.
    shown = window.preview.frames_shown
    qtbot.waitUntil(lambda: window.preview.frames_shown >= shown + 5, timeout=10_000)
    assert window.controller.state == RunState.RUNNING
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)
    window.tabs.setCurrentIndex(1)  # the rest of the window still responds
    assert window.tabs.currentIndex() == 1


def test_a_model_that_fails_to_load_is_reported_in_the_window_and_the_preview_passes_through(
    qtbot: QtBot, tmp_path: Path, face_photo: Path
) -> None:
    models = tmp_path / "models"
    write_all(models)
    (models / "inswapper_128.onnx").unlink()  # the photo can be analysed, but the swap cannot load
    window = open_window(qtbot, tmp_path, models, run_config(face_photo, vcam=False))
    wait_for_face(qtbot, window)
    window.toggle_running()

    qtbot.waitUntil(lambda: window.controller.models == ModelsState.FAILED, timeout=15_000)
    errors = window.messages.texts()
    assert any("inswapper_128" in t for t in errors), errors
    shown = window.preview.frames_shown
    qtbot.waitUntil(lambda: window.preview.frames_shown >= shown + 5, timeout=10_000)
    assert window.controller.state == RunState.RUNNING  # passthrough, as the engine does
    assert window.preview.badge.startswith("Passthrough")
    assert QApplication.activeModalWidget() is None
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)


def test_recording_to_a_file_is_finalised_when_the_window_closes_mid_run(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    out = tmp_path / "clips" / "take1.mp4"
    config = run_config(face_photo, vcam=False, detector="det_10g")
    config = replace(config, output=replace(config.output, record=True, record_path=str(out)))
    window = open_window(qtbot, tmp_path, models_dir, config)
    wait_for_face(qtbot, window)
    window.toggle_running()
    qtbot.waitUntil(lambda: frames_out(window) >= 15, timeout=15_000)

    window.close()  # while running: the engine stops and the file is finalised, not left partial
    assert window.controller.state == RunState.IDLE or window.controller.state == RunState.STOPPING
    with av.open(str(out)) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames >= 15
    assert not list(out.parent.glob(".*partial*"))
    assert ConfigStore(tmp_path / "settings.toml").load().config.output.record_path == str(out)
