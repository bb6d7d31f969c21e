"""The control panel's notes and banners: the run note elided beside the live numbers and gone after
Stop, one banner per problem across Starts, a models banner that reads as a sentence and follows a
detector change, long file names elided on a card, a layout that holds at the window's minimum size,
and an 'auto' provider entry that says what it picks."""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path

from PyQt6.QtCore import QObject, Qt, pyqtSignal
from PyQt6.QtWidgets import QComboBox, QLabel, QScrollArea
from pytestqt.qtbot import QtBot

from gui.config import InputConfig
from gui.controller import RunState
from gui.face_analysis import FaceResult
from gui.gallery import FaceGallery
from gui.main_window import MainWindow
from gui.models_banner import MODELS_BANNER, absolute_command, models_banner
from gui.stage_panel import StagePanel
from models.runtime.providers import auto_provider
from realtime.api import OutputInfo
from tests.gui.test_gui_helpers import open_window, run_config

LONG_RUN = (
    "video file /home/someone/videos/Grandma's 80th birthday, family recording, final edit "
    "v3 (1080p).mp4 (1920x1080 @ 30 fps, real time, looping) → virtual camera (unavailable)"
)


def texts_with(window: MainWindow, *parts: str) -> list[str]:
    return [t for t in window.messages.texts() if all(p in t for p in parts)]


def wait_state(qtbot: QtBot, window: MainWindow, state: RunState) -> None:
    qtbot.waitUntil(lambda: window.controller.state == state, timeout=15_000)


def shown_note(window: MainWindow) -> str:
    """The status bar's note as drawn."""
    return window.status_note.text()


def models_banners(window: MainWindow) -> list[str]:
    return [t for t in window.messages.texts() if t.startswith(MODELS_BANNER)]


# ---- 1: the run note against the live numbers --------------------------------------------------------


def assert_note_clear_of_the_numbers(window: MainWindow) -> None:
    note = window.status_note
    shown = shown_note(window)
    assert shown.startswith("Running: ") and "…" in shown, shown
    right = note.x() + note.contentsMargins().left() + note.fontMetrics().horizontalAdvance(shown)
    assert right <= window.numbers.fps_label.x(), (shown, right, window.numbers.fps_label.x())


def test_the_run_note_is_elided_again_when_the_live_numbers_widen_or_the_window_narrows(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    """Elided once at RUNNING, while the numbers still read '– fps': 250 ms later they widened and
    the status bar cut the note a second time, hard ('…real t15.0 fps')."""
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    window.resize(1280, 700)
    qtbot.wait(50)
    window.controller.described.emit(LONG_RUN, OutputInfo())
    qtbot.wait(50)
    # What the first stats refresh shows:
    window.numbers.fps_label.setText("15.0 fps")
    window.numbers.latency_label.setText("latency p50 7 / p99 13 ms")
    window.numbers.dropped_label.setText("dropped 0")
    window.numbers.stages_label.setText("det_10g + inswapper_128 + GFPGANv1.4 on cpu")
    qtbot.wait(50)
    assert_note_clear_of_the_numbers(window)
    window.resize(900, 700)
    qtbot.wait(50)
    assert_note_clear_of_the_numbers(window)
    assert window.status_note.toolTip() == f"Running: {LONG_RUN}"


# ---- 2: "Running: …" after the run -------------------------------------------------------------------


def test_the_running_note_goes_when_the_run_stops_or_its_restart_fails(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    window.toggle_running()
    qtbot.waitUntil(lambda: shown_note(window).startswith("Running: "), timeout=15_000)
    window.toggle_running()
    wait_state(qtbot, window, RunState.IDLE)
    assert not shown_note(window).startswith("Running: ")

    window.toggle_running()
    qtbot.waitUntil(lambda: shown_note(window).startswith("Running: "), timeout=15_000)
    window.controller.stop()  # and a Start that fails
    wait_state(qtbot, window, RunState.IDLE)
    window.input_panel.set_config(InputConfig(kind="video", video_path=str(tmp_path / "nope.mp4")))
    window.toggle_running()
    qtbot.waitUntil(lambda: bool(texts_with(window, "nope.mp4")), timeout=15_000)
    wait_state(qtbot, window, RunState.IDLE)
    assert not shown_note(window).startswith("Running: ")


# ---- 4: two failed Starts in a row ---------------------------------------------------------------------


def test_a_second_failed_start_replaces_the_first_ones_error(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    for name in ("first-missing.mp4", "second-missing.mp4"):
        window.input_panel.set_config(InputConfig(kind="video", video_path=str(tmp_path / name)))
        window.toggle_running()
        qtbot.waitUntil(lambda name=name: bool(texts_with(window, name)), timeout=15_000)  # type: ignore[misc]
        wait_state(qtbot, window, RunState.IDLE)
    assert texts_with(window, "second-missing.mp4")
    assert not texts_with(window, "first-missing.mp4"), window.messages.texts()


# ---- 5: the models banner and the detector ---------------------------------------------------------


def test_the_models_banner_follows_a_detector_change(qtbot: QtBot, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    window = open_window(qtbot, tmp_path, models, run_config((), vcam=False, detector="det_10g"))
    qtbot.waitUntil(lambda: bool(texts_with(window, MODELS_BANNER, "det_10g")), timeout=15_000)

    window.set_override("detector.model", "mtcnn")  # built in: nothing to download for it
    qtbot.waitUntil(
        lambda: len(models_banners(window)) == 1 and "det_10g" not in models_banners(window)[0],
        timeout=15_000,
    )
    assert "inswapper_128" in models_banners(window)[0]


# ---- 7: the models banner's words and command -------------------------------------------------------


def test_the_models_banner_reads_as_a_sentence_with_an_absolute_command(qtbot: QtBot, tmp_path: Path) -> None:
    """'No face can be swapped in: Models not downloaded yet: …, then again;' and a relative
    --models-dir, which pasted into a fresh terminal downloads into another folder."""
    models = tmp_path / "models"
    models.mkdir()
    relative = Path(os.path.relpath(models))
    assert not relative.is_absolute()
    window = open_window(qtbot, tmp_path, relative, run_config((), vcam=False, detector="det_10g"))
    qtbot.waitUntil(lambda: bool(models_banners(window)), timeout=15_000)
    banner = models_banners(window)[0]
    assert banner.startswith(f"{MODELS_BANNER}models that are not downloaded yet: det_10g.onnx"), banner
    assert "then again" not in banner and "Models not downloaded yet" not in banner, banner
    command = banner.split("`")[1]
    assert "models download det_10g" in command and f"--models-dir {models}" in command, command
    assert Path(command.split()[0]).is_absolute() and Path(command.split()[1]).is_absolute(), command
    assert f"(folder {models})" in banner


def test_an_absolute_command_keeps_quotes_and_absolute_paths(tmp_path: Path) -> None:
    here = tmp_path / "app"
    (here / ".venv" / "bin").mkdir(parents=True)
    (here / ".venv" / "bin" / "python").touch()
    (here / "main.py").touch()
    command = '.venv/bin/python main.py models download det_10g --models-dir "my models"'
    assert absolute_command(command, here, "linux") == (
        f'{here}/.venv/bin/python {here}/main.py models download det_10g --models-dir "{here}/my models"'
    )
    untouched = "/usr/bin/python3 -m facecast models download x --models-dir /srv/models"
    assert absolute_command(untouched, here, "linux") == untouched
    damaged = f"Model file {here}/a.onnx is truncated. Delete it and run `{command}`."
    assert models_banner(damaged, here) == (
        f"{MODELS_BANNER}the face models. Model file {here}/a.onnx is truncated. Delete it and run "
        f"`{absolute_command(command, here, 'linux')}`."
    )


# ---- 8: the virtual camera warning's count ----------------------------------------------------------


def test_a_new_runs_virtual_camera_warning_replaces_the_last_ones(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, failing_vcam_backend: str
) -> None:
    """It read '(×3)', '(×4)', '(×5)' after more Starts, as if it failed again and again in one run."""
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=True), failing_vcam_backend)
    for _ in range(3):
        window.toggle_running()
        wait_state(qtbot, window, RunState.RUNNING)
        window.toggle_running()
        wait_state(qtbot, window, RunState.IDLE)
    qtbot.wait(50)  # dismissed banners are deleted
    labels = [
        label.text()
        for label in window.messages.findChildren(QLabel)
        if "Virtual camera unavailable" in label.text()
    ]
    assert len(labels) == 1 and "×" not in labels[0], labels


# ---- 9: a long file name on a no-face card ------------------------------------------------------------


class FakeAnalysis(QObject):
    analysed = pyqtSignal(object)

    def submit(self, path: Path) -> None:
        pass


def test_a_no_face_card_elides_a_long_file_name(qtbot: QtBot, tmp_path: Path) -> None:
    """The name was repeated in full, chopped into 16-character pieces over four lines."""
    service = FakeAnalysis()
    gallery = FaceGallery(service)  # type: ignore[arg-type]
    qtbot.addWidget(gallery)
    gallery.resize(360, 600)
    gallery.show()
    photo = tmp_path / f"holiday_snapshot_{'y' * 90}.jpg"
    error = f"No face found in source photo {photo}. Use a photo where one face is clearly visible."
    gallery.add_photos([photo])
    service.analysed.emit(FaceResult(photo, None, None, error=error))

    status = gallery.card(photo).status
    text = status.text()
    assert photo.name not in text.replace("\u200b", "") and "…" in text, text
    shown_name = text.split("photo ", 1)[1].split(". Use", 1)[0]
    assert "\u200b" not in shown_name, shown_name  # elided, not broken over lines
    assert str(photo) in status.toolTip()


# ---- 3: the window's minimum size ----------------------------------------------------------------------


def test_at_the_minimum_size_no_page_scrolls_sideways_and_nothing_overlaps(
    qtbot: QtBot, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    window = open_window(qtbot, tmp_path, models, run_config((), vcam=True, detector="det_10g"))
    qtbot.waitUntil(lambda: bool(models_banners(window)), timeout=15_000)
    window.controller.vcam_unavailable.emit("No v4l2 loopback device found at /dev/video[0-99].")
    assert not window.output_panel.help_panel.isHidden()  # its buttons widen the Output page
    qtbot.wait(50)

    window.resize(window.minimumSize())
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        qtbot.wait(50)
        for area in window.tabs.findChildren(QScrollArea):
            bar = area.horizontalScrollBar()
            if area.isVisible() and bar is not None:
                assert bar.maximum() == 0, (window.tabs.tabText(index), bar.maximum(), window.size())
    left = (window.messages, window.start_button, window.preview, window.graph)
    for upper, lower in pairwise(left):
        assert upper.geometry().bottom() < lower.geometry().top(), (upper, lower, window.size())


# ---- minor: what 'auto' picks ------------------------------------------------------------------------


def test_the_providers_auto_entry_says_what_it_picks(qtbot: QtBot) -> None:
    panel = StagePanel()
    qtbot.addWidget(panel)
    combo = panel.widget_for("pipeline.provider")
    assert isinstance(combo, QComboBox)
    tip = combo.itemData(combo.findText("auto"), Qt.ItemDataRole.ToolTipRole)
    assert "CUDA" in tip and "DirectML" in tip and f"Here: {auto_provider()}" in tip, tip


def test_stacked_banners_are_all_shown_whole(qtbot: QtBot) -> None:
    """The banner area measured a new banner before it was laid out: each new one hid the one
    before (a failed Start's error cut the models banner's command), and at the minimum size a
    blank strip sat under a clipped banner."""
    from PyQt6.QtWidgets import QVBoxLayout, QWidget

    from gui.messages import MAX_LINES, MessageBar

    host = QWidget()
    qtbot.addWidget(host)
    layout = QVBoxLayout(host)
    bar = MessageBar(parent=host)
    layout.addWidget(bar)
    layout.addStretch(1)
    host.resize(900, 500)
    host.show()
    long = "Face swapping needs models that are not downloaded yet: " + "det_10g.onnx, " * 8 + "done."
    banners = (("warning", long), ("error", "Video file not found: /tmp/nope.mp4"), ("warning", "x"))
    for level, text in banners:
        bar.show_message(level, text)  # type: ignore[arg-type]
        qtbot.wait(30)
        scroll = bar._scroll
        needed = bar._rows.heightForWidth(scroll.viewport().width())
        cap = bar.fontMetrics().lineSpacing() * MAX_LINES
        assert scroll.height() == min(needed, cap), text
        assert bar.height() - scroll.height() <= 8  # no blank strip under the banners


def test_a_damaged_model_beside_missing_ones_gets_absolute_paths_in_the_banner(tmp_path: Path) -> None:
    """That message matched neither pattern: its folder stayed relative and 'then again' stayed."""
    message = (
        "Models not downloaded yet: inswapper_128.onnx, w600k_r50.onnx (folder models). Also: Model file "
        "models/det_10g.onnx is truncated. Run `python main.py models download inswapper_128 w600k_r50 "
        "--models-dir models` (verified), then again; `python main.py models list` shows what each is."
    )
    (tmp_path / "main.py").write_text("")
    banner = models_banner(message, cwd=tmp_path)
    assert banner.startswith(MODELS_BANNER) and "then again" not in banner
    assert f"(folder {tmp_path / 'models'})" in banner
    assert f"--models-dir {tmp_path / 'models'}" in banner


def test_every_tab_shows_at_the_default_size_and_the_divider_stays_put_through_a_run(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, failing_vcam_backend: str
) -> None:
    """ "Process on" hid behind the tab bar's scroll arrows at the default size, and the divider
    between the preview and the tabs jumped when a run started (the latency line grew on the Output
    tab, and the virtual camera's help panel with it)."""
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=True), failing_vcam_backend)
    qtbot.waitExposed(window)
    bar = window.tabs.tabBar()
    assert bar is not None
    last = bar.tabRect(bar.count() - 1)
    assert last.right() <= bar.width(), "the last tab is cut off"
    window.tabs.setCurrentIndex(2)  # Output: the help panel and the latency line live here
    qtbot.wait(50)
    before = window.splitter.sizes()
    window.toggle_running()
    qtbot.waitUntil(lambda: not window.output_panel.help_panel.isHidden(), timeout=15_000)
    qtbot.waitUntil(lambda: "p99" in window.output_panel.latency_value.text(), timeout=15_000)
    qtbot.wait(100)
    assert window.splitter.sizes() == before
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=15_000)
    qtbot.wait(100)
    assert window.splitter.sizes() == before


def test_the_window_fits_a_small_laptop_screen_with_every_control_shown(qtbot: QtBot, tmp_path: Path) -> None:
    """1024 px wide (a small laptop, a netbook): the Models… and Log buttons and the "unverified
    models" note joined the preview's toolbar and made the window at least 1021 px wide."""
    models = tmp_path / "models"
    models.mkdir()
    window = open_window(qtbot, tmp_path, models, run_config((), vcam=True, detector="det_10g"))
    window.unverified_label.show()  # the widest state: unverified files allowed
    qtbot.wait(50)
    assert window.minimumSizeHint().width() <= 800
    for control in (window.models_button, window.log_button, window.unverified_label, window.view_combo):
        assert control.isVisible()
