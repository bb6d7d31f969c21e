"""Every bad input gets a one-line actionable message, a non-zero exit, no traceback, and leaves
nothing half-written behind."""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

import main
from models.fakes.detector_double import DEFAULT_FACE, build_scrfd
from models.fakes.doubles import write_all
from realtime.tools.bench import make_clip_with_faces
from tests.fixtures_media import write_video


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    frames, _ = make_clip_with_faces(6, 160, 120)
    return write_video(Path(tmp_path_factory.mktemp("clip")) / "clip.mp4", frames)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main.main(list(args), out=io.StringIO())
    err = capsys.readouterr().err
    return code, err


def error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def base_args(models: Path, photo: Path, clip: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--models-dir",
        str(models),
        "--allow-unverified",
        "--source",
        str(photo),
        "--input",
        str(clip),
        "--output",
        str(out),
        "--detector",
        "mtcnn",
        *extra,
    ]


def nothing_left(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.startswith(".") or p.suffix in (".mp4", ".png")]


def test_missing_source_photo(capsys, tmp_path, models, clip) -> None:  # type: ignore[no-untyped-def]
    code, err = run_cli(capsys, *base_args(models, tmp_path / "nope.jpg", clip, tmp_path / "o.mp4"))
    assert code != 0 and "does not exist" in error_line(err)
    assert nothing_left(tmp_path)


def test_source_that_is_not_an_image(capsys, tmp_path, models, clip) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "notes.jpg"
    bad.write_text("not a picture")
    code, err = run_cli(capsys, *base_args(models, bad, clip, tmp_path / "o.mp4"))
    assert code != 0 and "not an image" in error_line(err)


def test_source_photo_without_a_face(capsys, tmp_path, models, clip) -> None:  # type: ignore[no-untyped-def]
    grey = tmp_path / "wall.png"
    cv2.imwrite(str(grey), np.full((240, 320, 3), 128, np.uint8))
    code, err = run_cli(capsys, *base_args(models, grey, clip, tmp_path / "o.mp4"))
    line = error_line(err)
    assert code != 0 and "No face found" in line and "wall.png" in line
    assert not (tmp_path / "o.mp4").exists()


def test_reference_photo_without_a_face_is_called_the_reference(
    capsys, tmp_path, models, photo, clip
) -> None:  # type: ignore[no-untyped-def]
    grey = tmp_path / "wall.png"
    cv2.imwrite(str(grey), np.full((240, 320, 3), 128, np.uint8))
    args = base_args(models, photo, clip, tmp_path / "o.mp4", "--reference", str(grey))
    code, err = run_cli(capsys, *args)
    assert code == 2 and "No face found in reference photo" in error_line(err)


def test_missing_model_names_file_hash_and_folder(capsys, tmp_path, photo, clip) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "models"
    empty.mkdir()

    def run(*extra: str) -> tuple[int, str]:
        return run_cli(  # type: ignore[no-any-return]
            capsys, "run", "--models-dir", str(empty), *extra, "--source", str(photo),
            "--input", str(clip), "--output", str(tmp_path / "o.mp4"),
        )  # fmt: skip

    code, err = run()
    line = error_line(err)
    # A fresh install: every missing model in one message, and the one command that fetches them.
    assert code != 0 and str(empty) in line
    assert all(name in line for name in ("det_10g", "inswapper_128", "w600k_r50"))
    # ... naming catalogue entries, in this folder (the hint said `models download default` with no
    # --models-dir: it filled the default folder, and missed the quality preset's models).
    assert f"models download det_10g inswapper_128 w600k_r50 --models-dir {empty}" in err
    code, err = run("--preset", "quality")
    assert code != 0 and "GPEN-BFR-256.onnx" in error_line(err)
    assert f"models download det_10g inswapper_128 w600k_r50 GPEN-BFR-256 --models-dir {empty}" in err

    # One file missing among verified-size others: the store's message with its file and hash.
    write_all(empty)
    (empty / "inswapper_128.onnx").unlink()
    code, err = run("--allow-unverified")
    line = error_line(err)
    assert code != 0 and "missing" in line and "inswapper_128" in line and "sha256" in line
    assert f"models download inswapper_128 --models-dir {empty}" in err


def test_truncated_model(capsys, tmp_path, photo, clip) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "models"
    write_all(d)  # doubles are far smaller than the catalogue's files
    code, err = run_cli(
        capsys,
        "run",
        "--models-dir",
        str(d),
        "--source",
        str(photo),
        "--input",
        str(clip),
        "--output",
        str(tmp_path / "o.mp4"),
    )
    assert code != 0 and "truncated" in error_line(err)


def test_model_with_the_wrong_hash(capsys, tmp_path, photo, clip) -> None:  # type: ignore[no-untyped-def]
    from models.files.catalogue import get_entry

    d = tmp_path / "models"
    write_all(d)
    spec = get_entry("det_10g").file("det_10g.onnx")
    assert spec.size is not None
    with open(d / "det_10g.onnx", "wb") as fh:  # right size, wrong bytes
        fh.truncate(spec.size)
    code, err = run_cli(
        capsys,
        "run",
        "--models-dir",
        str(d),
        "--source",
        str(photo),
        "--input",
        str(clip),
        "--output",
        str(tmp_path / "o.mp4"),
    )
    line = error_line(err)
    assert code != 0 and "does not match" in line and str(spec.sha256) in line


def test_model_with_the_wrong_contract(capsys, tmp_path, photo, clip) -> None:  # type: ignore[no-untyped-def]
    import onnx

    d = tmp_path / "models"
    write_all(d)
    onnx.save(build_scrfd([DEFAULT_FACE]), str(d / "inswapper_128.onnx"))  # a detector as the swapper
    code, err = run_cli(capsys, *base_args(d, photo, clip, tmp_path / "o.mp4"))
    line = error_line(err)
    assert code != 0 and "not a face swapper" in line and "detector" in line


def test_corrupt_model_file(capsys, tmp_path, photo, clip) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "models"
    write_all(d)
    (d / "w600k_r50.onnx").write_bytes(os.urandom(4096))
    code, err = run_cli(capsys, *base_args(d, photo, clip, tmp_path / "o.mp4"))
    line = error_line(err)
    assert code != 0 and "w600k_r50.onnx" in line and "not a readable ONNX model" in line
    # The fix names the file's download and its folder (following "download NAME" filled the
    # default folder and left this one broken).
    assert "models download w600k_r50 --models-dir" in err and str(d.name) in err


def test_camera_index_that_does_not_exist(capsys, tmp_path, models, photo) -> None:  # type: ignore[no-untyped-def]
    code, err = run_cli(capsys, *base_args(models, photo, Path("7"), tmp_path / "o.mp4"))
    line = error_line(err)
    assert code != 0 and "Camera 7" in line and "doctor" in line
    assert nothing_left(tmp_path)


def test_missing_virtual_camera_driver(capsys, tmp_path, models, photo, clip) -> None:  # type: ignore[no-untyped-def]
    code, err = run_cli(capsys, *base_args(models, photo, clip, Path("vcam")))
    line = error_line(err)
    assert code != 0
    if os.name == "posix" and os.uname().sysname == "Linux":
        assert "modprobe v4l2loopback" in line
    assert "--output window" in line


def test_unwritable_output_path(capsys, tmp_path, models, photo, clip) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, err = run_cli(capsys, *base_args(models, photo, clip, blocker / "out.mp4"))
    assert code != 0 and str(blocker) in error_line(err)


@pytest.mark.parametrize("content", [b"", os.urandom(20000)], ids=["empty", "corrupt"])
def test_corrupt_or_empty_video(capsys, tmp_path, models, photo, content: bytes) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(content)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, err = run_cli(capsys, *base_args(models, photo, bad, out_dir / "o.mp4"))
    assert code != 0 and "broken.mp4" in error_line(err)
    assert nothing_left(out_dir)


def test_reference_mode_without_a_reference_photo(capsys, tmp_path, models, photo, clip) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out.mp4"
    code, err = run_cli(capsys, *base_args(models, photo, clip, out, "--set", "swap.target=reference"))
    assert code == 2
    assert "no reference photo" in error_line(err) and "--reference PHOTO" in err
    assert nothing_left(tmp_path)


def test_debug_flag_shows_the_traceback(tmp_path, models, clip) -> None:  # type: ignore[no-untyped-def]
    from realtime.core.errors import SourceError

    with pytest.raises(SourceError):
        main.main(["--debug", *base_args(models, tmp_path / "nope.jpg", clip, tmp_path / "o.mp4")])


def test_camera_vanishing_mid_run_leaves_a_finalised_playable_file(tmp_path: Path) -> None:
    """A real CameraSource (fake device that dies after 15 frames) into the real file sink."""
    import av

    from realtime.core.engine import Engine
    from realtime.core.settings import Settings
    from realtime.io.camera_source import CameraSource
    from realtime.io.file_sinks import VideoFileSink

    class DyingCamera:
        def __init__(self, *args: object) -> None:
            self.frames = 0

        def isOpened(self) -> bool:
            return True

        def read(self) -> tuple[bool, np.ndarray | None]:
            self.frames += 1
            time.sleep(0.02)  # a camera delivers at its frame rate
            if self.frames > 15:
                return False, None
            return True, np.full((120, 160, 3), self.frames * 10 % 256, np.uint8)

        def set(self, prop: int, value: float) -> bool:
            return True

        def get(self, prop: int) -> float:
            return {
                cv2.CAP_PROP_FPS: 30.0,
                cv2.CAP_PROP_FRAME_WIDTH: 160.0,
                cv2.CAP_PROP_FRAME_HEIGHT: 120.0,
            }.get(prop, 0.0)

        def release(self) -> None:
            return None

    devices: list[DyingCamera] = []

    def factory(*args: object) -> DyingCamera:
        # The first device dies after 15 frames; every re-open finds a dead device.
        cam = DyingCamera()
        if devices:
            cam.frames = 1_000
        devices.append(cam)
        return cam

    source = CameraSource(0, capture_factory=factory, reconnect_s=0.3, retry_delay_s=0.01, first_frame_s=0.05)
    out = tmp_path / "rec.mp4"
    engine = Engine(source, VideoFileSink(out), Settings())
    engine.start()
    assert engine.wait(10)
    assert engine.error is not None and "disconnected" in engine.error.user_message()
    assert len(devices) >= 3  # retried before giving up
    stats = engine.stats()
    assert stats.frames_in == 15
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == stats.frames_out >= 12
    assert not list(tmp_path.glob(".*partial*"))


@pytest.mark.parametrize("which", ["--input", "--source"])
def test_an_output_that_is_one_of_the_inputs_is_refused(capsys, tmp_path, models, photo, clip, which) -> None:  # type: ignore[no-untyped-def]
    """It overwrote the original video (or photo) with the swapped output and exited 0."""
    target = clip if which == "--input" else photo
    before = target.read_bytes()
    code, err = run_cli(capsys, *base_args(models, photo, clip, target))
    assert code == 2
    assert f"is the {which} file" in error_line(err)
    assert target.read_bytes() == before


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--fps", "-5"), ("--fps", "nan"), ("--width", "-4"), ("--output", "")]
    + [("--chunk-seconds", v) for v in ("nan", "-1", "inf")],  # accepted once: a job of 1 chunk, or none
)
def test_bad_numbers_and_names_are_refused_by_the_parser(capsys, flag: str, value: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as info:
        main.main(["run", "--source", "x.png", "--input", "0", "--output", "vcam", flag, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "Traceback" not in err


def test_a_window_without_a_display_is_refused_before_loading_anything(  # type: ignore[no-untyped-def]
    capsys, tmp_path, models, photo, clip, monkeypatch
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the display check is for X11/Wayland")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    code, err = run_cli(capsys, *base_args(models, photo, clip, Path("window")))
    assert code == 2 and "No display" in error_line(err)


def test_an_error_mid_run_is_said_once(capsys, tmp_path, models, photo, clip, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every engine error was printed twice, with the `done:` line between the two."""
    from realtime.core.errors import SinkError
    from realtime.io import file_sinks as sinks

    real_send = sinks.VideoFileSink.send

    def send(self: sinks.VideoFileSink, frame: object) -> None:
        if self.frames_written >= 3:
            raise SinkError("Disk full while writing out.mp4.", hint="Free some space.")
        real_send(self, frame)  # type: ignore[arg-type]

    monkeypatch.setattr(sinks.VideoFileSink, "send", send)
    code, err = run_cli(capsys, *base_args(models, photo, clip, tmp_path / "out.mp4"))
    assert code == 2 and "Disk full" in error_line(err)


@pytest.mark.parametrize(
    "kind",
    [
        "missing",
        "audio only",
        "huge camera number",
        pytest.param(
            "absent camera",
            marks=pytest.mark.skipif(
                not sys.platform.startswith("linux") or Path("/dev/video7").exists(),
                reason="Linux, no /dev/video7",
            ),
        ),
    ],
)
def test_a_bad_input_is_reported_before_any_model_loads(capsys, tmp_path, photo, kind) -> None:  # type: ignore[no-untyped-def]
    """A typo in --input was reported only after every model had loaded (minutes, for a first
    TensorRT build): here the models folder is empty, and the input must still be what is named."""
    from tests.fixtures_media import make_audio_only_file

    empty = tmp_path / "no-models"
    empty.mkdir()
    spec = {
        "missing": str(tmp_path / "typo.mp4"),
        "audio only": str(make_audio_only_file(tmp_path / "talk.m4a")),
        "huge camera number": "99999999999",
        "absent camera": "7",
    }[kind]
    code, err = run_cli(
        capsys, "run", "--models-dir", str(empty), "--source", str(photo), "--input", spec, "--output", "null"
    )
    line = error_line(err)
    assert code != 0 and "Models not downloaded" not in line
    expected = {
        "missing": "not found",
        "audio only": "no video stream",
        "huge camera number": "cannot exist",
        "absent camera": "could not be opened",
    }
    assert expected[kind] in line


@pytest.mark.parametrize("role", ["--source", "--reference", "--input"])
def test_a_huge_picture_is_refused_before_decoding_with_its_own_exit_code(
    capsys, tmp_path, models, photo, clip, role
) -> None:  # type: ignore[no-untyped-def]
    from tests.realtime.core.test_image_header import huge_png

    huge = huge_png(tmp_path / "huge.png")
    source, given, extra = photo, clip, []
    if role == "--source":
        source = huge
    elif role == "--input":
        given = huge
    else:
        extra = ["--reference", str(huge)]
    code, err = run_cli(capsys, *base_args(models, source, given, tmp_path / "o.mp4", *extra))
    line = error_line(err)
    assert code == 9 and "40000x40000 pixels" in line and "up to 100 MP" in line
    assert not (tmp_path / "o.mp4").exists()


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_a_bad_chunk_length_is_refused_for_batches_and_the_queue(capsys, value: str) -> None:  # type: ignore[no-untyped-def]
    for command in (["jobs", "batch", "--targets", "."], ["jobs", "submit", "--input", "a", "--output", "b"]):
        with pytest.raises(SystemExit) as info:
            main.main([*command, "--chunk-seconds", value])
        assert info.value.code == 2
        assert "argument --chunk-seconds" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["o.xyz", "o.webm"])
def test_a_video_output_its_container_cannot_hold_is_refused_before_any_frame(  # type: ignore[no-untyped-def]
    capsys, tmp_path, models, photo, clip, name, monkeypatch
) -> None:
    """A file job processed every frame, then failed joining them, and left its job folder."""
    import realtime.jobs.filejob as filejob

    def no_models(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the models loaded before the output was checked")

    monkeypatch.setattr(filejob, "prepare_face_swap", no_models)
    code, err = run_cli(capsys, *base_args(models, photo, clip, tmp_path / name))
    assert code == 2 and "Cannot write video" in error_line(err) and ".mp4" in err
    assert list(tmp_path.iterdir()) == []  # no job folder, no partial file


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["--set", "detector.model=bogus", "--detector", "mtcnn"], "choose one of"),
        (["--set", "detector.model=det_10g", "--detector", "mtcnn"], "disagree"),
    ],
)
def test_a_set_value_a_flag_would_replace_is_still_checked(  # type: ignore[no-untyped-def]
    capsys, tmp_path, models, photo, clip, overrides, said
) -> None:
    """`--set detector.model=bogus --detector mtcnn` ran, the --set dropped without a word."""
    for out in (tmp_path / "o.png", tmp_path / "o.mp4"):  # a live run, and a file job
        code, err = run_cli(capsys, *base_args(models, photo, clip, out)[:-2], *overrides)
        assert code == 2 and said in error_line(err) and "detector.model" in err
    assert list(tmp_path.iterdir()) == []


def test_every_command_that_loads_models_takes_the_models_folder_options(capsys) -> None:  # type: ignore[no-untyped-def]
    """The worker (and the doctor) had no --models-dir / --allow-unverified."""
    commands = ["run", "doctor", "bench", "serve", "worker", "jobs batch", "jobs submit"]
    commands += ["models list", "models verify", "models download"]
    for command in commands:
        with pytest.raises(SystemExit):
            main.main([*command.split(), "--help"])
        text = capsys.readouterr().out
        assert "--models-dir" in text and "--allow-unverified" in text, command
