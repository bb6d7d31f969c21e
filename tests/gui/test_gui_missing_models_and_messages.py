"""The control panel names every missing model early and once, keeps long messages from widening the
face cards, lets Ctrl+C cancel the consent dialog, keeps the run description clear of the fps figure,
and clears a failed Start's error once a run is running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from PyQt6.QtCore import QObject, QPoint, pyqtSignal
from PyQt6.QtWidgets import QScrollArea, QToolButton
from pytestqt.qtbot import QtBot

from gui.config import InputConfig
from gui.controller import ModelsState, RunState
from gui.face_analysis import FaceResult
from gui.gallery import FaceGallery
from gui.main_window import MainWindow
from gui.models_banner import MODELS_BANNER
from realtime.api import OutputInfo
from tests.gui.test_gui_helpers import SIZE, open_window, run_config, write_face_photo, write_models
from tests.paths import REPO_ROOT
from tests.signals import CHILD_SIGNALS

ROOT = REPO_ROOT
SHA = "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91"


def texts_with(window: MainWindow, *parts: str) -> list[str]:
    return [t for t in window.messages.texts() if all(p in t for p in parts)]


def wait_state(qtbot: QtBot, window: MainWindow, state: RunState) -> None:
    qtbot.waitUntil(lambda: window.controller.state == state, timeout=15_000)


def stop(qtbot: QtBot, window: MainWindow) -> None:
    window.toggle_running()
    wait_state(qtbot, window, RunState.IDLE)


# ---- 1: a face found without models, while running ------------------------------------------------


def test_a_photo_added_while_running_without_models_says_so_in_the_badge_and_a_banner(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """The badge kept blaming the photo ('no usable source face chosen') and no banner named the
    models until Stop and Start: a face-found-models-missing result reached nobody."""
    models = tmp_path / "models"
    models.mkdir()
    window = open_window(qtbot, tmp_path, models, run_config((), vcam=False))
    window.toggle_running()
    wait_state(qtbot, window, RunState.RUNNING)
    # Only what adding the photo says counts here: the models checks (at start-up, at Start) have
    # answered once this one has (one analysis thread, in order), and their banner is cleared.
    checked: list[str] = []
    window.photos.models_checked.connect(checked.append)
    window.photos.check_models()
    qtbot.waitUntil(lambda: bool(checked), timeout=15_000)
    window.messages.clear()

    window.gallery.add_photos([write_face_photo(tmp_path / "me.png")])
    qtbot.waitUntil(lambda: "needs the face models" in window.preview.badge, timeout=15_000)
    assert texts_with(window, MODELS_BANNER, "w600k_r50.onnx")
    stop(qtbot, window)


def test_missing_models_are_named_at_start_up_before_any_photo(qtbot: QtBot, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    window = open_window(qtbot, tmp_path, models, run_config((), vcam=False))
    qtbot.waitUntil(lambda: bool(texts_with(window, MODELS_BANNER)), timeout=15_000)
    assert texts_with(window, "models download")


def test_no_models_banner_when_every_model_is_there(qtbot: QtBot, tmp_path: Path, models_dir: Path) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    checked: list[str] = []
    window.photos.models_checked.connect(checked.append)
    window.photos.check_models()
    qtbot.waitUntil(lambda: bool(checked), timeout=15_000)  # (the start-up check may answer too)
    assert set(checked) == {""} and window.messages.texts() == []


# ---- 2: a long message on a face card -------------------------------------------------------------


class FakeAnalysis(QObject):
    """The gallery's analysis service, answered by the test."""

    analysed = pyqtSignal(object)

    def submit(self, path: Path) -> None:
        pass


def test_a_long_models_message_never_widens_the_face_cards(qtbot: QtBot, tmp_path: Path) -> None:
    """A 64-character hash and a long path cannot wrap: they set the card's minimum width, so both
    cards were clipped and their remove buttons scrolled out of view."""
    service = FakeAnalysis()
    gallery = FaceGallery(service)  # type: ignore[arg-type]
    qtbot.addWidget(gallery)
    gallery.resize(360, 600)
    gallery.show()
    deep = tmp_path / ("a-very-long-folder-name-" * 4) / "models_empty_for_this_test"
    message = (
        f"Model file det_10g.onnx (sha256 {SHA}) is missing from {deep}. Run "
        f"`.venv/bin/python main.py models download det_10g --models-dir {deep}`."
    )
    ok, broken = tmp_path / "source.jpg", tmp_path / "other.jpg"
    gallery.add_photos([ok, broken])
    service.analysed.emit(FaceResult(ok, None, None, models_missing=message))
    service.analysed.emit(FaceResult(broken, None, None, error=f"Unreadable: {SHA}{SHA}"))

    qtbot.wait(100)  # the layouts settle (a pending layout would pass the width checks early)

    card = gallery.card(ok)
    assert "see the message above" in card.status.text() and SHA not in card.status.text()
    assert card.status.toolTip() == message
    scroll = gallery.findChild(QScrollArea)
    viewport = scroll.viewport() if scroll is not None else None
    assert viewport is not None
    for path in (ok, broken):
        shown = gallery.card(path)
        assert shown.width() <= viewport.width(), (path.name, shown.width(), viewport.width())
        remove = shown.findChild(QToolButton)
        assert remove is not None
        right = remove.mapTo(viewport, QPoint(remove.width(), 0)).x()
        assert right <= viewport.width(), (right, viewport.width())


# ---- 3: every missing model at once ---------------------------------------------------------------


def test_every_missing_model_is_named_with_one_download_command(qtbot: QtBot, tmp_path: Path) -> None:
    """The window named det_10g, and inswapper_128 only on a later Start: a download each."""
    models = tmp_path / "models"
    models.mkdir()
    photo = write_face_photo(tmp_path / "me.png")
    window = open_window(qtbot, tmp_path, models, run_config(photo, vcam=False, detector="det_10g"))
    result = lambda: window.gallery.card(photo).result  # noqa: E731
    qtbot.waitUntil(lambda: result() is not None, timeout=15_000)
    message = result().models_missing  # type: ignore[union-attr]
    for name in ("det_10g.onnx", "w600k_r50.onnx", "inswapper_128.onnx"):
        assert name in message, message
    assert message.count("models download") == 1
    window.toggle_running()
    assert texts_with(window, MODELS_BANNER, "det_10g.onnx", "inswapper_128.onnx")
    stop(qtbot, window)


def test_a_start_names_every_missing_model_of_the_run(qtbot: QtBot, tmp_path: Path, face_photo: Path) -> None:
    models = write_models(tmp_path / "models")
    (models / "inswapper_128.onnx").unlink()
    (models / "GPEN-BFR-256.onnx").unlink()
    config = run_config(face_photo, vcam=False)
    config = replace(config, overrides={**config.overrides, "enhancer.model": "gpen_256"})
    window = open_window(qtbot, tmp_path, models, config)
    qtbot.waitUntil(lambda: window.gallery.active_identity() is not None, timeout=15_000)
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.models == ModelsState.FAILED, timeout=15_000)
    errors = [t for t in texts_with(window, "inswapper_128.onnx") if not t.startswith(MODELS_BANNER)]
    assert errors and "GPEN-BFR-256.onnx" in errors[0], window.messages.texts()
    stop(qtbot, window)


# ---- 8: Ctrl+C at the consent dialog --------------------------------------------------------------

CONSENT_CHILD = r"""
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
sys.path.insert(0, {root!r})
from pathlib import Path
from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QApplication
import gui.app as gui_app
from tests.gui.test_gui_helpers import services_for

tmp = Path(sys.argv[1])
app = QApplication([])

def say_when_asked():  # once: a repeating timer would hand Python the control it lacked
    dialog = QApplication.activeModalWidget()
    print("asking" if dialog is not None else "no dialog", flush=True)

QTimer.singleShot(300, say_when_asked)
code = gui_app.run_gui([], services_for(tmp, tmp / "models"))
print("exit", code, flush=True)
sys.exit(code)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_at_the_consent_dialog_cancels_it_and_exits(tmp_path: Path) -> None:
    """The dialog's own event loop ran before the signal handlers existed: Ctrl+C was ignored and
    only SIGKILL ended the app."""
    script = tmp_path / "child.py"
    script.write_text(CONSENT_CHILD.format(root=str(ROOT)))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    child = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, **CHILD_SIGNALS,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "asking", (line, child.stderr.read() if child.stderr else "")
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail("Ctrl+C at the consent dialog was ignored")
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0 and "exit 0" in out, (child.returncode, out, err[-3000:])
    assert "Traceback" not in err
    settings = tmp_path / "settings.toml"
    assert not settings.exists() or "consent_accepted = true" not in settings.read_text()


# ---- 9: the run description in the status bar -----------------------------------------------------


def test_the_run_description_stops_short_of_the_fps_figure(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    window.resize(900, 600)
    window.numbers.fps_label.setText("24.0 fps")
    folder = "/home/someone/media/with/a/rather/deep/folder"
    text = (
        f"video file {folder}/clip.mp4 (640x360 @ 24 fps, real time, looping) → "
        f"video file {folder}/recordings/take-2.mp4"
    )
    window.controller.described.emit(text, OutputInfo())
    qtbot.wait(50)  # the status bar lays out
    note = window.status_note
    shown = note.text()
    assert shown.startswith("Running: ")
    assert (
        note.x() + note.contentsMargins().left() + note.fontMetrics().horizontalAdvance(shown)
        <= window.numbers.fps_label.x()
    )
    assert note.toolTip() == f"Running: {text}"


# ---- 10: a failed Start's error after a Start that works ------------------------------------------


def test_a_failed_starts_error_goes_once_a_run_is_running(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    missing = tmp_path / "nope.mp4"
    window.input_panel.set_config(InputConfig(kind="video", video_path=str(missing)))
    window.toggle_running()
    qtbot.waitUntil(lambda: bool(texts_with(window, "Video file not found")), timeout=15_000)
    wait_state(qtbot, window, RunState.IDLE)

    window.input_panel.set_config(InputConfig(kind="pattern", width=SIZE[0], height=SIZE[1], fps=30.0))
    window.toggle_running()
    wait_state(qtbot, window, RunState.RUNNING)
    assert not texts_with(window, "nope.mp4"), window.messages.texts()
    stop(qtbot, window)


def test_one_models_banner_after_some_models_were_downloaded(qtbot: QtBot, tmp_path: Path) -> None:
    """The start-up banner named three files; two were downloaded, and Start's check added a second
    banner naming the third while the first (naming files now there) stayed above it."""
    import shutil

    from tests.gui.test_gui_helpers import open_window, run_config, write_models

    full = write_models(tmp_path / "all")
    models = tmp_path / "models"
    models.mkdir()
    window = open_window(qtbot, tmp_path, models, run_config((), vcam=False, detector="det_10g"))

    def banners() -> list[str]:
        return [t for t in window.messages.texts() if t.startswith(MODELS_BANNER)]

    qtbot.waitUntil(lambda: bool(banners()), timeout=15_000)
    for name in ("det_10g.onnx", "w600k_r50.onnx"):  # downloaded meanwhile
        shutil.copy(full / name, models / name)
    checked: list[str] = []
    window.photos.models_checked.connect(checked.append)
    window.photos.check_models()  # what Start does
    qtbot.waitUntil(lambda: bool(checked), timeout=15_000)
    qtbot.wait(50)
    assert len(banners()) == 1 and "inswapper_128" in banners()[0] and "det_10g" not in banners()[0]
