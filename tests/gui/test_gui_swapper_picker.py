"""The panel's swap-model picker: every catalogue swapper with its crop, download and licence; a
switch during a run loads the new model while the old one keeps swapping (no restart); the
Models dialog lists every model under its role."""

from __future__ import annotations

import os
from pathlib import Path

from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QComboBox, QLabel
from pytestqt.qtbot import QtBot

from gui.controller import ModelsState, RunState
from gui.models_dialog import ModelsDialog
from gui.stage_panel import StagePanel
from models.files.catalogue import CATALOGUE, names_of_role
from tests.gui.test_gui_live_edits import started

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def test_the_picker_offers_every_catalogue_swapper_with_its_crop_download_and_licence(qtbot: QtBot) -> None:
    panel = StagePanel()
    qtbot.addWidget(panel)
    combo = panel.widget_for("swap.model")
    assert isinstance(combo, QComboBox)
    names = [combo.itemText(i) for i in range(combo.count())]
    assert names == list(names_of_role("swapper"))
    tips = {
        combo.itemText(i): str(combo.itemData(i, Qt.ItemDataRole.ToolTipRole)) for i in range(combo.count())
    }
    assert tips["hyperswap_1a_256"].startswith("HyperSwap, 256 px crop, 403 MB")
    assert "ResearchRAIL-MS" in tips["hyperswap_1a_256"]
    # A swapper that needs a converter counts its download too (515 + 22 MB).
    assert tips["ghost_1_256"].startswith("Ghost, 256 px crop, 537 MB")
    assert tips["simswap_unofficial_512"].startswith("SimSwap, 512 px crop")
    assert "AGPL-3.0" in tips["reswapper_256"]
    # And the chosen one said in a line under the picker, whichever way it was chosen.
    (note,) = [n for box in panel.boxes for k, n in box.notes.items() if k == "swap.model"]
    combo.setCurrentText("simswap_unofficial_512")
    assert note.text().startswith("SimSwap, 512 px crop, 261 MB; CC BY-NC 4.0")  # 239 + its 22 MB converter
    from realtime.api import Settings

    panel.set_settings("balanced", Settings().with_overrides({"swap.model": "hyperswap_1b_256"}), set())
    assert note.text().startswith("HyperSwap, 256 px crop, 403 MB")


def test_a_switch_during_a_run_loads_the_new_model_while_the_old_one_keeps_swapping(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, face_photo: Path
) -> None:
    window = started(qtbot, tmp_path, models_dir, face_photo)
    qtbot.waitUntil(lambda: window.controller.models == ModelsState.READY, timeout=20_000)
    run_before = window.controller._engine
    qtbot.waitUntil(lambda: "inswapper_128" in window.controller.stages_label, timeout=20_000)

    def frames() -> int:
        stats = window.controller.stats()
        return stats.frames_out if stats else 0

    window.stage_panel.widget_for("swap.model").setCurrentText("hyperswap_1a_256")  # type: ignore[attr-defined]
    switched_at = frames()
    qtbot.waitUntil(lambda: "hyperswap_1a_256" in window.controller.stages_label, timeout=30_000)
    assert window.controller.models == ModelsState.READY
    assert window.controller._engine is run_before  # the same run: no restart
    assert window.controller.state == RunState.RUNNING
    qtbot.waitUntil(lambda: frames() > switched_at + 5, timeout=10_000)  # and the frames went on
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=10_000)


def test_the_models_dialog_lists_every_model_under_its_role(qtbot: QtBot, tmp_path: Path) -> None:
    dialog = ModelsDialog(tmp_path)
    qtbot.addWidget(dialog)
    texts = [label.text() for label in dialog.findChildren(QLabel)]
    headings = [t for t in texts if t.startswith("<b>") and t.endswith("</b>") and " " in t]
    assert headings[:3] == [
        "<b>Face swappers</b>",
        "<b>Embedding converters (downloaded with the swappers that need them)</b>",
        "<b>Face detectors</b>",
    ]
    first_swapper = texts.index("<b>Face swappers</b>")
    converters = texts.index(headings[1])
    for entry in CATALOGUE:
        at = next(i for i, t in enumerate(texts) if t.startswith(f"<b>{entry.name}</b>"))
        if entry.role == "swapper":
            assert first_swapper < at < converters
    assert "≈ 402.7 MB" in texts  # a publisher's rounded size, shown as such
    dialog.shutdown()
