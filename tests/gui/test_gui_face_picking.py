"""Picking a face in the live preview, as a user does it: the faces of a real clip are outlined,
the one under the mouse stands out, a click on it locks the swap onto that person (the analysis
gets the picture and that face's landmarks), a right click lets go."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PyQt6.QtCore import QPoint, QPointF, Qt
from PyQt6.QtGui import QMouseEvent
from PyQt6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from gui.face_picker import FacePicker
from gui.preview import PreviewFrame, PreviewWidget
from models.wrappers.mtcnn import MTCNN
from realtime.face.picks import FacePick, LivePicks, MappedPerson
from realtime.tools.leak_scenes import BYSTANDER, TARGET, FaceTruth, build_scenes


@pytest.fixture(scope="module")
def clip() -> tuple[list[np.ndarray], list[list[FaceTruth]]]:
    scene = build_scenes(["behind someone"])[0]  # two real faces side by side at the start
    return scene.frames, scene.truth


def shown_preview(qtbot: QtBot, width: int) -> PreviewWidget:
    """A preview on screen, `width` x 300, closed with the test."""
    preview = PreviewWidget()
    qtbot.addWidget(preview)
    preview.resize(width, 300)
    preview.show()
    return preview


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
    preview = shown_preview(qtbot, 1000)
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
    preview = shown_preview(qtbot, 800)
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


def test_clicking_a_face_offers_to_map_that_person_to_a_gallery_face(qtbot: QtBot, clip) -> None:  # type: ignore[no-untyped-def]
    """If this broke, a click with several gallery faces would lock onto the person instead of
    offering the menu, or would map them to the wrong face (or the wrong person)."""
    from gui.face_picker import GalleryChoice

    frames, truth = clip
    preview = shown_preview(qtbot, 1000)
    picks = LivePicks()
    faces = [GalleryChoice("/photos/a.jpg", "a.jpg", 0), GalleryChoice("/photos/b.jpg", "b.jpg", 1)]
    picker = FacePicker(preview, picks, detect=MTCNN(min_face_size=40).detect, choices=lambda: faces)
    preview.show_frame(PreviewFrame(frames[0], frames[0], 0))
    picker.search_now()
    other = next(t for t in truth[0] if t.person == BYSTANDER)
    at = _widget_point(preview, other, 1)
    _mouse(preview, QMouseEvent.Type.MouseMove, at, Qt.MouseButton.NoButton)
    assert preview.hovered is not None  # the outline on hover stays
    _mouse(preview, QMouseEvent.Type.MouseButtonPress, at, Qt.MouseButton.LeftButton)
    menu = picker.menu
    assert menu is not None and picks.take() is None  # a menu, not a lock
    texts = [a.text() for a in menu.actions()]
    assert texts[0] == "Swap this person only" and "This person becomes" in texts
    becomes = next(a.menu() for a in menu.actions() if a.text() == "This person becomes")
    assert becomes is not None and [a.text() for a in becomes.actions()] == ["a.jpg", "b.jpg"]
    becomes.actions()[1].trigger()
    mapped = picks.take_map_picks()
    assert len(mapped) == 1 and mapped[0].identity == 1 and mapped[0].key == "/photos/b.jpg"
    assert np.array_equal(mapped[0].image, frames[0])
    assert np.abs(mapped[0].kps - other.kps).mean() < 6.0
    # "Swap this person only" locks as a click does with one gallery face.
    _mouse(preview, QMouseEvent.Type.MouseButtonPress, at, Qt.MouseButton.LeftButton)
    assert picker.menu is not None
    picker.menu.actions()[0].trigger()
    assert isinstance(picks.take(), FacePick) and picks.take_map_picks() == []
    # With a map and a single gallery face left, a click still offers "Clear the map"; a right
    # click lets go of the map too.
    picks.add_mapped(MappedPerson("dlib", (0.6, 0.8), 0, "/photos/a.jpg"), lambda _: False)
    faces.pop()
    _mouse(preview, QMouseEvent.Type.MouseButtonPress, at, Qt.MouseButton.LeftButton)
    assert picker.menu is not None and picks.take() is None
    clear = next(a for a in picker.menu.actions() if a.text() == "Clear the map")
    assert clear.isEnabled()
    picker.menu.close()
    _mouse(preview, QMouseEvent.Type.MouseButtonPress, at, Qt.MouseButton.RightButton)
    assert picks.mapping()[1] == () and picks.take() == "unpick"
    # "Swap this person only" with a map: this person only, so the map goes.
    picks.add_mapped(MappedPerson("dlib", (0.6, 0.8), 0, "/photos/a.jpg"), lambda _: False)
    _mouse(preview, QMouseEvent.Type.MouseButtonPress, at, Qt.MouseButton.LeftButton)
    assert picker.menu is not None
    picker.menu.actions()[0].trigger()
    assert isinstance(picks.take(), FacePick) and picks.mapping()[1] == ()
    picker.close()


def test_the_face_map_is_kept_across_restarts_and_a_gone_face_dropped(  # type: ignore[no-untyped-def]
    qtbot: QtBot, tmp_path, models_dir
) -> None:
    """If this broke, the people mapped to gallery faces would be forgotten when the window closed,
    or a map entry for a removed photo would linger."""
    from gui.app import create_window
    from gui.config import ConfigStore, LoadResult, MapEntry
    from realtime.face.picks import MappedPerson
    from tests.gui.test_gui_helpers import services_for

    services = services_for(tmp_path, models_dir)
    store = ConfigStore(services.config_path)
    photos = (str(tmp_path / "a.png"), str(tmp_path / "b.png"))
    first = create_window(services, store.load(), store)
    qtbot.addWidget(first)

    def nobody(_: MappedPerson) -> bool:
        return False

    first._picks.add_mapped(MappedPerson("dlib", (0.6, 0.8), 1, photos[1]), nobody)  # (what analysis does)
    first._picks.add_mapped(MappedPerson("dlib", (0.8, 0.6), 0, photos[0]), nobody)
    first.close()
    saved = store.load().config
    assert saved.face_map == (
        MapEntry("dlib", (0.6, 0.8), photos[1]),
        MapEntry("dlib", (0.8, 0.6), photos[0]),
    )
    # The next session has b.png in the gallery, not a.png.
    third = create_window(services, LoadResult(replace(saved, photos=(photos[1],))), store)
    qtbot.addWidget(third)
    assert [p.key for p in third._picks.mapping()[1]] == [photos[1]]
    assert any("a.png" in text for text in third.messages.texts())
    third.face_map.on_run([Path(photos[1])])
    assert [p.identity for p in third._picks.mapping()[1]] == [0]
    third.close()
