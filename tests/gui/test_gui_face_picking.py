"""Picking a face in the live preview, as a user does it: the faces of a real clip are outlined,
the one under the mouse stands out, a click on it locks the swap onto that person (the analysis
gets the picture and that face's landmarks), a right click lets go."""

from __future__ import annotations

import numpy as np
import pytest
from PyQt6.QtCore import QPoint, QPointF, Qt
from PyQt6.QtGui import QMouseEvent
from PyQt6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from gui.face_picker import FacePicker
from gui.preview import PreviewFrame, PreviewWidget
from models.wrappers.mtcnn import MTCNN
from realtime.face.picks import FacePick, LivePicks
from realtime.tools.leak_scenes import BYSTANDER, TARGET, FaceTruth, build_scenes


@pytest.fixture(scope="module")
def clip() -> tuple[list[np.ndarray], list[list[FaceTruth]]]:
    scene = build_scenes(["behind someone"])[0]  # two real faces side by side at the start
    return scene.frames, scene.truth


def _widget_point(preview: PreviewWidget, face: FaceTruth, pane: int) -> QPoint:
    """Where the face's nose is on screen, in the given pane (0: Original, 1: Output)."""
    rect = preview._layout()[pane][0]
    frame = preview.last_frame
    assert frame is not None
    h, w = frame.output.shape[:2]
    x, y = (float(v) for v in face.kps[2])
    return QPoint(int(rect.x() + x * rect.width() / w), int(rect.y() + y * rect.height() / h))


def _mouse(preview: PreviewWidget, kind: QMouseEvent.Type, at: QPoint, button: Qt.MouseButton) -> None:
    buttons = Qt.MouseButton.NoButton if kind == QMouseEvent.Type.MouseMove else button
    event = QMouseEvent(
        kind, QPointF(at), QPointF(preview.mapToGlobal(at)), button, buttons, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(preview, event)


def test_clicking_a_face_in_the_preview_locks_onto_that_person(qtbot: QtBot, clip) -> None:  # type: ignore[no-untyped-def]
    """If this broke, clicking a face would do nothing (or pick the other person), and there would
    be no way to choose whom to swap without a photo of them."""
    frames, truth = clip
    preview = PreviewWidget()
    qtbot.addWidget(preview)
    preview.resize(1000, 300)
    preview.show()
    picks = LivePicks()
    mtcnn = MTCNN(min_face_size=40)
    picker = FacePicker(preview, picks, detect=mtcnn.detect)
    original = frames[0]
    swapped = original.copy()
    swapped[:40] = 0  # the output differs from the original (it carries the swap)
    preview.show_frame(PreviewFrame(swapped, original, 0))
    picker.search_now()  # the real detector on the real picture
    target = next(t for t in truth[0] if t.person == TARGET)
    other = next(t for t in truth[0] if t.person == BYSTANDER)
    # Hovering over the target (in the Output pane) outlines it, not the other face.
    _mouse(preview, QMouseEvent.Type.MouseMove, _widget_point(preview, target, 1), Qt.MouseButton.NoButton)
    hovered = preview.hovered
    assert hovered is not None and np.abs(hovered.kps - target.kps).mean() < 6.0
    _mouse(preview, QMouseEvent.Type.MouseMove, _widget_point(preview, other, 0), Qt.MouseButton.NoButton)
    hovered = preview.hovered
    assert hovered is not None and np.abs(hovered.kps - other.kps).mean() < 6.0
    # A click on the target hands the analysis the ORIGINAL picture and the target's landmarks.
    notes: list[str] = []
    picker.note.connect(notes.append)
    _mouse(
        preview,
        QMouseEvent.Type.MouseButtonPress,
        _widget_point(preview, target, 1),
        Qt.MouseButton.LeftButton,
    )
    pick = picks.take()
    assert isinstance(pick, FacePick)
    assert np.array_equal(pick.image, original)
    assert np.abs(pick.kps - target.kps).mean() < 6.0
    assert picks.picked and notes and "clicked" in notes[-1]
    # A right click lets go.
    _mouse(
        preview,
        QMouseEvent.Type.MouseButtonPress,
        _widget_point(preview, target, 1),
        Qt.MouseButton.RightButton,
    )
    assert picks.take() == "unpick" and not picks.picked
    # A click beside every face picks nobody.
    _mouse(preview, QMouseEvent.Type.MouseButtonPress, QPoint(2, 2), Qt.MouseButton.LeftButton)
    assert picks.take() is None
    picker.close()


def test_moving_over_the_preview_finds_the_faces_off_the_gui_thread(qtbot: QtBot, clip) -> None:  # type: ignore[no-untyped-def]
    frames, _ = clip
    preview = PreviewWidget()
    qtbot.addWidget(preview)
    preview.resize(800, 300)
    preview.show()
    mtcnn = MTCNN(min_face_size=40)
    picker = FacePicker(preview, LivePicks(), detect=mtcnn.detect)
    preview.show_frame(PreviewFrame(frames[0], frames[0], 7))
    _mouse(preview, QMouseEvent.Type.MouseMove, QPoint(400, 150), Qt.MouseButton.NoButton)
    qtbot.waitUntil(lambda: len(preview._faces) == 2, timeout=15_000)
    assert preview._faces_for == 7
    picker.close()


def test_the_picked_person_is_kept_across_restarts(qtbot: QtBot, tmp_path, models_dir) -> None:  # type: ignore[no-untyped-def]
    """If this broke, the face a user clicked would be forgotten when the window closed, and the
    next session would swap whoever is largest again."""
    from gui.app import create_window
    from gui.config import ConfigStore
    from realtime.face.picks import PickedIdentity
    from tests.gui.test_gui_helpers import services_for

    services = services_for(tmp_path, models_dir)
    store = ConfigStore(services.config_path)
    first = create_window(services, store.load(), store)
    qtbot.addWidget(first)
    image = np.zeros((64, 64, 3), np.uint8)
    first._picks.pick(image, np.zeros((5, 2), np.float32))  # what a click on a face does
    first._picks.remember("dlib", np.array([0.6, 0.8], np.float32))  # what the analysis does with it
    first.close()
    saved = store.load().config
    assert saved.picked_recognizer == "dlib" and saved.picked_embedding == pytest.approx((0.6, 0.8))
    second = create_window(services, store.load(), store)
    qtbot.addWidget(second)
    restored = second._picks.take()
    assert isinstance(restored, PickedIdentity) and restored.recognizer == "dlib"
    assert second._picks.picked
    second._picks.unpick()
    second.close()
    assert store.load().config.picked_embedding == ()
