"""The main window: wires the panels to the engine controller and keeps the config in step.

Left: messages, the preview with its view mode and Start/Stop, the fps/latency graph.
Right: tabs for source faces, input, output and the per-stage controls. Bottom: live numbers.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import cast

from PyQt6.QtCore import QByteArray, Qt, QTimer
from PyQt6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PyQt6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gui.check_dialog import CheckDialog
from gui.composer import SettingsComposer
from gui.config import ConfigStore, GuiConfig, ViewMode
from gui.controller import EngineController, RunPlan, RunState
from gui.face_analysis import PhotoAnalysisService
from gui.face_map import FaceMapKeeper
from gui.face_picker import FacePicker
from gui.gallery import FaceGallery
from gui.graph import FpsLatencyGraph
from gui.input_panel import InputPanel
from gui.io_banners import IoBanners
from gui.live_numbers import LiveNumbers
from gui.log_viewer import LogViewer
from gui.messages import Level, MessageBar
from gui.models_banner import drop_models_banner, models_banner, show_models_banner
from gui.models_dialog import UNVERIFIED_HELP, ModelsDialog
from gui.output_panel import OutputPanel
from gui.preview import OriginalTap, PreviewFeed, PreviewWidget
from gui.remote_panel import attach_remote_panel
from gui.run_status import RecIndicator, local_badge
from gui.services import AppServices
from gui.stage_panel import StagePanel
from gui.takes import Takes
from gui.widgets import ClickOnceButton, ComboBox, ElidedLabel, PageScrollArea
from realtime.api import (
    ActiveFace,
    FaceCastError,
    LivePicks,
    ModelOptions,
    OutputInfo,
    PickedIdentity,
    Settings,
    default_models_dir,
    quality_model_names,
    virtual_camera_fix,
)

VIEW_MODES: tuple[tuple[ViewMode, str], ...] = (
    ("side_by_side", "Side by side"),
    ("swapped", "Output"),
    ("original", "Original"),
)
STATS_INTERVAL_MS = 250
APPLY_DELAY_MS = 150  # spin boxes fire per step: settle before asking the engine
STATUS_NOTE_MS = 8000  # how long a status-bar note stays
VCAM_UNAVAILABLE = (
    "Virtual camera unavailable: preview and recording continue. The Output tab says how to fix it."
)
RUNNING_NOTE = "Running: "  # the run's description in the status bar, while it runs

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    def __init__(
        self,
        services: AppServices,
        store: ConfigStore,
        config: GuiConfig,
        load_message: str = "",
    ) -> None:
        super().__init__()
        self.setWindowTitle("FaceCast")
        self._services = services
        self._store = store
        self._config = config
        self._closed = False
        self._composer = SettingsComposer(config.preset, config.disclosure_label)
        override_problems = self._composer.restore_overrides(config.overrides)

        self._active = ActiveFace(None)
        self._run_faces: tuple[Path, ...] = ()  # the usable faces the current run was started with
        self._runs = 0  # Starts so far: which run an input/output error banner belongs to
        self._tap = OriginalTap()
        self._feed = PreviewFeed(self._tap, self)
        self._picks = LivePicks()  # faces clicked in the preview, for every run's analyser
        if config.picked_embedding:
            self._picks.restore(PickedIdentity(config.picked_recognizer, config.picked_embedding))
        self.face_map = FaceMapKeeper(self._picks, self._note_info)
        allow = services.model_options.allow_unverified or config.allow_unverified
        self._model_options = _model_options(
            replace(services.model_options, picks=self._picks, allow_unverified=allow), config.models_dir
        )
        self.photos = PhotoAnalysisService(self._model_options, self._composer.effective(), self)
        self.controller = EngineController(
            self._model_options, self._active, self._feed, services.vcam_backend, self
        )
        self.models_dialog: ModelsDialog | None = None  # made when first opened
        self.log_viewer: LogViewer | None = None  # made when Log finds no viewer on the desktop
        self._models_dialog_offered = not services.models_dialog_at_start

        self.messages = MessageBar()
        self._io_banners = IoBanners(self.messages)  # (level, text) -> the run it came from
        self.preview = PreviewWidget()
        self.face_picker = FacePicker(self.preview, self._picks, self, choices=self.face_map.choices)
        self.graph = FpsLatencyGraph()
        self.view_combo = ComboBox()
        for mode, text in VIEW_MODES:
            self.view_combo.addItem(text, mode)
        self.start_button = ClickOnceButton("Start")
        self.start_button.setMinimumWidth(110)
        self.start_button.setToolTip("Start or stop (Ctrl+Return)")
        self.models_button = QToolButton()
        self.models_button.setText("Models…")
        self.models_button.setToolTip("Download and check the face models, choose their folder")
        self.check_button = QToolButton()
        self.check_button.setText("Check…")
        self.check_button.setToolTip(
            "Check a video or picture: FaceCast's invisible watermark and its Content Credentials (C2PA)"
        )
        self.check_dialog: CheckDialog | None = None  # made when first opened
        self.log_button = QToolButton()
        self.log_button.setText("Log")
        self.log_button.setToolTip(f"Open the log file ({services.log_path or 'not written in this run'})")
        self.log_button.setEnabled(services.log_path is not None)
        self.state_label = QLabel("Stopped")
        self.rec_indicator = RecIndicator()
        self.gallery = FaceGallery(self.photos)
        self.input_panel = InputPanel(services.list_cameras, services.probe_modes)
        self.output_panel = OutputPanel()
        self._takes = Takes(self.messages, self.rec_indicator, self.output_panel)
        self.stage_panel = StagePanel()
        self.numbers = LiveNumbers()
        # A visible state, not a hidden environment variable: the models need not be the published ones.
        self.unverified_label = QLabel("unverified models allowed")
        self.unverified_label.setStyleSheet("color:#c0c060;")
        self.unverified_label.setToolTip(UNVERIFIED_HELP + " Change it in Models….")
        self.unverified_label.setVisible(self._model_options.allow_unverified)
        self.status_note = ElidedLabel()  # left of the live numbers: the run, the active face
        self._note_timer = QTimer(self)
        self._note_timer.setSingleShot(True)
        self._note_timer.setInterval(STATUS_NOTE_MS)
        self._note_timer.timeout.connect(self._clear_note)
        self._models_checked_for = _models_needed(self._composer.effective())
        self._build_layout()
        self.remote_panel = attach_remote_panel(self, config.remote, store.path)
        self.remote_panel.link_state.connect(lambda *_: self._update_badge())

        self._apply_timer = QTimer(self)
        self._apply_timer.setSingleShot(True)
        self._apply_timer.setInterval(APPLY_DELAY_MS)
        self._apply_timer.timeout.connect(self._apply_settings)
        self._stats_timer = QTimer(self)
        self._stats_timer.setInterval(STATS_INTERVAL_MS)
        self._stats_timer.timeout.connect(self._refresh_stats)
        self._connect()
        self._restore(config)
        if load_message:
            self.messages.show_message("warning", load_message)
        dropped = [f"A saved stage setting was dropped: {problem}" for problem in override_problems]
        if self._composer.preset != config.preset:
            dropped.append(
                f"The saved preset '{config.preset}' no longer exists; using '{self._composer.preset}'."
            )
        for text in dropped:
            self.messages.show_message("warning", text)
        if dropped and not load_message:  # (a load problem has backed the file up already)
            # The next save writes the defaults over those values: the original is kept first, as
            # for any other setting that cannot be used (a newer FaceCast's file, a downgrade).
            self.messages.show_message("info", self._store.keep_original("had settings this version drops"))
        self.input_panel.refresh_cameras()
        self.photos.check_models()  # a fresh install hears of the models before its first Start

    # ---- construction ------------------------------------------------------------------------------------

    def _build_layout(self) -> None:
        toolbar = QHBoxLayout()
        toolbar.addWidget(self.start_button)
        toolbar.addWidget(self.rec_indicator)
        toolbar.addWidget(self.state_label, 1)
        toolbar.addWidget(QLabel("View"))
        toolbar.addWidget(self.view_combo)
        # Here, not in the tab bar's corner: there they took the room of the last tab, which hid
        # behind scroll arrows at the window's default size. A row of their own under the run's
        # controls: on one row they made the window too wide for a small screen (1021 px at least).
        tools = QHBoxLayout()
        tools.addStretch(1)
        tools.addWidget(self.unverified_label)
        tools.addWidget(self.models_button)
        tools.addWidget(self.check_button)
        tools.addWidget(self.log_button)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(6, 6, 6, 6)
        left_layout.addWidget(self.messages)
        left_layout.addLayout(toolbar)
        left_layout.addLayout(tools)
        left_layout.addWidget(self.preview, 1)
        left_layout.addWidget(self.graph)

        self.tabs = QTabWidget()
        self.tabs.addTab(self.gallery, "Faces")
        # As wide as the widest page needs (the pages say so): at the window's minimum size the
        # Input and Output pages scrolled sideways, cutting off Probe modes, Browse… and Dismiss.
        self.tabs.addTab(PageScrollArea(self.input_panel), "Input")
        self.tabs.addTab(PageScrollArea(self.output_panel), "Output")
        self.tabs.addTab(PageScrollArea(self.stage_panel), "Stages")

        splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter = splitter
        splitter.addWidget(left)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 0)
        splitter.setSizes([900, 400])
        self.setCentralWidget(splitter)

        status = self.statusBar()
        assert status is not None
        self.status_note.setContentsMargins(4, 0, 0, 0)  # not flush with the window's edge
        status.addWidget(self.status_note, 1)
        self.numbers.add_to(status)
        self.resize(1320, 800)

    def _connect(self) -> None:
        queued = Qt.ConnectionType.QueuedConnection
        self._feed.frame_ready.connect(self._show_preview, queued)  # type: ignore[call-arg]
        self.start_button.clicked.connect(self.toggle_running)
        self.models_button.clicked.connect(self.open_models_dialog)
        self.check_button.clicked.connect(self.open_check_dialog)
        self.log_button.clicked.connect(self._open_log)
        self.view_combo.currentIndexChanged.connect(self._on_view)
        self.face_picker.note.connect(self.status_note.setText)
        c = self.controller
        c.state_changed.connect(self._on_state)
        # Bound methods, not lambdas: Qt drops a bound slot with its window, while a lambda would
        # still run on a closed window when a run's last signal arrives after it (a crash).
        c.models_changed.connect(self._on_models_changed)
        c.message.connect(self._on_message)
        c.io_error.connect(self._on_io_error)
        c.vcam_unavailable.connect(self._on_vcam_unavailable)
        c.described.connect(self._on_described)
        self.gallery.active_changed.connect(self._on_active_face)
        self.gallery.faces_changed.connect(self._on_faces_changed)
        self.gallery.models_missing_found.connect(self._warn_models_missing)
        self.photos.models_checked.connect(self._on_models_checked)
        self.input_panel.changed.connect(self._on_io_changed)
        self.output_panel.changed.connect(self._on_io_changed)
        self.output_panel.disclosure_changed.connect(self._on_disclosure)
        self.output_panel.help_panel.retry_requested.connect(self._retry_output)
        self.output_panel.open_folder_requested.connect(self._open_folder)
        self.stage_panel.preset_requested.connect(self.set_preset)
        self.stage_panel.override_requested.connect(self.set_override)
        self.stage_panel.reset_requested.connect(self.reset_to_preset)
        shortcuts = (
            ("F2", self.gallery.cycle),
            ("Ctrl+Tab", self.gallery.cycle),
            ("Ctrl+Shift+Tab", self._cycle_back),
            ("Ctrl+Return", self.toggle_running),
        )
        for keys, action in shortcuts:
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(action)

    def _restore(self, config: GuiConfig) -> None:
        if config.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(config.window_geometry.encode("ascii")))
        self.view_combo.setCurrentIndex(max(self.view_combo.findData(config.view), 0))
        self._on_view()
        self.input_panel.set_config(config.input)
        self.output_panel.set_config(config.output, config.disclosure_label)
        self._refresh_stage_panel()
        self.gallery.add_photos(Path(p) for p in config.photos)
        if config.active_face:
            self.gallery.set_active(Path(config.active_face))
        self.face_map.restore(config.face_map, config.photos)

    # ---- what is saved ---------------------------------------------------------------------------------

    def current_config(self) -> GuiConfig:
        picked = self._picks.remembered
        return replace(
            self._config,
            preset=self._composer.preset,
            overrides=self._composer.overrides,
            disclosure_label=self._composer.disclosure_label,
            photos=tuple(str(p) for p in self.gallery.photos),
            active_face=str(self.gallery.active) if self.gallery.active else "",
            view=self.preview.mode,
            input=self.input_panel.config(),
            output=self.output_panel.config(),
            remote=self.remote_panel.config(),
            window_geometry=bytes(self.saveGeometry().toBase64().data()).decode("ascii"),
            picked_recognizer=picked.recognizer if picked else "",
            picked_embedding=picked.embedding if picked else (),
            face_map=self.face_map.entries(),
        )

    def save_config(self) -> None:
        try:
            self._store.save(self.current_config())
        except OSError as exc:
            text = f"Could not save settings to {self._store.path}: {exc}"
            # On exit the window is closing: the banner would never be seen, so say it on stderr too.
            log.error("%s", text)
            print(f"error: {text}", file=sys.stderr)
            self.messages.show_message("error", text)

    def closeEvent(self, event: QCloseEvent | None) -> None:
        if self._closed:  # a second request (Ctrl+C again, a signal after the button)
            super().closeEvent(event)
            return
        self._closed = True
        self._stats_timer.stop()
        # A path or number typed but not confirmed with Return is what the window shows: save it.
        self._commit_pending_edit()
        self.save_config()
        self.controller.shutdown()
        self.photos.shutdown()
        self.face_picker.close()
        if self.models_dialog is not None:
            self.models_dialog.shutdown()
            self.models_dialog.deleteLater()
        super().closeEvent(event)

    # ---- run ---------------------------------------------------------------------------------------------

    def plan(self) -> RunPlan:
        """What Start opens now; the usable faces are snapshotted for the run (see _on_faces_changed)."""
        faces = self.gallery.usable_faces()
        self._run_faces = tuple(path for path, _ in faces)
        self.face_map.on_run(self._run_faces)
        self._sync_active_face()
        return RunPlan(
            self.input_panel.config(),
            self.output_panel.config(),
            self._composer.effective(),
            tuple(identity for _, identity in faces),
        )

    def toggle_running(self) -> None:
        if self.controller.state == RunState.IDLE:
            self._commit_pending_edit()
            self.output_panel.help_panel.hide()
            self.graph.clear()
            self._takes.started()
            plan = self.plan()
            missing = self.gallery.models_missing()
            if not plan.faces and missing:
                self._warn_models_missing(missing)
                self.gallery.retry_missing_models()  # downloaded meanwhile? used as soon as found
            self.photos.check_models()  # and the banner goes once they all are
            self.controller.start(plan)
        else:
            self.controller.stop()

    @staticmethod
    def _commit_pending_edit() -> None:
        """Ctrl+Return right after typing a path or a number: that edit has not been committed yet
        (editingFinished fires on Return or focus loss), so the run would start with the old value."""
        focused = QApplication.focusWidget()
        if focused is None:
            return
        parent = focused.parentWidget()
        if isinstance(parent, QAbstractSpinBox):
            parent.interpretText()
        elif isinstance(focused, QAbstractSpinBox):
            focused.interpretText()
        elif isinstance(focused, QLineEdit):
            focused.editingFinished.emit()

    def _on_io_changed(self) -> None:
        if not self.output_panel.config().vcam:
            self.messages.dismiss("warning", VCAM_UNAVAILABLE)  # about an output no longer asked for
            self._io_banners.forget("warning", VCAM_UNAVAILABLE)
        if self.controller.state in (RunState.STARTING, RunState.RUNNING):
            self._status_message("Input/output changed: restarting…")
            self.controller.restart(self.plan)

    def _retry_output(self) -> None:
        self.output_panel.help_panel.hide()
        if self.controller.state != RunState.IDLE:
            self.controller.restart(self.plan)

    def _on_state(self, value: str) -> None:
        state = RunState(value)
        text = {
            RunState.IDLE: "Stopped",
            RunState.STARTING: "Starting…",
            RunState.RUNNING: "Running",
            RunState.STOPPING: "Stopping…",
        }[state]
        self.state_label.setText(text)
        self.start_button.setText("Start" if state == RunState.IDLE else "Stop")
        self.start_button.setEnabled(state != RunState.STOPPING)
        self.input_panel.set_capturing(state != RunState.IDLE)
        if state == RunState.STARTING:
            self._runs += 1
        if state != RunState.RUNNING and self.status_note.full_text().startswith(RUNNING_NOTE):
            self._status_message("")  # else it says "Running: …" beside "Stopped" and the Start's error
        if state == RunState.RUNNING:
            self._io_banners.clear_before(self._runs)
            self._stats_timer.start()
        elif state == RunState.IDLE:
            self._takes.stopped()
            self._stats_timer.stop()
            self._refresh_stats()
            self.preview.clear()
            self.graph.clear()  # its lines are the last run's, drawn as if live
            self.output_panel.set_vcam_state("Virtual camera: not running")
        self._update_badge()

    def _show_preview(self) -> None:
        item = self._feed.take()
        if item is not None and self.controller.state != RunState.IDLE:
            self.preview.show_frame(item)

    def _on_view(self) -> None:
        mode = cast(ViewMode, self.view_combo.currentData())
        self.preview.set_mode(mode)
        self._tap.set_enabled(mode != "swapped")

    def _clear_note(self) -> None:
        self.status_note.set_full_text("")

    def _cycle_back(self) -> None:
        self.gallery.cycle(-1)

    def _note_info(self, text: str) -> None:
        self.messages.show_message("info", text)

    def _on_models_changed(self, _state: object, _text: str) -> None:
        self._update_badge()

    def _on_io_error(self, text: str) -> None:
        self._show_io_banner("error", text)

    def _update_badge(self) -> None:
        badge = ""
        if self.controller.state == RunState.RUNNING:
            remote = self.remote_panel.badge()  # the server's stream: the local engine loads no models
            has_face = self._active.get() is not None
            missing = not has_face and bool(self.gallery.models_missing())
            c = self.controller
            local = local_badge(c.models, c.previous_models_running, has_face, missing)
            badge = local if remote is None else remote
        self.preview.set_badge(badge)

    def _refresh_stats(self) -> None:
        stats = self.controller.stats()
        if stats is None:
            self.numbers.clear()
            self.output_panel.set_latency(None)
            self.stage_panel.set_stage_ms({})  # not the last run's figures after Stop
            return
        lat = stats.latency_ms
        self.numbers.show(stats, self.controller.stages_label)
        self.graph.add_sample(stats.fps_out, lat.p50)
        self.stage_panel.set_stage_ms(stats.stages_ms)
        self.output_panel.set_latency(lat.p50 if lat.count else None, lat.p99 if lat.count else None)

    # ---- settings ----------------------------------------------------------------------------------------

    def set_preset(self, name: str) -> None:
        try:
            self._composer.set_preset(name)
        except FaceCastError as exc:
            self.stage_panel.show_error(exc.user_message())
            return
        self.stage_panel.show_error("")
        self._settings_changed()

    def reset_to_preset(self) -> None:
        self._composer.reset()
        self.stage_panel.show_error("")
        self._settings_changed()

    def set_override(self, key: str, value: object) -> None:
        try:
            self._composer.set_override(key, value)
        except FaceCastError as exc:
            self.stage_panel.show_error(exc.user_message())
            self._refresh_stage_panel()  # put the control back to the value in effect
            return
        self.stage_panel.show_error("")
        self._settings_changed()

    def _on_disclosure(self, on: bool) -> None:
        self._composer.set_disclosure_label(on)
        self._settings_changed()

    def _settings_changed(self) -> None:
        self._refresh_stage_panel()
        settings = self._composer.effective()
        self.photos.set_settings(settings)
        needed = _models_needed(settings)
        if needed[:1] != self._models_checked_for[:1]:
            self.gallery.reanalyse()  # the photos' faces are the old detector's
        if needed != self._models_checked_for:
            # Another detector (mtcnn needs no download) or swap model: the models banner follows
            # now, not at the next Start.
            self._models_checked_for = needed
            self.photos.check_models()
        self._apply_timer.start()

    def _apply_settings(self) -> None:
        self.controller.update_settings(self._composer.effective())

    def _refresh_stage_panel(self) -> None:
        self.stage_panel.set_settings(
            self._composer.preset, self._composer.effective(), set(self._composer.overrides)
        )

    # ---- faces and messages ------------------------------------------------------------------------------

    def _sync_active_face(self) -> None:
        """Point the running swap at the active photo (an index into the run's faces)."""
        active = self.gallery.active
        self._active.set(self._run_faces.index(active) if active in self._run_faces else None)
        self._update_badge()

    def _on_active_face(self, path: Path | None) -> None:
        self._sync_active_face()
        if path is not None:
            self._status_message(f"Active face: {path.name}")

    def _on_faces_changed(self) -> None:
        """A usable face was added or removed: a running swap reloads with the new set."""
        self.face_map.on_photos(self.gallery.photos)
        usable = tuple(path for path, _ in self.gallery.usable_faces())
        running = self.controller.state in (RunState.STARTING, RunState.RUNNING)
        if running and usable != self._run_faces:
            self._status_message("Source faces changed: reloading…")
            self.controller.restart(self.plan)
        else:
            self._sync_active_face()

    def _warn_models_missing(self, text: str) -> None:
        """A face that cannot be swapped in for want of models: said where the user looks (the badge
        alone blamed the photo), with the fix; once, however many photos are waiting."""
        show_models_banner(self.messages, models_banner(text))
        self._update_badge()

    def _on_models_checked(self, text: str) -> None:
        """The models check (at start-up, at Start): missing ones are named; once they are all
        there, a banner that still says otherwise goes."""
        if text:
            self._warn_models_missing(text)
            if not self._models_dialog_offered:  # a first run: the models come from here
                self._models_dialog_offered = True
                self.open_models_dialog()
            return
        drop_models_banner(self.messages)

    def _open_log(self) -> None:
        """The log in the desktop's text viewer, or in a window of its own where there is none
        (the button did nothing visible then)."""
        path = self._services.log_path
        if path is not None:
            self._services.open_path(path, lambda: self._show_log(path))

    def open_check_dialog(self) -> CheckDialog:
        """The "Check a video or picture" dialog (one, kept between openings)."""
        if self.check_dialog is None:
            self.check_dialog = CheckDialog(self)
        self.check_dialog.show()
        self.check_dialog.raise_()
        return self.check_dialog

    def _show_log(self, path: Path) -> None:
        self.log_viewer = LogViewer(path, self)
        self.log_viewer.show()

    def _open_folder(self, folder: Path) -> None:
        def failed() -> None:
            self.messages.show_message(
                "info", f"No file manager opens folders here; the take is in {folder}."
            )

        self._services.open_path(folder, failed)

    # ---- models --------------------------------------------------------------------------------------------

    @property
    def models_folder(self) -> Path:
        return self._model_options.models_dir or default_models_dir()

    def open_models_dialog(self) -> ModelsDialog:
        if self.models_dialog is None:
            services = self._services
            dialog = ModelsDialog(
                self.models_folder,
                services.catalogue,
                services.download_tuning,
                self,
                allow_unverified=self._model_options.allow_unverified,
            )
            dialog.models_changed.connect(self._on_models_downloaded)
            dialog.folder_changed.connect(self.set_models_folder)
            dialog.unverified_changed.connect(self.set_allow_unverified)
            self.models_dialog = dialog
        self.models_dialog.show()
        self.models_dialog.raise_()
        return self.models_dialog

    def set_models_folder(self, folder: Path) -> None:
        """The folder chosen in the Models dialog: remembered, used by photos now and from the next Start."""
        self._config = replace(self._config, models_dir=str(folder))
        self._model_options = _model_options(self._services.model_options, str(folder))
        self.controller.set_model_options(self._model_options)
        self.photos.set_model_options(self._model_options)
        self._on_models_downloaded()

    def set_allow_unverified(self, allow: bool) -> None:
        """The Models dialog's "Allow unverified files": remembered, used by photos now and from
        the next Start, and shown beside the live numbers while it is on."""
        self._config = replace(self._config, allow_unverified=allow)
        self._model_options = replace(self._model_options, allow_unverified=allow, _store=None)
        self.controller.set_model_options(self._model_options)
        self.photos.set_model_options(self._model_options)
        self.unverified_label.setVisible(allow)
        self._on_models_downloaded()

    def _on_models_downloaded(self) -> None:
        """A model arrived (or turned out damaged): the banner and the waiting photos follow now."""
        self.photos.check_models()
        self.gallery.retry_missing_models()

    def _show_io_banner(self, level: Level, text: str) -> None:
        self._io_banners.show(level, text, self._runs)
        self._update_badge()

    def _on_message(self, level: str, text: str) -> None:
        known = level if level in ("info", "warning", "error") else "info"
        if known == "error" and self.controller.state != RunState.IDLE:
            # A run's error (a model that failed, a device that stopped): down once a later run runs.
            self._show_io_banner("error", text)
            return
        self.messages.show_message(cast(Level, known), text)
        self._update_badge()

    def _on_described(self, text: str, outputs: OutputInfo) -> None:
        """The run is up: say what it sends where, and whether a restart began a new take."""
        self._status_message(RUNNING_NOTE + text)
        wanted = self.output_panel.config()
        if outputs.vcam is not None:
            self.output_panel.set_vcam_state(f"Virtual camera: {outputs.vcam}")
        elif wanted.vcam:
            self.output_panel.set_vcam_state("Virtual camera: unavailable (see below)")
        else:
            self.output_panel.set_vcam_state("Virtual camera: off")
        self._takes.recording(outputs.record_path)

    def _on_vcam_unavailable(self, error_text: str) -> None:
        fix = virtual_camera_fix(self._services.platform, error_text)
        self.output_panel.show_vcam_help(fix)
        self._show_io_banner("warning", VCAM_UNAVAILABLE)

    def _status_message(self, text: str) -> None:
        """A note in the status bar for a while ("" takes it down). Elided again whenever the live
        numbers beside it widen or the window narrows; the whole text is its tooltip."""
        self.status_note.set_full_text(text)
        if text:
            self._note_timer.start()
        else:
            self._note_timer.stop()


def _models_needed(settings: Settings) -> tuple[str, ...]:
    """What the models check depends on: the models these settings run."""
    return (settings.detector.model, settings.swap.model, *quality_model_names(settings))


def _model_options(base: ModelOptions, folder: str) -> ModelOptions:
    """`base` with the models folder chosen in the window, if any (a new store: the old one's hash
    cache belongs to the old folder)."""
    if not folder:
        return base
    return replace(base, models_dir=Path(folder), _store=None)
