"""The panel's "Check a video or picture": the same check as `main.py verify`, shown as a person who
received a file reads it: the mark, what it says, how sure, who signed the file and what it states."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PyQt6.QtCore import Qt
from pytestqt.qtbot import QtBot

from gui.check_dialog import CheckDialog
from realtime.api import sign_video
from realtime.core.watermark.embed import Watermarker
from realtime.core.watermark.payload import Payload
from tests.gui.test_gui_helpers import open_window, run_config, write_models
from tests.real_faces import astronaut_bgr

RUN_ID = "0ddba11a"


@pytest.fixture(autouse=True)
def _signing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACECAST_PROVENANCE_DIR", str(tmp_path / "key"))


def marked_signed_picture(folder: Path) -> Path:
    """A picture as FaceCast writes it: marked with RUN_ID and signed naming the same run."""
    image = np.ascontiguousarray(astronaut_bgr())
    Watermarker(Payload.for_run("0.1", RUN_ID)).mark(image)
    plain = folder / "plain.png"
    cv2.imwrite(str(plain), image)
    signed = folder / "received.png"
    sign_video(plain, signed, signed.name, RUN_ID)
    return signed


def checked(qtbot: QtBot, dialog: CheckDialog, path: Path) -> None:
    with qtbot.waitSignal(dialog.checked, timeout=60_000):
        dialog.check(path)


def test_a_marked_signed_picture_shows_its_mark_payload_confidence_signer_and_statement(
    qtbot: QtBot, tmp_path: Path
) -> None:
    dialog = CheckDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    checked(qtbot, dialog, marked_signed_picture(tmp_path))
    assert dialog.verdict.text() == "AI-modified by FaceCast"
    assert dialog.watermark.text().startswith("found")
    assert f"run {RUN_ID}" in dialog.payload.text() and "AI-modified" in dialog.payload.text()
    assert "z = " in dialog.confidence.text() and "chance of a false match" in dialog.confidence.text()
    assert "FaceCast signer" in dialog.signer.text() and ": valid" in dialog.signer.text()
    statement = dialog.statement.text()
    assert "modified by AI" in statement or "AI" in statement
    assert "names the same run as the watermark: yes" in statement
    assert f"run {RUN_ID}" in dialog.details.toPlainText()  # what `verify` prints, to copy
    assert dialog.choose_button.isEnabled()


def test_a_plain_photo_shows_no_mark_and_no_manifest(qtbot: QtBot, tmp_path: Path) -> None:
    photo = tmp_path / "holiday.png"
    cv2.imwrite(str(photo), astronaut_bgr())
    dialog = CheckDialog()
    qtbot.addWidget(dialog)
    checked(qtbot, dialog, photo)
    assert dialog.verdict.text() == "No FaceCast mark found"
    assert dialog.watermark.text().startswith("not found") and dialog.payload.text() == "–"
    assert dialog.signer.text() == "no manifest"


def test_a_file_that_is_no_video_or_picture_says_so(qtbot: QtBot, tmp_path: Path) -> None:
    junk = tmp_path / "notes.mp4"
    junk.write_bytes(b"not a video at all" * 100)
    dialog = CheckDialog()
    qtbot.addWidget(dialog)
    checked(qtbot, dialog, junk)
    assert "not a video or picture" in dialog.verdict.text() and dialog.outcome is None


def test_the_windows_check_button_opens_the_dialog(qtbot: QtBot, tmp_path: Path) -> None:
    window = open_window(qtbot, tmp_path, write_models(tmp_path / "models"), run_config((), vcam=False))
    qtbot.mouseClick(window.check_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.check_dialog is not None and window.check_dialog.isVisible())
    assert window.check_dialog is not None
    assert window.check_dialog.windowTitle() == "Check a video or picture"
