"""The stage panel's picture stages: the blend choice (feather / Poisson) in the merge box, the
frame enhancer's own box (model, blend, its ms), and the box saying when it would run on the CPU."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

from PyQt6.QtWidgets import QComboBox
from pytestqt.qtbot import QtBot

from gui.composer import SettingsComposer
from gui.stage_panel import FRAME_ENHANCER_STAGE, StagePanel, frame_enhancer_warning
from realtime.core.metrics import Summary
from realtime.core.settings import Settings, load_preset


def items(combo: QComboBox) -> list[str]:
    return [combo.itemText(i) for i in range(combo.count())]


def test_the_blend_and_the_frame_enhancer_are_chosen_in_the_panel(qtbot: QtBot) -> None:
    panel = StagePanel()
    qtbot.addWidget(panel)
    panel.set_settings("balanced", Settings(), set())
    blend = panel.widget_for("composite.blend")
    model = panel.widget_for("frame_enhancer.model")
    assert isinstance(blend, QComboBox) and isinstance(model, QComboBox)
    assert items(blend) == ["feather", "poisson"] and blend.currentText() == "feather"
    assert items(model) == [
        "none",
        "real_esrgan_x2",
        "real_esrgan_x2_fp16",
        "real_esrgan_x4",
        "real_esrgan_x4_fp16",
    ]
    assert "BSD-3-Clause" in str(model.itemData(1, 3))  # a model's licence on its item (ToolTipRole)
    edits: list[tuple[str, object]] = []
    panel.override_requested.connect(lambda key, value: edits.append((key, value)))
    blend.setCurrentText("poisson")
    model.setCurrentText("real_esrgan_x2")
    panel.widget_for("frame_enhancer.blend").setValue(0.6)  # type: ignore[attr-defined]
    composer = SettingsComposer("balanced")
    for key, value in edits:
        composer.set_override(key, value)
    effective = composer.effective()
    assert effective.composite.blend == "poisson"
    assert effective.frame_enhancer.model == "real_esrgan_x2" and effective.frame_enhancer.blend == 0.6
    assert effective.frame_enhancer.output_scale == 1  # the panel keeps the picture's size


def test_the_quality_preset_blends_in_the_gradient_domain(qtbot: QtBot) -> None:
    panel = StagePanel()
    qtbot.addWidget(panel)
    quality = load_preset("quality")
    panel.set_settings("quality", quality, set())
    assert quality.composite.blend == "poisson" and load_preset("balanced").composite.blend == "feather"
    assert panel.widget_for("composite.blend").currentText() == "poisson"  # type: ignore[attr-defined]


def test_each_stage_shows_its_own_ms(qtbot: QtBot) -> None:
    panel = StagePanel()
    qtbot.addWidget(panel)
    panel.set_stage_ms(
        {
            "paste": Summary(0.5, 0.5, 0.6, 0.7, 10),
            "blend": Summary(1.5, 1.5, 1.6, 1.7, 10),
            "frame_enhance": Summary(92.0, 90.0, 95.0, 99.0, 10),
        }
    )
    shown = {box.stage.title: box.ms_label.text() for box in panel.boxes}
    assert shown["Merge (mask & colour)"] == "2.0 ms" and shown[FRAME_ENHANCER_STAGE] == "92.0 ms"


def test_the_frame_enhancer_box_says_when_it_would_run_on_the_cpu(qtbot: QtBot) -> None:
    panel = StagePanel()
    qtbot.addWidget(panel)
    (box,) = [b for b in panel.boxes if b.stage.title == FRAME_ENHANCER_STAGE]
    on_cpu = Settings().with_overrides({"frame_enhancer.model": "real_esrgan_x2", "pipeline.provider": "cpu"})
    panel.set_settings("balanced", on_cpu, {"frame_enhancer.model"})
    assert not box.note.isHidden() and "video files" in box.note.text()
    assert frame_enhancer_warning(on_cpu) == box.note.text()
    panel.set_settings("balanced", on_cpu.with_overrides({"pipeline.provider": "cuda"}), set())
    assert box.note.isHidden()
    panel.set_settings("balanced", Settings().with_overrides({"pipeline.provider": "cpu"}), set())
    assert box.note.isHidden()  # no frame enhancer, nothing to say
