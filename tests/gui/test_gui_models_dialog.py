"""The Models dialog against a local server: licence first, progress, cancel and resume, a dropped
connection, verification, and a folder of the user's choosing."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PyQt6.QtCore import QPoint, Qt
from PyQt6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from gui.config import ConfigStore
from gui.controller import ModelsState, RunState
from gui.main_window import MainWindow
from gui.model_tasks import DownloadTuning
from gui.models_banner import MODELS_BANNER
from gui.models_dialog import ModelsDialog
from tests.gui.model_server import ModelServer, Route, model_server, served_entry
from tests.gui.test_gui_helpers import run_config, services_for, write_models

BODY = random.Random(0).randbytes(600_000)
OTHER = random.Random(1).randbytes(90_000)
TUNING = DownloadTuning(chunk_size=16_384, timeout=5.0, retry_delay=0.05)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with model_server() as running:
        yield running


def texts_with(window: MainWindow, *parts: str) -> list[str]:
    return [t for t in window.messages.texts() if all(p in t for p in parts)]


def faces_swapped(window: MainWindow) -> int:
    stats = window.controller.stats()
    return stats.faces_swapped if stats is not None else 0


def open_dialog(qtbot: QtBot, folder: Path, *entries: object) -> ModelsDialog:
    dialog = ModelsDialog(folder, entries, TUNING)  # type: ignore[arg-type]
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: all(dialog.state(e.name) is not None for e in entries), timeout=5_000)  # type: ignore[attr-defined]
    return dialog


def click(qtbot: QtBot, button: object) -> None:
    assert button.isEnabled()  # type: ignore[attr-defined]
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)  # type: ignore[arg-type]


def test_each_model_shows_its_size_licence_and_state_before_anything_downloads(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    big = served_entry(server, "big.onnx", BODY, licence="research only (Big Lab)")
    small = served_entry(server, "small.onnx", OTHER, default=False)
    (tmp_path / "small.onnx").write_bytes(OTHER)
    dialog = open_dialog(qtbot, tmp_path, big, small)
    texts = [label.text() for label in dialog.findChildren(type(dialog.row("big").status))]
    assert any("0.6 MB" in t for t in texts) and any("research only (Big Lab)" in t for t in texts)
    assert dialog.status_text("big") == "missing"
    assert dialog.status_text("small").startswith("verified")
    assert dialog.row("big").download.isEnabled() and not dialog.row("big").verify.isEnabled()
    assert not dialog.row("small").download.isEnabled() and dialog.row("small").verify.isEnabled()
    assert server.ranges("/big.onnx") == []  # nothing fetched just to show the list


def test_the_licence_is_asked_before_the_first_download_and_declining_fetches_nothing(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    one = served_entry(server, "one.onnx", OTHER, licence="shared licence")
    two = served_entry(server, "two.onnx", OTHER[::-1], licence="shared licence")
    dialog = open_dialog(qtbot, tmp_path, one, two)
    click(qtbot, dialog.row("one").download)
    assert dialog.licence_box.isVisible() and "shared licence" in dialog.licence_text.text()
    click(qtbot, dialog.decline_button)
    assert not dialog.licence_box.isVisible() and "declined" in dialog.status_text("one")
    qtbot.wait(200)
    assert server.ranges("/one.onnx") == [] and not (tmp_path / "one.onnx").exists()

    click(qtbot, dialog.row("one").download)
    click(qtbot, dialog.accept_button)
    qtbot.waitUntil(lambda: dialog.status_text("one").startswith("verified"), timeout=10_000)
    assert hashlib.sha256((tmp_path / "one.onnx").read_bytes()).hexdigest() == one.files[0].sha256
    accepted = json.loads((tmp_path / ".licences.json").read_text())
    assert "shared licence" in accepted  # remembered in the models folder, as the command line does
    click(qtbot, dialog.row("two").download)  # same licence: accepted once
    assert not dialog.licence_box.isVisible()
    qtbot.waitUntil(lambda: dialog.status_text("two").startswith("verified"), timeout=10_000)


def test_a_download_shows_its_progress_and_cancel_keeps_what_arrived_for_download_to_resume(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    slow = Route(BODY, chunk=8_192, delay_s=0.01)  # ~0.75 s in all
    entry = served_entry(server, "slow.onnx", BODY, route=slow)
    dialog = open_dialog(qtbot, tmp_path, entry)
    dialog.tasks.accept_licence(entry)
    row = dialog.row("slow")
    click(qtbot, row.download)
    qtbot.waitUntil(lambda: row.bar.isVisible() and 100 < row.bar.value() < 700, timeout=10_000)
    assert dialog.status_text("slow").startswith("downloading:") and "of 0.6 MB" in dialog.status_text("slow")
    assert not row.download.isEnabled()
    click(qtbot, row.cancel)
    qtbot.waitUntil(lambda: dialog.status_text("slow").startswith("paused:"), timeout=10_000)
    kept = (tmp_path / "slow.onnx.part").stat().st_size
    assert 0 < kept < len(BODY) and not (tmp_path / "slow.onnx").exists()
    assert not row.bar.isVisible() and row.download.isEnabled() and not row.cancel.isEnabled()

    slow.delay_s = 0.0
    click(qtbot, row.download)
    qtbot.waitUntil(lambda: dialog.status_text("slow").startswith("verified"), timeout=10_000)
    assert server.ranges("/slow.onnx")[-1] == f"bytes={kept}-"  # resumed, not fetched again
    assert (tmp_path / "slow.onnx").read_bytes() == BODY


def test_a_dropped_connection_resumes_and_the_model_verifies(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    flaky = Route(BODY, drop_after=200_000, drops_left=1)
    entry = served_entry(server, "flaky.onnx", BODY, route=flaky)
    dialog = open_dialog(qtbot, tmp_path, entry)
    dialog.tasks.accept_licence(entry)
    click(qtbot, dialog.row("flaky").download)
    qtbot.waitUntil(lambda: dialog.status_text("flaky").startswith("verified"), timeout=10_000)
    ranges = server.ranges("/flaky.onnx")
    assert ranges[0] is None and ranges[-1] is not None and ranges[-1].startswith("bytes=")
    assert (tmp_path / "flaky.onnx").read_bytes() == BODY
    assert not dialog.error_label.isVisible()


def test_a_server_that_never_delivers_says_why_in_the_dialog(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    entry = served_entry(server, "gone.onnx", OTHER)
    server.state.routes.clear()  # 404
    dialog = open_dialog(qtbot, tmp_path, entry)
    dialog.tasks.accept_licence(entry)
    click(qtbot, dialog.row("gone").download)
    qtbot.waitUntil(dialog.error_label.isVisible, timeout=10_000)
    assert (
        "Could not download gone.onnx" in dialog.error_label.text()
        and "HTTP 404" in dialog.error_label.text()
    )
    # The row is updated by its own signal, a moment after the error on a busy machine.
    qtbot.waitUntil(lambda: dialog.status_text("gone") == "missing", timeout=5_000)
    assert dialog.row("gone").download.isEnabled()


def test_verify_reads_the_file_again_and_finds_it_damaged(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    entry = served_entry(server, "model.onnx", OTHER)
    (tmp_path / "model.onnx").write_bytes(OTHER)
    dialog = open_dialog(qtbot, tmp_path, entry)
    assert dialog.status_text("model").startswith("verified")
    damaged = bytearray(OTHER)
    damaged[10] ^= 0xFF
    path = tmp_path / "model.onnx"
    stat = path.stat()
    path.write_bytes(bytes(damaged))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and time: only the bytes tell
    click(qtbot, dialog.row("model").verify)
    qtbot.waitUntil(lambda: dialog.status_text("model").startswith("damaged"), timeout=10_000)
    assert "sha256" in dialog.status_text("model") and dialog.row("model").download.isEnabled()


def test_another_folder_chosen_in_the_dialog_is_checked_there(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    entry = served_entry(server, "model.onnx", OTHER)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "model.onnx").write_bytes(OTHER)
    dialog = open_dialog(qtbot, tmp_path / "first", entry)
    assert dialog.status_text("model") == "missing"
    with qtbot.waitSignal(dialog.folder_changed) as changed:
        dialog.set_folder(elsewhere)
    assert changed.args == [elsewhere] and dialog.folder_edit.text() == str(elsewhere)
    qtbot.waitUntil(lambda: dialog.status_text("model").startswith("verified"), timeout=5_000)


# ---- the window ------------------------------------------------------------------------------------


def test_a_first_run_without_models_opens_the_models_dialog_whose_download_lets_the_face_swap(
    qtbot: QtBot, tmp_path: Path, server: ModelServer, face_photo: Path
) -> None:
    doubles = write_models(tmp_path / "doubles")
    catalogue = tuple(
        served_entry(server, f"{name}.onnx", (doubles / f"{name}.onnx").read_bytes(), name=name, licence="L")
        for name in ("inswapper_128", "w600k_r50")
    )
    models = tmp_path / "models"  # empty: a first run
    services = replace(services_for(tmp_path, models), catalogue=catalogue, download_tuning=TUNING)
    window = MainWindow(services, ConfigStore(services.config_path), run_config(face_photo, vcam=False))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(
        lambda: window.models_dialog is not None and window.models_dialog.isVisible(), timeout=15_000
    )
    assert texts_with(
        window, MODELS_BANNER, "Models…"
    )  # the banner points at the window, not only a terminal
    dialog = window.models_dialog
    assert dialog is not None and dialog.folder == models
    qtbot.waitUntil(lambda: dialog.status_text("w600k_r50") == "missing", timeout=5_000)
    assert window.gallery.active_identity() is None  # no recogniser yet: the photo cannot be swapped in

    click(qtbot, dialog.defaults_button)
    click(qtbot, dialog.accept_button)  # one licence for both
    qtbot.waitUntil(
        lambda: all(dialog.status_text(n).startswith("verified") for n in ("inswapper_128", "w600k_r50")),
        timeout=15_000,
    )
    qtbot.waitUntil(lambda: not texts_with(window, MODELS_BANNER), timeout=15_000)
    qtbot.waitUntil(lambda: window.gallery.active_identity() is not None, timeout=15_000)
    close = next(b for b in dialog.findChildren(QPushButton) if b.text() == "Close")
    click(qtbot, close)
    assert not dialog.isVisible()  # downloads and checks carry on without it

    click(qtbot, window.start_button)
    qtbot.waitUntil(lambda: window.controller.models == ModelsState.READY, timeout=20_000)
    qtbot.waitUntil(lambda: faces_swapped(window) >= 2, timeout=20_000)
    click(qtbot, window.start_button)
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)


def test_the_models_folder_chosen_in_the_dialog_is_used_and_remembered(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    services = services_for(tmp_path, tmp_path / "empty")
    store = ConfigStore(services.config_path)
    window = MainWindow(services, store, run_config(face_photo, vcam=False))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: bool(texts_with(window, MODELS_BANNER)), timeout=15_000)
    dialog = window.open_models_dialog()
    dialog.set_folder(models_dir)  # what Choose… does once a folder is picked
    qtbot.waitUntil(lambda: not texts_with(window, MODELS_BANNER), timeout=15_000)
    qtbot.waitUntil(lambda: window.gallery.active_identity() is not None, timeout=15_000)
    window.close()
    assert store.load().config.models_dir == str(models_dir)

    again = MainWindow(services, store, store.load().config)
    qtbot.addWidget(again)
    assert again.models_folder == models_dir and again.open_models_dialog().folder == models_dir


def test_another_folder_takes_down_the_error_of_the_folder_before(
    qtbot: QtBot, tmp_path: Path, server: ModelServer
) -> None:
    entry = served_entry(server, "gone.onnx", OTHER)
    server.state.routes.clear()  # 404
    dialog = open_dialog(qtbot, tmp_path / "first", entry)
    dialog.tasks.accept_licence(entry)
    click(qtbot, dialog.row("gone").download)
    qtbot.waitUntil(dialog.error_label.isVisible, timeout=10_000)
    dialog.set_folder(tmp_path / "second")  # the error stayed, about a download into the first
    assert not dialog.error_label.isVisible()


def test_the_offline_doubles_are_named_as_such_and_can_be_allowed_from_the_panel(
    qtbot: QtBot, tmp_path: Path, face_photo: Path
) -> None:
    """README's offline try-out (`main.py models doubles DIR`): every row said "damaged", the banner
    said to delete the files, and only an environment variable let the panel use them."""
    doubles = write_models(tmp_path / "doubles")
    services = services_for(tmp_path, doubles)
    services = replace(services, model_options=replace(services.model_options, allow_unverified=False))
    store = ConfigStore(services.config_path)
    window = MainWindow(services, store, run_config(face_photo, vcam=False))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: bool(texts_with(window, MODELS_BANNER)), timeout=15_000)
    banner = texts_with(window, MODELS_BANNER)[0]
    assert "allow unverified files in Models…" in banner and "--allow-unverified" not in banner
    assert window.unverified_label.isHidden()
    dialog = window.open_models_dialog()
    qtbot.waitUntil(lambda: dialog.state("inswapper_128") is not None, timeout=15_000)
    status = dialog.status_text("inswapper_128")
    assert "is not the published file" in status and not status.startswith("damaged"), status
    check = dialog.unverified_check
    qtbot.mouseClick(check, Qt.MouseButton.LeftButton, pos=QPoint(8, check.height() // 2))  # its box
    qtbot.waitUntil(lambda: dialog.status_text("inswapper_128").startswith("unverified"), timeout=15_000)
    qtbot.waitUntil(lambda: not texts_with(window, MODELS_BANNER), timeout=15_000)
    assert window.unverified_label.isVisible()
    window.toggle_running()
    qtbot.waitUntil(lambda: faces_swapped(window) > 0, timeout=30_000)  # the doubles do the swap
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=15_000)
    window.close()
    assert store.load().config.allow_unverified


_UNREADABLE = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from gui.model_tasks import entry_state
from realtime.api import FaceCastError, ModelStore, get_entry
store = ModelStore(Path({folder!r}))
print("state:", entry_state(store, get_entry("inswapper_128")).status)
try:
    store.resolve("inswapper_128")
except FaceCastError as exc:
    print("error:", exc.user_message())
"""


def test_a_models_folder_that_may_not_be_read_is_said_so_not_called_damaged(tmp_path: Path) -> None:
    """It showed "damaged: cannot read it" and logged a traceback."""
    from tests.access import lock, unlock, without_root_rights
    from tests.paths import REPO_ROOT

    folder = tmp_path / "models"
    write_models(folder)
    lock(folder)
    try:
        code = _UNREADABLE.format(root=str(REPO_ROOT), folder=str(folder))
        done = subprocess.run(
            [*without_root_rights(), sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    finally:
        unlock(folder)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "state: unreadable" in done.stdout
    assert "Permission denied" in done.stdout and "Let FaceCast read the models folder" in done.stdout
