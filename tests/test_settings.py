"""Engine settings: presets, overrides from the command line or a saved file, and settings built in
code are all checked the same way, and a bad one is refused with a message naming the key."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from realtime.settings import Settings, SettingsError, available_presets, load_preset, parse_override


@pytest.mark.parametrize("name", available_presets())
def test_every_preset_loads_and_validates(name: str) -> None:
    settings = load_preset(name)
    assert settings.validate() is settings


@pytest.mark.parametrize(
    "text",
    [
        "tracker.beta=inf",
        "tracker.min_cutoff=inf",
        "tracker.d_cutoff=1e999",
        'tracker.beta="inf"',
        "tracker.beta=nan",
    ],
)
def test_non_finite_numbers_are_refused_naming_the_key(text: str) -> None:
    """inf passed the old `>= 0` checks; the One-Euro filter then made every landmark NaN and the
    run passed every frame through with an SVD error that named no setting."""
    key, value = parse_override(text)
    with pytest.raises(SettingsError, match=key.replace(".", r"\.")):
        Settings().with_overrides({key: value})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("detector.max_faces", 3_000_000_000, "0 (no limit) to 64"),  # crashed the GUI's spin box
        ("tracker.min_cutoff", 0.0, "0.01-30"),
        ("tracker.beta", 11.0, "0-10"),
        ("tracker.d_cutoff", 40.0, "0.01-30"),
    ],
)
def test_smoothing_and_face_count_are_bounded(key: str, value: Any, expected: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(key) + ".*" + re.escape(expected)):
        Settings().with_overrides({key: value})


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("tracker", "enabled", "false"),  # a truthy string: tracking stayed on
        ("composite", "colour_match", "false"),
        ("detector", "model", "yolo"),
        ("pipeline", "frames_in_flight", 2.0),  # Engine.start then died with a TypeError
        ("detector", "size", 640.0),
        ("tracker", "beta", float("inf")),
        ("masks", "region_classes", (1, "2")),
    ],
)
def test_settings_built_in_code_are_type_checked(section: str, field: str, value: Any) -> None:
    """Engine.update_settings takes Settings objects: `replace` skips the overrides' coercion."""
    settings = Settings()
    bad = replace(settings, **{section: replace(getattr(settings, section), **{field: value})})
    with pytest.raises(SettingsError, match=rf"'{section}\.{field}'"):
        bad.validate()


def test_an_int_where_a_number_is_expected_is_fine() -> None:
    settings = Settings()
    ok = replace(settings, composite=replace(settings.composite, opacity=1))
    assert ok.validate() is ok


@pytest.mark.parametrize(("text", "expected"), [("1", True), ("0", False), ("yes", True), ("off", False)])
def test_switches_take_1_and_0_like_yes_and_no(text: str, expected: bool) -> None:
    key, value = parse_override(f"tracker.enabled={text}")
    assert Settings().with_overrides({key: value}).tracker.enabled is expected


def test_a_switch_refuses_other_numbers() -> None:
    with pytest.raises(SettingsError, match=r"tracker\.enabled"):
        Settings().with_overrides({"tracker.enabled": 2})


def test_a_conflicting_override_names_the_one_that_set_the_whole_section() -> None:
    with pytest.raises(SettingsError, match=r"'detector\.size' conflicts with the override 'detector'"):
        Settings().with_overrides({"detector": 5, "detector.size": 320})


def test_unknown_keys_name_themselves_and_what_is_known() -> None:
    with pytest.raises(SettingsError, match=r"Unknown setting 'tracker\.smoothness'.*beta"):
        Settings().with_overrides({"tracker.smoothness": 1})
