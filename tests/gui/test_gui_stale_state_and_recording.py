"""Nothing stale stays on the panel, and the outputs say what they are doing while they do it."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import cv2
import pytest
from PyQt6.QtCore import Qt
from pytestqt.qtbot import QtBot

from gui.config import ConfigStore, OutputConfig
from gui.controller import RunState
from gui.main_window import MainWindow
from models.fakes.detector_double import DEFAULT_FACE, frame_with_faces
from tests.gui.test_gui_helpers import (
    SIZE,
    open_window,
    run_config,
    services_for,
    wait_for_face,
)
from tests.vcam_recorder import RecordingBackendHandle


def wait_state(qtbot: QtBot, window: MainWindow, state: RunState) -> None:
    qtbot.waitUntil(lambda: window.controller.state == state, timeout=15_000)


def test_unticking_the_virtual_camera_takes_its_driver_advice_and_banner_down(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, failing_vcam_backend: str
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=True), failing_vcam_backend)
    window.toggle_running()
    panel = window.output_panel.help_panel
    qtbot.waitUntil(lambda: not panel.isHidden(), timeout=10_000)
    assert any("Virtual camera unavailable" in t for t in window.messages.texts())
    window.output_panel.vcam_check.setChecked(False)
    assert panel.isHidden()
    assert not any("Virtual camera unavailable" in t for t in window.messages.texts())
    wait_state(qtbot, window, RunState.RUNNING)  # restarted without it
    assert window.output_panel.vcam_state.text() == "Virtual camera: off"
    window.toggle_running()
    wait_state(qtbot, window, RunState.IDLE)


def test_a_runs_error_banner_goes_once_a_restarted_run_is_running(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    window.toggle_running()
    wait_state(qtbot, window, RunState.RUNNING)
    window.controller.message.emit("error", "The face swap failed on this frame: boom.")
    assert "boom" in " ".join(window.messages.texts())
    states: list[str] = []
    window.controller.state_changed.connect(states.append)
    window.controller.restart(window.plan)
    # The signals, not a poll of the state: a passthrough run can be running again between polls.
    qtbot.waitUntil(lambda: states[-1:] == [RunState.RUNNING.value] and RunState.STARTING.value in states,
                    timeout=15_000)  # fmt: skip
    assert not any("boom" in t for t in window.messages.texts())
    window.toggle_running()
    wait_state(qtbot, window, RunState.IDLE)


def test_the_graph_is_empty_after_stop_not_frozen_on_the_last_run(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    window.toggle_running()
    qtbot.waitUntil(lambda: window.graph.samples >= 3, timeout=15_000)
    window.toggle_running()
    wait_state(qtbot, window, RunState.IDLE)
    assert window.graph.samples == 0 and window.numbers.fps_label.text() == "– fps"


def test_another_detector_checks_the_photos_already_added_again(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    # The built-in detector finds no face in a plain skin-coloured oval; the det_10g double does.
    blank = tmp_path / "oval.png"
    cv2.imwrite(str(blank), frame_with_faces([DEFAULT_FACE], 320, 240))
    window = open_window(qtbot, tmp_path, models_dir, run_config(blank, vcam=False, detector="mtcnn"))
    card = window.gallery.card(blank)
    qtbot.waitUntil(lambda: card.result is not None, timeout=15_000)
    assert card.result is not None and not card.result.usable
    window.set_override("detector.model", "det_10g")
    qtbot.waitUntil(lambda: card.result is not None and card.result.usable, timeout=15_000)
    assert window.gallery.active == blank


def test_recording_shows_rec_with_time_and_size_and_a_restart_says_a_new_take_began(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, vcam_recorder: RecordingBackendHandle
) -> None:
    opened: list[Path] = []
    services = replace(
        services_for(tmp_path, models_dir, vcam_recorder.name),
        open_path=lambda path, _failed: opened.append(path),
    )
    take = tmp_path / "takes" / "call.mp4"
    take.parent.mkdir()
    config = run_config(face_photo, vcam=True)
    config = replace(config, output=replace(config.output, record=True, record_path=str(take)))
    window = MainWindow(services, ConfigStore(services.config_path), config)
    qtbot.addWidget(window)
    window.show()
    wait_for_face(qtbot, window)
    assert window.rec_indicator.isHidden()
    window.toggle_running()
    wait_state(qtbot, window, RunState.RUNNING)
    rec = window.rec_indicator
    assert not rec.isHidden() and rec.path == take and rec.toolTip() == f"Recording to {take}"
    qtbot.waitUntil(
        lambda: re.fullmatch(r"● REC 0:0[1-9] · 0\.[0-9] MB", rec.text()) is not None, timeout=10_000
    )
    qtbot.waitUntil(lambda: not rec.text().endswith(" 0.0 MB"), timeout=15_000)  # the size grows
    assert window.output_panel.take_label.text() == f"Recording to: {take}"
    vcam = window.output_panel.vcam_state.text()
    assert vcam == f"Virtual camera: {vcam_recorder.device_name}, {SIZE[0]}x{SIZE[1]} @ 30", vcam

    window.output_panel.vcam_fps.setValue(25)  # an output change restarts the run: a new take
    second = take.with_name("call-2.mp4")
    qtbot.waitUntil(
        lambda: window.output_panel.take_label.text() == f"Recording to: {second}", timeout=15_000
    )
    assert any(
        "a new take began, call-2.mp4" in t and "call.mp4, is complete in the same folder" in t
        for t in window.messages.texts()
    )
    # Frames, not time: on a busy machine a Stop right after the restart found the new take empty
    # ("No frames were produced, so call-2.mp4 was not written").
    qtbot.waitUntil(lambda: (stats := window.controller.stats()) is not None and stats.frames_out >= 3,
                    timeout=30_000)  # fmt: skip
    window.toggle_running()
    wait_state(qtbot, window, RunState.IDLE)
    # The note was about that run: it went with it (it stayed up through later runs).
    assert not any("a new take began" in t for t in window.messages.texts())
    assert rec.isHidden() and window.output_panel.take_label.text() == f"Last recording: {second}"
    assert take.is_file() and second.is_file()
    qtbot.mouseClick(window.output_panel.open_folder_button, Qt.MouseButton.LeftButton)
    assert opened == [take.parent]
    assert window.output_panel.vcam_state.text() == "Virtual camera: not running"


def test_the_readout_explains_dropped_frames_and_advises_the_audio_delay_from_p99(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    assert "skipped so the output never lags" in window.numbers.dropped_label.toolTip().replace("\n", " ")
    window.output_panel.set_latency(42.0, 97.0)
    assert window.output_panel.latency_value.text().startswith("Suggested audio delay: 97 ms")
    assert OutputConfig().vcam  # (the default sends to the virtual camera: its state is shown)


def test_the_status_bar_says_which_faces_are_in_the_privacy_fallback(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from realtime.api import Metrics

    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    metrics = Metrics()
    metrics.fallbacks(("not confirmed yet", "held"))
    monkeypatch.setattr(window.controller, "stats", metrics.snapshot)
    window.toggle_running()
    wait_state(qtbot, window, RunState.RUNNING)
    qtbot.waitUntil(
        lambda: (
            window.numbers.fallback_label.text() == "2 faces in privacy fallback (not confirmed yet, held)"
        ),
        timeout=5_000,
    )
    assert "privacy fallback" in window.numbers.fallback_label.toolTip()
    metrics.fallbacks(())  # swapped again: the note goes
    qtbot.waitUntil(lambda: window.numbers.fallback_label.text() == "", timeout=5_000)
    window.toggle_running()
    wait_state(qtbot, window, RunState.IDLE)


def test_a_new_take_in_another_folder_says_where_the_one_before_is(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    """The note said the take before was "complete in the same folder" when the record path had
    moved to another folder."""
    from realtime.api import OutputInfo

    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    first, second = tmp_path / "monday" / "call.mp4", tmp_path / "tuesday" / "call.mp4"
    window.controller.described.emit("run", OutputInfo(record_path=first))
    window.controller.described.emit("run", OutputInfo(record_path=second))  # restarted elsewhere
    notes = [t for t in window.messages.texts() if "a new take began" in t]
    assert len(notes) == 1 and f"{second}" in notes[0] and f"{first}, is complete." in notes[0]
    assert "same folder" not in notes[0]
