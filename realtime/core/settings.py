"""Typed, validated, immutable engine settings, loaded from TOML presets plus user overrides.

A live change builds a new Settings object; workers pick the new snapshot up at the next frame.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from models.errors import FaceCastError
from models.files.catalogue import names_of_role
from models.files.frame_enhancer_catalogue import frame_enhancer_facts

PRESETS_DIR = Path(__file__).resolve().parents[2] / "configs" / "presets"
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
        _check(0 <= self.max_faces <= 64, "detector.max_faces", "0 (no limit) to 64")


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
        _check(0.01 <= self.min_cutoff <= 30.0, "tracker.min_cutoff", "0.01-30 (Hz)")
        _check(0.0 <= self.beta <= 10.0, "tracker.beta", "0-10")
        _check(0.01 <= self.d_cutoff <= 30.0, "tracker.d_cutoff", "0.01-30 (Hz)")
        _check(0.0 <= self.min_quality <= 1.0, "tracker.min_quality", "between 0 and 1")
        _check(0 <= self.fade_frames <= 60, "tracker.fade_frames", "0-60")
        _check(0 <= self.max_missed <= 120, "tracker.max_missed", "0-120")


@dataclass(frozen=True, slots=True)
class SwapSettings:
    # A face swapper of the catalogue (models/files/swapper_catalogue.py; `models list` shows them).
    model: str = "inswapper_128"
    # Which faces get swapped: the largest, all, the one matching the reference photo, or
    # "mapped": each reference photo's person gets its own source identity (`run --map REF=SRC`),
    # faces matching no reference are left alone.
    target: Literal["largest", "all", "reference", "mapped"] = "largest"
    reference_threshold: float = 0.6  # max cosine distance to the reference embedding (ArcFace)
    # Who is who for "reference" and "mapped" (the swap itself always takes ArcFace's embedding of
    # the source): ArcFace, or dlib's ResNet with its own, much smaller distances.
    recognizer: Literal["arcface", "dlib"] = "arcface"
    # dlib: ~0.01-0.05 for the same person across frames, 0.09-0.19 between different people.
    dlib_threshold: float = 0.07

    def validate(self) -> None:
        swappers = names_of_role("swapper")
        _check(self.model in swappers, "swap.model", f"one of {', '.join(swappers)}")
        _check(0.0 < self.reference_threshold < 2.0, "swap.reference_threshold", "between 0 and 2")
        _check(0.0 < self.dlib_threshold < 2.0, "swap.dlib_threshold", "between 0 and 2")

    @property
    def identity_threshold(self) -> float:
        """The reference threshold of the chosen recogniser."""
        return self.dlib_threshold if self.recognizer == "dlib" else self.reference_threshold


@dataclass(frozen=True, slots=True)
class PrivacySettings:
    # What a face that should be swapped shows while it is not (yet) swapped: found again but not
    # yet confirmed, or its swap faded: its own pixels ("original"), a pixelation ("blur"), or the
    # last good swap held for up to `hold_frames` ("hold", then the pixelation).
    fallback: Literal["original", "blur", "hold"] = "original"
    hold_frames: int = 15
    # Frames a locked face is still expected back after it was lost (behind someone, out of frame):
    # a face found where it was, not yet confirmed, is covered meanwhile.
    expect_frames: int = 60

    def validate(self) -> None:
        _check(0 <= self.hold_frames <= 120, "privacy.hold_frames", "0-120")
        _check(0 <= self.expect_frames <= 600, "privacy.expect_frames", "0-600")


@dataclass(frozen=True, slots=True)
class CompositeSettings:
    erode_ratio: float = 0.1
    blur_ratio: float = 0.05
    colour_match: bool = False
    opacity: float = 1.0
    disclosure_label: bool = False  # small "AI-modified" mark on the output
    # Unsharp-mask amount on the pasted face (0 = off): the 128 px swap is soft when upscaled
    # onto a large face; 0.3-0.8 restores edges without ringing.
    sharpen: float = 0.0
    # How the swapped face meets the frame: "feather" (the feathered paste alone) or "poisson"
    # (gradient-domain: the face takes the frame's lighting at its mask's edge, then the same
    # feathered paste; realtime/face/host/poisson.py).
    blend: Literal["feather", "poisson"] = "feather"

    def validate(self) -> None:
        _check(0.0 <= self.erode_ratio <= 0.4, "composite.erode_ratio", "0-0.4")
        _check(0.0 <= self.blur_ratio <= 0.3, "composite.blur_ratio", "0-0.3")
        _check(0.0 <= self.opacity <= 1.0, "composite.opacity", "0-1")
        _check(0.0 <= self.sharpen <= 3.0, "composite.sharpen", "0 (off) to 3")


EnhancerModel = Literal["none", "gpen_256", "gpen_512", "gfpgan_1.4", "codeformer"]


@dataclass(frozen=True, slots=True)
class EnhancerSettings:
    """Face restoration of the swapped face, in FFHQ-aligned space (realtime/face/steps/enhance.py)."""

    model: EnhancerModel = "none"
    blend: float = 0.8  # 0 = the plain swap, 1 = the restorer's output only
    # Run the restorer on every Nth frame of a face; in between its last correction (kept in
    # aligned space) is re-applied at the face's current position.
    every_n: int = 1
    fidelity: float = 0.5  # CodeFormer only: its `weight` input (0 = more restoration, 1 = more fidelity)

    def validate(self) -> None:
        _check(0.0 <= self.blend <= 1.0, "enhancer.blend", "0-1")
        _check(1 <= self.every_n <= 30, "enhancer.every_n", "1-30 frames")
        _check(0.0 <= self.fidelity <= 1.0, "enhancer.fidelity", "0-1")


@dataclass(frozen=True, slots=True)
class FrameEnhancerSettings:
    """Whole-frame super-resolution after the faces (realtime/picture/frame_enhancer.py)."""

    # "none", or a frame enhancer of the catalogue (Real-ESRGAN x2/x4; `models list` shows them).
    model: str = "none"
    # False: the enhanced picture is scaled back to the input's size (sharper, same size: the live
    # default). True: the output is `scale` times the input's size (files; read when a run starts).
    upscale: bool = False
    blend: float = 0.8  # the enhanced picture's share; the rest is the plain picture

    def validate(self) -> None:
        models = ("none", *names_of_role("frame_enhancer"))
        _check(self.model in models, "frame_enhancer.model", f"one of {', '.join(models)}")
        _check(0.0 <= self.blend <= 1.0, "frame_enhancer.blend", "0-1")

    @property
    def output_scale(self) -> int:
        """How many times the input's size the output is: the model's factor when it upscales."""
        if self.model == "none" or not self.upscale:
            return 1
        return frame_enhancer_facts(self.model).scale


# BiSeNet face-parsing classes (docs/model-contracts.md, "Masks").
PARSER_CLASSES = 19
DEFAULT_REGION_CLASSES = (1, 2, 3, 4, 5, 10, 11, 12, 13)  # skin, brows, eyes, nose, mouth, lips


@dataclass(frozen=True, slots=True)
class MasksSettings:
    """Which masks limit the pasted face; all are combined by taking the minimum
    (realtime/face/steps/masks.py).

    The feathered box (composite.erode_ratio / blur_ratio) is always on.
    """

    occlusion: bool = False  # xseg: hands, hair, microphones in front of the face stay visible
    regions: bool = False  # BiSeNet: only the classes in `region_classes` are swapped
    region_classes: tuple[int, ...] = DEFAULT_REGION_CLASSES
    mouth: bool = False  # keep the target's own mouth (from the landmarks)
    mouth_scale: float = 1.0  # size of the kept mouth area, relative to the default

    def validate(self) -> None:
        ok = len(self.region_classes) > 0 and all(0 <= c < PARSER_CLASSES for c in self.region_classes)
        _check(ok, "masks.region_classes", f"a non-empty list of face-parser classes 0-{PARSER_CLASSES - 1}")
        _check(0.5 <= self.mouth_scale <= 2.0, "masks.mouth_scale", "0.5-2")


@dataclass(frozen=True, slots=True)
class WatermarkSettings:
    # The invisible, machine-readable mark on every output frame (realtime/core/watermark,
    # docs/PROVENANCE.md). Off only on purpose: a run without it says so with a warning.
    enabled: bool = True

    def validate(self) -> None:
        pass


# Where the models run; "auto" is resolved by whoever builds the stages (realtime.wiring.face_swap).
Provider = Literal["auto", "cpu", "cuda", "tensorrt", "coreml", "directml", "openvino"]


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    # "auto": the GPU where one can run the models (models.runtime.session.auto_provider), else the CPU.
    provider: Provider = "auto"
    fp16: bool = True
    frames_in_flight: int = 2
    # Files and clips only: how many frames the (serial) analysis may run ahead of the swap workers,
    # so that it overlaps their work. Live sources ignore it: there it would only add latency.
    read_ahead: int = 2
    # Longest side of the frame the face stages see; 0 = the source's own size.
    processing_size: int = 0

    def validate(self) -> None:
        _check(1 <= self.frames_in_flight <= 8, "pipeline.frames_in_flight", "1-8")
        _check(0 <= self.read_ahead <= 8, "pipeline.read_ahead", "0-8")
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
    enhancer: EnhancerSettings = field(default_factory=EnhancerSettings)
    masks: MasksSettings = field(default_factory=MasksSettings)
    privacy: PrivacySettings = field(default_factory=PrivacySettings)
    frame_enhancer: FrameEnhancerSettings = field(default_factory=FrameEnhancerSettings)
    watermark: WatermarkSettings = field(default_factory=WatermarkSettings)

    def validate(self) -> Settings:
        for f in fields(self):
            section = getattr(self, f.name)
            _check_types(section, f"{f.name}.")
            section.validate()
        return self

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """A copy with `{"section": {"key": value}}` or `{"section.key": value}` applied."""
        return _apply(self, _nest(overrides), "").validate()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {f.name: dataclasses.asdict(getattr(self, f.name)) for f in fields(self)}


# Keys that were renamed: a file that still uses one gets told where it went.
_MOVED: Mapping[str, str] = MappingProxyType(
    {"pipeline.enhancer": "enhancer.model (none, gpen_256, gpen_512, gfpgan_1.4, codeformer)"}
)


def _check(ok: bool, key: str, expected: str) -> None:
    if not ok:
        raise SettingsError(f"Bad value for setting '{key}': expected {expected}.")


def _check_types(section: Any, prefix: str) -> None:
    """Every field holds its declared type (Settings built in code skip with_overrides' coercion:
    "false" would run as true), and every float is finite (inf passed the range checks of
    unbounded keys and turned the landmarks into NaN)."""
    hints = get_type_hints(type(section))
    for f in fields(section):
        value, hint, path = getattr(section, f.name), hints[f.name], f"{prefix}{f.name}"
        origin = get_origin(hint)
        if origin is Literal:
            ok, expected = value in get_args(hint), f"one of {', '.join(map(str, get_args(hint)))}"
        elif origin is tuple:
            ok = isinstance(value, tuple) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            )
            expected = "a list of whole numbers"
        elif hint is bool:
            ok, expected = isinstance(value, bool), "true or false"
        elif hint is int:
            ok, expected = isinstance(value, int) and not isinstance(value, bool), "a whole number"
        elif hint is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            expected = "a finite number"
        else:
            continue
        if not ok:
            raise SettingsError(f"Bad value for setting '{path}': {value!r}; expected {expected}.")


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        node = out
        for depth, part in enumerate(parts[:-1], start=1):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                owner = ".".join(parts[:depth])
                raise SettingsError(
                    f"Setting '{key}' conflicts with the override '{owner}', which gives a value to "
                    "the whole section: set its keys one by one instead."
                )
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
            if path in _MOVED:
                raise SettingsError(f"Setting '{path}' has moved: use {_MOVED[path]}.")
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
    if origin is tuple:
        return _coerce_int_tuple(value, hint, path)
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
        if isinstance(value, int) and value in (0, 1):  # `--set x=1` reads as the TOML integer 1
            return bool(value)
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
            number = float(value)
        except ValueError:
            raise SettingsError(f"Bad value for setting '{path}': {value!r} is not a number.") from None
        if not math.isfinite(number):
            raise SettingsError(f"Bad value for setting '{path}': {value!r}; expected a finite number.")
        return number
    return value


def _coerce_int_tuple(value: Any, hint: Any, path: str) -> tuple[int, ...]:
    """A TOML array (or "1,2,3" from the command line) of whole numbers."""
    if get_args(hint) != (int, Ellipsis):
        raise TypeError(f"unsupported setting type {hint} for '{path}'")
    if isinstance(value, str):
        items: list[Any] = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise SettingsError(f"Bad value for setting '{path}': {value!r} is not a list of whole numbers.")
    out: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise SettingsError(f"Bad value for setting '{path}': {item!r} is not a whole number.")
        try:
            out.append(int(item))
        except ValueError:
            raise SettingsError(f"Bad value for setting '{path}': {item!r} is not a whole number.") from None
    return tuple(out)


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
