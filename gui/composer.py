"""The engine settings the window asks for: a preset, the user's overrides on top, and the label.

Pure (no Qt): the stage panel edits overrides through it, and the controller receives its result.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

from realtime.api import (
    DEFAULT_PRESET,
    PRESETS_DIR,
    FaceCastError,
    Settings,
    SettingsError,
    available_presets,
    load_preset,
)

GUI_TARGETS = ("largest", "all")  # "reference"/"mapped" need reference photos: command line only


def preset_keys(name: str) -> set[str]:
    """The "section.key" names a preset file sets itself."""
    try:
        data = tomllib.loads((PRESETS_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return set()
    return {f"{section}.{key}" for section, table in data.items() if isinstance(table, dict) for key in table}


class SettingsComposer:
    """preset + overrides + disclosure label -> Settings. Every change is validated before it sticks."""

    def __init__(self, preset: str = DEFAULT_PRESET, disclosure_label: bool = True) -> None:
        self._preset = preset if preset in available_presets() else DEFAULT_PRESET
        self._base = load_preset(self._preset)
        self._overrides: dict[str, Any] = {}
        self._label = disclosure_label

    @property
    def preset(self) -> str:
        return self._preset

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(self._overrides)

    @property
    def disclosure_label(self) -> bool:
        return self._label

    def effective(self) -> Settings:
        return self._base.with_overrides(self._overrides).with_overrides(
            {"composite.disclosure_label": self._label}
        )

    def set_preset(self, name: str) -> None:
        """Switch preset. The preset's own keys replace the user's overrides of them; the user's other
        choices (detector model, execution provider, ...) stay."""
        self._base = load_preset(name)  # raises SettingsError for an unknown name
        self._preset = name
        owned = preset_keys(name)
        self._overrides = {k: v for k, v in self._overrides.items() if k not in owned}

    def reset(self) -> None:
        """Drop every override: exactly the preset."""
        self._overrides = {}

    def set_override(self, key: str, value: Any) -> None:
        """Raises SettingsError (naming the key) and keeps the previous value when `value` is invalid."""
        if key == "composite.disclosure_label":
            raise SettingsError("The disclosure label is set with its own checkbox.")
        if key == "swap.target" and value not in GUI_TARGETS:
            raise SettingsError(
                f"Setting 'swap.target' = {value!r} needs reference photos.",
                hint="Use the command line (--reference / --map) for that; here: largest or all.",
            )
        candidate = {**self._overrides, key: value}
        self._base.with_overrides(candidate)  # validates; raises before anything changes
        if self._base.with_overrides({key: value}) == self._base:
            self._overrides.pop(key, None)  # back to the preset's value: no override needed
        else:
            self._overrides = candidate

    def set_disclosure_label(self, on: bool) -> None:
        self._label = on

    def restore_overrides(self, overrides: Mapping[str, Any]) -> list[str]:
        """Apply saved overrides one by one; returns a message for each one that no longer applies."""
        problems: list[str] = []
        for key, value in overrides.items():
            try:
                self.set_override(key, value)
            except FaceCastError as exc:
                problems.append(exc.user_message())
        return problems
