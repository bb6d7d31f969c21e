"""Engine settings: presets, overrides from the command line or a saved file, and settings built in
code are all checked the same way, and a bad one is refused with a message naming the key."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from realtime.core.settings import Settings, SettingsError, available_presets, load_preset, parse_override


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
    """inf and nan are refused naming the key: let through, the One-Euro filter would make every
    landmark NaN and the run pass every frame through with an SVD error that names no setting."""
    key, value = parse_override(text)
    with pytest.raises(SettingsError, match=key.replace(".", r"\.")):
        Settings().with_overrides({key: value})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("detector.max_faces", 3_000_000_000, "0 (no limit) to 64"),  # too big for the GUI's spin box
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
        ("tracker", "enabled", "false"),  # a truthy string: tracking would stay on
        ("composite", "colour_match", "false"),
        ("detector", "model", "yolo"),
        ("pipeline", "frames_in_flight", 2.0),  # Engine.start would die with a TypeError
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


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", True), ("0", False), ("yes", True), ("no", False), ("on", True), ("off", False)],
)
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


# Every range the settings check: the documented edges are accepted, the first value past each is
# refused naming the key (a typo'd 500 fade frames or a detector threshold of 1 — nothing ever
# detected — must be said, not run).
RANGES: list[tuple[str, float, float, float, float]] = [
    ("detector.size", 128, 1280, 96, 1312),
    ("detector.threshold", 0.01, 0.99, 0.0, 1.0),
    ("detector.interval", 1, 120, 0, 121),
    ("detector.max_faces", 0, 64, -1, 65),
    ("tracker.min_cutoff", 0.01, 30.0, 0.0, 30.5),
    ("tracker.beta", 0.0, 10.0, -0.1, 10.1),
    ("tracker.d_cutoff", 0.01, 30.0, 0.0, 30.5),
    ("tracker.min_quality", 0.0, 1.0, -0.1, 1.1),
    ("tracker.fade_frames", 0, 60, -1, 61),
    ("tracker.max_missed", 0, 120, -1, 121),
    ("swap.reference_threshold", 0.01, 1.99, 0.0, 2.0),
    ("composite.erode_ratio", 0.0, 0.4, -0.01, 0.41),
    ("composite.blur_ratio", 0.0, 0.3, -0.01, 0.31),
    ("composite.opacity", 0.0, 1.0, -0.01, 1.01),
    ("composite.sharpen", 0.0, 3.0, -0.1, 3.1),
    ("enhancer.blend", 0.0, 1.0, -0.1, 1.1),
    ("enhancer.every_n", 1, 30, 0, 31),
    ("enhancer.fidelity", 0.0, 1.0, -0.1, 1.1),
    ("masks.mouth_scale", 0.5, 2.0, 0.49, 2.01),
    ("pipeline.frames_in_flight", 1, 8, 0, 9),
    ("pipeline.read_ahead", 0, 8, -1, 9),
    ("pipeline.processing_size", 160, 4096, 159, 4097),
]


@pytest.mark.parametrize(("key", "low", "high", "below", "above"), RANGES, ids=[r[0] for r in RANGES])
def test_every_range_accepts_its_edges_and_refuses_past_them(
    key: str, low: float, high: float, below: float, above: float
) -> None:
    section, field = key.split(".")
    for value in (low, high):
        assert getattr(getattr(Settings().with_overrides({key: value}), section), field) == value
    for value in (below, above):
        with pytest.raises(SettingsError, match=re.escape(key)):
            Settings().with_overrides({key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("detector.size", 336),  # not a multiple of 32 (SCRFD's strides)
        ("masks.region_classes", [1, 19]),  # the face parser's classes are 0-18
        ("masks.region_classes", []),  # nothing kept: the whole swap hidden
        ("detector.interval", 2.5),  # not silently 2
    ],
)
def test_values_the_checks_exclude_are_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(SettingsError, match=re.escape(key)):
        Settings().with_overrides({key: value})


def test_a_dotted_key_and_a_table_of_the_same_section_both_apply() -> None:
    s = Settings().with_overrides({"detector.size": 320, "detector": {"interval": 3}})
    assert (s.detector.size, s.detector.interval) == (320, 3)
