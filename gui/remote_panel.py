"""Process on: this computer, or a FaceCast server (URL and token).

With a server chosen, Start runs realtime.remote's client instead of the local engine, with the
same input and outputs; this panel shows the link (connected, reconnecting, the one-line reason it
failed) and, on the first connection to a server, its certificate fingerprint for the user to
compare and trust (trust on first use, pinned in the same known-hosts file as the command line's).
Nothing here blocks the GUI thread: the certificate check runs on a thread, the run on the
controller's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtWidgets import (
    QButtonGroup,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from gui.config import RemoteConfig
from gui.controller import EngineController, EngineMaker, RunState
from gui.remote_run import (
    RemoteEngine,
    RemoteRun,
    ServerCheck,
    TokenStore,
    check_server,
    panel_error,
    trust,
)
from realtime.api import Engine, EngineEvent, FaceCastError, FanOutSink, FrameSource, Settings
from realtime.remote.signalling import Endpoint, default_known_hosts

STATE_COLOURS: Mapping[str, str] = MappingProxyType(
    {
        "idle": "#a0a0a0",
        "checking": "#a0a0a0",
        "connecting": "#a0a0a0",
        "connected": "#60c060",
        "reconnecting": "#e0b040",
        "error": "#e06060",
        "untrusted": "#e0b040",
        "trusted": "#60c060",
    }
)


class _Window(Protocol):
    """What the panel needs of the main window."""

    tabs: QTabWidget
    controller: EngineController

    @property
    def gallery(self) -> _Gallery: ...


class _Gallery(Protocol):
    @property
    def active(self) -> Path | None: ...

    @property
    def photos(self) -> list[Path]: ...


class RemotePanel(QWidget):
    """The choice and the link's state. `engine_maker()` (GUI thread) is what the controller asks
    at every Start: None for this computer."""

    # From the client's and the check's threads; Qt queues them to the GUI thread.
    link_state = pyqtSignal(str, str)  # state (see STATE_COLOURS), a one-line text
    _untrusted = pyqtSignal(str, str)  # host:port, fingerprint
    _checked = pyqtSignal(object)  # ServerCheck or FaceCastError
    attention = pyqtSignal()  # something for the user to confirm is shown

    def __init__(
        self,
        config: RemoteConfig,
        tokens: TokenStore,
        photo: Callable[[], Path | None] = lambda: None,
        known_hosts: Path | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._tokens = tokens
        self._photo = photo
        self.known_hosts = known_hosts or default_known_hosts()
        self._pending_trust: tuple[str, str] | None = None
        self.state = "idle"

        self.local_radio = QRadioButton("this computer")
        self.server_radio = QRadioButton("a FaceCast server")
        group = QButtonGroup(self)
        group.addButton(self.local_radio)
        group.addButton(self.server_radio)
        self.url_edit = QLineEdit(config.url)
        self.url_edit.setPlaceholderText("https://gpu-box:8443")
        self.token_edit = QLineEdit(tokens.load())
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText("the token `serve` printed")
        self.token_edit.setToolTip(f"Kept in {tokens.path}, readable only by you")
        self.check_button = QPushButton("Check server")
        self.status_label = QLabel("Not connected")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.fingerprint_label = QLabel()
        self.fingerprint_label.setWordWrap(True)
        self.fingerprint_label.setTextFormat(Qt.TextFormat.PlainText)
        self.fingerprint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.trust_button = QPushButton("Trust this server")
        self.fingerprint_label.hide()
        self.trust_button.hide()

        choice = QHBoxLayout()
        choice.addWidget(self.local_radio)
        choice.addWidget(self.server_radio)
        choice.addStretch(1)
        form = QFormLayout()
        form.addRow("Server URL", self.url_edit)
        form.addRow("Token", self.token_edit)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Process on:"))
        layout.addLayout(choice)
        layout.addLayout(form)
        layout.addWidget(self.check_button)
        layout.addWidget(self.status_label)
        layout.addWidget(self.fingerprint_label)
        layout.addWidget(self.trust_button)
        layout.addStretch(1)

        (self.server_radio if config.mode == "server" else self.local_radio).setChecked(True)
        self.server_radio.toggled.connect(self._update_enabled)
        self.token_edit.editingFinished.connect(self.save_token)
        self.check_button.clicked.connect(self.check)
        self.trust_button.clicked.connect(self.trust_shown)
        self.link_state.connect(self._show_state)
        self._untrusted.connect(self._show_untrusted)
        self._checked.connect(self._on_checked)
        self._running = False
        self._update_enabled()

    # ---- what is saved -------------------------------------------------------------------------

    def config(self) -> RemoteConfig:
        return RemoteConfig(
            "server" if self.server_radio.isChecked() else "local", self.url_edit.text().strip()
        )

    def save_token(self) -> None:
        try:
            self._tokens.save(self.token_edit.text())
        except OSError as exc:
            self._show_state("error", f"The token could not be saved to {self._tokens.path}: {exc.strerror}")

    # ---- a Start -------------------------------------------------------------------------------

    @property
    def remote(self) -> bool:
        return self.server_radio.isChecked()

    def engine_maker(self) -> EngineMaker | None:
        """(GUI thread, at every Start.) None: the local engine runs."""
        if not self.remote:
            return None
        self.save_token()
        run = RemoteRun(self.url_edit.text(), self.token_edit.text(), self._photo(), self.known_hosts)
        self._show_state("checking", f"Connecting to {run.url.strip()} …")

        def make(
            source: FrameSource, sink: FanOutSink, settings: Settings, on_event: Callable[[EngineEvent], None]
        ) -> Engine:
            remote = RemoteEngine(
                run, source, sink, settings, on_event, self.link_state.emit, self._untrusted.emit
            )
            return remote.as_engine()

        return make

    def set_running(self, running: bool) -> None:
        self._running = running
        if not running and self.state in ("connected", "reconnecting", "checking"):
            self._show_state("idle", "Not connected")
        self._update_enabled()

    # ---- the certificate -----------------------------------------------------------------------

    def check(self) -> None:
        """Ask the server for its certificate and, once it is trusted, whether it accepts the
        token (on a thread); an unknown certificate is shown to trust first."""
        url, known, token = self.url_edit.text(), self.known_hosts, self.token_edit.text()
        if not url.strip():
            self._show_state("error", "Enter the server's URL, e.g. https://gpu-box:8443.")
            return
        self._show_state("checking", f"Checking {url.strip()} …")
        self.check_button.setEnabled(False)

        def work() -> None:
            try:
                self._checked.emit(check_server(url, known, token))
            except FaceCastError as exc:
                self._checked.emit(panel_error(exc))

        threading.Thread(target=work, name="remote-check", daemon=True).start()

    def _on_checked(self, result: ServerCheck | FaceCastError) -> None:
        self._update_enabled()
        if isinstance(result, FaceCastError):
            self._show_state("error", result.user_message())
            return
        if result.fingerprint is not None and not result.known:
            self._show_untrusted(result.host_port, result.fingerprint)
            return
        plain = result.fingerprint is None
        how = "(no TLS: use it only on a trusted network)" if plain else "with its pinned certificate"
        if result.token_name is None:
            text = f"{result.host_port} answers {how}; enter the token in the Token field."
            self._show_state("untrusted", text)
        else:
            self._show_state("trusted", f"{result.host_port} answers {how} and accepts the token.")

    def _show_untrusted(self, host_port: str, fingerprint: str) -> None:
        self._pending_trust = (host_port, fingerprint)
        self.fingerprint_label.setText(
            f"First connection to {host_port}. Its certificate's SHA-256 fingerprint:\n{fingerprint}\n"
            "Compare it with the one the server printed at start; trust it only if they match."
        )
        self.fingerprint_label.show()
        self.trust_button.show()
        self.attention.emit()
        self._show_state("untrusted", f"Confirm the certificate of {host_port} below, then Start.")

    def trust_shown(self) -> None:
        if self._pending_trust is None:
            return
        host_port, fingerprint = self._pending_trust
        self._pending_trust = None
        try:
            trust(host_port, fingerprint, self.known_hosts)
        except OSError as exc:
            self._show_state("error", f"Could not write {self.known_hosts}: {exc.strerror}")
            return
        self.fingerprint_label.hide()
        self.trust_button.hide()
        self._show_state("trusted", f"{host_port} is trusted (pinned in {self.known_hosts}).")
        if self.token_edit.text().strip() and not self._running:
            self.check()  # now the token can go to it

    # ---- state ---------------------------------------------------------------------------------

    def badge(self) -> str | None:
        """What the preview's badge says while a run goes and it is on a server (None: the run is
        this computer's, and the local engine's state is the badge's)."""
        if not self.remote:
            return None
        host = _host(self.url_edit.text())
        return {
            "connected": f"Swapping on {host}",
            "reconnecting": f"Reconnecting to {host}… (the local picture meanwhile)",
            "error": f"Not swapping: {self.status_label.text()}",
        }.get(self.state, f"Connecting to {host}…")

    def _show_state(self, state: str, text: str) -> None:
        if state == "ended":  # a Stop, or the input ended
            state, text = "idle", "Not connected"
        self.state = state
        first = text.splitlines()[0] if text else ""
        self.status_label.setText(first)
        self.status_label.setStyleSheet(f"color:{STATE_COLOURS.get(state, '#a0a0a0')};")

    def _update_enabled(self) -> None:
        editable = not self._running
        self.local_radio.setEnabled(editable)
        self.server_radio.setEnabled(editable)
        server = self.server_radio.isChecked()
        for widget in (self.url_edit, self.token_edit):
            widget.setEnabled(editable and server)
        self.check_button.setEnabled(editable and server)


def _host(url: str) -> str:
    """The server's host:port for a short label (the URL as typed when it does not parse)."""
    try:
        ep = Endpoint.parse(url)
    except FaceCastError:
        return url.strip()
    return f"{ep.host}:{ep.port}"


def attach_remote_panel(window: _Window, config: RemoteConfig, settings_path: Path) -> RemotePanel:
    """The panel as the window's "Process on" tab, asked by the controller at every Start."""
    gallery = window.gallery

    def photo() -> Path | None:
        return gallery.active or next(iter(gallery.photos), None)

    panel = RemotePanel(config, TokenStore.beside(settings_path), photo)
    window.tabs.addTab(panel, "Process on")
    panel.attention.connect(lambda: window.tabs.setCurrentWidget(panel))  # a fingerprint to confirm
    window.controller.remote = panel.engine_maker
    window.controller.state_changed.connect(lambda value: panel.set_running(RunState(value) != RunState.IDLE))
    return panel
