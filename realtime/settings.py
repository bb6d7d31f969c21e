"""Typed, validated, immutable engine settings, loaded from TOML presets plus user overrides.

A live change builds a new Settings object; workers pick the new snapshot up at the next frame.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from models.errors import FaceCastError

PRESETS_DIR = Path(__file__).resolve().parent.parent / "configs" / "presets"
DEFAULT_PRESET = "balanced"


class SettingsError(FaceCastError):
    """A preset or override names an unknown key or holds a bad value."""


@dataclass(frozen=True, slots=True)
class DetectorSettings:
    model: Literal["det_10g", "scrfd_2.5g", "mtcnn"] = "det_10g"
    size: int = 640  # detector input (square letterbox), multiple of 32
    threshold: float = 0.5
    interval: int = 1  # full detection every K frames; the tracker carries faces in between
    max_faces: int = 0  # 0 = no limit

    def validate(self) -> None:
        ok_size = self.size % 32 == 0 and 128 <= self.size <= 1280
        _check(ok_size, "detector.size", "a multiple of 32, 128-1280")
        _check(0.0 < self.threshold < 1.0, "detector.threshold", "between 0 and 1")
        _check(1 <= self.interval <= 120, "detector.interval", "1-120 frames")
        _check(self.max_faces >= 0, "detector.max_faces", ">= 0")


@dataclass(frozen=True, slots=True)
class TrackerSettings:
    enabled: bool = True
    # One-Euro filter on landmark coordinates (pixels): lower min_cutoff = steadier, higher beta =
    # less lag on fast motion.
    min_cutoff: float = 1.0
    beta: float = 0.05
    d_cutoff: float = 1.0
    # Below this tracking quality (0..1) a face passes through unswapped.
    min_quality: float = 0.5
    # Frames of fade when a face switches between swapped and passthrough.
    fade_frames: int = 4
    # Frames a track survives without being seen before it is dropped.
    max_missed: int = 5

    def validate(self) -> None:
        _check(self.min_cutoff > 0, "tracker.min_cutoff", "> 0")
        _check(self.beta >= 0, "tracker.beta", ">= 0")
        _check(self.d_cutoff > 0, "tracker.d_cutoff", "> 0")
        _check(0.0 <= self.min_quality <= 1.0, "tracker.min_quality", "between 0 and 1")
        _check(0 <= self.fade_frames <= 60, "tracker.fade_frames", "0-60")
        _check(0 <= self.max_missed <= 120, "tracker.max_missed", "0-120")


@dataclass(frozen=True, slots=True)
class SwapSettings:
    model: Literal["inswapper_128", "inswapper_128_fp16"] = "inswapper_128"
    # Which faces get swapped: the largest, all, or the one matching the reference photo.
    target: Literal["largest", "all", "reference"] = "largest"
    reference_threshold: float = 0.6  # max cosine distance to the reference embedding

    def validate(self) -> None:
        _check(0.0 < self.reference_threshold < 2.0, "swap.reference_threshold", "between 0 and 2")


@dataclass(frozen=True, slots=True)
class CompositeSettings:
    erode_ratio: float = 0.1
    blur_ratio: float = 0.05
    colour_match: bool = False
    opacity: float = 1.0
    disclosure_label: bool = False  # small "AI-modified" mark on the output

    def validate(self) -> None:
        _check(0.0 <= self.erode_ratio <= 0.4, "composite.erode_ratio", "0-0.4")
        _check(0.0 <= self.blur_ratio <= 0.3, "composite.blur_ratio", "0-0.3")
        _check(0.0 <= self.opacity <= 1.0, "composite.opacity", "0-1")


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    provider: Literal["cpu", "cuda", "tensorrt", "coreml", "directml", "openvino"] = "cpu"
    fp16: bool = True
    frames_in_flight: int = 2
    # Longest side of the frame the face stages see; 0 = the source's own size.
    processing_size: int = 0
    enhancer: bool = False

    def validate(self) -> None:
        _check(1 <= self.frames_in_flight <= 8, "pipeline.frames_in_flight", "1-8")
        _check(
            self.processing_size == 0 or 160 <= self.processing_size <= 4096,
            "pipeline.processing_size",
            "0 (native) or 160-4096",
        )


@dataclass(frozen=True, slots=True)
class Settings:
    detector: DetectorSettings = field(default_factory=DetectorSettings)
    tracker: TrackerSettings = field(default_factory=TrackerSettings)
    swap: SwapSettings = field(default_factory=SwapSettings)
    composite: CompositeSettings = field(default_factory=CompositeSettings)
    pipeline: PipelineSettings = field(default_factory=PipelineSettings)

    def validate(self) -> Settings:
        for f in fields(self):
            getattr(self, f.name).validate()
        return self

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """A copy with `{"section": {"key": value}}` or `{"section.key": value}` applied."""
        return _apply(self, _nest(overrides), "").validate()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {f.name: dataclasses.asdict(getattr(self, f.name)) for f in fields(self)}


def _check(ok: bool, key: str, expected: str) -> None:
    if not ok:
        raise SettingsError(f"Bad value for setting '{key}': expected {expected}.")


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SettingsError(f"Setting '{key}' conflicts with another override.")
        if isinstance(value, Mapping):
            node.setdefault(parts[-1], {}).update(_nest(value))
        else:
            node[parts[-1]] = value
    return out


T = TypeVar("T")


def _apply(obj: T, values: Mapping[str, Any], prefix: str) -> T:
    hints = get_type_hints(type(obj))
    names = {f.name for f in fields(obj)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if key not in names:
            known = ", ".join(sorted(names))
            raise SettingsError(f"Unknown setting '{path}'. Known here: {known}.")
        current = getattr(obj, key)
        if is_dataclass(current):
            if not isinstance(value, Mapping):
                raise SettingsError(f"Setting '{path}' is a section; give it a table of keys.")
            changes[key] = _apply(current, value, f"{path}.")
        else:
            changes[key] = _coerce(value, hints[key], path)
    return replace(obj, **changes)  # type: ignore[type-var]


def _coerce(value: Any, hint: Any, path: str) -> Any:
    origin = get_origin(hint)
    if origin is Literal:
        allowed = get_args(hint)
        if value not in allowed:
            raise SettingsError(
                f"Bad value for setting '{path}': {value!r}; choose one of {', '.join(map(str, allowed))}."
            )
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "on", "off", "1", "0", "yes", "no"):
            return value.lower() in ("true", "on", "1", "yes")
        raise SettingsError(f"Bad value for setting '{path}': {value!r} is not true/false.")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise SettingsError(f"Bad value for setting '{path}': {value!r} is not a whole number.")
        try:
            return int(value)
        except ValueError:
            raise SettingsError(f"Bad value for setting '{path}': {value!r} is not a whole number.") from None
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise SettingsError(f"Bad value for setting '{path}': {value!r} is not a number.")
        try:
            return float(value)
        except ValueError:
            raise SettingsError(f"Bad value for setting '{path}': {value!r} is not a number.") from None
    return value


def available_presets(presets_dir: Path = PRESETS_DIR) -> list[str]:
    return sorted(p.stem for p in presets_dir.glob("*.toml"))


def load_preset(name: str, presets_dir: Path = PRESETS_DIR) -> Settings:
    path = presets_dir / f"{name}.toml"
    if not path.is_file():
        raise SettingsError(
            f"Unknown preset '{name}'.", hint=f"Choose one of: {', '.join(available_presets(presets_dir))}."
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"Preset file {path} is not valid TOML: {exc}.") from exc
    data.pop("description", None)
    return Settings().with_overrides(data)


def parse_override(text: str) -> tuple[str, Any]:
    """`section.key=value` from the command line; the value is read as TOML when it can be."""
    if "=" not in text:
        raise SettingsError(f"Override '{text}' must look like section.key=value.")
    key, raw = text.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip(), value
