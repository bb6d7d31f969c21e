"""The panel's settings travel to a server as a preset and overrides, and come out the same there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from realtime.api import Settings, load_preset, parse_override
from realtime.remote.limits import SERVER_ONLY_SETTINGS
from realtime.remote.runner import ServerThread
from realtime.remote.settings_push import overrides_for, toml_value
from tests.realtime.remote.test_faults import wait_for
from tests.realtime.remote.test_stream_control import face_change, swapping_call


def rebuilt(preset: str, overrides: list[str]) -> Settings:
    """What the server makes of them (its own fields aside)."""
    return load_preset(preset).with_overrides(dict(parse_override(o) for o in overrides))


def without_server_fields(settings: Settings) -> dict[str, dict[str, object]]:
    data = settings.to_dict()
    for name in SERVER_ONLY_SETTINGS:
        section, key = name.split(".")
        data[section].pop(key)
    return data


@pytest.mark.parametrize("preset", ["balanced", "quality", "privacy", "ultra-low-latency"])
def test_any_preset_with_edits_arrives_as_it_was_set(preset: str) -> None:
    edited = load_preset(preset).with_overrides(
        {"composite.opacity": 0.25, "tracker.min_cutoff": 2.5, "swap.recognizer": "dlib",
         "privacy.fallback": "hold", "detector.interval": 1, "pipeline.frames_in_flight": 4}
    )  # fmt: skip
    sent = overrides_for(edited)
    assert not any(o.startswith("pipeline.frames_in_flight") for o in sent)  # the server's to choose
    assert without_server_fields(rebuilt("balanced", sent)) == without_server_fields(edited)


def test_unchanged_settings_send_nothing() -> None:
    assert overrides_for(load_preset("balanced")) == []


def test_values_are_written_as_toml_reads_them() -> None:
    for value in (True, False, 3, 0.1, 'a "quoted" name', [1, 2.5], ("x", "y")):
        text = toml_value(value)
        assert text is not None
        got = parse_override(f"s.k={text}")[1]
        assert got == (list(value) if isinstance(value, tuple) else value)
    assert toml_value(None) is None


@pytest.mark.timeout(150)
def test_a_settings_change_on_the_client_reaches_the_running_stream(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    """The panel's Stages edits during a remote run: the client sends them (PATCH), the server's
    engine runs them, the returned video shows it."""
    client, sink, image, session = swapping_call(start_server(), photo, tmp_path)
    try:
        client.client.update_settings(load_preset("balanced").with_overrides({"composite.opacity": 0.0}))
        wait_for(
            lambda: session.engine is not None and session.engine.settings.composite.opacity == 0.0,
            20,
            "the new opacity on the server",
        )
        seen = client.client.stats.remote_frames
        wait_for(lambda: client.client.stats.remote_frames > seen + 15, 30, "frames after the change")
        assert face_change(sink, image) < 6.0  # opacity 0: the face comes back as it went
        assert client.client.options.overrides == ("composite.opacity=0.0",)  # kept for a reconnect
    finally:
        client.stop()
    assert client.error is None, client.error
