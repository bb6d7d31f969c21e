"""Editing while a run is going: restarts take the latest state, recordings survive them, and what
the window shows matches what runs (each case was a bug found by driving the real window)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import pytest
from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QAbstractSpinBox, QApplication, QComboBox, QWidget
from pytestqt.qtbot import QtBot

import gui.controller as controller_module
import realtime.wiring.gallery_stages as swap_stages
from gui.config import ConfigStore, InputConfig
from gui.controller import ModelsState, RunState
from gui.main_window import MainWindow
from realtime.io.cameras import CameraInfo, CameraMode
from tests.gui.test_gui_helpers import (
    open_window,
    run_config,
    services_for,
    wait_for_face,
    write_face_photo,
)
from tests.gui.test_gui_run import SlowSource


@pytest.fixture(scope="module")
def face_photo2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_face_photo(tmp_path_factory.mktemp("photos2") / "other.png", variant=1)


def running(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: window.controller.state == RunState.RUNNING, timeout=10_000)


def started(qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, **output: Any) -> MainWindow:
    config = run_config(face_photo, vcam=False, detector="det_10g")
    if output:
        config = replace(config, output=replace(config.output, **output))
    window = open_window(qtbot, tmp_path, models_dir, config)
    wait_for_face(qtbot, window)
    window.toggle_running()
    running(qtbot, window)
    return window


def source_of(window: MainWindow) -> Any:
    engine = window.controller._engine
    assert engine is not None
    return engine._source


def test_typing_a_rate_restarts_once_with_the_whole_number(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    window = started(qtbot, tmp_path, models_dir, face_photo)
    spin = window.input_panel.fps_spin
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, "15")  # "1" alone restarted the run at 1 fps
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    qtbot.wait(300)
    running(qtbot, window)
    qtbot.wait(300)
    assert source_of(window).fps == 15.0


def test_two_quick_changes_both_reach_the_restarted_run(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    window = started(qtbot, tmp_path, models_dir, face_photo)
    window.input_panel.mode_combo.setCurrentIndex(0)  # 640x480
    window.input_panel.fps_spin.setValue(20)  # and, a moment later, the rate
    running(qtbot, window)
    qtbot.wait(300)
    assert (source_of(window).size, source_of(window).fps) == ((640, 480), 20.0)


def slow_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every source the controller opens from now on is slow to open and close (a restart takes a while)."""
    real = controller_module.make_source
    monkeypatch.setattr(
        controller_module, "make_source", lambda c, provider="cpu": SlowSource(real(c, provider))
    )


def test_a_setting_changed_during_a_restart_is_the_one_that_runs(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_sources(monkeypatch)
    window = started(qtbot, tmp_path, models_dir, face_photo)
    window.output_panel.vcam_check.setChecked(True)  # an output change: restart
    assert window.controller.state == RunState.STOPPING
    window.stage_panel.widget_for("detector.interval").setValue(7)  # tuning goes on meanwhile
    running(qtbot, window)
    qtbot.wait(300)
    live = window.controller.engine_settings
    assert live is not None and live.detector.interval == 7


def test_stop_during_a_restart_stops(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_sources(monkeypatch)
    window = started(qtbot, tmp_path, models_dir, face_photo)
    window.input_panel.fps_spin.setValue(20)  # restart
    assert window.controller.state == RunState.STOPPING
    window.toggle_running()  # Ctrl+Return: stop it
    qtbot.wait(2000)
    assert window.controller.state == RunState.IDLE


def test_a_restart_while_recording_keeps_the_recording_made_so_far(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, face_photo2: Path
) -> None:
    take = tmp_path / "take1.mp4"
    window = started(qtbot, tmp_path, models_dir, face_photo, record=True, record_path=str(take))

    def frames() -> int:
        stats = window.controller.stats()
        return stats.frames_out if stats else 0

    qtbot.waitUntil(lambda: frames() >= 30, timeout=20_000)
    before = frames()
    window.gallery.add_photos([face_photo2])  # a second face: the run restarts
    qtbot.waitUntil(lambda: window.controller.state == RunState.STOPPING, timeout=10_000)
    running(qtbot, window)
    qtbot.waitUntil(lambda: frames() >= 10, timeout=10_000)
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=10_000)
    with av.open(str(take)) as container:
        assert sum(1 for _ in container.decode(video=0)) >= before  # not replaced by the next take
    assert (tmp_path / "take1-2.mp4").exists()


def test_ctrl_return_uses_a_path_typed_just_before(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    config = run_config(face_photo, vcam=False, detector="det_10g")
    config = replace(
        config, output=replace(config.output, record=True, record_path=str(tmp_path / "old.mp4"))
    )
    window = open_window(qtbot, tmp_path, models_dir, config)
    wait_for_face(qtbot, window)
    window.activateWindow()
    edit = window.output_panel.record_edit
    window.tabs.setCurrentIndex(2)
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, str(tmp_path / "new.mp4"))
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    running(qtbot, window)
    qtbot.wait(300)
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=10_000)
    assert (tmp_path / "new.mp4").exists() and not (tmp_path / "old.mp4").exists()


def test_a_live_reload_is_not_shown_as_passthrough(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = swap_stages.GalleryFaceSwap.__call__
    calls: list[int] = []

    def slow(self: Any, settings: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            time.sleep(1.5)  # a real model takes seconds to load
        return real(self, settings)

    monkeypatch.setattr(swap_stages.GalleryFaceSwap, "__call__", slow)
    window = started(qtbot, tmp_path, models_dir, face_photo)
    qtbot.waitUntil(lambda: window.controller.models == ModelsState.READY, timeout=20_000)
    window.stage_panel.widget_for("swap.model").setCurrentText("inswapper_128_fp16")
    qtbot.waitUntil(lambda: window.controller.models == ModelsState.LOADING, timeout=5_000)
    qtbot.wait(300)
    assert not window.preview.badge.startswith("Passthrough")  # the previous models still swap
    assert "previous" in window.preview.badge
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)


def test_the_stage_timings_clear_after_stop(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    window = started(qtbot, tmp_path, models_dir, face_photo)
    qtbot.waitUntil(lambda: window.stage_panel.boxes[0].ms_label.text() != "– ms", timeout=15_000)
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=10_000)
    qtbot.wait(300)
    assert all(box.ms_label.text() == "– ms" for box in window.stage_panel.boxes)


# ----------------------------------------------------------------------------------------- cameras

MODES = (CameraMode(1280, 720, 30.0, "MJPG"), CameraMode(1280, 720, 60.0, "MJPG"))
CAMERAS = [CameraInfo(0, "Built-in", "/dev/video0"), CameraInfo(2, "USB cam", "/dev/video2")]


def camera_window(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, **inputs: Any
) -> MainWindow:
    services = replace(
        services_for(tmp_path, models_dir), list_cameras=lambda: CAMERAS, probe_modes=lambda index: MODES
    )
    config = run_config(face_photo, vcam=False)
    config = replace(config, input=InputConfig(**{"width": 1280, "height": 720, "fps": 30.0, **inputs}))
    window = MainWindow(services, ConfigStore(services.config_path), config)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.input_panel.camera_combo.count() == 2, timeout=5000)
    return window


def test_a_probed_60fps_mode_sets_the_rate_too(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    panel = camera_window(qtbot, tmp_path, models_dir, face_photo, kind="camera", camera_index=0).input_panel
    panel.probe_current_camera()
    qtbot.waitUntil(lambda: "delivers:" in panel.camera_status.text(), timeout=5000)
    items = [panel.mode_combo.itemText(i) for i in range(panel.mode_combo.count())]
    panel.mode_combo.setCurrentIndex(items.index("1280x720@60 MJPG"))
    assert panel.config().fps == 60.0 and panel.fps_spin.value() == 60.0


def pick(combo: QComboBox, position: int) -> None:
    """What a user's click on an item does: it becomes current, and `activated` says it was picked."""
    combo.setCurrentIndex(position)
    combo.activated.emit(position)


def test_picking_a_camera_uses_it(qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path) -> None:
    panel = camera_window(qtbot, tmp_path, models_dir, face_photo, kind="pattern").input_panel
    pick(panel.camera_combo, 1)  # "USB cam"
    assert panel.config().kind == "camera" and panel.config().camera_index == 2
    assert panel.camera_radio.isChecked()


def test_picking_the_camera_already_shown_uses_it(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    """With one webcam it is shown from the start, so picking it changed nothing (no index change)
    and Start still ran the test pattern."""
    panel = camera_window(qtbot, tmp_path, models_dir, face_photo, kind="pattern").input_panel
    shown = panel.camera_combo.currentIndex()
    assert shown >= 0 and panel.config().kind == "pattern"
    pick(panel.camera_combo, shown)
    assert panel.config().kind == "camera" and panel.camera_radio.isChecked()


def test_the_mouse_wheel_scrolls_past_settings_it_was_not_meant_for(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    """Scrolling the page over a combo or spin box changed it (the swap model, the detector
    interval, the camera size), reloading models or restarting the run on the way past."""
    from PyQt6.QtCore import QPoint, QPointF, Qt
    from PyQt6.QtGui import QWheelEvent

    window = camera_window(qtbot, tmp_path, models_dir, face_photo, kind="pattern")
    boxes = [
        w for w in window.findChildren(QComboBox) + window.findChildren(QAbstractSpinBox) if w.isEnabled()
    ]
    assert len(boxes) > 5

    def value(w: QWidget) -> object:
        return w.currentIndex() if isinstance(w, QComboBox) else w.text()

    def wheel(w: QWidget) -> None:
        event = QWheelEvent(
            QPointF(5, 5), QPointF(w.mapToGlobal(QPoint(5, 5))), QPoint(0, 0), QPoint(0, -120),
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False,
        )  # fmt: skip
        QApplication.sendEvent(w, event)

    window.setFocus()
    before = [value(w) for w in boxes]
    for w in boxes:
        wheel(w)
    assert [value(w) for w in boxes] == before
    # Clicked into, a box takes the wheel as usual.
    combo = next(w for w in boxes if isinstance(w, QComboBox) and w.count() > 1)
    combo.setFocus()
    qtbot.waitUntil(combo.hasFocus, timeout=2000)
    start = combo.currentIndex()
    wheel(combo)
    assert combo.currentIndex() != start


def test_a_saved_camera_that_is_gone_says_so(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    panel = camera_window(qtbot, tmp_path, models_dir, face_photo, kind="camera", camera_index=5).input_panel
    assert "not connected" in panel.camera_combo.placeholderText()


def test_settings_that_cannot_be_saved_on_exit_are_reported_on_stderr(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "settings.toml"
    target.mkdir()  # unwritable as a file
    services = services_for(tmp_path, models_dir)
    window = MainWindow(services, ConfigStore(target), run_config(face_photo, vcam=False))
    qtbot.addWidget(window)
    window.show()
    window.close()  # the window is going away: a banner in it would never be seen
    assert "Could not save settings" in capsys.readouterr().err
