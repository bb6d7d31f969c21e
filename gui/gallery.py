"""The source-face gallery: photos added by drag and drop or a file dialog, one card each.

Each card shows a thumbnail cropped to the detected face, or — inline, never in a dialog — why the
photo cannot be used. Clicking a usable card makes it the active face; F2 / Ctrl+Tab cycle (the
window owns the shortcuts and calls cycle()).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from PyQt6.QtCore import QMimeData, Qt, pyqtSignal
from PyQt6.QtGui import QDragEnterEvent, QDropEvent, QImage, QMouseEvent, QPixmap
from PyQt6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gui.face_analysis import THUMB_SIZE, FaceResult, PhotoAnalysisService
from realtime.api import IMAGE_EXTENSIONS, ImageBGR, SourceIdentity

_FILTER = "Images (" + " ".join(f"*{ext}" for ext in sorted(IMAGE_EXTENSIONS)) + ")"
MODELS_MISSING_NOTE = "Face found — swapping needs the face models (see the message above the preview)."
NAME_WIDTH = 180  # pixels: a long file name is elided to this on a card
_BREAK_EVERY = 16  # characters: where a longer unbreakable run (a hash, a path) may wrap
_ZERO_WIDTH_SPACE = "\u200b"


def pixmap_from_bgr(image: ImageBGR) -> QPixmap:
    image = np.ascontiguousarray(image)
    h, w = image.shape[:2]
    qimage = QImage(image.data, w, h, image.strides[0], QImage.Format.Format_BGR888)  # type: ignore[call-overload]
    return QPixmap.fromImage(qimage.copy())


def wrappable(text: str) -> str:
    """`text` with invisible break points inside long unbroken runs: word wrap cannot break a
    64-character hash or a long path, which then set the card's width and pushed its ✕ out of view."""
    words = []
    for word in text.split(" "):
        if len(word) > _BREAK_EVERY:
            pieces = (word[i : i + _BREAK_EVERY] for i in range(0, len(word), _BREAK_EVERY))
            word = _ZERO_WIDTH_SPACE.join(pieces)
        words.append(word)
    return " ".join(words)


def image_paths(mime: QMimeData | None) -> list[Path]:
    """Local image files in a drag's data (other URLs and file types are ignored)."""
    if mime is None or not mime.hasUrls():
        return []
    paths = [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
    return [p for p in paths if p.suffix.lower() in IMAGE_EXTENSIONS]


class FaceCard(QFrame):
    """One photo: thumbnail, file name, and its status (analysing / ready / why it cannot be used)."""

    clicked = pyqtSignal()
    remove_requested = pyqtSignal()

    def __init__(self, path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self.result: FaceResult | None = None
        self.setObjectName("faceCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.thumb = QLabel(self)
        self.thumb.setFixedSize(THUMB_SIZE // 2 + 8, THUMB_SIZE // 2 + 8)
        self.thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.thumb.setStyleSheet("background:#2a2a2e; border-radius:4px; color:#888;")
        self.thumb.setText("…")
        self.name = QLabel(self)
        self.name.setStyleSheet("font-weight:bold;")
        # A long file name is elided (full path in the tooltip): unelided it widened the card until
        # the remove button scrolled out of a narrow window.
        self.name.setText(
            self.name.fontMetrics().elidedText(path.name, Qt.TextElideMode.ElideMiddle, NAME_WIDTH)
        )
        self.name.setToolTip(str(path))
        self.status = QLabel("Looking for a face…", self)
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setStyleSheet("color:#999;")
        # The card follows the list's width: no text may ask for more (the rest wraps or is cut).
        self.status.setMinimumWidth(1)
        remove = QToolButton(self)
        remove.setText("✕")
        remove.setAutoRaise(True)
        remove.setToolTip("Remove this photo")
        remove.clicked.connect(self.remove_requested)
        text = QVBoxLayout()
        text.setSpacing(2)
        text.addWidget(self.name)
        text.addWidget(self.status, 1)
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 6, 2, 6)
        row.addWidget(self.thumb, 0, Qt.AlignmentFlag.AlignTop)
        row.addLayout(text, 1)
        row.addWidget(remove, 0, Qt.AlignmentFlag.AlignTop)
        self.set_active(False)

    @property
    def usable(self) -> bool:
        """Usable or still being analysed (a pending photo may be chosen; it applies once ready)."""
        return self.result is None or self.result.usable

    def set_result(self, result: FaceResult) -> None:
        self.result = result
        if result.thumbnail is not None:
            pixmap = pixmap_from_bgr(result.thumbnail)
            # Scaled for the screen's device pixels, so it is sharp on high-DPI displays.
            ratio = self.devicePixelRatioF()
            scaled = pixmap.scaled(
                self.thumb.size() * ratio,
                Qt.AspectRatioMode.KeepAspectRatio,
                Qt.TransformationMode.SmoothTransformation,
            )
            scaled.setDevicePixelRatio(ratio)
            self.thumb.setPixmap(scaled)
        else:
            self.thumb.setText("?")
        self._show_status(result)
        self.setCursor(Qt.CursorShape.PointingHandCursor if result.usable else Qt.CursorShape.ArrowCursor)

    def _show_status(self, result: FaceResult) -> None:
        """The card's line: why the photo cannot be used, or how it can. The models' message (a
        hash, a folder, the command) is shown once above the preview; the card says so, and holds
        it in its tooltip."""
        tooltip, name = "", ""
        if result.error:
            # The file name elided, as in the title (the whole path in the tooltip): cut into
            # break points, a long one filled four lines of the card.
            name = self.status.fontMetrics().elidedText(
                result.path.name, Qt.TextElideMode.ElideMiddle, NAME_WIDTH
            )
            text = result.error.replace(str(result.path), result.path.name).replace(result.path.name, name)
            colour, tooltip = "#ff8080", result.error
        elif result.models_missing:
            text = f"{result.note} {MODELS_MISSING_NOTE}".strip()
            colour, tooltip = "#d8c070", result.models_missing
        else:
            text = result.note or "Face found."
            colour = "#d8c070" if result.identity is None else "#8fd08f"
        # Long hashes and paths may break anywhere; the elided name (which fits) nowhere.
        self.status.setText(
            name.join(wrappable(part) for part in text.split(name)) if name else wrappable(text)
        )
        self.status.setToolTip(tooltip)
        self.status.setStyleSheet(f"color:{colour};")

    def set_active(self, active: bool) -> None:
        border = "2px solid #3d8bfd" if active else "1px solid #444"
        self.setStyleSheet(f"QFrame#faceCard {{ border:{border}; border-radius:6px; }}")

    def mousePressEvent(self, event: QMouseEvent | None) -> None:
        if event is not None and event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mousePressEvent(event)


class FaceGallery(QWidget):
    """Source photos and which one is active.

    active_changed(Path | None): another photo was chosen. faces_changed: the set of usable faces
    (photos with an identity ready to swap in) changed. photos_changed: a photo was added or removed.
    models_missing_found(str): a face was found that cannot be swapped in for want of models (the
    models' message).
    """

    active_changed = pyqtSignal(object)
    faces_changed = pyqtSignal()
    photos_changed = pyqtSignal()
    models_missing_found = pyqtSignal(str)

    def __init__(self, service: PhotoAnalysisService, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self._cards: dict[Path, FaceCard] = {}
        self._active: Path | None = None
        self.setAcceptDrops(True)
        service.analysed.connect(self._on_analysed)

        add = QPushButton("Add photos…", self)
        add.clicked.connect(self.choose_files)
        hint = QLabel("Drop photos here. F2 or Ctrl+Tab switches the active face.", self)
        hint.setWordWrap(True)
        hint.setStyleSheet("color:#999;")
        self._empty = QLabel("No source face yet: add a clear, frontal photo of the person.", self)
        self._empty.setWordWrap(True)
        self._list = QVBoxLayout()
        self._list.setSpacing(6)
        self._list.addWidget(self._empty)
        self._list.addStretch(1)
        holder = QWidget()
        holder.setLayout(self._list)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setWidget(holder)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        layout = QVBoxLayout(self)
        layout.addWidget(add)
        layout.addWidget(hint)
        layout.addWidget(scroll, 1)

    # ---- queries -------------------------------------------------------------------------------------

    @property
    def photos(self) -> list[Path]:
        return list(self._cards)

    @property
    def active(self) -> Path | None:
        return self._active

    def card(self, path: Path) -> FaceCard:
        return self._cards[Path(path)]

    def active_identity(self) -> SourceIdentity | None:
        if self._active is None:
            return None
        result = self._cards[self._active].result
        return result.identity if result is not None else None

    def models_missing(self) -> str:
        """The models' message when a photo has a face that cannot be swapped in for want of them."""
        for card in self._cards.values():
            if card.result is not None and card.result.models_missing:
                return card.result.models_missing
        return ""

    def retry_missing_models(self) -> None:
        """Analyse again the photos that waited for models (they may have been downloaded since)."""
        for path, card in self._cards.items():
            if card.result is not None and card.result.models_missing:
                self._service.submit(path)

    def reanalyse(self) -> None:
        """Analyse every photo again (another detector: a face it finds, or misses, differently)."""
        for path in self._cards:
            self._service.submit(path)

    def usable_faces(self) -> list[tuple[Path, SourceIdentity]]:
        """Photos whose identity is ready to swap in, in gallery order."""
        faces = []
        for path, card in self._cards.items():
            if card.result is not None and card.result.identity is not None:
                faces.append((path, card.result.identity))
        return faces

    # ---- changes -------------------------------------------------------------------------------------

    def choose_files(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(self, "Add source photos", "", _FILTER)
        self.add_photos(Path(n) for n in names)

    def add_photos(self, paths: Iterable[Path]) -> None:
        added = False
        for raw in paths:
            path = Path(raw)
            if path in self._cards:
                continue
            card = FaceCard(path, self)
            card.clicked.connect(lambda p=path: self.set_active(p))
            card.remove_requested.connect(lambda p=path: self.remove(p))
            self._cards[path] = card
            self._list.insertWidget(self._list.count() - 1, card)
            self._service.submit(path)
            added = True
        if added:
            self._empty.setVisible(False)
            if self._active is None:
                self.cycle()
            self.photos_changed.emit()

    def remove(self, path: Path) -> None:
        path = Path(path)
        card = self._cards.pop(path, None)
        if card is None:
            return
        self._list.removeWidget(card)
        card.deleteLater()
        self._empty.setVisible(not self._cards)
        if self._active == path:
            self._active = None
            self.cycle()
            if self._active is None:
                self.active_changed.emit(None)
        if card.result is not None and card.result.identity is not None:
            self.faces_changed.emit()
        self.photos_changed.emit()

    def set_active(self, path: Path | None) -> None:
        if path is not None:
            path = Path(path)
            if path not in self._cards or not self._cards[path].usable:
                return
        if path == self._active:
            return
        self._active = path
        for p, card in self._cards.items():
            card.set_active(p == path)
        self.active_changed.emit(path)

    def cycle(self, step: int = 1) -> None:
        """Make the next usable photo active (wrapping round)."""
        paths = [p for p, c in self._cards.items() if c.usable]
        if not paths:
            return
        if self._active not in paths:
            self.set_active(paths[0])
            return
        assert self._active is not None
        self.set_active(paths[(paths.index(self._active) + step) % len(paths)])

    def _on_analysed(self, result: FaceResult) -> None:
        card = self._cards.get(result.path)
        if card is None:
            return  # removed while it was being analysed
        card.set_result(result)
        if result.identity is not None:
            self.faces_changed.emit()
        if result.models_missing:  # nothing else changes: the window would not hear of it
            self.models_missing_found.emit(result.models_missing)
        if result.path != self._active:
            if self._active is None and result.usable:
                self.set_active(result.path)
            return
        if not result.usable:
            # The active photo turned out unusable: move on to another one, if any.
            self._active = None
            card.set_active(False)
            self.cycle()
            if self._active is None:
                self.active_changed.emit(None)

    # ---- drag and drop -------------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent | None) -> None:
        if event is not None and image_paths(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent | None) -> None:
        if event is None:
            return
        paths = image_paths(event.mimeData())
        if paths:
            self.add_photos(paths)
            event.acceptProposedAction()
