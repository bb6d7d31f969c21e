"""A client's settings as the server takes them: a preset name and `section.key=value` overrides.

The server rebuilds a stream's settings from these (realtime.remote.server settings_from), so the
overrides are every field that differs from the preset, as TOML values, less the fields the
server chooses itself (its provider, precision and frames in flight).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from realtime.api import DEFAULT_PRESET, Settings, load_preset
from realtime.remote.limits import SERVER_ONLY_SETTINGS

log = logging.getLogger(__name__)


def toml_value(value: Any) -> str | None:
    """`value` written as TOML reads it back (None: TOML cannot hold it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: quotes and escapes as JSON writes them
    if isinstance(value, list | tuple):
        items = [toml_value(v) for v in value]
        return None if any(i is None for i in items) else f"[{', '.join(str(i) for i in items)}]"
    return None


def overrides_for(settings: Settings, preset: str = DEFAULT_PRESET) -> list[str]:
    """What to send with `preset` so that the server's stream runs `settings`."""
    base, wanted = load_preset(preset).to_dict(), settings.to_dict()
    overrides: list[str] = []
    for section, values in wanted.items():
        for key, value in values.items():
            name = f"{section}.{key}"
            if name in SERVER_ONLY_SETTINGS or base.get(section, {}).get(key) == value:
                continue
            text = toml_value(value)
            if text is None:
                log.warning("Setting %s (%r) cannot be sent to the server; it keeps its own.", name, value)
                continue
            overrides.append(f"{name}={text}")
    return overrides
