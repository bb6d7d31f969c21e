"""`main.py run` end to end, offline: doubles for the downloaded models, the real MTCNN detector,
a clip of the astronaut moving, out to a video file and to a recording virtual camera."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

import main
from models.fakes.doubles import write_all
from realtime.tools import cli_run
from realtime.tools.bench import astronaut_bgr, make_clip_with_faces
from tests.fixtures_media import write_video
from tests.paths import REPO_ROOT
from tests.signals import CHILD_SIGNALS
from tests.vcam_recorder import RecordingBackendHandle

W, H, N = 480, 360, 24


@pytest.fixture(scope="module")
def doubles_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("doubles"))


@pytest.fixture(scope="module")
def models(doubles_dir: Path) -> Path:
    write_all(doubles_dir)
    return doubles_dir


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray], list[np.ndarray]]:
    frames, boxes = make_clip_with_faces(N, W, H)
    path = Path(tmp_path_factory.mktemp("clip")) / "astronaut.mp4"
    write_video(path, frames, fps=25.0)
    return path, frames, boxes


@pytest.fixture(scope="module")
def source_photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("photo")) / "me.png"
    cv2.imwrite(str(path), astronaut_bgr()[:, ::-1].copy())  # mirrored: still one clear face
    return path


def decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main.main(list(args), out=out)
    return code, out.getvalue()


def far_from_face_mask(box: np.ndarray, shape: tuple[int, ...], margin: float = 0.6) -> np.ndarray:
    x1, y1, x2, y2 = box
    mx, my = (x2 - x1) * margin, (y2 - y1) * margin
    mask = np.ones(shape[:2], dtype=bool)
    mask[max(int(y1 - my), 0) : int(y2 + my), max(int(x1 - mx), 0) : int(x2 + mx)] = False
    return mask


def inner_face(box: np.ndarray) -> tuple[slice, slice]:
    x1, y1, x2, y2 = box
    cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
    return slice(int(cy - h * 0.2), int(cy + h * 0.2)), slice(int(cx - w * 0.2), int(cx + w * 0.2))


FADE_IN = 5  # a newly found face fades in over the tracker's fade_frames (4) rather than popping


def assert_swapped_only_the_face(
    inputs: list[np.ndarray], outputs: list[np.ndarray], boxes: list[np.ndarray], *, exact: bool
) -> None:
    """The face changed; pixels far from it did not (bit-exact, or within codec tolerance)."""
    assert len(outputs) == len(inputs)  # frame count preserved
    for i, (src, out, box) in enumerate(zip(inputs, outputs, boxes, strict=True)):
        diff = np.abs(out.astype(np.int16) - src.astype(np.int16)).mean(axis=2)
        if i >= FADE_IN:
            ys, xs = inner_face(box)
            assert diff[ys, xs].mean() > 8, f"the face was not swapped in frame {i}"
        far = far_from_face_mask(box, src.shape, margin=1.0 if exact else 0.6)
        if exact:
            assert diff[far].max() == 0, f"pixels far from the face changed in frame {i}"
        else:
            # Re-encoding alone (H.264, crf 20) moves textured pixels by ~2-3 levels on average.
            assert diff[far].mean() < 3.5, f"pixels far from the face changed in frame {i}"


@pytest.mark.parametrize("detector", ["mtcnn", "det_10g"])
def test_run_to_a_video_file(
    tmp_path: Path, models: Path, clip: tuple[Path, list, list], source_photo: Path, detector: str
) -> None:
    clip_path, _, boxes = clip
    out = tmp_path / "out.mp4"
    code, text = run_cli(
        "run",
        "--models-dir",
        str(models),
        "--allow-unverified",
        "--source",
        str(source_photo),
        "--input",
        str(clip_path),
        "--output",
        str(out),
        "--detector",
        detector,
    )
    assert code == 0, text
    assert out.is_file() and not list(tmp_path.glob(".*partial*"))
    inputs = decode(clip_path)
    outputs = decode(out)
    if detector == "mtcnn":
        assert_swapped_only_the_face(inputs, outputs, boxes, exact=False)
    else:
        # The SCRFD double reports its one configured face where it finds the astronaut's skin.
        from models.runtime.session import SessionConfig, SessionFactory
        from models.wrappers.scrfd import SCRFD

        det = SCRFD(SessionFactory(SessionConfig(provider="cpu")).create(models / "det_10g.onnx"))
        found = [np.asarray(det.detect(f)[0].box, dtype=np.float64) for f in inputs]
        assert_swapped_only_the_face(inputs, outputs, found, exact=False)


def test_run_to_a_recording_virtual_camera(
    models: Path,
    clip: tuple[Path, list, list],
    source_photo: Path,
    vcam_recorder: RecordingBackendHandle,
) -> None:
    clip_path, _, boxes = clip
    code, text = run_cli(
        "run",
        "--models-dir",
        str(models),
        "--allow-unverified",
        "--source",
        str(source_photo),
        "--input",
        str(clip_path),
        "--output",
        "vcam",
        "--every-frame",
        "--detector",
        "mtcnn",
        "--preset",
        "ultra-low-latency",
        "--vcam-backend",
        vcam_recorder.name,
        "--vcam-device",
        "FaceCast 2",
        "--no-label",  # the disclosure mark (on by default for vcam) would change the far pixels
        "--set",
        "watermark.enabled=false",  # so does the invisible one (tests/realtime/test_watermark_routes.py)
    )
    assert code == 0, text
    assert 'note: --no-label: the output carries no "AI-modified" mark' in text
    assert len(vcam_recorder.opens) == 1
    opened = vcam_recorder.opens[0]
    assert (opened.width, opened.height) == (W, H)
    assert opened.device == "FaceCast 2"  # the device the user picked, through the backend they named
    # Nothing re-encodes frames on the way to the virtual camera: far pixels are bit-exact.
    assert_swapped_only_the_face(decode(clip_path), vcam_recorder.frames, boxes, exact=True)


def test_two_source_photos_are_averaged_and_a_group_photo_uses_the_largest_face(
    tmp_path: Path, models: Path, clip: tuple[Path, list, list], source_photo: Path
) -> None:
    from insightface.data import get_image

    group = tmp_path / "group.jpg"
    cv2.imwrite(str(group), get_image("t1"))
    code, text = run_cli(
        "run",
        "--models-dir",
        str(models),
        "--allow-unverified",
        "--source",
        str(source_photo),
        str(group),
        "--input",
        str(source_photo),
        "--output",
        str(tmp_path / "still.png"),
        "--detector",
        "mtcnn",
    )
    assert code == 0, text
    assert "faces found, using the largest" in text
    assert (tmp_path / "still.png").is_file()


def test_doubles_module_writes_every_catalogue_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-m", "models.fakes.doubles", str(tmp_path)], check=True, capture_output=True
    )
    from models.files.catalogue import entry_for_file

    names = sorted(p.name for p in tmp_path.glob("*.onnx"))
    assert {"det_10g.onnx", "w600k_r50.onnx", "inswapper_128.onnx", "inswapper_128_fp16.onnx"} <= set(names)
    for name in names:
        entry_for_file(name)  # every double is a catalogue file name


def test_run_to_a_window(
    models: Path, clip: tuple[Path, list, list], source_photo: Path, qapp: object
) -> None:
    import os

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    clip_path, _, _ = clip
    code, text = run_cli(
        "run", "--models-dir", str(models), "--allow-unverified", "--source", str(source_photo),
        "--input", str(clip_path), "--output", "window", "--detector", "mtcnn",
    )  # fmt: skip
    assert code == 0, text
    import re

    done = re.search(r"done: (\d+) frames out, (\d+) dropped", text)
    assert "-> window" in text and done is not None, text
    out, dropped = int(done.group(1)), int(done.group(2))
    assert out > 0 and out + dropped == N  # a live (paced) output may drop stale frames, never queue
    # The run leaves the process's Qt application (pytest-qt's `qapp`, as a GUI's would be) usable:
    # its window, closed once the loop had ended, set off Qt's quit-on-last-window, and every later
    # event loop returned at once.
    import time

    from PyQt6.QtCore import QEventLoop, QTimer
    from PyQt6.QtWidgets import QApplication

    QApplication.processEvents()
    loop = QEventLoop()
    QTimer.singleShot(50, loop.quit)
    started = time.perf_counter()
    assert loop.exec() == 0 and time.perf_counter() - started >= 0.04


def run_args(models: Path, photo: Path, clip: Path, out: Path, *extra: str) -> list[str]:
    """`run` from `clip` to `out` with the doubles and the built-in detector."""
    args = ["run", "--models-dir", str(models), "--allow-unverified", "--source", str(photo)]
    return [*args, "--input", str(clip), "--output", str(out), "--detector", "mtcnn", *extra]


def start_run(args: list[str], *, stderr: int = subprocess.STDOUT) -> subprocess.Popen[str]:
    """`main.py` with `args` in a child process, returned once it says it is running."""
    root = REPO_ROOT
    proc = subprocess.Popen(
        [sys.executable, str(root / "main.py"), *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        **CHILD_SIGNALS,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("running:"):
            break
    return proc


def wait_for_recording(folder: Path, timeout: float = 60.0) -> None:
    """Until the run's hidden partial file holds some encoded video (a fixed sleep was too short
    on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.stat().st_size >= 4096 for p in folder.glob(".*.partial.mp4")):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing was recorded in {timeout:.0f} s")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_kill_or_a_closed_terminal_ends_a_run_like_ctrl_c_and_keeps_the_recording(
    tmp_path: Path, models: Path, clip: tuple[Path, list, list], source_photo: Path, how: str
) -> None:
    """`kill` or closing the terminal left a hidden, unplayable 48-byte file and no recording."""
    sig = getattr(signal, how, None)
    if sig is None:
        pytest.skip(f"no {how} on this platform")
    out = tmp_path / "take.mp4"
    proc = start_run(run_args(models, source_photo, clip[0], out, "--loop", "--realtime"))
    wait_for_recording(tmp_path)
    proc.send_signal(sig)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, rest  # 143 for SIGTERM, 129 for SIGHUP, as a shell reports
    assert "stopping" in rest and "done:" in rest
    assert len(decode(out)) >= 1 and not list(tmp_path.glob(".*partial*"))  # finalised and playable


def test_a_closed_stdout_and_a_double_ctrl_c_still_finish_the_recording(
    tmp_path: Path, models: Path, clip: tuple[Path, list, list], source_photo: Path
) -> None:
    """`run --stats | head -1` (or a dropped SSH session) crashed on the next print with the
    recording lost; a second Ctrl+C while stopping killed the process before the file was written."""
    out = tmp_path / "take.mp4"
    args = run_args(models, source_photo, clip[0], out, "--loop", "--realtime", "--stats")
    proc = start_run(args, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -1` exits: the next stats line has nowhere to go
    wait_for_recording(tmp_path)
    time.sleep(1.2)  # at least one stats line (one a second) meets the closed pipe
    proc.send_signal(signal.SIGINT)
    time.sleep(0.001)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, err  # finished, and still says Ctrl+C ended it
    assert "Traceback" not in err
    assert len(decode(out)) >= 1 and not list(tmp_path.glob(".*partial*"))


def test_a_file_run_stopped_early_says_the_output_is_partial(
    tmp_path: Path, models: Path, source_photo: Path
) -> None:
    from tests.fixtures_media import make_test_video

    clip = make_test_video(tmp_path / "long.mp4", frames=150, size=(160, 120), fps=25.0)
    out = tmp_path / "out.mp4"
    proc = start_run(run_args(models, source_photo, clip, out, "--realtime"))
    wait_for_recording(tmp_path)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, rest
    assert "note: stopped before the input ended" in rest and str(out) in rest


def test_a_run_that_swapped_nothing_says_why(tmp_path: Path, models: Path, source_photo: Path) -> None:
    """An input with no face ended with 'done', exit 0 and an output equal to the input: the user
    had no hint why nothing changed."""
    blank = tmp_path / "no_face.png"
    cv2.imwrite(str(blank), np.full((240, 320, 3), 120, np.uint8))
    out = tmp_path / "out.png"
    code, text = run_cli(*run_args(models, source_photo, blank, out))
    assert code == 0, text
    assert "nothing was swapped: no face was found in any of the 1 frames" in text
    code, text = run_cli(*run_args(models, source_photo, clip_with_a_face(tmp_path), tmp_path / "o.png"))
    assert code == 0 and "nothing was swapped" not in text


def clip_with_a_face(folder: Path) -> Path:
    from realtime.tools.bench import astronaut_bgr

    path = folder / "face.png"
    cv2.imwrite(str(path), astronaut_bgr())
    return path


def test_faces_found_but_all_passed_through_are_told_apart_from_no_face() -> None:
    note = cli_run._nothing_swapped_note(frames=30, swapped=0, passed_through=12, seen=12)
    assert note is not None and "detector.threshold" in note and "no face was found" not in note
    note = cli_run._nothing_swapped_note(frames=30, swapped=0, passed_through=0, seen=30, target="reference")
    assert note is not None and "none matched the reference photo" in note
    note = cli_run._nothing_swapped_note(frames=30, swapped=0, passed_through=5, seen=30, target="reference")
    assert note is not None and "detector.threshold" in note  # below the threshold: never compared
    note = cli_run._nothing_swapped_note(frames=30, swapped=0, passed_through=0, seen=0, detector="mtcnn")
    assert note is not None and "--detector det_10g" in note  # not the detector already in use
    assert cli_run._nothing_swapped_note(frames=30, swapped=3, passed_through=12, seen=15) is None
    assert cli_run._nothing_swapped_note(frames=0, swapped=0, passed_through=0, seen=0) is None


def test_a_reference_that_matches_nobody_is_said_as_such(
    tmp_path: Path, models: Path, source_photo: Path
) -> None:
    """It said 'no face was found' (and to try --detector mtcnn, already in use)."""
    from tests.real_faces import group_photo_bgr

    reference = tmp_path / "someone_else.png"
    cv2.imwrite(str(reference), group_photo_bgr())
    face = clip_with_a_face(tmp_path)
    # A threshold no other face can meet: the doubles' ArcFace is a fixed projection of the crop.
    args = run_args(models, source_photo, face, tmp_path / "o.png")
    code, text = run_cli(*args, "--reference", str(reference), "--set", "swap.reference_threshold=0.001")
    assert code == 0, text
    assert "nothing was swapped: faces were found but none matched the reference photo" in text


def test_a_video_into_an_image_says_which_frame_it_kept(
    tmp_path: Path, models: Path, clip: tuple[Path, list, list], source_photo: Path
) -> None:
    clip_path, _, _ = clip
    out = tmp_path / "still.png"
    code, text = run_cli(*run_args(models, source_photo, clip_path, out))
    assert code == 0 and out.is_file()
    assert f"note: {out} holds the last of the" in text
    code, text = run_cli(*run_args(models, source_photo, clip_with_a_face(tmp_path), tmp_path / "one.png"))
    assert code == 0 and "holds the last of" not in text  # one picture in, one out: nothing to say
