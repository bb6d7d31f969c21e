"""Pick a face in the live preview: the faces of the newest picture outlined on hover, a click
locks the swap onto the clicked person (a reference taken from the live frame, no photo needed),
a right click lets go (of the map too). With more than one gallery face, or a map, a click offers
a menu instead: swap this person only, or "this person becomes" a gallery face (the live map,
realtime/face/picks.py), or clear the map. The faces are found off the GUI thread with the built-in MTCNN."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from PyQt6.QtCore import QObject, Qt, QTimer, pyqtSignal
from PyQt6.QtGui import QCursor
from PyQt6.QtWidgets import QMenu

from gui.preview import PreviewWidget
from realtime.api import MTCNN, Detection, FloatArray, ImageBGR, LivePicks

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.3  # s between two searches while the mouse moves over the preview
NOTE_CHECK_MS, NOTE_CHECKS = 300, 10  # how often, and how long, a click waits for the analysis' word

Detect = Callable[[ImageBGR], list[Detection]]


@dataclass(frozen=True, slots=True)
class GalleryChoice:
    """A gallery face a clicked person can become: its key (the photo's path), the name shown and
    its index among the running swap's identities."""

    key: str
    name: str
    identity: int


Choices = Callable[[], Sequence[GalleryChoice]]


class FacePicker(QObject):
    """Connects a PreviewWidget to the run's LivePicks. `note` carries what the status bar says."""

    note = pyqtSignal(str)
    _found = pyqtSignal(int, object)  # (frame index, faces), from the search thread

    def __init__(
        self,
        preview: PreviewWidget,
        picks: LivePicks,
        parent: QObject | None = None,
        detect: Detect | None = None,
        choices: Choices | None = None,
    ) -> None:
        super().__init__(parent)
        self.preview = preview
        self.picks = picks
        self._choices = choices
        self.menu: QMenu | None = None  # the menu of the last click, while it is open
        self._detect = detect
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="face-picker")
        self._busy: Future[None] | None = None
        self._last = 0.0
        preview.faces_wanted.connect(self.search)
        preview.face_clicked.connect(self._pick)
        preview.unpick_requested.connect(self._unpick)
        self._found.connect(preview.set_faces, Qt.ConnectionType.QueuedConnection)  # type: ignore[call-arg]

    def search(self) -> None:
        """Find the faces of the picture on screen (at most every MIN_INTERVAL, one at a time)."""
        frame, picture = self.preview.last_frame, self.preview.pick_picture()
        now = time.monotonic()
        if frame is None or picture is None or (self._busy is not None and not self._busy.done()):
            return
        if now - self._last < MIN_INTERVAL:
            return
        self._last = now
        self._busy = self._pool.submit(self._search, frame.index, picture)

    def search_now(self) -> None:
        """The same search, on this thread (tests)."""
        frame, picture = self.preview.last_frame, self.preview.pick_picture()
        if frame is not None and picture is not None:
            self.preview.set_faces(frame.index, self._detector()(picture))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _detector(self) -> Detect:
        if self._detect is None:
            mtcnn = MTCNN(min_face_size=40)
            self._detect = mtcnn.detect
        return self._detect

    def _search(self, index: int, picture: ImageBGR) -> None:
        try:
            faces = self._detector()(picture)
        except Exception:  # a search is a hint for the outline; the run goes on without it
            log.exception("finding faces in the preview failed")
            return
        self._found.emit(index, faces)

    def _pick(self, picture: ImageBGR, kps: FloatArray) -> None:
        choices = list(self._choices()) if self._choices is not None else []
        if len(choices) < 2 and not self.picks.mapping()[1]:
            self._lock(picture, kps)
            return
        menu = QMenu(self.preview)
        # (triggered passes `checked` first: the lambdas take it so it binds no choice)
        menu.addAction("Swap this person only", lambda _=False: self._only(picture, kps))
        becomes = menu.addMenu("This person becomes")
        assert becomes is not None
        for choice in choices:
            becomes.addAction(choice.name, lambda _=False, c=choice: self._map(picture, kps, c))
        clear = menu.addAction("Clear the map", lambda _=False: self._clear_map())
        assert clear is not None
        clear.setEnabled(bool(self.picks.mapping()[1]))
        self.menu = menu
        menu.aboutToHide.connect(menu.deleteLater)
        menu.popup(QCursor.pos())

    def _lock(self, picture: ImageBGR, kps: FloatArray) -> None:
        self.picks.pick(picture, kps)
        self.note.emit("Swapping the face you clicked (right-click the preview to let go).")
        self._hear_back(NOTE_CHECKS)

    def _hear_back(self, checks_left: int) -> None:
        """What the analysis says about the click (its detector finds no face there), once it has
        had a frame to look: asked a few times, since a frame takes longer on a loaded machine."""
        notes = self.picks.take_notes()
        if notes:
            self.note.emit(notes[-1])
        elif checks_left > 0:
            QTimer.singleShot(NOTE_CHECK_MS, lambda: self._hear_back(checks_left - 1))

    def _only(self, picture: ImageBGR, kps: FloatArray) -> None:
        """This person and nobody else: the map goes (a mapped person would keep their own face)."""
        if self.picks.mapping()[1]:
            self.picks.clear_map()
        self._lock(picture, kps)

    def _map(self, picture: ImageBGR, kps: FloatArray, choice: GalleryChoice) -> None:
        self.picks.map_face(picture, kps, choice.identity, choice.key)
        self.note.emit(f"The person you clicked becomes {choice.name}.")

    def _clear_map(self) -> None:
        self.picks.clear_map()
        self.note.emit("Nobody is mapped to a gallery face any more.")

    def _unpick(self) -> None:
        """A right click lets go of everything picked: the lock and the map."""
        mapped = bool(self.picks.mapping()[1])
        if mapped:
            self.picks.clear_map()
        if self.picks.picked or mapped:
            self.picks.unpick()
            gone = "; nobody is mapped any more" if mapped else ""
            self.note.emit(f"Back to the panel's choice of face{gone}.")


__all__ = ["FacePicker", "GalleryChoice"]
