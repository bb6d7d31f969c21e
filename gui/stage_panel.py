"""Preset dropdown and one advanced box per pipeline stage, each with its live ms, applied live.

Controls never change settings themselves: they emit `override_requested(key, value)`; the window
validates it (SettingsComposer) and calls back set_settings() with what is now in effect, or
show_error() with the reason a value was refused.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui.widgets import ComboBox, DoubleSpinBox, SpinBox
from realtime.api import (
    PRESETS_DIR,
    Settings,
    Summary,
    auto_provider,
    available_presets,
    frame_enhancer_names,
    get_entry,
    swapper_info,
    swapper_names,
)

Kind = Literal["int", "float", "bool", "choice"]

FRAME_ENHANCER_STAGE = "Frame enhancer (super-resolution)"
# Measured with `main.py bench --picture` on a 2-core CPU (docs/PERFORMANCE.md).
POISSON_COST = "2-5 ms per face on a 2-core CPU (the most while the face changes size): it fits a live run"
FRAME_ENHANCER_CPU_NOTE = (
    "On the CPU Real-ESRGAN takes minutes per frame (x2: about 2 minutes at 720p on 2 cores): it is for "
    "video files (main.py run with a file in and out) or a GPU; live, the output would stall."
)


@dataclass(frozen=True, slots=True)
class Control:
    key: str  # "section.field"
    label: str
    kind: Kind
    minimum: float = 0.0
    maximum: float = 1.0
    step: float = 1.0
    decimals: int = 2
    choices: tuple[str, ...] = ()
    tooltip: str = ""
    # A line under the control saying what the chosen value is (a swap model's crop, download,
    # licence), kept up to date; None: no line.
    describe: Callable[[str], str] | None = None


def swapper_line(name: str) -> str:
    """What the chosen swap model is, in a line: family, crop, download, licence."""
    info = swapper_info(name)
    size = "size not published" if info.download_bytes is None else f"{info.download_bytes / 1e6:,.0f} MB"
    return f"{info.family}, {info.crop} px crop, {size}; {info.licence.split(':')[0]}"


@dataclass(frozen=True, slots=True)
class Stage:
    title: str
    timings: tuple[str, ...]  # StatsSnapshot.stages_ms keys summed for this stage's ms
    controls: tuple[Control, ...]


STAGES: tuple[Stage, ...] = (
    Stage(
        "Detector",
        ("detect",),
        (
            Control("detector.model", "Model", "choice"),
            Control("detector.size", "Input size", "int", 128, 1280, 32, tooltip="Smaller is faster"),
            Control("detector.threshold", "Threshold", "float", 0.01, 0.99, 0.05),
            Control(
                "detector.interval",
                "Detect every",
                "int",
                1,
                120,
                1,
                tooltip="Full detection every N frames; tracking carries the faces in between",
            ),
            Control("detector.max_faces", "Max faces", "int", 0, 64, 1, tooltip="0 = no limit"),
        ),
    ),
    Stage(
        "Tracking & smoothing",
        ("track", "select"),
        (
            Control("tracker.enabled", "Tracking", "bool"),
            Control(
                "tracker.min_cutoff",
                "Min cutoff",
                "float",
                0.01,
                30.0,
                0.05,
                tooltip="Lower = steadier face when still (One-Euro filter)",
            ),
            Control(
                "tracker.beta", "Beta", "float", 0.0, 10.0, 0.01, 3, tooltip="Higher = less lag when moving"
            ),
            Control("tracker.min_quality", "Min quality", "float", 0.0, 1.0, 0.05),
        ),
    ),
    Stage(
        "Face swap",
        ("swap",),
        (
            Control(
                "swap.model",
                "Model",
                "choice",
                choices=swapper_names(),
                tooltip="The face swap model: a change loads in the background while the current one "
                "keeps swapping (no restart). Hover a model for its crop, download and licence; "
                "Models… downloads it",
                describe=swapper_line,
            ),
            # "reference" and "mapped" need reference photos, which only the command line takes.
            Control("swap.target", "Swap", "choice", choices=("largest", "all")),
            Control(
                "swap.recognizer",
                "Who is who",
                "choice",
                tooltip="The recogniser that tells people apart for a locked or mapped face: ArcFace, "
                "or dlib's ResNet (pip install dlib-bin face-recognition-models); the swap itself "
                "always uses ArcFace. Takes effect at the next Start",
            ),
            Control(
                "swap.dlib_threshold",
                "dlib threshold",
                "float",
                0.01,
                1.99,
                0.01,
                tooltip="Largest dlib distance that is still the same person (same face ~0.02, "
                "different people 0.09-0.19)",
            ),
        ),
    ),
    Stage(
        "Privacy",
        ("cover",),
        (
            Control(
                "privacy.fallback",
                "While unsure",
                "choice",
                tooltip="What a face that should be swapped shows while it is not swapped yet (found "
                "again, not yet confirmed, or fading in): as it is, pixelated, or the last swap held",
            ),
            Control(
                "privacy.hold_frames",
                "Hold for",
                "int",
                0,
                120,
                1,
                tooltip="'hold': frames the last swap is kept on a face found where the person was",
            ),
        ),
    ),
    Stage(
        "Merge (mask & colour)",
        ("blend", "paste"),
        (
            Control("composite.erode_ratio", "Mask erode", "float", 0.0, 0.4, 0.01),
            Control("composite.blur_ratio", "Mask blur", "float", 0.0, 0.3, 0.01),
            Control(
                "composite.blend",
                "Blend",
                "choice",
                tooltip="feather: the feathered paste alone. poisson: the face takes the frame's "
                "lighting at its edge (gradient-domain blending) before the same paste, so a face lit "
                f"differently shows no seam; {POISSON_COST}",
            ),
            Control("composite.colour_match", "Colour match", "bool"),
            Control("composite.opacity", "Opacity", "float", 0.0, 1.0, 0.05),
            Control("composite.sharpen", "Sharpen", "float", 0.0, 3.0, 0.1, tooltip="0 = off"),
        ),
    ),
    Stage(
        "Enhancer",
        ("enhance",),
        (
            Control("enhancer.model", "Model", "choice", tooltip="Face restoration of the swapped face"),
            Control("enhancer.blend", "Blend", "float", 0.0, 1.0, 0.05),
            Control("enhancer.every_n", "Run every", "int", 1, 30, 1, tooltip="Frames between restorer runs"),
        ),
    ),
    Stage(
        FRAME_ENHANCER_STAGE,
        ("frame_enhance",),
        (
            Control(
                "frame_enhancer.model",
                "Model",
                "choice",
                choices=("none", *frame_enhancer_names()),
                tooltip="Whole-frame super-resolution after the faces (Real-ESRGAN), kept at the "
                "picture's size: sharper, same size. A separate download (Models…); a change loads "
                "in the background",
            ),
            Control(
                "frame_enhancer.blend",
                "Blend",
                "float",
                0.0,
                1.0,
                0.05,
                tooltip="The enhanced picture's share (the rest is the plain picture)",
            ),
        ),
    ),
    Stage(
        "Pipeline",
        ("sink",),
        (
            Control(
                "pipeline.frames_in_flight",
                "Frames in flight",
                "int",
                1,
                8,
                1,
                tooltip="More = higher fps on a fast GPU, more latency; takes effect at the next Start",
            ),
            Control(
                "pipeline.read_ahead",
                "Read-ahead (files)",
                "int",
                0,
                8,
                1,
                tooltip="Video files only: frames analysed ahead of the swaps, for throughput. "
                "Live cameras ignore it (it would add latency)",
            ),
            Control(
                "pipeline.processing_size",
                "Processing size",
                "int",
                0,
                4096,
                160,
                tooltip="Longest side the face stages work at (0 = the source's own size). Smaller is "
                "faster and softer; the output keeps its size. Values 1-159 are refused",
            ),
            Control(
                "pipeline.provider",
                "Execution provider",
                "choice",
                tooltip="Where the models run; 'auto' picks for this computer (see its entry in the list)",
            ),
            Control("pipeline.fp16", "fp16 (TensorRT)", "bool"),
        ),
    ),
)


def preset_description(name: str) -> str:
    try:
        data = tomllib.loads((PRESETS_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return ""
    text = data.get("description", "")
    return text if isinstance(text, str) else ""


def choice_tooltip(key: str, choice: str) -> str:
    """A choice's own tooltip: what 'auto' picks (it said nothing; only the status bar's 'on cpu'
    told, once running); a swap model's crop, download, cost and licence."""
    if key == "swap.model":
        info = swapper_info(choice)
        return f"{info.summary()}. Licence: {info.licence}."
    if key == "frame_enhancer.model" and choice != "none":
        entry = get_entry(choice)
        return f"{entry.description}. Licence: {entry.licence}."
    if (key, choice) == ("pipeline.provider", "auto"):
        return (
            "auto: CUDA where onnxruntime-gpu and an NVIDIA driver are present, DirectML on "
            f"Windows, else the CPU. Here: {auto_provider()}."
        )
    return ""


def frame_enhancer_warning(settings: Settings) -> str:
    """What the frame enhancer's box says when the chosen one would run on the CPU (else "")."""
    if settings.frame_enhancer.model == "none":
        return ""
    provider = settings.pipeline.provider
    on_cpu = provider == "cpu" or (provider == "auto" and auto_provider() == "cpu")
    return FRAME_ENHANCER_CPU_NOTE if on_cpu else ""


def _value(settings: Settings, key: str) -> Any:
    section, name = key.split(".", 1)
    return getattr(getattr(settings, section), name)


def setting_exists(key: str) -> bool:
    """Whether this engine version has the setting (controls for others are left out)."""
    section, name = key.split(".", 1)
    part = getattr(Settings(), section, None)
    return part is not None and name in {f.name for f in fields(part)}


def choices_for(control: Control) -> tuple[str, ...]:
    """The control's own choices, else every value the setting's Literal type allows."""
    if control.choices:
        return control.choices
    section, name = control.key.split(".", 1)
    hint = get_type_hints(type(getattr(Settings(), section)))[name]
    return tuple(str(v) for v in get_args(hint)) if get_origin(hint) is Literal else ()


class StageBox(QGroupBox):
    """One stage: its controls and its measured ms."""

    edited = pyqtSignal(str, object)

    def __init__(self, stage: Stage, parent: QWidget | None = None) -> None:
        super().__init__(stage.title.replace("&", "&&"), parent)  # "&" would be a mnemonic
        self.stage = stage
        self.ms_label = QLabel("– ms")
        self.ms_label.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.ms_label.setStyleSheet("color:#8fd08f; font-family:monospace;")
        self.ms_label.setToolTip("Mean time per frame in this stage (" + " + ".join(stage.timings) + ")")
        self.widgets: dict[str, QWidget] = {}
        self._labels: dict[str, QLabel] = {}
        self.notes: dict[str, QLabel] = {}  # the chosen value described, under its control
        self._describe: dict[str, Callable[[str], str]] = {}
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for control in stage.controls:
            if not setting_exists(control.key):
                continue
            widget = self._make(control)
            label = QLabel(control.label)
            label.setToolTip(control.tooltip)
            widget.setToolTip(control.tooltip)
            self.widgets[control.key] = widget
            self._labels[control.key] = label
            form.addRow(label, widget)
            if control.describe is not None and isinstance(widget, QComboBox):
                note = QLabel(control.describe(widget.currentText()))
                note.setWordWrap(True)
                note.setStyleSheet("color:#999; font-size:11px;")
                describe = control.describe
                widget.currentTextChanged.connect(lambda text, n=note, d=describe: n.setText(d(text)))
                self.notes[control.key] = note
                self._describe[control.key] = describe
                form.addRow("", note)
        self.note = QLabel()  # a warning about the stage's settings, shown when there is one
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color:#e0b050;")
        self.note.hide()
        layout = QVBoxLayout(self)
        layout.addWidget(self.ms_label)
        layout.addLayout(form)
        layout.addWidget(self.note)

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _make(self, control: Control) -> QWidget:
        key = control.key
        if control.kind == "bool":
            check = QCheckBox()
            check.toggled.connect(lambda on, k=key: self.edited.emit(k, bool(on)))
            return check
        if control.kind == "choice":
            combo = ComboBox()
            combo.addItems(choices_for(control))
            for index in range(combo.count()):
                tip = choice_tooltip(key, combo.itemText(index))
                if tip:
                    combo.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)
            combo.currentTextChanged.connect(lambda text, k=key: self.edited.emit(k, text))
            return combo
        if control.kind == "int":
            spin = SpinBox()
            spin.setRange(int(control.minimum), int(control.maximum))
            spin.setSingleStep(int(control.step))
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(lambda v, k=key: self.edited.emit(k, int(v)))
            return spin
        dspin = DoubleSpinBox()
        dspin.setRange(control.minimum, control.maximum)
        dspin.setSingleStep(control.step)
        dspin.setDecimals(control.decimals)
        dspin.setKeyboardTracking(False)
        dspin.valueChanged.connect(lambda v, k=key: self.edited.emit(k, float(v)))
        return dspin

    def set_values(self, settings: Settings, overridden: set[str]) -> None:
        for key, widget in self.widgets.items():
            value = _value(settings, key)
            widget.blockSignals(True)
            if isinstance(widget, QCheckBox):
                widget.setChecked(bool(value))
            elif isinstance(widget, QComboBox):
                widget.setCurrentText(str(value))
                if key in self.notes:  # (its signal is blocked: said here)
                    self.notes[key].setText(self._describe[key](str(value)))
            elif isinstance(widget, QSpinBox):
                widget.setValue(int(value))
            elif isinstance(widget, QDoubleSpinBox):
                widget.setValue(float(value))
            widget.blockSignals(False)
            font = self._labels[key].font()
            font.setItalic(key in overridden)
            self._labels[key].setFont(font)
            tip = "changed from the preset" if key in overridden else ""
            self._labels[key].setStatusTip(tip)

    def set_ms(self, stages_ms: Mapping[str, Summary]) -> None:
        parts = [stages_ms[k].mean for k in self.stage.timings if k in stages_ms]
        self.ms_label.setText(f"{sum(parts):.1f} ms" if parts else "– ms")


class StagePanel(QWidget):
    preset_requested = pyqtSignal(str)
    override_requested = pyqtSignal(str, object)  # key, value
    reset_requested = pyqtSignal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        presets = available_presets()
        self._descriptions = {name: preset_description(name) for name in presets}  # read once
        self.preset_combo = ComboBox()
        self.preset_combo.addItems(presets)
        self.preset_combo.currentTextChanged.connect(self.preset_requested)
        reset = QPushButton("Reset to preset")
        reset.clicked.connect(self.reset_requested)
        row = QHBoxLayout()
        row.addWidget(QLabel("Preset"))
        row.addWidget(self.preset_combo, 1)
        row.addWidget(reset)
        self.description = QLabel()
        self.description.setWordWrap(True)
        self.description.setStyleSheet("color:#aaa;")
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.setStyleSheet("color:#ff8080;")
        self.error_label.hide()
        note = QLabel("Changes apply live. Italic = changed from the preset.")
        note.setStyleSheet("color:#888;")
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.description)
        layout.addWidget(note)
        layout.addWidget(self.error_label)
        self.boxes: list[StageBox] = []
        for stage in STAGES:
            if not any(setting_exists(c.key) for c in stage.controls):
                continue
            box = StageBox(stage, self)
            box.edited.connect(self.override_requested)
            self.boxes.append(box)
            layout.addWidget(box)
        layout.addStretch(1)

    def widget_for(self, key: str) -> QWidget:
        for box in self.boxes:
            if key in box.widgets:
                return box.widgets[key]
        raise KeyError(key)

    def set_settings(self, preset: str, settings: Settings, overridden: set[str]) -> None:
        self.preset_combo.blockSignals(True)
        self.preset_combo.setCurrentText(preset)
        self.preset_combo.blockSignals(False)
        self.description.setText(self._descriptions.get(preset, ""))
        for box in self.boxes:
            box.set_values(settings, overridden)
            if box.stage.title == FRAME_ENHANCER_STAGE:
                box.set_note(frame_enhancer_warning(settings))

    def set_stage_ms(self, stages_ms: Mapping[str, Summary]) -> None:
        for box in self.boxes:
            box.set_ms(stages_ms)

    def show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))
