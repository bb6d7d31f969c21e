"""What the control panel remembers between runs, and the TOML file it lives in.

The file is read once at start and written on exit. Nothing the user saved is lost and nothing blocks
start-up: a key with a wrong type or an out-of-range value falls back to its default (the others
are kept), a file that cannot be parsed falls back to defaults as a whole, and either way the
original is copied to `settings.toml.bak` first, with a message for the window to show. A file that
exists but cannot be read (or backed up) is never written over.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shutil
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

import platformdirs
import tomli_w

from realtime.api import DEFAULT_PRESET, settings_path

log = logging.getLogger(__name__)

CONFIG_ENV = "FACECAST_CONFIG"
CONFIG_VERSION = 1

InputKind = Literal["pattern", "camera", "video"]
ViewMode = Literal["swapped", "original", "side_by_side"]

# What the panels' own widgets accept; a saved value outside falls back to its default.
INPUT_FPS_RANGE = (1.0, 120.0)
VCAM_FPS_RANGE = (1.0, 60.0)
_WIDTH_RANGE = (64, 7680)
_HEIGHT_RANGE = (48, 4320)
_RANGES: dict[str, tuple[float, float]] = {
    "input.camera_index": (0, 99),
    "input.width": _WIDTH_RANGE,
    "input.height": _HEIGHT_RANGE,
    "input.fps": INPUT_FPS_RANGE,
    "output.vcam_width": _WIDTH_RANGE,
    "output.vcam_height": _HEIGHT_RANGE,
    "output.vcam_fps": VCAM_FPS_RANGE,
}
_GEOMETRY = re.compile(r"[A-Za-z0-9+/=]*")  # QWidget.saveGeometry() in base64


def default_config_path() -> Path:
    """`$FACECAST_CONFIG` if set, else <user config dir>/FaceCast/settings.toml (the command line's
    consent file lives beside it: realtime.consent)."""
    return settings_path()


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
class RemoteConfig:
    """Where the swap runs: "local" or "server" (a FaceCast server at `url`; its token is kept in a
    file of its own, see gui/remote_run.py)."""

    mode: str = "local"
    url: str = ""


@dataclass(frozen=True, slots=True)
class MapEntry:
    """A person mapped to a gallery face in the preview: the recogniser that embedded them, the
    embedding and the gallery face they become (its photo path)."""

    recognizer: str
    embedding: tuple[float, ...]
    face: str


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
    models_dir: str = ""  # chosen in the Models dialog; "" = $FACECAST_MODELS_DIR or the default
    allow_unverified: bool = False  # the Models dialog's "Allow unverified files" (the test doubles)
    # The person picked in the preview: the recogniser that embedded them and the embedding.
    picked_recognizer: str = ""
    picked_embedding: tuple[float, ...] = ()
    face_map: tuple[MapEntry, ...] = ()  # people mapped to gallery faces in the preview
    remote: RemoteConfig = field(default_factory=RemoteConfig)


class ConfigError(ValueError):
    """The file as a whole cannot be used (e.g. written by a newer FaceCast)."""


class ConfigNotSaved(OSError):
    """Saving was refused to protect the file on disk (see ConfigStore.save)."""


@dataclass(frozen=True, slots=True)
class LoadResult:
    config: GuiConfig
    message: str = ""  # non-empty when some or all of the file could not be used


class ConfigStore:
    """Reads and writes one settings.toml."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_config_path()
        # Why the file on disk must not be written over (it could not be read or backed up).
        self._protect: str = ""

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    def load(self) -> LoadResult:
        if not self.path.exists():
            return LoadResult(GuiConfig())
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            # Unreadable (permissions, a directory): it may be fine once fixed, so it is left alone.
            self._protect = (
                f"{self.path} could not be read at start ({_reason(exc)}), so it was left as it is"
            )
            return LoadResult(
                GuiConfig(),
                f"Your settings file {self.path} could not be read ({_reason(exc)}); defaults are in use "
                "and the file will not be written over. Fix its permissions (or move it away) and restart.",
            )
        try:
            data = tomllib.loads(raw.decode("utf-8"))
            config, problems = config_from_dict(data)
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, ConfigError) as exc:
            return LoadResult(
                GuiConfig(), self.keep_original(f"could not be read ({_reason(exc)}); defaults are in use")
            )
        if not problems:
            return LoadResult(config)
        listed = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        return LoadResult(
            config,
            self.keep_original(
                f"had settings that could not be used ({listed}); those are back to their defaults"
            ),
        )

    def save(self, config: GuiConfig) -> None:
        """Write atomically (temp file + rename), so a crash mid-write never corrupts the file.

        A symlinked file is written through the link; the file's permissions are kept. Refused
        (ConfigNotSaved) when the file could not be read at start or is read-only.
        """
        if self._protect:
            raise ConfigNotSaved(f"not saved: {self._protect}")
        target = self.path.resolve() if self.path.is_symlink() else self.path
        mode: int | None = None
        if target.exists():
            mode = stat.S_IMODE(target.stat().st_mode)
            if not mode & 0o222:
                raise ConfigNotSaved(f"not saved: {target} is read-only (make it writable to keep changes)")
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(target.name + ".tmp")
        try:
            temp.write_text(tomli_w.dumps(config_to_dict(config)), encoding="utf-8")
            if mode is not None:
                os.chmod(temp, mode)
            os.replace(temp, target)
        except OSError:
            with contextlib.suppress(OSError):
                temp.unlink()  # a full disk must not leave a stray settings.toml.tmp behind
            raise

    def keep_original(self, what: str) -> str:
        """Copy the file to .bak (or, failing that, protect it from the next save); the message."""
        try:
            shutil.copy2(self.path, self.backup_path)
        except OSError as copy_error:
            log.warning("could not back up %s: %s", self.path, copy_error)
            self._protect = (
                f"{self.path} could not be backed up ({_reason(copy_error)}), so it was left as it is"
            )
            return f"Your settings file {self.path} {what}. It will not be written over (no backup possible)."
        return f"Your settings file {what}. The original is kept as {self.backup_path}."


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


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
        "models_dir": config.models_dir,
        "allow_unverified": config.allow_unverified,
        "pick": {"recognizer": config.picked_recognizer, "embedding": list(config.picked_embedding)},
        "map": [
            {"recognizer": e.recognizer, "embedding": list(e.embedding), "face": e.face}
            for e in config.face_map
        ],
        "remote": _section_to_dict(config.remote),
    }


def config_from_dict(data: dict[str, Any]) -> tuple[GuiConfig, list[str]]:
    """The config, and what could not be used: a missing key takes its default, and so does a key
    with a wrong type or an out-of-range value (named in the problems); unknown keys are reported."""
    version = data.get("version", CONFIG_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version > CONFIG_VERSION:
        raise ConfigError(f"unsupported settings version {version!r}, from a newer FaceCast?")
    problems: list[str] = []
    default = GuiConfig()
    known = {"version", "consent_accepted", "preset", "disclosure_label", "active_face", "view"}
    known |= {"overrides", "faces", "input", "output", "window", "models_dir", "pick", "map", "remote"}
    known |= {"allow_unverified"}
    problems += [f"unknown setting '{k}' ignored" for k in data if k not in known]

    def top(key: str, kind: type, fallback: Any, check: Callable[[Any], bool] | None = None) -> Any:
        return _take(data, key, kind, fallback, problems, check=check)

    faces = _table(data, "faces", problems)
    photos: list[str] = []
    raw_photos = faces.get("photos", [])
    if isinstance(raw_photos, list):
        photos = [p for p in raw_photos if isinstance(p, str)]
        if len(photos) != len(raw_photos):
            problems.append("'faces.photos' entries that are not file paths were dropped")
    else:
        problems.append("'faces.photos' must be a list of file paths")
    window = _table(data, "window", problems)
    pick = _table(data, "pick", problems)
    raw_embedding = pick.get("embedding", [])
    embedding: tuple[float, ...] = ()
    if isinstance(raw_embedding, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in raw_embedding
    ):
        embedding = tuple(float(v) for v in raw_embedding)
    else:
        problems.append("'pick.embedding' must be a list of numbers; the picked face is forgotten")
    return (
        GuiConfig(
            consent_accepted=top("consent_accepted", bool, default.consent_accepted),
            preset=top("preset", str, default.preset),
            overrides=_overrides(_table(data, "overrides", problems), problems),
            disclosure_label=top("disclosure_label", bool, default.disclosure_label),
            photos=tuple(photos),
            active_face=top("active_face", str, default.active_face),
            models_dir=top("models_dir", str, default.models_dir),
            allow_unverified=top("allow_unverified", bool, default.allow_unverified),
            picked_recognizer=_take(pick, "recognizer", str, "", problems, "pick") if embedding else "",
            picked_embedding=embedding,
            face_map=_face_map(data.get("map", []), problems),
            view=cast(ViewMode, top("view", str, default.view, lambda v: v in get_args(ViewMode))),
            input=_section_from_dict(InputConfig(), _table(data, "input", problems), "input", problems),
            output=_section_from_dict(OutputConfig(), _table(data, "output", problems), "output", problems),
            remote=_section_from_dict(RemoteConfig(), _table(data, "remote", problems), "remote", problems),
            window_geometry=_take(
                window,
                "geometry",
                str,
                default.window_geometry,
                problems,
                "window",
                check=lambda v: _GEOMETRY.fullmatch(v) is not None,
            ),
        ),
        problems,
    )


def _section_to_dict(section: InputConfig | OutputConfig | RemoteConfig) -> dict[str, Any]:
    return {f.name: getattr(section, f.name) for f in fields(section)}


def _section_from_dict(default: Any, table: dict[str, Any], prefix: str, problems: list[str]) -> Any:
    names = {f.name for f in fields(default)}
    problems += [f"unknown setting '{prefix}.{k}' ignored" for k in table if k not in names]
    changes: dict[str, Any] = {}
    for f in fields(default):
        current = getattr(default, f.name)
        check: Callable[[Any], bool] | None = None
        bounds = _RANGES.get(f"{prefix}.{f.name}")
        if bounds is not None:
            lo, hi = bounds
            check = lambda v, lo=lo, hi=hi: math.isfinite(v) and lo <= v <= hi  # noqa: E731
        elif f.name == "kind":
            check = lambda v: v in get_args(InputKind)  # noqa: E731
        elif f"{prefix}.{f.name}" == "remote.mode":
            check = lambda v: v in ("local", "server")  # noqa: E731
        changes[f.name] = _take(table, f.name, type(current), current, problems, prefix, check=check)
    return replace(default, **changes)


def _overrides(table: dict[str, Any], problems: list[str], prefix: str = "") -> dict[str, Any]:
    """{"section.key": value}; a nested table (`detector.size = 320` written without quotes
    makes one) is read as the dotted keys it stands for."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_overrides(value, problems, f"{name}."))
        elif "." in name:
            flat[name] = value
        else:
            problems.append(f"override '{name}' must look like section.key")
    return flat


def _numbers(value: Any) -> tuple[float, ...] | None:
    if isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        return tuple(float(v) for v in value)
    return None


def _face_map(raw: Any, problems: list[str]) -> tuple[MapEntry, ...]:
    """The [[map]] entries; one that is not a table of recognizer, embedding and face is dropped."""
    if not isinstance(raw, list):
        problems.append("'map' must be a list of tables; the face map is forgotten")
        return ()
    entries: list[MapEntry] = []
    for item in raw:
        embedding = _numbers(item.get("embedding")) if isinstance(item, dict) else None
        recognizer, face = (item.get("recognizer"), item.get("face")) if isinstance(item, dict) else ("", "")
        if embedding and isinstance(recognizer, str) and recognizer and isinstance(face, str) and face:
            entries.append(MapEntry(recognizer, embedding, face))
        else:
            problems.append("a 'map' entry without recognizer, embedding and face was dropped")
    return tuple(entries)


def _table(data: dict[str, Any], key: str, problems: list[str]) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        problems.append(f"'{key}' must be a table")
        return {}
    return value


def _take(
    data: dict[str, Any],
    key: str,
    kind: type,
    default: Any,
    problems: list[str],
    prefix: str = "",
    *,
    check: Callable[[Any], bool] | None = None,
) -> Any:
    """data[key] if it has the right type (an int for a float is fine) and passes `check`, else
    `default` with a problem naming the key."""
    if key not in data:
        return default
    value = data[key]
    name = f"{prefix}.{key}" if prefix else key
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        problems.append(f"'{name}' = {value!r} is not {_KIND_TEXT.get(kind, kind.__name__)}")
        return default
    if check is not None and not check(value):
        problems.append(f"'{name}' = {value!r} is out of range")
        return default
    return value


_KIND_TEXT = {int: "a whole number", float: "a number", bool: "true or false", str: "text"}
