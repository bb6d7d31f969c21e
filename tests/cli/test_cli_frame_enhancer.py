"""`run --frame-enhancer NAME`: a file kept at its size or upscaled (twice the size, every frame),
a picture upscaled, and bad or missing model files refused with the usual messages and codes."""

from __future__ import annotations

import io
import os
from pathlib import Path

import av
import cv2
import numpy as np
import onnx
import pytest

import main
from models.errors import ExitCode
from models.fakes.doubles import write_all
from models.fakes.pixel_doubles import build_restorer
from realtime.tools.bench import astronaut_bgr, make_clip_with_faces
from tests.fixtures_media import write_video

FRAMES = 7


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    frames, _ = make_clip_with_faces(FRAMES, 160, 120)
    return write_video(Path(tmp_path_factory.mktemp("clip")) / "clip.mp4", frames)


@pytest.fixture(autouse=True)
def consent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACECAST_CONSENT", "1")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main.main(list(args), out=io.StringIO())
    return code, capsys.readouterr().err


def args(models: Path, photo: Path, source: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--models-dir",
        str(models),
        "--allow-unverified",
        "--detector",
        "mtcnn",
        "--source",
        str(photo),
        "--input",
        str(source),
        "--output",
        str(out),
        *extra,
    ]


def video_facts(path: Path) -> tuple[int, int, int]:
    """(width, height, frames) as a player decodes them."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        return int(stream.width), int(stream.height), frames


def test_an_upscaled_file_is_twice_the_size_with_every_frame(capsys, tmp_path, models, photo, clip) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "big.mp4"
    extra = ("--frame-enhancer", "real_esrgan_x2", "--set", "frame_enhancer.upscale=true")
    code, err = run_cli(capsys, *args(models, photo, clip, out, *extra))
    assert code == 0, err
    assert video_facts(out) == (320, 240, FRAMES)


def test_by_default_the_file_keeps_its_size_and_every_frame(capsys, tmp_path, models, photo, clip) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "same.mp4"
    code, err = run_cli(capsys, *args(models, photo, clip, out, "--frame-enhancer", "real_esrgan_x4_fp16"))
    assert code == 0, err
    assert video_facts(out) == (160, 120, FRAMES)


def test_a_picture_is_upscaled_four_times(capsys, tmp_path, models, photo) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "in.png"
    cv2.imwrite(str(source), cv2.resize(astronaut_bgr(), (150, 100)))
    out = tmp_path / "out.png"
    extra = ("--set", "frame_enhancer.model=real_esrgan_x4", "--set", "frame_enhancer.upscale=true")
    code, err = run_cli(capsys, *args(models, photo, source, out, *extra))
    assert code == 0, err
    image = cv2.imread(str(out))
    assert image is not None and image.shape == (400, 600, 3)


def error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix in (".mp4", ".png") or p.name.startswith("."))


@pytest.mark.parametrize("damage", ["garbage", "restorer"])
def test_a_bad_frame_enhancer_file_is_refused_and_nothing_is_written(  # type: ignore[no-untyped-def]
    capsys, tmp_path, photo, clip, damage: str
) -> None:
    d = tmp_path / "models"
    write_all(d)
    target = d / "real_esrgan_x2.onnx"
    if damage == "garbage":
        target.write_bytes(os.urandom(4096))
    else:
        onnx.save(build_restorer(256), str(target))  # a face restorer under the frame enhancer's name
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, err = run_cli(
        capsys, *args(d, photo, clip, out_dir / "o.mp4", "--frame-enhancer", "real_esrgan_x2")
    )
    line = error_line(err)
    assert code == ExitCode.USAGE
    assert "real_esrgan_x2.onnx" in line
    expected = "not a readable ONNX model" if damage == "garbage" else "not a real_esrgan_x2 model"
    assert expected in line
    assert leftovers(out_dir) == []


def test_a_missing_frame_enhancer_names_its_download(capsys, tmp_path, photo, clip) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "models"
    write_all(d)
    (d / "real_esrgan_x4.onnx").unlink()
    code, err = run_cli(
        capsys, *args(d, photo, clip, tmp_path / "o.mp4", "--frame-enhancer", "real_esrgan_x4")
    )
    line = error_line(err)
    assert code != 0 and "real_esrgan_x4.onnx" in line
    assert "models download real_esrgan_x4" in err
    assert not (tmp_path / "o.mp4").exists()


def test_the_flag_and_a_set_that_disagree_are_refused(capsys, tmp_path, models, photo, clip) -> None:  # type: ignore[no-untyped-def]
    extra = ("--frame-enhancer", "real_esrgan_x2", "--set", "frame_enhancer.model=real_esrgan_x4")
    code, err = run_cli(capsys, *args(models, photo, clip, tmp_path / "o.mp4", *extra))
    assert code == ExitCode.USAGE and "disagree" in error_line(err)


def test_an_unknown_frame_enhancer_is_refused_by_the_parser(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as info:
        main.main(
            ["run", "--input", "x.mp4", "--output", "y.mp4", "--frame-enhancer", "esrgan_x3"],
            out=io.StringIO(),
        )
    assert info.value.code == 2
    assert "real_esrgan_x2" in capsys.readouterr().err


def test_the_upscaled_output_is_the_enhanced_picture(capsys, tmp_path, models, photo) -> None:  # type: ignore[no-untyped-def]
    """The picture that comes out is the model's (the double's whole-picture reference, blended
    0.8 over the plain picture scaled up), not a plain resize of the input."""
    from models.fakes.upscaler_double import upscaler_reference

    plain = np.full((80, 120, 3), 90, np.uint8)
    plain[20:60, 30:90] = (40, 160, 220)  # a sharp-edged block, no face
    source = tmp_path / "in.png"
    cv2.imwrite(str(source), plain)
    out = tmp_path / "out.png"
    extra = ("--frame-enhancer", "real_esrgan_x2", "--set", "frame_enhancer.upscale=true")
    # The invisible watermark moves pixels by a level or two: off, to compare with the reference.
    extra += ("--set", "watermark.enabled=false")
    code, err = run_cli(capsys, *args(models, photo, source, out, *extra))
    assert code == 0, err
    image = cv2.imread(str(out))
    assert image is not None
    up = cv2.resize(plain, (240, 160), interpolation=cv2.INTER_LINEAR).astype(np.float64)
    expected = 0.8 * upscaler_reference(plain, 2) + 0.2 * up
    assert np.abs(image - expected).max() <= 1.5


def test_a_batch_upscales_every_video_with_every_frame(capsys, tmp_path, models, photo, clip) -> None:  # type: ignore[no-untyped-def]
    targets = tmp_path / "targets"
    targets.mkdir()
    (targets / "a.mp4").write_bytes(clip.read_bytes())
    (targets / "b.mp4").write_bytes(clip.read_bytes())
    results = tmp_path / "results"
    code, err = run_cli(
        capsys,
        "jobs",
        "batch",
        "--targets",
        str(targets),
        "--output-dir",
        str(results),
        "--source",
        str(photo),
        "--detector",
        "mtcnn",
        "--frame-enhancer",
        "real_esrgan_x2",
        "--set",
        "frame_enhancer.upscale=true",
        "--models-dir",
        str(models),
        "--allow-unverified",
    )
    assert code == 0, err
    assert sorted(p.name for p in results.iterdir()) == ["a.mp4", "b.mp4"]
    assert video_facts(results / "a.mp4") == video_facts(results / "b.mp4") == (320, 240, FRAMES)
