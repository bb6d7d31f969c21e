"""pipeline.processing_size: the face stages see the frame scaled down to it (the sinks scale back),
a live change applies at the next frame, the tracker keeps its faces through it (and starts afresh
on another picture)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from models.types import Detection, ImageBGR
from realtime.core.contracts import FramePlan, PassthroughWorker
from realtime.core.engine import Engine
from realtime.core.frames import VideoFrame, fit_processing_size, processing_shape
from realtime.core.settings import Settings, SettingsError, TrackerSettings
from realtime.core.stage_set import StageSet
from realtime.face.tracker import FaceTracker
from tests.engine_fakes import FakeSource, RecordingSink


@pytest.mark.parametrize(
    ("size", "longest", "want"),
    [
        ((1920, 1080), 1280, (1280, 720)),
        ((1080, 1920), 640, (360, 640)),  # portrait: the longer side is the height
        ((1280, 720), 1280, (1280, 720)),  # already fits
        ((640, 480), 1280, (640, 480)),  # never enlarged
        ((1280, 720), 0, (1280, 720)),  # 0 = native
        ((641, 479), 320, (320, 239)),
    ],
)
def test_processing_shape_keeps_the_aspect_and_never_enlarges(
    size: tuple[int, int], longest: int, want: tuple[int, int]
) -> None:
    assert processing_shape(*size, longest) == want


def test_fit_scales_the_picture_itself_without_aliasing() -> None:
    image = np.zeros((480, 640, 3), dtype=np.uint8)
    image[:, ::2] = 200  # one-pixel stripes: a box filter averages them to a flat 100
    frame = fit_processing_size(VideoFrame(image, 3, 1.5), 320)
    assert frame.image.shape == (240, 320, 3)
    assert (frame.index, frame.capture_ts) == (3, 1.5)
    assert np.abs(frame.image.astype(int) - 100).max() <= 1
    # 3x smaller (a halving, then 1.5x): still no stripes, the mean kept.
    third = fit_processing_size(VideoFrame(image, 0, 0.0), 213)
    assert third.image.shape == (160, 213, 3)
    assert np.abs(third.image.astype(int) - 100).max() <= 1
    same = VideoFrame(image, 0, 0.0)
    assert fit_processing_size(same, 0).image is image


def test_a_frame_that_fits_is_not_downloaded_from_the_gpu() -> None:
    """An NVDEC frame's picture stays on the GPU unless it really has to be scaled."""
    from realtime.io.nvdec_device import DeviceVideoFrame

    downloads: list[int] = []

    class Picture:
        width, height, pitch, gpu_id, ptr = 640, 480, 640, 0, 0

    def download(picture: object) -> ImageBGR:
        downloads.append(1)
        return np.zeros((480, 640, 3), dtype=np.uint8)

    frame = DeviceVideoFrame(Picture(), 0, 0.0, None, download)  # type: ignore[arg-type]
    fit_processing_size(frame, 0)
    fit_processing_size(frame, 1280)
    assert downloads == [] and not frame.image_loaded
    assert fit_processing_size(frame, 320).image.shape == (240, 320, 3)
    assert downloads == [1]


def test_a_bad_processing_size_is_rejected_with_its_name() -> None:
    with pytest.raises(SettingsError, match=r"pipeline\.processing_size"):
        Settings().with_overrides({"pipeline.processing_size": 50})


class ShapeAnalyser:
    """Records the shape of every frame the face stages see."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []
        self.lock = threading.Lock()

    def analyse(self, image: ImageBGR, timestamp: float, settings: Settings) -> FramePlan:
        with self.lock:
            self.shapes.append(image.shape)
        return FramePlan()


class ShapeSink(RecordingSink):
    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def send(self, frame: VideoFrame) -> None:
        self.shapes.append(frame.image.shape)
        super().send(frame)


def run_engine(
    settings: Settings, frames: int = 12, change_at: int | None = None
) -> tuple[ShapeAnalyser, ShapeSink]:
    analyser = ShapeAnalyser()

    def stages(s: Settings) -> StageSet:
        return StageSet(analyser, (PassthroughWorker(),) * s.pipeline.frames_in_flight, "shapes")

    sink = ShapeSink()
    source = FakeSource(frames=frames, size=(640, 480), pace=change_at is not None, fps=100.0)
    engine = Engine(source, sink, settings, stages)
    engine.start()
    if change_at is not None:
        while len(sink.shapes) < change_at:
            time.sleep(0.005)
        engine.update_settings(settings.with_overrides({"pipeline.processing_size": 0}))
    assert engine.wait(10)
    assert engine.error is None
    return analyser, sink


def test_the_face_stages_see_the_processing_size_and_the_sink_gets_every_frame() -> None:
    analyser, sink = run_engine(Settings().with_overrides({"pipeline.processing_size": 320}))
    assert set(analyser.shapes) == {(240, 320, 3)}
    assert len(sink.shapes) == 12 and set(sink.shapes) == {(240, 320, 3)}
    native, _ = run_engine(Settings())
    assert set(native.shapes) == {(480, 640, 3)}


def test_a_live_change_of_the_processing_size_applies_to_later_frames() -> None:
    analyser, sink = run_engine(Settings().with_overrides({"pipeline.processing_size": 320}), 40, change_at=5)
    assert analyser.shapes[0] == (240, 320, 3)
    assert analyser.shapes[-1] == (480, 640, 3)
    assert len(sink.shapes) == 40


def _one_face_scaled_to_width(image: ImageBGR) -> list[Detection]:
    """One face, where a 640 px wide picture has it, scaled with the picture's width."""
    s = image.shape[1] / 640.0
    kps = np.array([[280, 200], [360, 200], [320, 240], [290, 280], [350, 280]], np.float32) * s
    return [Detection(box=np.array([250, 150, 390, 320], np.float32) * s, kps=kps, score=0.9)]


def test_the_tracker_keeps_its_faces_through_a_processing_size_change() -> None:
    """A live processing-size change keeps every track: the swap does not blink out and fade back
    in, nor (in "largest" mode) land on another person."""

    tracker = FaceTracker(_one_face_scaled_to_width, TrackerSettings(), interval=3)
    big = np.full((480, 640, 3), 120, np.uint8)
    first = [tracker.update(big, i / 30.0)[0] for i in range(8)]
    assert len({f.track_id for f in first}) == 1 and first[-1].swap_weight == 1.0
    small = np.full((240, 320, 3), 120, np.uint8)
    faces = tracker.update(small, 9 / 30.0)
    assert len(faces) == 1 and faces[0].track_id == first[0].track_id  # the same face ...
    assert faces[0].swap_weight == 1.0  # ... still fully swapped (no blink)
    np.testing.assert_allclose(faces[0].kps[0], [140.0, 100.0], atol=0.5)  # in the new pixels


def test_the_tracker_starts_afresh_when_the_frame_size_changes() -> None:
    tracker = FaceTracker(_one_face_scaled_to_width, TrackerSettings(), interval=3)
    big = np.full((480, 640, 3), 120, np.uint8)
    first = [tracker.update(big, i / 30.0)[0].track_id for i in range(4)]
    assert len(set(first)) == 1
    other = np.full((320, 320, 3), 120, np.uint8)  # another picture: a new aspect ratio
    faces = tracker.update(other, 5 / 30.0)
    # One face, a new id, landmarks in the new frame's pixels (no track left over from the old one).
    assert len(faces) == 1 and faces[0].track_id != first[0]
    np.testing.assert_allclose(faces[0].kps[0], [140.0, 100.0], atol=0.5)
