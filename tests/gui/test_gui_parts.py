"""The control panel's parts on their own: output fan-out, the optional virtual camera, the preview's
latest-wins hand-off, settings composition, the stage panel and the test pattern source."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

import threading
import time

import numpy as np
import pytest
from PyQt6.QtWidgets import QComboBox
from pytestqt.qtbot import QtBot

from gui.composer import SettingsComposer
from gui.preview import OriginalTap, PreviewFeed
from gui.stage_panel import STAGES, Control, StagePanel
from models.wrappers.mtcnn import MTCNN
from realtime.core.contracts import FrameSink, FrameSource
from realtime.core.errors import SinkError, VirtualCameraUnavailableError
from realtime.core.frames import VideoFrame
from realtime.core.metrics import Summary
from realtime.core.settings import Settings, SettingsError
from realtime.io.fan_out import BackgroundSink, FanOutSink, OptionalSink
from realtime.io.test_pattern import TestPatternSource
from tests.engine_fakes import FakeSource, RecordingSink, frame_with_index


def frame(index: int, value: int = 0) -> VideoFrame:
    """A small frame whose pixel (0, 0) carries its index (read back by RecordingSink)."""
    image = np.full((24, 32, 3), value, np.uint8)
    image[0, 0] = frame_with_index(index)[0, 0]
    return VideoFrame(image, index, time.perf_counter())


class BrokenSink(RecordingSink):
    def open(self, width: int, height: int, fps: float) -> None:
        raise SinkError("Cannot write /nowhere/out.mp4.")


class MissingVcam(RecordingSink):
    def open(self, width: int, height: int, fps: float) -> None:
        raise VirtualCameraUnavailableError("Virtual camera unavailable: no v4l2loopback.")


# ---- outputs ---------------------------------------------------------------------------------------------


def test_fan_out_sends_every_frame_to_every_output_and_closes_them_all() -> None:
    a, b = RecordingSink(), RecordingSink()
    fan = FanOutSink([a, b])
    assert isinstance(fan, FrameSink)
    fan.open(32, 24, 30.0)
    for i in range(3):
        fan.send(frame(i))
    fan.close()
    assert a.indices == b.indices == [0, 1, 2]
    assert a.closed and b.closed
    assert FanOutSink([]).description == "preview only"


def test_fan_out_that_cannot_open_one_output_releases_the_others() -> None:
    opened = RecordingSink()
    fan = FanOutSink([opened, BrokenSink()])
    with pytest.raises(SinkError):
        fan.open(32, 24, 30.0)
    assert opened.aborted  # nothing left open or half-written


def test_a_missing_virtual_camera_is_reported_once_and_the_other_outputs_carry_on() -> None:
    reported: list[str] = []
    record = RecordingSink()
    fan = FanOutSink([record, OptionalSink(MissingVcam(), lambda exc: reported.append(exc.user_message()))])
    fan.open(32, 24, 30.0)
    fan.send(frame(0))
    fan.close()
    assert reported == ["Virtual camera unavailable: no v4l2loopback."]
    assert record.indices == [0] and record.closed


# ---- preview hand-off -----------------------------------------------------------------------------------


def test_a_failing_recording_stops_alone_and_the_virtual_camera_carries_on() -> None:
    """A full recording disk stopped the whole run: the call's camera froze."""
    from realtime.core.engine import Engine

    recording, vcam = RecordingSink(fail_at=5), RecordingSink()
    failures: list[str] = []
    fan = FanOutSink([BackgroundSink(recording, lambda e: failures.append(e.user_message())), vcam])
    engine = Engine(FakeSource(frames=40), fan, Settings())
    engine.start()
    assert engine.wait(10)
    assert engine.error is None
    assert vcam.indices == list(range(40)) and vcam.closed
    assert len(recording.indices) == 5 and recording.aborted and not recording.closed  # (drops allowed)
    assert len(failures) == 1 and "No space left" in failures[0]


def test_a_virtual_camera_lost_mid_run_keeps_the_recording() -> None:
    """The engine aborted every output when the virtual camera failed: the recording was deleted."""
    from realtime.core.engine import Engine

    recording, vcam = RecordingSink(), RecordingSink(fail_at=10)
    lost: list[str] = []
    background = BackgroundSink(recording, lambda e: None)
    fan = FanOutSink([background, OptionalSink(vcam, lambda e: None, lambda e: lost.append(str(e)))])
    # Paced as a clip plays: an unpaced burst of 40 frames can fill the recording's queue on a
    # loaded machine before its thread writes one, and most would be counted as dropped.
    engine = Engine(FakeSource(frames=40, fps=100.0, pace=True), fan, Settings())
    engine.start()
    assert engine.wait(10)
    assert engine.error is None and len(lost) == 1
    # Every frame reached the recording (a loaded machine may drop some at its queue: counted).
    assert len(recording.indices) + background.dropped == 40 and recording.indices == sorted(
        recording.indices
    )
    assert len(recording.indices) > 10 and recording.closed and not recording.aborted
    assert max(recording.indices) >= 30  # it went on recording after the camera was lost
    assert vcam.aborted


def test_closing_a_recording_stuck_on_a_stalled_disk_returns_in_bounded_time() -> None:
    """Engine.stop(timeout=1) took 71 s behind a recording on a stalled disk (Stop hung)."""
    recording = RecordingSink(send_delay_s=1.0)
    background = BackgroundSink(recording, lambda e: None, depth=2)
    background.finish_timeout_s = 0.3
    background.open(64, 48, 30.0)
    for i in range(5):
        background.send(VideoFrame(frame_with_index(i), i, time.perf_counter()))
    t0 = time.perf_counter()
    background.close()
    assert time.perf_counter() - t0 < 0.8
    deadline = time.monotonic() + 5.0
    while not recording.closed and time.monotonic() < deadline:  # finished in the background
        time.sleep(0.05)
    assert recording.closed and not recording.aborted


def test_a_slow_recording_does_not_hold_up_the_other_outputs() -> None:
    """The H.264 encode on the sink thread added ~60 ms to the virtual camera's latency."""
    recording = RecordingSink(send_delay_s=0.05)
    background = BackgroundSink(recording, lambda e: None, depth=4)
    fan = FanOutSink([background, RecordingSink()])
    fan.open(64, 48, 30.0)
    t0 = time.perf_counter()
    for i in range(20):
        fan.send(VideoFrame(frame_with_index(i), i, time.perf_counter()))
    assert time.perf_counter() - t0 < 0.2  # 20 frames in a burst: the recorder alone takes 1 s
    fan.close()
    assert recording.closed
    written = len(recording.indices)
    assert written + background.dropped == 20 and 4 <= written < 20  # the queue's frames, then drops
    assert recording.indices == sorted(recording.indices)


def test_the_preview_and_the_thumbnails_show_colours_as_they_are(qtbot: QtBot) -> None:
    """OpenCV frames are BGR: a mutation showing them as RGB (red and blue swapped) passed every test."""
    from gui.gallery import pixmap_from_bgr
    from gui.preview import PreviewFrame, PreviewWidget

    red_bgr = np.zeros((90, 160, 3), np.uint8)
    red_bgr[..., 2] = 230  # pure red in BGR order
    thumb = pixmap_from_bgr(red_bgr).toImage().pixelColor(80, 45)
    assert (thumb.red(), thumb.green(), thumb.blue()) == (230, 0, 0)

    widget = PreviewWidget()
    qtbot.addWidget(widget)
    widget.set_mode("swapped")
    widget.resize(320, 180)
    widget.show_frame(PreviewFrame(red_bgr, None, 0))
    shown = widget.grab().toImage().pixelColor(160, 90)
    assert shown.red() > 200 and shown.green() < 20 and shown.blue() < 20


def test_the_preview_keeps_only_the_newest_frame_and_signals_once(qtbot: QtBot) -> None:
    feed = PreviewFeed(OriginalTap())
    signals: list[int] = []
    feed.frame_ready.connect(lambda: signals.append(1))

    def sink_thread() -> None:  # a burst faster than the GUI thread runs
        for i in range(5):
            feed.offer(frame(i))

    thread = threading.Thread(target=sink_thread)
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: len(signals) >= 1)
    qtbot.wait(20)
    taken = feed.take()
    assert taken is not None and taken.index == 4  # the newest; 0-3 were never converted
    assert len(signals) == 1 and feed.skipped == 4
    assert feed.take() is None


def test_the_original_is_paired_with_its_own_output_frame() -> None:
    tap = OriginalTap(capacity=4)
    tap.set_enabled(True)
    for i in range(6):
        tap.put(frame(i, value=i))  # capture thread; 0 and 1 fall out of the bounded store
    assert tap.take(1) is None
    original = tap.take(3)  # frame 2 was dropped by the engine: discarded on the way
    assert original is not None and int(original[1, 1, 0]) == 3
    assert tap.take(2) is None
    tap.set_enabled(False)
    tap.put(frame(9))
    assert tap.take(9) is None  # copies only while a view needs the original


# ---- settings -------------------------------------------------------------------------------------------


def test_a_preset_change_keeps_the_users_model_choices_but_not_what_the_preset_sets() -> None:
    composer = SettingsComposer("balanced")
    composer.set_override("detector.model", "mtcnn")
    composer.set_override("detector.interval", 2)
    composer.set_preset("ultra-low-latency")
    settings = composer.effective()
    assert settings.detector.model == "mtcnn"  # the user's choice stays
    assert settings.detector.interval == 6  # the preset's own key wins
    assert settings.composite.disclosure_label  # on by default
    composer.reset()
    assert composer.overrides == {}


def test_an_invalid_stage_value_is_refused_with_its_key_and_changes_nothing() -> None:
    composer = SettingsComposer("balanced")
    before = composer.effective()
    with pytest.raises(SettingsError, match=r"detector\.size"):
        composer.set_override("detector.size", 333)
    with pytest.raises(SettingsError, match=r"swap\.target"):
        composer.set_override("swap.target", "reference")  # needs reference photos: command line only
    assert composer.effective() == before
    composer.set_override("detector.interval", 3)  # what balanced already says: no override kept
    assert composer.overrides == {}


def test_the_stage_panel_shows_each_setting_and_each_stages_ms(qtbot: QtBot) -> None:
    panel = StagePanel()
    qtbot.addWidget(panel)
    settings = Settings().with_overrides({"detector.interval": 7, "composite.opacity": 0.5})
    panel.set_settings("balanced", settings, {"detector.interval"})
    assert panel.widget_for("detector.interval").value() == 7  # type: ignore[attr-defined]
    assert panel.widget_for("composite.opacity").value() == pytest.approx(0.5)  # type: ignore[attr-defined]
    edits: list[tuple[str, object]] = []
    panel.override_requested.connect(lambda key, value: edits.append((key, value)))
    panel.widget_for("tracker.beta").setValue(0.2)  # type: ignore[attr-defined]
    assert edits == [("tracker.beta", pytest.approx(0.2))]
    panel.set_stage_ms({"detect": Summary(4.2, 4.0, 5.0, 6.0, 10), "swap": Summary(8.0, 8.0, 9.0, 9.5, 10)})
    titles = {box.stage.title: box.ms_label.text() for box in panel.boxes}
    assert titles["Detector"] == "4.2 ms" and titles["Face swap"] == "8.0 ms"
    assert titles["Tracking & smoothing"] == "– ms"


@pytest.mark.parametrize(
    "control",
    [c for stage in STAGES for c in stage.controls if c.kind in ("int", "float")],
    ids=lambda c: c.key,
)
def test_each_stage_control_spans_exactly_what_the_engine_accepts(control: Control) -> None:
    """A saved value the engine ran but the spin box could not show was displayed as another value
    (beta 5 as 2.0), or crashed the window on start (max_faces 3e9)."""
    kind = int if control.kind == "int" else float
    for edge in (control.minimum, control.maximum):
        Settings().with_overrides({control.key: kind(edge)})  # the panel never offers a refused value
    for outside in (control.minimum - control.step, control.maximum + control.step):
        with pytest.raises(SettingsError):
            Settings().with_overrides({control.key: kind(outside)})


# ---- test pattern ---------------------------------------------------------------------------------------


def test_the_test_pattern_is_a_live_source_paced_at_its_rate_with_a_moving_face() -> None:
    source = TestPatternSource(320, 240, fps=30.0)
    assert isinstance(source, FrameSource) and source.is_live
    source.open()
    assert source.has_face and source.size == (320, 240)
    t0 = time.perf_counter()
    frames = [source.read() for _ in range(16)]
    elapsed = time.perf_counter() - t0
    source.close()
    assert all(f is not None for f in frames)
    assert 0.4 <= elapsed < 0.9  # 15 frame intervals at 30 fps = 0.5 s, paced like a camera
    first, last = frames[0], frames[-1]
    assert first is not None and last is not None
    assert first.image.shape == (240, 320, 3) and [f.index for f in frames if f] == list(range(16))
    assert not np.array_equal(first.image, last.image)  # it moves


def test_the_test_patterns_face_is_found_by_the_built_in_detector_as_it_moves() -> None:
    source = TestPatternSource(320, 240, realtime=False)
    source.open()
    detector = MTCNN()
    centres = []
    for index in range(0, 240, 80):  # 0, 80, 160: different places along its path
        while (f := source.read()) is not None and f.index < index:
            pass
        assert f is not None
        faces = detector.detect(f.image)
        assert len(faces) == 1
        box = faces[0].box
        centres.append(((box[0] + box[2]) / 2, (box[1] + box[3]) / 2))
    assert len({(round(x / 10), round(y / 10)) for x, y in centres}) == 3  # found in three places


def test_a_double_click_on_start_is_one_click(qtbot: QtBot) -> None:
    """The double-click's second press stopped the run the first had just started."""
    from PyQt6.QtCore import Qt
    from PyQt6.QtTest import QTest

    from gui.widgets import ClickOnceButton

    button = ClickOnceButton("Start")
    qtbot.addWidget(button)
    button.show()
    clicks: list[bool] = []
    button.clicked.connect(clicks.append)
    # What the platform delivers for a double-click: press, release, double-click press, release.
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    QTest.mouseDClick(button, Qt.MouseButton.LeftButton)
    QTest.mouseRelease(button, Qt.MouseButton.LeftButton)
    assert len(clicks) == 1
    QTest.mouseClick(button, Qt.MouseButton.LeftButton, delay=600)  # a later click is a click
    assert len(clicks) == 2


def test_the_window_s_source_wrapper_passes_stop_and_camera_news_through() -> None:
    """The preview tap hid the camera's `interrupt` and `notify` from the engine: in the window a
    Stop did not end a camera's reconnect, and 'looking for it again' was never shown."""
    from gui.preview import TappedSource
    from realtime.io.camera_source import CameraSource

    camera = CameraSource(0, capture_factory=lambda *_: None)  # never opened here
    tapped = TappedSource(camera, OriginalTap())
    said: list[str] = []
    tapped.notify = lambda level, message: said.append(f"{level}: {message}")
    assert camera.notify is not None
    camera.notify("warning", "Camera 0 stopped sending pictures")
    assert said == ["warning: Camera 0 stopped sending pictures"]
    tapped.interrupt()
    assert camera._closed.is_set()  # a reconnect wait would end at once


def test_the_recogniser_and_the_privacy_fallback_are_chosen_in_the_stage_panel(qtbot: QtBot) -> None:
    """If this broke, a user could not pick dlib for who-is-who or turn the pixelation on from the
    window (only from the command line)."""
    panel = StagePanel()
    qtbot.addWidget(panel)
    panel.set_settings("balanced", Settings(), set())
    edits: list[tuple[str, object]] = []
    panel.override_requested.connect(lambda key, value: edits.append((key, value)))
    recognizer = panel.widget_for("swap.recognizer")
    fallback = panel.widget_for("privacy.fallback")
    assert isinstance(recognizer, QComboBox) and isinstance(fallback, QComboBox)
    assert [recognizer.itemText(i) for i in range(recognizer.count())] == ["arcface", "dlib"]
    assert [fallback.itemText(i) for i in range(fallback.count())] == ["original", "blur", "hold"]
    recognizer.setCurrentText("dlib")
    fallback.setCurrentText("blur")
    assert ("swap.recognizer", "dlib") in edits and ("privacy.fallback", "blur") in edits
    composer = SettingsComposer("balanced")
    for key, value in edits:
        composer.set_override(key, value)
    effective = composer.effective()
    assert effective.swap.recognizer == "dlib" and effective.privacy.fallback == "blur"
    assert effective.swap.identity_threshold == effective.swap.dlib_threshold
