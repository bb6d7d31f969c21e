"""An output file that is there already is never replaced unless --overwrite says so: whatever the
output's kind (a picture, a video played in real time or looped) and whichever path runs it."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import pytest

import main
from realtime.api import ExitCode
from realtime.tools.bench import astronaut_bgr, make_clip_with_faces
from tests.fixtures_media import write_video


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    frames, _ = make_clip_with_faces(4, 160, 120)
    return write_video(Path(tmp_path_factory.mktemp("clip")) / "clip.mp4", frames)


def run(models: Path, photo: Path, given: Path, out: Path, *extra: str) -> int:
    args = ["run", "--models-dir", str(models), "--allow-unverified", "--detector", "mtcnn"]
    args += ["--consent", "--source", str(photo), "--input", str(given), "--output", str(out), *extra]
    return main.main(args, out=io.StringIO())


@pytest.mark.parametrize(
    ("name", "extra", "image_input"),
    [("o.png", (), True), ("o.png", (), False), ("o.mp4", ("--realtime",), False)],
    ids=["image-to-png", "video-to-png", "video-realtime-to-mp4"],
)
def test_an_existing_output_is_refused_and_left_as_it_was(  # type: ignore[no-untyped-def]
    capsys, tmp_path, models, photo, clip, name, extra, image_input
) -> None:
    out = tmp_path / name
    out.write_bytes(b"the user's own file")
    code = run(models, photo, photo if image_input else clip, out, *extra)
    err = capsys.readouterr().err
    assert code == ExitCode.OUTPUT_EXISTS, err
    assert out.read_bytes() == b"the user's own file"
    assert "exists already" in err and "--overwrite" in err and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no partial file either


def test_a_looped_run_into_an_existing_file_is_refused(capsys, tmp_path, models, photo) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "o.mp4"
    out.write_bytes(b"keep me")
    code = run(models, photo, photo, out, "--loop", "--duration", "1")
    assert code == ExitCode.OUTPUT_EXISTS and out.read_bytes() == b"keep me"


def test_overwrite_replaces_it(capsys, tmp_path, models, photo) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "o.png"
    out.write_bytes(b"old")
    assert run(models, photo, photo, out, "--overwrite") == 0, capsys.readouterr().err
    image = cv2.imread(str(out))
    assert image is not None and image.shape[:2] == astronaut_bgr().shape[:2]


@pytest.mark.timeout(90)
def test_duration_ends_a_looped_local_run_and_keeps_its_recording(  # type: ignore[no-untyped-def]
    capsys, tmp_path, models, photo
) -> None:
    """`--duration` was read by remote runs only: a local `--loop` run went on until killed."""
    out = tmp_path / "loop.mp4"
    assert run(models, photo, photo, out, "--loop", "--duration", "1", "--fps", "10") == 0
    err = capsys.readouterr()
    assert out.is_file() and "Traceback" not in err.err
