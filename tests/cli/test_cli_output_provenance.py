"""`main.py run` signs what it writes: a live recording (`--realtime`, the path a camera takes)
and an image output carry the C2PA manifest saying faces were modified by AI."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import pytest

import main
from models.fakes.doubles import write_all
from realtime.io.provenance import AI_MODIFIED_IMAGE_TEXT, AI_MODIFIED_TEXT, facecast_version, read_provenance
from realtime.tools.bench import astronaut_bgr, make_clip_with_faces
from tests.fixtures_media import write_video


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(models, source photo, clip)."""
    root = Path(tmp_path_factory.mktemp("cli_provenance"))
    write_all(root / "models")
    photo = root / "me.png"
    cv2.imwrite(str(photo), astronaut_bgr()[:, ::-1].copy())
    frames, _ = make_clip_with_faces(8, 160, 120)
    clip = root / "clip.mp4"
    write_video(clip, frames, fps=25.0)
    return root / "models", photo, clip


def run(models: Path, photo: Path, input_path: Path, out: Path, *extra: str) -> str:
    text = io.StringIO()
    args = ["run", "--models-dir", str(models), "--allow-unverified", "--source", str(photo)]
    code = main.main(
        [*args, "--input", str(input_path), "--output", str(out), "--detector", "mtcnn", *extra], out=text
    )
    assert code == 0, text.getvalue()
    return text.getvalue()


def described(path: Path) -> set[str]:
    manifest = read_provenance(path)
    assert manifest is not None, f"{path.name} has no C2PA manifest"
    agent = manifest["claim_generator_info"][0]
    assert (agent["name"], agent["version"]) == ("FaceCast", facecast_version())
    actions = next(a for a in manifest["assertions"] if a["label"].startswith("c2pa.actions"))["data"]
    return {a.get("description", "") for a in actions["actions"]}


def test_a_live_recording_from_run_output_is_signed(tmp_path: Path, inputs: tuple[Path, Path, Path]) -> None:
    models, photo, clip = inputs
    out = tmp_path / "take.mp4"
    run(models, photo, clip, out, "--realtime")  # played live: the recording sink, not the file job
    assert AI_MODIFIED_TEXT in described(out)


def test_an_image_output_from_run_is_signed(tmp_path: Path, inputs: tuple[Path, Path, Path]) -> None:
    models, photo, _ = inputs
    out = tmp_path / "out.jpg"
    run(models, photo, photo, out)
    assert AI_MODIFIED_IMAGE_TEXT in described(out)
    assert cv2.imread(str(out)) is not None
