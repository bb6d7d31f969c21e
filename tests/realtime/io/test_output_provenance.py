"""Recordings and image outputs carry Content Credentials: once the file has its name, a signed
C2PA manifest saying faces were modified by AI, by FaceCast and its version, is embedded in place
(read back with c2pa); formats c2pa cannot embed into keep their tags; a failing signer keeps the
file, unsigned."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import av
import cv2
import pytest

from realtime.core.contracts import FrameSink
from realtime.io import provenance
from realtime.io.file_sinks import ImageFileSink, VideoFileSink
from realtime.io.outputs import open_output
from realtime.io.provenance import (
    AI_MODIFIED_IMAGE_TEXT,
    AI_MODIFIED_TEXT,
    DIGITAL_SOURCE_TYPE,
    facecast_version,
    read_provenance,
)
from realtime.io.test_pattern import TestPatternSource

FRAMES = 6


def record(sink: FrameSink, frames: int = FRAMES) -> None:
    """A short live take from the test pattern into `sink`, closed."""
    source = TestPatternSource(96, 64, 25.0, face=False, realtime=False, frames=frames)
    source.open()
    sink.open(96, 64, 25.0)
    while (frame := source.read()) is not None:
        sink.send(frame)
    source.close()
    sink.close()


def assert_ai_modified(path: Path, text: str = AI_MODIFIED_TEXT) -> None:
    manifest = read_provenance(path)
    assert manifest is not None, f"{path.name} has no C2PA manifest"
    agent = manifest["claim_generator_info"][0]
    assert (agent["name"], agent["version"]) == ("FaceCast", facecast_version())
    actions = next(a for a in manifest["assertions"] if a["label"].startswith("c2pa.actions"))["data"][
        "actions"
    ]
    assert any(a.get("description") == text for a in actions)
    assert all(a["digitalSourceType"] == DIGITAL_SOURCE_TYPE for a in actions)


def frame_count(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def no_partials(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if ".partial" in p.name]


@pytest.mark.parametrize("suffix", [".mp4", ".mov"])
def test_a_live_recording_is_signed_in_place(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"take{suffix}"
    sink = open_output(str(out))
    assert isinstance(sink, VideoFileSink)  # the real file sink, as `run --output take.mp4` gets
    record(sink)
    assert_ai_modified(out)
    assert frame_count(out) == FRAMES  # still a plain, playable video
    assert no_partials(tmp_path)


def test_the_panels_recording_is_signed(tmp_path: Path) -> None:
    from gui.config import OutputConfig
    from gui.controller import make_sink

    out = tmp_path / "panel.mp4"
    sink = make_sink(OutputConfig(record=True, record_path=str(out)), lambda err: None)
    record(sink)  # the recording runs on its own thread; close() waits for it
    assert_ai_modified(out)
    assert frame_count(out) == FRAMES


@pytest.mark.parametrize("suffix", [".png", ".jpg"])
def test_an_image_output_is_signed(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"still{suffix}"
    sink = open_output(str(out))
    assert isinstance(sink, ImageFileSink)
    record(sink, frames=1)
    assert_ai_modified(out, AI_MODIFIED_IMAGE_TEXT)
    image = cv2.imread(str(out))
    assert image is not None and image.shape == (64, 96, 3)
    assert no_partials(tmp_path)


def test_an_mkv_recording_keeps_its_tags_and_says_once_it_is_not_signed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provenance, "_said", set())
    caplog.set_level(logging.INFO, logger=provenance.__name__)
    for name in ("one.mkv", "two.mkv"):
        record(open_output(str(tmp_path / name)))
        assert read_provenance(tmp_path / name) is None
        with av.open(str(tmp_path / name)) as c:
            assert c.metadata.get("COMMENT", c.metadata.get("comment")) == AI_MODIFIED_TEXT
    said = [r for r in caplog.records if "no C2PA manifest" in r.getMessage()]
    assert len(said) == 1 and ".mkv" in said[0].getMessage()


def test_a_failing_signer_keeps_the_recording_unsigned_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []

    def broken(source: Path, dest: Path, title: str, *args: Any) -> None:
        calls.append(source)
        dest.write_bytes(b"half a signed copy")
        raise OSError("signer exploded")

    monkeypatch.setattr(provenance, "sign_video", broken)
    out = tmp_path / "take.mp4"
    record(open_output(str(out)))
    assert calls == [out]  # the hook ran, and failed
    assert frame_count(out) == FRAMES and read_provenance(out) is None
    assert no_partials(tmp_path)  # the half-written signed copy is gone
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "sign" in r.getMessage()]
    assert len(warnings) == 1 and "kept unsigned" in warnings[0].getMessage()


def test_provenance_off_leaves_the_file_as_encoded(tmp_path: Path) -> None:
    from realtime.io.outputs import OutputRequest, route_output

    out = tmp_path / "plain.mp4"
    record(route_output(OutputRequest(str(out), provenance=False))[0])
    assert read_provenance(out) is None
