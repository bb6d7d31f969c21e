"""Every output a run writes to carries the run's invisible watermark, once, with the run's id: the
virtual camera (pyvirtualcam's real API with a recording backend), a video file and a picture (read
back with PyAV / OpenCV and `main.py verify`, whose manifest names the same run), and several
outputs at once. `--no-label` (composite.disclosure_label off) leaves it on; watermark.enabled off
removes it and the run says so."""

from __future__ import annotations

import io
import time
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from main import main
from models.errors import ExitCode
from models.fakes.doubles import write_all
from realtime.core.contracts import FrameSink
from realtime.core.events import EngineEvent
from realtime.core.frames import VideoFrame
from realtime.core.settings import Settings
from realtime.core.watermark.detect import MarkDetector
from realtime.io.outputs import OutputRequest, open_output, open_outputs
from realtime.lifecycle.run import Run
from tests.engine_fakes import FakeSource
from tests.real_faces import astronaut_bgr
from tests.realtime.core.watermark.marked_clips import real_clip
from tests.realtime.jobs.media import write_clip
from tests.vcam_recorder import recording_backend

SIZE = (640, 360)


class PhotoSource(FakeSource):
    """A file-like source of a real photo drifting (every frame read, as fast as it goes)."""

    def read(self) -> VideoFrame | None:
        if self._next >= self.frames:
            return None
        i = self._next
        self._next += 1
        return VideoFrame(real_clip(i + 1, SIZE)[i], i, time.perf_counter(), i / 30.0)


def run_into(
    sink: FrameSink, settings: Settings | None = None, run_id: str = "0badcafe"
) -> list[EngineEvent]:
    events: list[EngineEvent] = []
    run = Run(
        PhotoSource(frames=12, size=SIZE), sink, settings or Settings(), on_event=events.append, run_id=run_id
    )
    run.start()
    run.watch()
    outcome = run.stop()
    assert outcome.error is None, outcome.error
    return events


def detect(frames: list[np.ndarray]):  # type: ignore[no-untyped-def]
    detector = MarkDetector()
    for image in frames:
        detector.add(image)
    return detector.decide(wide=False)


def video_frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path), "r") as container:
        return [np.asarray(f.to_ndarray(format="bgr24"), np.uint8) for f in container.decode(video=0)]


def test_the_virtual_camera_gets_marked_frames_with_the_runs_id_even_without_the_label() -> None:
    with recording_backend() as rec:
        sink = open_output("vcam", vcam_backend=rec.name, pace=False)
        run_into(sink, Settings().with_overrides({"composite.disclosure_label": False}))
        frames = list(rec.frames)
    found = detect(frames)
    assert found.marked and found.payload is not None and found.payload.run_id == "0badcafe"


def test_a_recording_and_a_picture_are_marked_and_their_manifests_name_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FACECAST_PROVENANCE_DIR", str(tmp_path / "key"))
    video, picture = tmp_path / "take.mp4", tmp_path / "still.png"
    sink = open_outputs(
        [OutputRequest(str(video), run_id="0badcafe"), OutputRequest(str(picture), run_id="0badcafe")]
    )
    run_into(sink)
    found = detect(video_frames(video))
    assert found.marked and found.payload is not None and found.payload.run_id == "0badcafe"
    still = np.asarray(cv2.imread(str(picture)), np.uint8)
    assert detect([still]).payload is not None

    for path in (video, picture):
        out = io.StringIO()
        assert main(["verify", str(path)], out=out) == ExitCode.OK
        text = out.getvalue()
        assert "run 0badcafe" in text and "the same run as the watermark" in text
        assert "valid manifest, signed by FaceCast signer" in text


def test_turning_the_watermark_off_removes_it_and_the_run_warns(tmp_path: Path) -> None:
    video = tmp_path / "plain.mp4"
    events = run_into(
        open_output(str(video), provenance=False), Settings().with_overrides({"watermark.enabled": False})
    )
    assert any(e.kind == "warning" and "watermark is off" in e.message for e in events)
    assert not detect(video_frames(video)).marked
    out = io.StringIO()
    assert main(["verify", str(video)], out=out) == ExitCode.NOT_MARKED
    assert "no FaceCast mark found" in out.getvalue()


def test_verify_says_unreadable_for_what_is_no_video_or_picture(tmp_path: Path) -> None:
    junk = tmp_path / "notes.mp4"
    junk.write_bytes(b"not a video at all" * 100)
    assert main(["verify", str(junk)], out=io.StringIO()) == ExitCode.UNREADABLE
    assert main(["verify", str(tmp_path / "missing.mp4")], out=io.StringIO()) == ExitCode.UNREADABLE


def verified(path: Path) -> str:
    """What `main.py verify` says of `path` (which must come out marked)."""
    out = io.StringIO()
    assert main(["verify", str(path)], out=out) == ExitCode.OK, out.getvalue()
    return out.getvalue()


def run_id_in(text: str) -> str:
    """The run id a `verify` report names for the watermark."""
    return text.split("watermark found: run ", 1)[1][:8]


def test_a_file_job_and_a_batch_carry_one_run_id_each_that_their_manifests_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` with a video file in and out (a file job, in chunks) and `jobs batch`: each output is
    marked with one run id for the whole file, and signed naming it; two jobs, two ids."""
    monkeypatch.setenv("FACECAST_PROVENANCE_DIR", str(tmp_path / "key"))
    monkeypatch.setenv("FACECAST_CONSENT", "1")
    models = tmp_path / "models"
    write_all(models)
    photo = tmp_path / "me.png"
    cv2.imwrite(str(photo), astronaut_bgr()[:, ::-1].copy())
    clips = tmp_path / "clips"
    clips.mkdir()
    for name in ("a.mp4", "b.mp4"):
        write_clip(clips / name, 60, (1280, 720), gop=15, audio=False)
    common = [
        "--source",
        str(photo),
        "--models-dir",
        str(models),
        "--allow-unverified",
        "--detector",
        "mtcnn",
    ]
    job = tmp_path / "job.mp4"
    args = ["run", "--input", str(clips / "a.mp4"), "--output", str(job), "--chunk-seconds", "1", *common]
    assert main(args, out=io.StringIO()) == ExitCode.OK
    text = verified(job)
    assert "the same run as the watermark" in text, text
    batch = tmp_path / "batch"
    args = ["jobs", "batch", "--targets", str(clips), "--output-dir", str(batch), *common]
    assert main(args, out=io.StringIO()) == ExitCode.OK
    reports = [verified(batch / name) for name in ("a.mp4", "b.mp4")]
    assert all("the same run as the watermark" in r for r in reports), reports
    assert len({run_id_in(r) for r in [text, *reports]}) == 3
