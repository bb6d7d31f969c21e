"""Check a video or picture: the same check as `main.py verify` (FaceCast's invisible watermark, with
its payload and confidence, and the file's C2PA manifest: valid or not, signed by whom, saying
what), for someone who received a file and has the panel rather than a terminal."""

from __future__ import annotations

from pathlib import Path

from PyQt6.QtCore import pyqtSignal
from PyQt6.QtWidgets import (
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gui.background import run_in_background
from realtime.api import FaceCastError, MediaCheck, check_media

FILE_FILTER = (
    "Videos and pictures (*.mp4 *.mov *.m4v *.mkv *.webm *.avi *.png *.jpg *.jpeg *.webp *.bmp)"
    ";;All files (*)"
)
MARKED_STYLE = "color:#e0a040; font-weight:bold;"  # AI-modified: said plainly, not as an error
PLAIN_STYLE = "color:#a0c0a0; font-weight:bold;"


class CheckDialog(QDialog):
    """Choose a file, and read what marks it carries. `checked` is emitted with each result (or the
    error's text) once it is shown."""

    checked = pyqtSignal(object)  # MediaCheck | str

    def __init__(self, parent: QWidget | None = None, folder: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Check a video or picture")
        self._folder = folder
        self.path: Path | None = None
        self.outcome: MediaCheck | None = None
        self.choose_button = QPushButton("Choose a file…")
        self.choose_button.setToolTip("A video, a picture or a screen capture someone sent you")
        self.file_label = QLabel("No file chosen")
        self.file_label.setWordWrap(True)
        self.verdict = QLabel("")
        self.watermark = QLabel("–")
        self.payload = QLabel("–")
        self.confidence = QLabel("–")
        self.signer = QLabel("–")
        self.statement = QLabel("–")
        for label in (self.watermark, self.payload, self.confidence, self.signer, self.statement):
            label.setWordWrap(True)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setPlaceholderText("What `main.py verify` prints for the file, to copy.")
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        self.choose_button.clicked.connect(self._choose)

        top = QHBoxLayout()
        top.addWidget(self.choose_button)
        top.addWidget(self.file_label, 1)
        form = QFormLayout()
        form.addRow("Watermark", self.watermark)
        form.addRow("Says", self.payload)
        form.addRow("Confidence", self.confidence)
        form.addRow("C2PA signer", self.signer)
        form.addRow("C2PA statement", self.statement)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.verdict)
        layout.addLayout(form)
        layout.addWidget(self.details, 1)
        layout.addLayout(buttons)
        self.resize(640, 460)

    def _choose(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Check a video or picture", self._folder, FILE_FILTER)
        if name:
            self.check(Path(name))

    def check(self, path: Path) -> None:
        """Check `path` off the GUI thread (a video is decoded for up to 10 s of it)."""
        self.path = path
        self._folder = str(path.parent)
        self.file_label.setText(str(path))
        self.verdict.setStyleSheet("")
        self.verdict.setText("Checking …")
        for label in (self.watermark, self.payload, self.confidence, self.signer, self.statement):
            label.setText("–")
        self.details.clear()
        self.choose_button.setEnabled(False)
        run_in_background(lambda: check_media(path), self._show, self, name="media-check")

    def _show(self, result: MediaCheck | None, error: Exception | None) -> None:
        self.choose_button.setEnabled(True)
        if result is None:
            text = error.user_message() if isinstance(error, FaceCastError) else f"The check failed: {error}"
            self.outcome = None
            self.verdict.setStyleSheet("")
            self.verdict.setText(text)
            self.checked.emit(text)
            return
        self.outcome = result
        mark = result.watermark
        if result.marked:
            self.verdict.setText("AI-modified by FaceCast")
            self.verdict.setStyleSheet(MARKED_STYLE)
        else:
            self.verdict.setText("No FaceCast mark found")
            self.verdict.setStyleSheet(PLAIN_STYLE)
        looked = f"{mark.frames} frame(s) of the {result.kind} looked at"
        self.watermark.setText(("found" if mark.marked else "not found") + f" ({looked})")
        if mark.payload is not None:
            flags = ", AI-modified" if mark.payload.ai_modified else ""
            self.payload.setText(f"run {mark.payload.run_id}, FaceCast {mark.payload.version}{flags}")
        elif mark.marked:
            self.payload.setText("the mark is there; its payload could not be read whole from so little")
        where = " where an uncropped copy carries it" if mark.in_place else ""
        odds = f"chance of a false match {mark.false_alarm:.1e}"
        self.confidence.setText(f"z = {mark.z:.1f}{where} ({mark.needed:.1f} needed); {odds}")
        credentials = result.credentials
        if credentials is None:
            self.signer.setText(result.credentials_note or "no manifest")
        else:
            state = "valid" if credentials.valid else "INVALID (" + ", ".join(credentials.problems) + ")"
            trust = "on a trust list" if credentials.trusted else "not on a trust list (a local key)"
            self.signer.setText(f"{credentials.signer}: {state}, {trust}")
            said = list(credentials.statements)
            if credentials.run_id is not None and mark.payload is not None:
                same = credentials.run_id == mark.payload.run_id
                said.append(f"names the same run as the watermark: {'yes' if same else 'NO'}")
            self.statement.setText("\n".join(said) or "nothing")
        self.details.setPlainText("\n".join(result.lines()))
        self.checked.emit(result)
