"""The Models dialog: every catalogue model with its size, licence and state, downloaded from here.

A licence is shown before its first download and accepted once (the engine's Downloader records it
in the models folder). Downloads run one at a time off the GUI thread (gui/model_tasks.py); Cancel
keeps what arrived and the next Download resumes it. The folder chosen here is remembered by the
window's config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PyQt6.QtCore import Qt, QUrl, pyqtSignal
from PyQt6.QtGui import QCloseEvent, QDesktopServices
from PyQt6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from gui.model_tasks import DownloadTuning, EntryState, ModelTasks, size_text
from realtime.api import CATALOGUE, ModelEntry, ModelStore

_COLOURS = {
    "missing": "#e0a040",
    "verified": "#60c080",
    "unverified": "#c0c060",
    "different": "#e0a040",
    "damaged": "#e06060",
    "unreadable": "#e06060",
}
_FETCHABLE = ("missing", "different", "damaged")
UNVERIFIED_HELP = (
    "Use model files whose SHA-256 is not the published one: a re-export, or the offline test "
    "doubles that `main.py models doubles DIR` writes (they do not swap faces: they tint them). "
    "A file that does not load as the model it stands for is still refused."
)
_INTRO = (
    "Face swapping needs the models marked <b>default</b>. Each file is checked against its "
    "published SHA-256 before it is used; a stopped download resumes where it stopped."
)


@dataclass(slots=True)
class _Row:
    entry: ModelEntry
    status: QLabel
    bar: QProgressBar
    download: QPushButton
    verify: QPushButton
    cancel: QPushButton


# The dialog's sections, in this order (roles not named here follow, titled by their name).
ROLE_TITLES = {
    "swapper": "Face swappers",
    "converter": "Embedding converters (downloaded with the swappers that need them)",
    "detector": "Face detectors",
    "recognizer": "Face recognisers",
    "enhancer": "Face enhancers",
    "occluder": "Occlusion masks",
    "parser": "Face parsers",
    "frame_enhancer": "Frame enhancers (whole-frame super-resolution)",
    "content": "Content checks (the server's content policy)",
}


def entries_by_role(catalogue: Sequence[ModelEntry]) -> list[tuple[str, list[ModelEntry]]]:
    """The catalogue grouped by role: the roles of ROLE_TITLES first, in its order."""
    order = list(ROLE_TITLES)
    roles = sorted(
        {e.role for e in catalogue}, key=lambda r: (order.index(r) if r in order else len(order), r)
    )
    return [(role, [e for e in catalogue if e.role == role]) for role in roles]


class ModelsDialog(QDialog):
    """models_changed: a download or check finished (the window checks its models again).
    folder_changed(Path): the user chose another models folder."""

    models_changed = pyqtSignal()
    folder_changed = pyqtSignal(object)
    unverified_changed = pyqtSignal(bool)  # the user allowed (or no longer allows) unverified files

    def __init__(
        self,
        folder: Path,
        catalogue: Sequence[ModelEntry] = CATALOGUE,
        tuning: DownloadTuning | None = None,
        parent: QWidget | None = None,
        allow_unverified: bool = False,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Models")
        self._catalogue = tuple(catalogue)
        self._allow_unverified = allow_unverified
        self.tasks = ModelTasks(self._store(folder), tuning, self)
        self._states: dict[str, EntryState] = {}
        self._busy = ""  # the entry downloading now
        self._queued: list[str] = []  # downloads asked for, not finished
        self._awaiting_licence: list[str] = []  # downloads waiting for their licence to be accepted
        self._rows: dict[str, _Row] = {}

        intro = QLabel(_INTRO)
        intro.setWordWrap(True)
        self.folder_edit = QLineEdit(str(folder))
        self.folder_edit.setReadOnly(True)
        self.choose_button = QPushButton("Choose…")
        self.choose_button.setToolTip("Keep the models in another folder (remembered)")
        self.choose_button.clicked.connect(self._choose_folder)
        self.open_button = QPushButton("Open folder")
        self.open_button.clicked.connect(self._open_folder)
        folder_row = QHBoxLayout()
        folder_row.addWidget(QLabel("Folder"))
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(self.choose_button)
        folder_row.addWidget(self.open_button)
        self.unverified_check = QCheckBox("Allow unverified files (e.g. the offline test doubles)")
        self.unverified_check.setChecked(allow_unverified)
        self.unverified_check.setToolTip(UNVERIFIED_HELP)
        self.unverified_check.toggled.connect(self.set_allow_unverified)

        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        for column, title in enumerate(("Model", "Size", "Licence", "Status", "")):
            header = QLabel(f"<b>{title}</b>")
            grid.addWidget(header, 0, column)
        line = 1
        for role, entries in entries_by_role(self._catalogue):
            heading = QLabel(f"<b>{ROLE_TITLES.get(role, role.capitalize())}</b>")
            heading.setStyleSheet("color:#c8c8c8; padding-top:8px;")
            grid.addWidget(heading, line, 0, 1, 5)
            line += 1
            for entry in entries:
                self._rows[entry.name] = self._add_row(grid, line, entry)
                line += 1
        grid.setColumnStretch(0, 3)
        grid.setColumnStretch(2, 2)
        grid.setColumnStretch(3, 2)
        holder = QWidget()
        holder_layout = QVBoxLayout(holder)
        holder_layout.addLayout(grid)
        holder_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(holder)

        self.licence_box = QFrame()
        self.licence_box.setFrameShape(QFrame.Shape.StyledPanel)
        self.licence_box.setStyleSheet("QFrame { background:#3a3320; border-radius:4px; }")
        self.licence_text = QLabel()
        self.licence_text.setWordWrap(True)
        self.licence_text.setOpenExternalLinks(True)
        self.accept_button = QPushButton("Accept and download")
        self.accept_button.clicked.connect(self._accept_licence)
        self.decline_button = QPushButton("Decline")
        self.decline_button.clicked.connect(self._decline_licence)
        box = QHBoxLayout(self.licence_box)
        box.addWidget(self.licence_text, 1)
        box.addWidget(self.accept_button)
        box.addWidget(self.decline_button)
        self.licence_box.hide()

        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color:#e06060;")
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        self.defaults_button = QPushButton("Download the default set")
        self.defaults_button.clicked.connect(self.download_defaults)
        close = QPushButton("Close")
        close.setToolTip("Downloads carry on in the background")
        close.clicked.connect(self.hide)
        bottom = QHBoxLayout()
        bottom.addWidget(self.defaults_button)
        bottom.addStretch(1)
        bottom.addWidget(close)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(folder_row)
        layout.addWidget(self.unverified_check)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.licence_box)
        layout.addWidget(self.error_label)
        layout.addLayout(bottom)
        self.resize(1000, 560)

        t = self.tasks
        t.state.connect(self._on_state)
        t.progress.connect(self._on_progress)
        t.failed.connect(self._on_failed)
        t.cancelled.connect(self._on_cancelled)
        t.busy_changed.connect(self._on_busy)
        for row in self._rows.values():
            row.status.setText("checking…")
        t.refresh()

    def _add_row(self, grid: QGridLayout, i: int, entry: ModelEntry) -> _Row:
        default = " <i>(default)</i>" if entry.default else ""
        name = QLabel(f"<b>{entry.name}</b>{default}<br><span style='color:#aaa'>{entry.description}</span>")
        name.setWordWrap(True)
        licence = QLabel(f"<a href='{entry.licence_url}' style='color:#8ab4f8'>{entry.licence}</a>")
        licence.setWordWrap(True)
        licence.setOpenExternalLinks(True)
        licence.setToolTip(entry.licence_url)
        status = QLabel()
        status.setWordWrap(True)
        bar = QProgressBar()
        bar.setTextVisible(True)
        bar.setMaximumHeight(16)
        bar.hide()
        status_cell = QVBoxLayout()
        status_cell.setSpacing(2)
        status_cell.addWidget(status)
        status_cell.addWidget(bar)
        download = QPushButton("Download")
        download.clicked.connect(lambda: self.start_download(entry.name))
        verify = QPushButton("Verify")
        verify.setToolTip("Read every byte again and compare with the published SHA-256")
        verify.clicked.connect(lambda: self.verify(entry.name))
        cancel = QPushButton("Cancel")
        cancel.setToolTip("Stop; what arrived is kept and Download resumes it")
        cancel.clicked.connect(self.tasks.cancel)
        buttons = QHBoxLayout()
        for button in (download, verify, cancel):
            buttons.addWidget(button)
        grid.addWidget(name, i, 0)
        size = QLabel(size_text(entry.shown_size, exact=entry.total_size is not None))
        if entry.total_size is None and entry.shown_size is not None:
            size.setToolTip("The publisher's rounded size (the exact one is not published)")
        grid.addWidget(size, i, 1)
        grid.addWidget(licence, i, 2)
        grid.addLayout(status_cell, i, 3)
        grid.addLayout(buttons, i, 4)
        return _Row(entry, status, bar, download, verify, cancel)

    # ---- queries (what the user sees) -------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        return self.tasks.store.models_dir

    def status_text(self, name: str) -> str:
        return self._rows[name].status.text()

    def row(self, name: str) -> _Row:
        return self._rows[name]

    def state(self, name: str) -> EntryState | None:
        return self._states.get(name)

    def missing_defaults(self) -> list[str]:
        return [
            e.name
            for e in self._catalogue
            if e.default and self._states.get(e.name, EntryState(e.name, "missing")).status in _FETCHABLE
        ]

    # ---- commands ---------------------------------------------------------------------------------------

    def start_download(self, name: str) -> None:
        """Download `name`, once its licence is accepted (asked here the first time)."""
        if name in self._queued or name in self._awaiting_licence:
            return
        entry = self._rows[name].entry
        self.error_label.hide()
        if not self.tasks.licence_accepted(entry):
            self._awaiting_licence.append(name)
            self._show_licence_question()
            return
        self._queued.append(name)
        self.tasks.download(name)
        self._rows[name].status.setText("waiting to download…")
        self._update_buttons()

    def download_defaults(self) -> None:
        for name in self.missing_defaults():
            self.start_download(name)

    def verify(self, name: str) -> None:
        self._rows[name].status.setText("checking every byte…")
        self.tasks.refresh([name], thorough=True)

    def set_folder(self, folder: Path) -> None:
        """Use another models folder (a running download is stopped first; it resumes there later)."""
        if self._busy or self._queued:
            self.tasks.cancel()
        self.folder_edit.setText(str(folder))
        self._check_again(folder)
        self.folder_changed.emit(folder)

    def set_allow_unverified(self, allow: bool) -> None:
        """Allow (or stop allowing) files whose hash is not the published one; every row is checked
        again, and the window uses them from the next Start."""
        if allow == self._allow_unverified:
            return
        self._allow_unverified = allow
        if self.unverified_check.isChecked() != allow:
            self.unverified_check.setChecked(allow)
        self._check_again(self.folder)
        self.unverified_changed.emit(allow)

    @property
    def allow_unverified(self) -> bool:
        return self._allow_unverified

    def _store(self, folder: Path) -> ModelStore:
        return ModelStore(folder, allow_unverified=self._allow_unverified, catalogue=self._catalogue)

    def _check_again(self, folder: Path) -> None:
        self.tasks.set_store(self._store(folder))
        self.error_label.hide()  # about the folder (or the choice) before: a stale error misleads
        self._states.clear()
        for row in self._rows.values():
            row.status.setText("checking…")
        self.tasks.refresh()

    def closeEvent(self, event: QCloseEvent | None) -> None:
        self.hide()  # downloads carry on; the window's Models… button shows it again
        if event is not None:
            event.ignore()

    def shutdown(self) -> None:
        self.tasks.shutdown()

    # ---- licence ----------------------------------------------------------------------------------------

    def _show_licence_question(self) -> None:
        if not self._awaiting_licence:
            self.licence_box.hide()
            return
        entry = self._rows[self._awaiting_licence[0]].entry
        self.licence_text.setText(
            f"<b>{entry.name}</b> is published under: <b>{entry.licence}</b> "
            f"(<a href='{entry.licence_url}' style='color:#8ab4f8'>{entry.licence_url}</a>). "
            "Read it before you accept; you are asked once for each licence."
        )
        self.licence_box.show()

    def _accept_licence(self) -> None:
        if not self._awaiting_licence:
            return
        licence = self._rows[self._awaiting_licence[0]].entry.licence
        self.tasks.accept_licence(self._rows[self._awaiting_licence[0]].entry)
        same = [n for n in self._awaiting_licence if self._rows[n].entry.licence == licence]
        self._awaiting_licence = [n for n in self._awaiting_licence if n not in same]
        for name in same:
            self.start_download(name)
        self._show_licence_question()

    def _decline_licence(self) -> None:
        if not self._awaiting_licence:
            return
        licence = self._rows[self._awaiting_licence[0]].entry.licence
        declined = [n for n in self._awaiting_licence if self._rows[n].entry.licence == licence]
        self._awaiting_licence = [n for n in self._awaiting_licence if n not in declined]
        for name in declined:
            self._rows[name].status.setText("not downloaded: its licence was declined")
        self._show_licence_question()

    # ---- task reports -----------------------------------------------------------------------------------

    def _on_state(self, state: EntryState) -> None:
        row = self._rows.get(state.name)
        if row is None:
            return
        old = self._states.get(state.name)
        self._states[state.name] = state
        if state.name == self._busy or state.name in self._queued:
            return  # a look-up that raced a running download: its own report follows
        row.bar.hide()
        text = {
            "missing": "missing",
            "verified": f"verified ({state.detail or 'SHA-256 matches'})",
            "unverified": f"unverified: {state.detail}",
            "different": f"{state.detail}. Download replaces it, or allow unverified files above",
            "damaged": f"damaged: {state.detail}",
            "unreadable": f"cannot be read: {state.detail}",
        }[state.status]
        if state.status == "missing" and state.kept_bytes:
            text = f"paused: {state.kept_bytes / 1e6:,.1f} MB downloaded; Download resumes"
        row.status.setText(text)
        row.status.setStyleSheet(f"color:{_COLOURS[state.status]};")
        row.status.setToolTip(state.detail)
        self._update_buttons()
        if old is not None and old.status != state.status:
            self.models_changed.emit()

    def _on_progress(self, name: str, done: int, total: int) -> None:
        row = self._rows.get(name)
        if row is None:
            return
        row.bar.show()
        if total > 0:
            row.bar.setRange(0, 1000)
            row.bar.setValue(min(int(done * 1000 / total), 1000))
            row.bar.setFormat(f"{done * 100 / total:.0f}%")
            row.status.setText(f"downloading: {done / 1e6:,.1f} of {total / 1e6:,.1f} MB")
        else:
            row.bar.setRange(0, 0)  # size unknown: a busy bar
            row.status.setText(f"downloading: {done / 1e6:,.1f} MB")
        row.status.setStyleSheet("")

    def _on_failed(self, name: str, message: str) -> None:
        self._finished(name)
        self.error_label.setText(message)
        self.error_label.show()

    def _on_cancelled(self, name: str) -> None:
        self._finished(name)
        self.tasks.refresh([name])  # says how much was kept

    def _on_busy(self, name: str) -> None:
        if not name and self._busy:
            self._finished(self._busy)
        self._busy = name
        self._update_buttons()

    def _finished(self, name: str) -> None:
        if name in self._queued:
            self._queued.remove(name)
        self._update_buttons()

    def _update_buttons(self) -> None:
        for name, row in self._rows.items():
            state = self._states.get(name)
            active = name == self._busy or name in self._queued
            row.download.setEnabled(not active and (state is None or state.status in _FETCHABLE))
            row.verify.setEnabled(not active and state is not None and state.status != "missing")
            row.cancel.setEnabled(active)
        self.defaults_button.setEnabled(bool([n for n in self.missing_defaults() if n not in self._queued]))

    # ---- folder -----------------------------------------------------------------------------------------

    def _choose_folder(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Folder for the models", str(self.folder))
        if chosen:
            self.set_folder(Path(chosen))

    def _open_folder(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.folder)))
