"""`main.py run --swapper NAME` for every swap family, end to end on their doubles (the real MTCNN
finds the astronaut in a moving clip); and each family's bad files get inswapper's clear
messages and exit codes: truncated, another model's contract, its converter missing."""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

import main
from models.files.catalogue import one_swapper_per_family
from realtime.tools.bench import astronaut_bgr, make_clip_with_faces
from tests.fixtures_media import write_video

W, H, N = 240, 180, 8
# Each compared with the default model's output, inswapper_128, which is left out for that.
OTHER_FAMILIES = tuple(n for n in one_swapper_per_family() if n != "inswapper_128")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    frames, boxes = make_clip_with_faces(N, W, H)
    return write_video(Path(tmp_path_factory.mktemp("clip")) / "clip.mp4", frames, fps=25.0), boxes


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("photo")) / "me.png"
    cv2.imwrite(str(path), astronaut_bgr()[:, ::-1].copy())
    return path


def run(models: Path, photo: Path, clip: Path, out: Path, *extra: str) -> tuple[int, str]:
    text = io.StringIO()
    args = [
        "run", "--models-dir", str(models), "--allow-unverified", "--consent", "--detector", "mtcnn",
        "--source", str(photo), "--input", str(clip), "--output", str(out), *extra,
    ]  # fmt: skip
    code = main.main(args, out=text)
    return code, text.getvalue()


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


@pytest.mark.parametrize("swapper", OTHER_FAMILIES)
def test_every_family_swaps_the_face_from_the_command_line(
    tmp_path: Path, models: Path, photo: Path, clip: tuple[Path, list[np.ndarray]], swapper: str
) -> None:
    path, boxes = clip
    out = tmp_path / "out.mp4"
    code, text = run(models, photo, path, out, "--swapper", swapper)
    assert code == 0, text
    inputs, outputs = frames_of(path), frames_of(out)
    assert len(outputs) == len(inputs)
    x1, y1, x2, y2 = (int(v) for v in boxes[-1])
    cx, cy, w, h = (x1 + x2) // 2, (y1 + y2) // 2, (x2 - x1) // 5, (y2 - y1) // 5
    face = (slice(cy - h, cy + h), slice(cx - w, cx + w))
    changed = np.abs(outputs[-1].astype(np.int16) - inputs[-1].astype(np.int16))
    assert changed[face].mean() > 8, f"{swapper}: the face was not swapped"
    assert changed[:20, :20].mean() < 4, f"{swapper}: pixels far from the face changed"
    # And by this model, not the default one: the doubles swap to different colours.
    default_out = tmp_path / "default.mp4"
    assert run(models, photo, path, default_out)[0] == 0
    other = np.abs(frames_of(default_out)[-1].astype(np.int16) - outputs[-1].astype(np.int16))
    assert other[face].mean() > 4, f"{swapper}: the face looks like inswapper_128's"


def error_of(text: str, capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err + text
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def _cut_short(folder: Path) -> None:
    target = folder / "hyperswap_1a_256.onnx"
    target.write_bytes(target.read_bytes()[:4000])  # a download cut short


BAD_FILES = [
    pytest.param(
        _cut_short, "hyperswap_1a_256", ("hyperswap_1a_256.onnx", "models download hyperswap_1a_256"),
        id="a truncated swapper",
    ),
    pytest.param(
        lambda folder: shutil.copy(folder / "inswapper_128.onnx", folder / "ghost_1_256.onnx"),  # 128 px
        "ghost_1_256", ("not a Ghost model: expected inputs target[1,3,256,256]",),
        id="another model's contract under a swapper's name",
    ),
    pytest.param(
        lambda folder: (folder / "crossface_simswap.onnx").unlink(),
        "simswap_256", ("crossface_simswap.onnx", "models download crossface_simswap"),
        id="its converter missing",
    ),
    pytest.param(
        lambda folder: shutil.copy(folder / "w600k_r50.onnx", folder / "crossface_ghost.onnx"),
        "ghost_2_256", ("crossface_ghost.onnx", "embedding converter"),
        id="a converter of the wrong kind",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("break_file", "swapper", "said"), BAD_FILES)
def test_a_bad_swapper_or_converter_file_is_named_with_what_to_do(
    tmp_path: Path,
    models: Path,
    photo: Path,
    clip: tuple[Path, list[np.ndarray]],
    capsys: pytest.CaptureFixture[str],
    break_file: Callable[[Path], object],
    swapper: str,
    said: tuple[str, ...],
) -> None:
    folder = tmp_path / "models"
    shutil.copytree(models, folder)
    break_file(folder)
    out = tmp_path / "out.mp4"
    code, text = run(folder, photo, clip[0], out, "--swapper", swapper)
    line = error_of(text, capsys)
    assert code == 2
    assert all(part in line for part in said), line
    assert not out.exists()


def test_an_unknown_swapper_is_a_usage_error_listing_the_choices(
    tmp_path: Path,
    models: Path,
    photo: Path,
    clip: tuple[Path, list[np.ndarray]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        run(models, photo, clip[0], tmp_path / "out.mp4", "--swapper", "megaswap_9000")
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "invalid choice: 'megaswap_9000'" in err and "hyperswap_1a_256" in err
    code, text = run(models, photo, clip[0], tmp_path / "out.mp4", "--set", "swap.model=megaswap_9000")
    line = error_of(text, capsys)
    assert code == 2 and "swap.model" in line and "ghost_1_256" in line
