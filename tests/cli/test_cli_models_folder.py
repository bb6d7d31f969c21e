"""A models folder that is a file, or a folder where a model file should be: `run` and `doctor`
say the same thing, in one line ("not downloaded yet" and "[ OK ]" both misled)."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import pytest

import main
from models.errors import ExitCode, ModelsFolderError
from models.files.store import ModelStore
from realtime.tools.bench import astronaut_bgr
from realtime.tools.doctor import _check_models
from tests.fixtures_media import make_test_video


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "me.png"
    cv2.imwrite(str(path), astronaut_bgr())
    return path


def run(capsys: pytest.CaptureFixture[str], models: Path, photo: Path, clip: Path) -> tuple[int, str]:
    args = ["run", "--models-dir", str(models), "--source", str(photo), "--input", str(clip)]
    code = main.main([*args, "--output", "null", "--consent"], out=io.StringIO())
    return code, capsys.readouterr().err


def test_a_models_folder_that_is_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, photo: Path
) -> None:
    models = tmp_path / "models"
    models.write_text("oops")
    clip = make_test_video(tmp_path / "clip.mp4", frames=3, size=(160, 120))

    code, err = run(capsys, models, photo, clip)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == ExitCode.MODELS_FOLDER and len(lines) == 1 and "Traceback" not in err
    assert f"the models folder {models} is a file, not a folder" in lines[0]
    assert "not downloaded" not in err

    checks = _check_models(models)
    assert [(c.name, c.status) for c in checks] == [("Models folder", "fail")]
    assert "is a file, not a folder" in checks[0].detail


def test_a_model_file_that_is_a_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, photo: Path
) -> None:
    models = tmp_path / "models"
    (models / "inswapper_128.onnx").mkdir(parents=True)
    store = ModelStore(models)

    result = next(r for r in store.verify_all() if r.name == "inswapper_128.onnx")
    assert result.status == "wrong_kind" and "is a folder, not a file" in result.detail
    with pytest.raises(ModelsFolderError, match="is a folder, not a file") as info:
        store.resolve("inswapper_128")
    assert "Remove it, then run" in info.value.user_message()

    checks = {c.name: c for c in _check_models(models)}
    assert checks["inswapper_128.onnx"].status == "fail"
    assert "is a folder, not a file" in checks["inswapper_128.onnx"].detail

    clip = make_test_video(tmp_path / "clip.mp4", frames=3, size=(160, 120))
    code, err = run(capsys, models, photo, clip)
    assert code != 0 and "inswapper_128.onnx is a folder, not a file" in err and "Traceback" not in err
