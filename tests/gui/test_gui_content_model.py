"""The server's content classifier comes from the Models dialog like any model: under its own
heading, its licence asked first, checked against the publisher's CRC-32 read from its .hash file
(here a local server holding the double and its CRC-32), and the file it writes loads as the
classifier the server runs."""

from __future__ import annotations

import zlib
from dataclasses import replace
from pathlib import Path

from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from gui.models_dialog import ModelsDialog
from models.fakes.content_double import FLAGGED_BGR, build_content_classifier
from models.files.catalogue import get_entry
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.content import ContentClassifier
from tests.gui.model_server import Route, model_server
from tests.real_faces import astronaut_bgr


def test_the_content_classifier_downloads_from_the_models_dialog_checked_by_its_crc32(
    qtbot: QtBot, tmp_path: Path
) -> None:
    body = build_content_classifier().SerializeToString()
    with model_server() as server:
        url = server.add("/nsfw_2.onnx", Route(body))
        crc_url = server.add("/nsfw_2.hash", Route(f"{zlib.crc32(body) & 0xFFFFFFFF:08x}".encode()))
        entry = get_entry("nsfw_2")
        entry = replace(entry, urls=(url,), files=(replace(entry.files[0], crc32_urls=(crc_url,)),))
        dialog = ModelsDialog(tmp_path, (entry,))
        qtbot.addWidget(dialog)
        dialog.show()
        qtbot.waitUntil(lambda: dialog.state("nsfw_2") is not None, timeout=5_000)
        headings = [label.text() for label in dialog.findChildren(QLabel)]
        assert any("Content checks" in text for text in headings), headings
        assert dialog.status_text("nsfw_2") == "missing"
        qtbot.mouseClick(dialog.row("nsfw_2").download, Qt.MouseButton.LeftButton)
        assert dialog.licence_box.isVisible() and "Apache-2.0" in dialog.licence_text.text()
        qtbot.mouseClick(dialog.accept_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.status_text("nsfw_2").startswith("verified"), timeout=15_000)
        assert "the publisher's CRC-32 matches" in dialog.status_text("nsfw_2")
    classifier = ContentClassifier.from_file(tmp_path / "nsfw_2.onnx", SessionFactory(SessionConfig("cpu")))
    flagged = astronaut_bgr().copy()
    flagged[100:400, 300:500] = FLAGGED_BGR
    assert classifier.verdict(flagged).flagged and not classifier.verdict(astronaut_bgr()).flagged
