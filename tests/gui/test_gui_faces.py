"""Source faces: thumbnails cropped to the face, the reason a photo cannot be used shown inline,
drag and drop, and switching the active face live with the hotkey."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

from pathlib import Path

import numpy as np
import pytest
from PyQt6.QtCore import QEvent, QMimeData, QPoint, QPointF, Qt, QUrl
from PyQt6.QtGui import QDragEnterEvent, QDropEvent
from PyQt6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from gui.controller import ModelsState, RunState
from gui.face_analysis import THUMB_SIZE, PhotoAnalyser
from gui.main_window import MainWindow
from realtime.wiring.face_swap import ModelOptions
from tests.gui.test_gui_helpers import (
    open_window,
    run_config,
    wait_for_face,
    write_blank_photo,
    write_face_photo,
)

NO_KEYS = Qt.KeyboardModifier.NoModifier


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("photos")
    return {
        "face": write_face_photo(folder / "astronaut.png"),
        "other": write_face_photo(folder / "astronaut-bgr.png", variant=1),
        "blank": write_blank_photo(folder / "wall.png"),
    }


def test_a_photo_with_no_face_shows_why_inline_and_is_never_the_active_face(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, photos: dict[str, Path]
) -> None:
    config = run_config((photos["blank"], photos["face"]), vcam=False)
    window = open_window(qtbot, tmp_path, models_dir, config)
    blank = window.gallery.card(photos["blank"])
    qtbot.waitUntil(lambda: blank.result is not None and window.gallery.active_identity() is not None)

    assert blank.result is not None and not blank.result.usable
    assert "No face found" in blank.status.text()  # the reason, under the thumbnail
    assert blank.status.isVisibleTo(window)
    assert QApplication.activeModalWidget() is None  # not a dialog
    assert window.gallery.active == photos["face"]  # the unusable photo was passed over
    window.gallery.set_active(photos["blank"])
    assert window.gallery.active == photos["face"]  # and cannot be chosen
    face = window.gallery.card(photos["face"])
    assert face.thumb.pixmap() is not None and not face.thumb.pixmap().isNull()


def test_thumbnails_are_cropped_to_the_detected_face(models_dir: Path, photos: dict[str, Path]) -> None:
    result = PhotoAnalyser(ModelOptions(models_dir, allow_unverified=True), "mtcnn").analyse(photos["face"])
    assert result.usable and result.identity is not None and result.thumbnail is not None
    assert result.thumbnail.shape == (THUMB_SIZE, THUMB_SIZE, 3)
    # The whole photo is 512 px with a grey backdrop; a face crop is mostly skin and hair, not backdrop.
    centre = result.thumbnail[THUMB_SIZE // 3 : 2 * THUMB_SIZE // 3, THUMB_SIZE // 3 : 2 * THUMB_SIZE // 3]
    red, blue = float(centre[:, :, 2].mean()), float(centre[:, :, 0].mean())
    assert red > blue + 20  # skin tones: red over blue


def test_photos_dropped_on_the_gallery_are_added_and_other_files_ignored(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, photos: dict[str, Path]
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False))
    notes = tmp_path / "notes.txt"
    notes.write_text("not a photo")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(photos["face"])), QUrl.fromLocalFile(str(notes))])
    only_notes = QMimeData()
    only_notes.setUrls([QUrl.fromLocalFile(str(notes))])
    for data, wanted in ((only_notes, False), (mime, True)):
        enter = QDragEnterEvent(
            QPoint(10, 10), Qt.DropAction.CopyAction, data, Qt.MouseButton.LeftButton, NO_KEYS
        )
        enter.ignore()
        window.gallery.dragEnterEvent(enter)  # Qt routes real drags only; call the handlers directly
        assert enter.isAccepted() == wanted
    args = (QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton)
    window.gallery.dropEvent(QDropEvent(*args, NO_KEYS, QEvent.Type.Drop))

    assert window.gallery.photos == [photos["face"]]
    wait_for_face(qtbot, window)
    assert window.gallery.active == photos["face"]


def face_tint(window: MainWindow) -> np.ndarray:
    """Mean colour change the swap made to the frame on screen (output minus its original)."""
    frame = window.preview.last_frame
    assert frame is not None and frame.original is not None
    diff = frame.output.astype(np.int16) - frame.original.astype(np.int16)
    changed = np.abs(diff).max(axis=2) > 12
    assert changed.sum() > 100, "no swapped face on screen"
    return diff[changed].mean(axis=0)


def test_f2_switches_the_active_face_live_without_a_restart(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, photos: dict[str, Path]
) -> None:
    config = run_config((photos["face"], photos["other"]), vcam=False, disclosure_label=False)
    window = open_window(qtbot, tmp_path, models_dir, config)
    qtbot.waitUntil(lambda: len(window.gallery.usable_faces()) == 2, timeout=15_000)
    window.toggle_running()
    qtbot.waitUntil(
        lambda: window.controller.models == ModelsState.READY and window.preview.frames_shown >= 10,
        timeout=20_000,
    )
    states: list[str] = []
    window.controller.state_changed.connect(states.append)
    qtbot.waitUntil(lambda: face_tint(window) is not None, timeout=5_000)
    before = face_tint(window)

    qtbot.keyClick(window, Qt.Key.Key_F2)
    assert window.gallery.active == photos["other"]
    shown = window.preview.frames_shown
    qtbot.waitUntil(lambda: window.preview.frames_shown >= shown + 10, timeout=5_000)
    after = face_tint(window)

    # The inswapper double tints the face with a colour computed from the identity: another face,
    # another tint, a few frames later, with the same engine still running.
    assert float(np.abs(after - before).sum()) > 6.0, (before, after)
    assert states == [] and window.controller.state == RunState.RUNNING
    qtbot.keyClick(window, Qt.Key.Key_F2)  # wraps round to the first face
    assert window.gallery.active == photos["face"]
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)
