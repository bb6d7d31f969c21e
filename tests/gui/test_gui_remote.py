"""Process on a FaceCast server: the choice, URL and token remembered (the token in a 0600 file), and
Start running the remote client against a real server on 127.0.0.1: the certificate to trust on first
use, connected, reconnecting when the server goes, and one-line errors for a wrong token, a full
server and no server at all."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest
from pytestqt.qtbot import QtBot

from gui.config import ConfigStore, GuiConfig, InputConfig, OutputConfig, RemoteConfig
from gui.controller import RunState
from gui.main_window import MainWindow
from gui.remote_panel import STATE_COLOURS
from gui.remote_run import TOKEN_FILE_NAME, TokenStore, _PreviewSink
from realtime.api import FanOutSink, ModelOptions, NullSink, VideoFileSink, collect_output_info
from realtime.remote.limits import Limits
from realtime.remote.runner import ServerThread, free_port
from realtime.remote.server import ServerConfig
from realtime.remote.tls import ensure_certificate, server_context
from tests.gui.test_gui_helpers import open_window, run_config, wait_for_face
from tests.gui.test_gui_run import Heartbeat
from tests.realtime.jobs.media import write_clip

pytestmark = pytest.mark.timeout(180)
TOKEN = "gui-test-token-0123456789"
# The GUI thread never waits on the network or the call: a generous bound, for a loaded machine
# (a Stop that joined the client's threads there would take seconds).
MAX_GUI_BLOCK_MS = 400.0


class Servers:
    """Servers on 127.0.0.1 with the model doubles; every one is stopped at the test's end."""

    def __init__(self, tmp_path: Path, models: Path) -> None:
        self.tmp_path = tmp_path
        self.models = models
        self.running: list[ServerThread] = []

    def start(self, tls: bool = True, max_streams: int = 2) -> ServerThread:
        data = self.tmp_path / f"server{len(self.running)}"
        data.mkdir()
        tokens = data / "tokens.txt"
        tokens.write_text(f"gui:{TOKEN}\n", encoding="utf-8")
        config = ServerConfig(
            data_dir=data,
            token_file=tokens,
            limits=Limits(max_streams=max_streams, idle_s=5.0),
            models=ModelOptions(models_dir=self.models, allow_unverified=True),
            provider="cpu",
        )
        context = None
        if tls:
            cert = ensure_certificate(data)
            context = server_context(cert.cert, cert.key)
        server = ServerThread(config, tls=context).start()
        self.running.append(server)
        return server


@pytest.fixture
def servers(tmp_path: Path, models_dir: Path) -> Iterator[Servers]:
    made = Servers(tmp_path, models_dir)
    yield made
    for server in made.running:
        server.stop()


def remote_window(
    qtbot: QtBot, tmp_path: Path, models: Path, photo: Path, url: str, token: str, **changes: object
) -> MainWindow:
    (tmp_path / TOKEN_FILE_NAME).write_text(token)
    config = replace(run_config(photo, vcam=False), remote=RemoteConfig("server", url), **changes)  # type: ignore[arg-type]
    window = open_window(qtbot, tmp_path, models, config)
    window.remote_panel.known_hosts = tmp_path / "known_hosts"
    return window


def start(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=20_000)
    window.toggle_running()


def panel_says(qtbot: QtBot, window: MainWindow, state: str, timeout: int = 30_000) -> str:
    panel = window.remote_panel
    qtbot.waitUntil(lambda: panel.state == state, timeout=timeout)
    return panel.status_label.text()


def test_the_choice_url_and_token_are_remembered_and_the_token_file_is_private(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    window = open_window(qtbot, tmp_path, models_dir, run_config(face_photo, vcam=False))
    panel = window.remote_panel
    assert panel.local_radio.isChecked() and not panel.url_edit.isEnabled()
    panel.server_radio.setChecked(True)
    assert panel.url_edit.isEnabled() and panel.token_edit.isEnabled()
    panel.url_edit.setText("https://gpu-box:8443")
    panel.token_edit.setText("s3cret")
    panel.token_edit.editingFinished.emit()
    window.save_config()
    token_file = tmp_path / TOKEN_FILE_NAME
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == "s3cret"
    saved = (tmp_path / "settings.toml").read_text()
    assert "s3cret" not in saved  # the token is not in the settings file (copied to .bak, shared)
    loaded = ConfigStore(tmp_path / "settings.toml").load()
    assert loaded.message == "" and loaded.config.remote == RemoteConfig("server", "https://gpu-box:8443")
    again = open_window(qtbot, tmp_path, models_dir, loaded.config)
    assert again.remote_panel.server_radio.isChecked()
    assert again.remote_panel.url_edit.text() == "https://gpu-box:8443"
    assert again.remote_panel.token_edit.text() == "s3cret"
    TokenStore(token_file).save("")
    assert not token_file.exists()


def test_the_remote_runs_preview_tap_passes_the_recording_through(tmp_path: Path) -> None:
    take = tmp_path / "take.mp4"
    sink = _PreviewSink(FanOutSink([NullSink(), VideoFileSink(take)]))
    assert collect_output_info(sink).record_path == take


def test_a_bad_remote_mode_in_the_file_falls_back_to_this_computer(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[remote]\nmode = "moon"\nurl = "https://x:1"\n')
    loaded = ConfigStore(path).load()
    assert loaded.config.remote == RemoteConfig("local", "https://x:1") and "remote.mode" in loaded.message
    assert GuiConfig().remote.mode == "local"


def test_start_on_a_server_trusts_on_first_use_connects_and_shows_reconnecting(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, servers: Servers
) -> None:
    server = servers.start(tls=True)
    window = remote_window(qtbot, tmp_path, models_dir, face_photo, server.url, TOKEN)
    panel = window.remote_panel
    start(qtbot, window)
    # First connection: nothing runs until the user has compared and trusted the fingerprint.
    panel_says(qtbot, window, "untrusted")
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=20_000)
    fingerprint = ensure_certificate(server.config.data_dir).fingerprint
    assert panel.trust_button.isVisible() and fingerprint in panel.fingerprint_label.text()
    assert not (tmp_path / "known_hosts").exists()
    panel.trust_button.click()
    assert fingerprint in (tmp_path / "known_hosts").read_text()
    assert not panel.trust_button.isVisible()
    qtbot.waitUntil(lambda: panel.state == "trusted", timeout=30_000)  # and the token checked
    assert "accepts the token" in panel.status_label.text()

    heartbeat = Heartbeat()
    heartbeat.start()
    start(qtbot, window)
    text = panel_says(qtbot, window, "connected")
    assert server.url in text
    assert not panel.url_edit.isEnabled()  # no edits while it runs
    qtbot.waitUntil(lambda: (window.controller.stats() or _zero()).frames_out > 10, timeout=30_000)
    # Each returned frame carries its source index: side by side pairs it with its own original.
    qtbot.waitUntil(lambda: (window.preview.last_frame or _NO_FRAME).original is not None, timeout=10_000)
    assert "on http" in window.controller.stages_label
    # A Stages edit while it runs reaches the server's engine for this stream.
    session = next(iter(server.server.sessions.values()))
    assert session.engine is not None and session.engine.settings.composite.opacity == 1.0
    window.stage_panel.widget_for("composite.opacity").setValue(0.35)  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: session.engine.settings.composite.opacity == pytest.approx(0.35), timeout=15_000)

    server.stop()  # the server goes: the local output carries on, the panel says so
    text = panel_says(qtbot, window, "reconnecting")
    assert "\n" not in text and text
    assert window.controller.state == RunState.RUNNING
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=20_000)
    heartbeat.stop()
    assert panel.state == "idle" and panel.url_edit.isEnabled()
    assert heartbeat.max_gap_ms < MAX_GUI_BLOCK_MS, heartbeat.max_gap_ms


class _NoFrame:
    original = None


_NO_FRAME = _NoFrame()


def _zero() -> object:
    class Zero:
        frames_out = 0

    return Zero()


def test_a_start_without_url_or_token_says_what_is_missing(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    window = remote_window(qtbot, tmp_path, models_dir, face_photo, "", TOKEN)
    window.remote_panel.check()
    assert window.remote_panel.state == "error" and "URL" in window.remote_panel.status_label.text()
    messages: list[str] = []
    window.controller.io_error.connect(messages.append)
    start(qtbot, window)
    qtbot.waitUntil(lambda: bool(messages), timeout=20_000)
    assert "No server URL" in messages[0] and "--remote" not in messages[0]
    window.remote_panel.url_edit.setText("http://127.0.0.1:9")
    window.remote_panel.token_edit.setText("")
    messages.clear()
    start(qtbot, window)
    qtbot.waitUntil(lambda: bool(messages), timeout=20_000)
    assert "No token" in messages[0]


@pytest.mark.parametrize("case", ["wrong token", "server full", "no server"])
def test_a_failed_start_is_one_clear_line_and_nothing_freezes(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, servers: Servers, case: str
) -> None:
    if case == "no server":
        url, token = f"http://127.0.0.1:{free_port()}", TOKEN
    else:
        server = servers.start(tls=False, max_streams=0 if case == "server full" else 2)
        url, token = server.url, "wrong" if case == "wrong token" else TOKEN
    window = remote_window(qtbot, tmp_path, models_dir, face_photo, url, token)
    heartbeat = Heartbeat()
    heartbeat.start()
    start(qtbot, window)
    text = panel_says(qtbot, window, "error")
    expected = {"wrong token": "refused the token", "server full": "full", "no server": "No FaceCast server"}
    assert expected[case] in text and "\n" not in text and "Traceback" not in text
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=20_000)
    heartbeat.stop()
    assert window.remote_panel.state == "error"  # the reason stays after the run stopped
    assert window.remote_panel.url_edit.isEnabled()
    assert heartbeat.max_gap_ms < MAX_GUI_BLOCK_MS, heartbeat.max_gap_ms


def played_back(path: Path) -> tuple[list[float], list[np.ndarray]]:
    """Each frame's time (s) and its picture (grey), as a player shows them."""
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    times = [float((f.pts or 0) * (f.time_base or 0)) for f in frames]
    return times, [f.to_ndarray(format="gray").astype(np.int16) for f in frames]


def check_says(qtbot: QtBot, window: MainWindow, state: str) -> str:
    panel = window.remote_panel
    panel.check_button.click()
    qtbot.waitUntil(lambda: panel.state != "checking", timeout=30_000)
    assert panel.state == state, panel.status_label.text()
    return panel.status_label.text()


def test_check_server_checks_the_token_and_names_the_field_to_fix(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, servers: Servers
) -> None:
    server = servers.start(tls=True)
    window = remote_window(qtbot, tmp_path, models_dir, face_photo, server.url, "not-the-token")
    panel = window.remote_panel
    check_says(qtbot, window, "untrusted")  # first: the certificate, before any token goes to it
    assert panel.trust_button.isVisible() and server.server.refused == {}
    panel.trust_button.click()  # trusted: the token is checked at once
    qtbot.waitUntil(lambda: panel.state == "error", timeout=30_000)
    text = panel.status_label.text()
    assert "refused the token" in text and "Token field" in text and "--token" not in text, text
    assert panel.status_label.styleSheet().endswith(f"color:{STATE_COLOURS['error']};")  # red
    panel.token_edit.setText(TOKEN)
    text = check_says(qtbot, window, "trusted")
    assert "accepts the token" in text and "#60c060" in panel.status_label.styleSheet()
    panel.token_edit.setText("")
    assert "Token field" in check_says(qtbot, window, "untrusted")  # nothing to check: said so
    panel.url_edit.setText("https://")
    assert "Server URL field" in check_says(qtbot, window, "error")


def test_a_refused_token_at_start_is_said_in_the_panels_words(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, servers: Servers
) -> None:
    server = servers.start(tls=False)
    window = remote_window(qtbot, tmp_path, models_dir, face_photo, server.url, "wrong")
    messages: list[str] = []
    window.controller.io_error.connect(messages.append)
    start(qtbot, window)
    text = panel_says(qtbot, window, "error")
    assert "Token field" in text and "--token" not in text, text
    qtbot.waitUntil(lambda: bool(messages), timeout=20_000)
    assert "Token field" in messages[0] and "--token" not in messages[0]


def test_a_remote_runs_badge_start_line_and_recording_follow_the_call(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path, servers: Servers
) -> None:
    """A 25 fps video file through the server, recorded: the badge says where the swap runs (not
    "loading models"), the start line the file's real size and rate, and the take plays as long
    as the frames in it spanned, each frame once."""
    server = servers.start(tls=False)
    clip = write_clip(tmp_path / "clip.mp4", 50, (320, 240), fps=25, audio=False)
    take = tmp_path / "take.mp4"
    window = remote_window(
        qtbot, tmp_path, models_dir, face_photo, server.url, TOKEN,
        input=InputConfig(kind="video", video_path=str(clip)),
        output=OutputConfig(vcam=False, record=True, record_path=str(take)),
    )  # fmt: skip
    wait_for_face(qtbot, window)  # else the face's arrival restarts the run: a second take
    start(qtbot, window)
    panel_says(qtbot, window, "connected")
    qtbot.waitUntil(lambda: window.preview.badge.startswith("Swapping on 127.0.0.1:"), timeout=10_000)
    assert "(320x240 @ 25 fps" in window.status_note.full_text(), window.status_note.full_text()
    qtbot.waitUntil(lambda: (window.controller.stats() or _zero()).frames_out > 60, timeout=60_000)
    server.stop()  # the server goes: the badge says so
    qtbot.waitUntil(lambda: window.preview.badge.startswith("Reconnecting to 127.0.0.1:"), timeout=20_000)
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=20_000)
    assert window.preview.badge == ""
    times, pictures = played_back(take)
    assert len(times) > 50
    # At capture times, each frame once: rising times a 25 fps period apart (not 30 fps frames
    # stamped at 25), and no two consecutive frames alike (the clip moves in every frame).
    steps = np.diff(times)
    assert steps.min() > 0, steps
    assert np.median(steps) == pytest.approx(1 / 25, abs=0.002), np.median(steps)
    same = [i for i in range(1, len(pictures)) if np.abs(pictures[i] - pictures[i - 1]).mean() < 0.3]
    assert not same, same
