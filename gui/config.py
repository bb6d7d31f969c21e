"""What the control panel remembers between runs, and the TOML file it lives in.

The file is read once at start and written on exit. A file that cannot be read back (bad TOML, a
wrong type, an unknown choice) is copied to `settings.toml.bak` and the defaults are used, with a
message for the window to show; nothing is lost and nothing blocks start-up.
"""

from __future__ import annotations

import logging
import os
import shutil
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

import platformdirs
import tomli_w

from realtime.settings import DEFAULT_PRESET

log = logging.getLogger(__name__)

CONFIG_ENV = "FACECAST_CONFIG"
CONFIG_VERSION = 1

InputKind = Literal["pattern", "camera", "video"]
ViewMode = Literal["swapped", "original", "side_by_side"]


def default_config_path() -> Path:
    """`$FACECAST_CONFIG` if set, else <user config dir>/FaceCast/settings.toml."""
    override = os.environ.get(CONFIG_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("FaceCast")) / "settings.toml"


def default_record_path() -> Path:
    return Path(platformdirs.user_videos_dir()) / "facecast.mp4"


@dataclass(frozen=True, slots=True)
class InputConfig:
    kind: InputKind = "pattern"
    camera_index: int = 0
    video_path: str = ""
    width: int = 1280  # camera request / test pattern size
    height: int = 720
    fps: float = 30.0


@dataclass(frozen=True, slots=True)
class OutputConfig:
    vcam: bool = True
    vcam_width: int = 1280
    vcam_height: int = 720
    vcam_fps: float = 30.0
    record: bool = False
    record_path: str = ""


@dataclass(frozen=True, slots=True)
class GuiConfig:
    consent_accepted: bool = False
    preset: str = DEFAULT_PRESET
    overrides: dict[str, Any] = field(default_factory=dict)  # {"section.key": value} over the preset
    disclosure_label: bool = True
    photos: tuple[str, ...] = ()
    active_face: str = ""
    view: ViewMode = "side_by_side"
    input: InputConfig = field(default_factory=InputConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    window_geometry: str = ""  # QWidget.saveGeometry() as base64


class ConfigError(ValueError):
    """The file's content does not fit GuiConfig (the message names the key)."""


@dataclass(frozen=True, slots=True)
class LoadResult:
    config: GuiConfig
    message: str = ""  # non-empty when the file was unusable and defaults are in use


class ConfigStore:
    """Reads and writes one settings.toml."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_config_path()

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    def load(self) -> LoadResult:
        if not self.path.exists():
            return LoadResult(GuiConfig())
        try:
            data = tomllib.loads(self.path.read_text(encoding="utf-8"))
            return LoadResult(config_from_dict(data))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ConfigError) as exc:
            return LoadResult(GuiConfig(), self._keep_broken_file(exc))

    def save(self, config: GuiConfig) -> None:
        """Write atomically (temp file + rename), so a crash mid-write never corrupts the file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(self.path.name + ".tmp")
        temp.write_text(tomli_w.dumps(config_to_dict(config)), encoding="utf-8")
        os.replace(temp, self.path)

    def _keep_broken_file(self, exc: Exception) -> str:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        try:
            shutil.copy2(self.path, self.backup_path)
        except OSError as copy_error:
            log.warning("could not back up %s: %s", self.path, copy_error)
            return f"Your settings file {self.path} could not be read ({reason}); defaults are in use."
        return (
            f"Your settings file could not be read ({reason}); defaults are in use. "
            f"The original is kept as {self.backup_path}."
        )


# ---- (de)serialisation ------------------------------------------------------------------------------


def config_to_dict(config: GuiConfig) -> dict[str, Any]:
    return {
        "version": CONFIG_VERSION,
        "consent_accepted": config.consent_accepted,
        "preset": config.preset,
        "disclosure_label": config.disclosure_label,
        "active_face": config.active_face,
        "view": config.view,
        "overrides": dict(config.overrides),
        "faces": {"photos": list(config.photos)},
        "input": _section_to_dict(config.input),
        "output": _section_to_dict(config.output),
        "window": {"geometry": config.window_geometry},
    }


def config_from_dict(data: dict[str, Any]) -> GuiConfig:
    """Missing keys take their defaults; a present key with a wrong type or value is an error."""
    version = data.get("version", CONFIG_VERSION)
    if not isinstance(version, int) or version > CONFIG_VERSION:
        raise ConfigError(f"unsupported settings version {version!r}")
    default = GuiConfig()
    overrides = _table(data, "overrides")
    for key in overrides:
        if "." not in key:
            raise ConfigError(f"override '{key}' must look like section.key")
    faces = _table(data, "faces")
    photos = faces.get("photos", [])
    if not isinstance(photos, list) or not all(isinstance(p, str) for p in photos):
        raise ConfigError("'faces.photos' must be a list of file paths")
    view = _typed(data, "view", str, default.view)
    if view not in get_args(ViewMode):
        raise ConfigError(f"'view' must be one of {', '.join(get_args(ViewMode))}")
    input_config = _section_from_dict(InputConfig(), _table(data, "input"), "input")
    if input_config.kind not in get_args(InputKind):
        raise ConfigError(f"'input.kind' must be one of {', '.join(get_args(InputKind))}")
    return GuiConfig(
        consent_accepted=_typed(data, "consent_accepted", bool, default.consent_accepted),
        preset=_typed(data, "preset", str, default.preset),
        overrides=dict(overrides),
        disclosure_label=_typed(data, "disclosure_label", bool, default.disclosure_label),
        photos=tuple(photos),
        active_face=_typed(data, "active_face", str, default.active_face),
        view=cast(ViewMode, view),
        input=input_config,
        output=_section_from_dict(OutputConfig(), _table(data, "output"), "output"),
        window_geometry=_typed(_table(data, "window"), "geometry", str, default.window_geometry),
    )


def _section_to_dict(section: InputConfig | OutputConfig) -> dict[str, Any]:
    return {f.name: getattr(section, f.name) for f in fields(section)}


def _section_from_dict(default: Any, table: dict[str, Any], prefix: str) -> Any:
    changes: dict[str, Any] = {}
    for f in fields(default):
        if f.name in table:
            current = getattr(default, f.name)
            changes[f.name] = _typed(table, f.name, type(current), current, prefix)
    return replace(default, **changes)


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"'{key}' must be a table")
    return value


def _typed(data: dict[str, Any], key: str, kind: type, default: Any, prefix: str = "") -> Any:
    if key not in data:
        return default
    value = data[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, bool):
        raise ConfigError(f"'{prefix + '.' if prefix else ''}{key}' must be a whole number")
    if not isinstance(value, kind):
        raise ConfigError(f"'{prefix + '.' if prefix else ''}{key}' must be {kind.__name__}, got {value!r}")
    return value
