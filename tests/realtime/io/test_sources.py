"""Frame sources: what a user sees from a camera, a video file or an image, including when they fail."""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest

from models.cli_text import app_command
from realtime.core.contracts import FrameSource
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame
from realtime.io.camera_source import CameraSource
from realtime.io.cameras import camera_access_hint
from realtime.io.source_parts import Pacer
from realtime.io.sources import ImageSource, open_source
from realtime.io.video_file import VideoFileSource
from tests.fixtures_media import (
    make_audio_only_file,
    make_test_video,
    read_frame_number,
    stamp_frame_number,
    synthetic_frame,
)


def read_all(source: FrameSource, limit: int = 10_000) -> list[VideoFrame]:
    frames: list[VideoFrame] = []
    while len(frames) < limit and (frame := source.read()) is not None:
        frames.append(frame)
    return frames


@pytest.fixture
def clip(tmp_path: Path) -> Path:
    return make_test_video(tmp_path / "clip.mp4", frames=30, size=(96, 64), fps=25.0)


# ------------------------------------------------------------------------------------------ video file


def test_video_file_delivers_every_frame_in_order(clip: Path) -> None:
    source = VideoFileSource(clip)
    source.open()
    try:
        frames = read_all(source)
    finally:
        source.close()

    assert source.size == (96, 64)
    assert source.fps == pytest.approx(25.0)
    assert not source.is_live
    assert [read_frame_number(f.image) for f in frames] == list(range(30))
    assert [f.index for f in frames] == list(range(30))
    assert [f.pts for f in frames] == pytest.approx([i / 25.0 for i in range(30)], abs=1e-3)
    assert all(f.image.shape == (64, 96, 3) and f.image.dtype == np.uint8 for f in frames)


def test_video_frames_are_independent_buffers(clip: Path) -> None:
    source = VideoFileSource(clip)
    source.open()
    first = source.read()
    assert first is not None
    first.image[:] = 0  # a downstream stage drawing on its frame
    second = source.read()
    source.close()
    assert second is not None and read_frame_number(second.image) == 1


def test_realtime_video_is_paced_like_a_camera(tmp_path: Path) -> None:
    fps, count = 30.0, 12
    path = make_test_video(tmp_path / "paced.mp4", frames=count, fps=fps)
    source = VideoFileSource(path, realtime=True)
    source.open()
    arrivals: list[tuple[float, float]] = []
    start = time.perf_counter()
    for frame in read_all(source):
        assert frame.pts is not None
        arrivals.append((time.perf_counter() - start, frame.pts))
    source.close()

    assert source.is_live
    assert len(arrivals) == count
    # No frame arrives (noticeably) before its time on the timeline...
    assert all(wall >= pts - 0.015 for wall, pts in arrivals)
    # ...and the whole clip takes about its own duration, not the time it takes to decode.
    duration = (count - 1) / fps
    assert 0.9 * duration <= arrivals[-1][0] < duration + 1.5


def test_pacer_resyncs_after_a_stall_instead_of_bursting() -> None:
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    pacer = Pacer(resync_after_s=0.25, clock=lambda: now[0], sleep=sleep)
    pacer.wait_until(0.0)
    pacer.wait_until(0.1)
    assert sleeps == pytest.approx([0.1])
    now[0] += 2.0  # the consumer stalled for two seconds
    pacer.wait_until(0.2)  # overdue: returns at once and re-anchors the clock
    pacer.wait_until(0.3)
    assert sleeps == pytest.approx([0.1, 0.1])


def test_loop_restarts_and_keeps_the_timeline_increasing(tmp_path: Path) -> None:
    path = make_test_video(tmp_path / "short.mp4", frames=5, fps=25.0)
    source = VideoFileSource(path, loop=True)
    source.open()
    frames = read_all(source, limit=12)
    source.close()

    assert [read_frame_number(f.image) for f in frames] == [0, 1, 2, 3, 4] * 2 + [0, 1]
    assert [f.index for f in frames] == list(range(12))
    pts = [f.pts for f in frames]
    assert pts == pytest.approx([i / 25.0 for i in range(12)], abs=1e-3)


def test_missing_video_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "holiday.mp4"
    with pytest.raises(SourceError, match=r"holiday\.mp4"):
        VideoFileSource(missing).open()
    with pytest.raises(SourceError, match=r"holiday\.mp4"):
        open_source(str(missing), realtime=None, loop=False)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("random.mp4", np.random.default_rng(7).integers(0, 256, 20_000, dtype=np.uint8).tobytes()),
        ("empty.mp4", b""),
        ("notes.mp4", b"this is a text file, not a video\n"),
    ],
)
def test_unreadable_video_is_rejected_at_open(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    source = VideoFileSource(path)
    with pytest.raises(SourceError, match=re.escape(name)) as info:
        source.open()
    assert "\n" not in info.value.message


def test_file_without_video_stream_is_rejected(tmp_path: Path) -> None:
    path = make_audio_only_file(tmp_path / "voice.m4a")
    with pytest.raises(SourceError, match=r"voice\.m4a.*no video stream"):
        VideoFileSource(path).open()


def test_damaged_packets_are_skipped_and_decoding_continues(tmp_path: Path) -> None:
    path = make_test_video(tmp_path / "damaged.mp4", frames=40, codec="mpeg4")
    data = bytearray(path.read_bytes())
    for offset in range(len(data) // 4, len(data) // 2, 997):
        data[offset : offset + 200] = b"\xff" * 200
    path.write_bytes(bytes(data))

    source = VideoFileSource(path)
    source.open()
    numbers = [read_frame_number(f.image) for f in read_all(source)]
    source.close()

    assert source.bad_packets >= 1
    # Frames decoded from damaged data may show garbage, but the clip plays on to its last frame.
    assert numbers[:5] == [0, 1, 2, 3, 4]
    assert numbers[-1] == 39


def test_frames_lost_in_a_damaged_stretch_are_counted_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A .ts with garbage in the middle: the frames it loses are counted and a warning says so.
    FFmpeg resyncs silently, so the jump in time is the only trace."""
    path = make_test_video(tmp_path / "long.ts", frames=120)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + len(data) // 5] = bytes(len(data) // 5)  # a fifth of the file zeroed
    path.write_bytes(bytes(data))

    source = VideoFileSource(path)
    source.open()
    with caplog.at_level(logging.WARNING):
        numbers = [read_frame_number(f.image) for f in read_all(source)]
    source.close()
    lost = 120 - len(numbers)
    assert lost >= 12, lost  # the test needs a real gap to mean anything
    assert abs(source.frames_missing - lost) <= 3
    assert any("frames missing" in r.getMessage() for r in caplog.records)


def test_an_intact_file_reports_nothing_missing(tmp_path: Path) -> None:
    path = make_test_video(tmp_path / "fine.ts", frames=60)
    source = VideoFileSource(path)
    source.open()
    assert len(read_all(source)) == 60 and source.frames_missing == 0
    source.close()


def test_truncated_download_plays_what_is_there(tmp_path: Path) -> None:
    # Matroska needs no index at the end, so a cut-off download is still playable up to the cut.
    path = make_test_video(tmp_path / "full.mkv", frames=40)
    cut = tmp_path / "partial.mkv"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size * 6 // 10])

    source = VideoFileSource(cut)
    source.open()
    numbers = [read_frame_number(f.image) for f in read_all(source)]
    source.close()

    assert 5 < len(numbers) < 40
    assert numbers == list(range(len(numbers)))


# ----------------------------------------------------------------------------------------------- image


def write_png(path: Path, image: np.ndarray[Any, Any]) -> Path:
    ok, encoded = cv2.imencode(".png", image)
    assert ok
    encoded.tofile(path)
    return path


def test_image_source_delivers_the_image_once(tmp_path: Path) -> None:
    image = synthetic_frame(42, (96, 64))
    path = write_png(tmp_path / "face.png", image)
    source = ImageSource(path)
    source.open()
    frames = read_all(source)
    source.close()

    assert len(frames) == 1
    assert np.array_equal(frames[0].image, image)
    assert source.size == (96, 64) and not source.is_live


def test_image_source_with_non_ascii_path(tmp_path: Path) -> None:
    path = write_png(tmp_path / "gesicht-äöü-顔.png", synthetic_frame(7, (96, 64)))
    source = open_source(str(path), realtime=None, loop=False)
    assert isinstance(source, ImageSource)
    source.open()
    frame = source.read()
    assert frame is not None and read_frame_number(frame.image) == 7


def test_repeated_image_is_paced_and_each_frame_is_its_own_copy(tmp_path: Path) -> None:
    path = write_png(tmp_path / "still.png", synthetic_frame(3, (96, 64)))
    source = ImageSource(path, repeat=True, fps=50.0)
    source.open()
    start = time.perf_counter()
    frames = [source.read() for _ in range(6)]
    elapsed = time.perf_counter() - start
    source.close()

    assert all(f is not None for f in frames)
    assert source.is_live
    assert elapsed >= 0.9 * 5 / 50.0  # six frames at 50 fps span five intervals
    assert [f.index for f in frames if f] == list(range(6))
    first, second = frames[0], frames[1]
    assert first is not None and second is not None
    stamp_frame_number(first.image, 1000)  # drawing on one frame...
    assert read_frame_number(second.image) == 3  # ...does not change the next


def test_file_that_is_not_an_image_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "portrait.png"
    path.write_text("not really a png")
    with pytest.raises(SourceError, match=r"portrait\.png"):
        ImageSource(path).open()


# --------------------------------------------------------------------------------------------- routing


def test_open_source_routes_by_spec(tmp_path: Path, clip: Path) -> None:
    image = write_png(tmp_path / "a.JPG.png", synthetic_frame(1, (96, 64)))
    assert isinstance(open_source("0", realtime=None, loop=False), CameraSource)
    assert isinstance(open_source(str(image), realtime=None, loop=False), ImageSource)
    video = open_source(str(clip), realtime=True, loop=True)
    assert isinstance(video, VideoFileSource) and video.realtime and video.loop
    live_image = open_source(str(image), realtime=True, loop=False)
    assert isinstance(live_image, ImageSource) and live_image.repeat


# ---------------------------------------------------------------------------------------------- camera


class FakeCamera:
    """A camera that delivers `frames_before_outage` frames, then fails `outage_reads` reads (counted
    across reopenings, like a device that was unplugged), then delivers again."""

    def __init__(self, frames_before_outage: int, outage_reads: float = math.inf) -> None:
        self.frames_before_outage = frames_before_outage
        self.outage_reads = outage_reads
        self.delivered = 0
        self.failed_reads = 0
        self.opens = 0
        self.requests: list[tuple[int, float]] = []

    def factory(self, index: int, api: int) -> FakeCapture:
        self.opens += 1
        return FakeCapture(self)


class FakeCapture:
    def __init__(self, camera: FakeCamera) -> None:
        self._camera = camera

    def isOpened(self) -> bool:
        return True

    def read(self) -> tuple[bool, Any]:
        cam = self._camera
        if cam.delivered >= cam.frames_before_outage and cam.failed_reads < cam.outage_reads:
            cam.failed_reads += 1
            return False, None
        image = synthetic_frame(cam.delivered, (96, 64))  # the camera's real mode, whatever was asked
        cam.delivered += 1
        return True, image

    def set(self, propId: int, value: float) -> bool:
        self._camera.requests.append((propId, value))
        return True

    def get(self, propId: int) -> float:
        return 30.0 if propId == cv2.CAP_PROP_FPS else 0.0

    def release(self) -> None:
        """Nothing to free."""


def test_camera_asks_for_mjpg_first_and_reports_what_it_gets() -> None:
    camera = FakeCamera(frames_before_outage=100)
    source = CameraSource(0, width=1280, height=720, fps=60, capture_factory=camera.factory)
    source.open()
    frame = source.read()
    source.close()

    mjpg = float(cv2.VideoWriter.fourcc(*"MJPG"))
    assert camera.requests[0] == (cv2.CAP_PROP_FOURCC, mjpg)
    assert set(camera.requests[1:]) == {
        (cv2.CAP_PROP_FRAME_WIDTH, 1280),
        (cv2.CAP_PROP_FRAME_HEIGHT, 720),
        (cv2.CAP_PROP_FPS, 60),
    }
    assert source.size == (96, 64)  # what the camera delivered, not what was asked
    assert source.fps == 30.0
    assert source.is_live
    assert frame is not None and read_frame_number(frame.image) == 0


def quick_camera(camera: FakeCamera, reconnect_s: float = 0.3, **kwargs: Any) -> CameraSource:
    return CameraSource(
        0, capture_factory=camera.factory, reconnect_s=reconnect_s, retry_delay_s=0.01,
        first_frame_s=0.05, **kwargs,
    )  # fmt: skip


def test_camera_vanishing_mid_stream_raises_after_looking_for_it() -> None:
    camera = FakeCamera(frames_before_outage=5)
    source = quick_camera(camera)
    said: list[str] = []
    source.notify = lambda level, message: said.append(f"{level}: {message}")
    source.open()
    delivered = [source.read() for _ in range(5)]
    t0 = time.perf_counter()
    with pytest.raises(SourceError, match=r"disconnected: not back after 0\.3 s") as info:
        source.read()
    source.close()

    assert [read_frame_number(f.image) for f in delivered if f] == [0, 1, 2, 3, 4]
    assert 0.3 <= time.perf_counter() - t0 < 1.5  # looked for it for its whole budget, then gave up
    assert camera.opens > 2 and info.value.hint
    assert (
        said and said[0].startswith("warning:") and "looking for it" in said[0]
    )  # the user is told while it looks, not only at the end


class ReplugCamera:
    """A camera unplugged for `away_s` seconds from its 3rd frame on; when back, each newly opened
    capture gives `warmup_reads` empty reads before its first picture (as real webcams do)."""

    def __init__(self, away_s: float, warmup_reads: int = 3) -> None:
        self.away_s = away_s
        self.warmup_reads = warmup_reads
        self.unplugged_at: float | None = None
        self.delivered = 0
        self.opens = 0

    def factory(self, index: int, api: int) -> Any:
        self.opens += 1
        camera = self
        back = self.unplugged_at is None or time.monotonic() >= self.unplugged_at + self.away_s
        empty_reads = [self.warmup_reads if self.opens > 1 else 0]

        class Capture(FakeCapture):
            def isOpened(self) -> bool:
                return back

            def read(self) -> tuple[bool, Any]:
                if camera.delivered >= 3 and camera.unplugged_at is None:
                    camera.unplugged_at = time.monotonic()
                if camera.unplugged_at is not None and time.monotonic() < camera.unplugged_at + camera.away_s:
                    return False, None
                if empty_reads[0] > 0:
                    empty_reads[0] -= 1
                    return False, None
                image = synthetic_frame(camera.delivered, (96, 64))
                camera.delivered += 1
                return True, image

        return Capture(FakeCamera(0))


def test_a_camera_held_by_another_app_is_given_up_within_its_budget() -> None:
    """A camera that opens but sends nothing is given up within its reconnect budget: the warm-up
    wait of each attempt counts against it."""

    class OpensButSendsNothing(FakeCamera):
        def factory(self, index: int, api: int) -> FakeCapture:
            self.opens += 1
            cap = FakeCapture(self)
            if self.opens > 1:
                cap.read = lambda: (False, None)  # type: ignore[method-assign]
            return cap

    camera = OpensButSendsNothing(frames_before_outage=1)
    source = CameraSource(
        0, capture_factory=camera.factory, reconnect_s=1.0, retry_delay_s=0.05, first_frame_s=2.0
    )
    source.open()
    source.read()
    t0 = time.perf_counter()
    with pytest.raises(SourceError, match="disconnected"):
        source.read()
    assert time.perf_counter() - t0 < 1.6
    source.close()


def test_a_replugged_camera_that_needs_a_warm_up_is_picked_up_again() -> None:
    """A camera that is back but needs a few empty reads is waited for on each reopen, within a
    budget long enough for a real unplug, and its return is said as good news."""
    camera = ReplugCamera(away_s=0.6)
    source = CameraSource(0, capture_factory=camera.factory, reconnect_s=5.0, retry_delay_s=0.05)
    said: list[str] = []
    source.notify = lambda level, message: said.append(f"{level}: {message}")
    source.open()
    numbers = [read_frame_number(f.image) for f in (source.read() for _ in range(6)) if f]
    source.close()
    assert numbers == [0, 1, 2, 3, 4, 5]
    assert source.reconnects == 1 and camera.opens > 2
    assert said[-1] == "info: Camera 0 is back."  # good news, not a warning


def test_camera_recovers_from_a_short_dropout() -> None:
    camera = FakeCamera(frames_before_outage=3, outage_reads=2)
    source = quick_camera(camera)
    source.open()
    numbers = [read_frame_number(f.image) for f in (source.read() for _ in range(6)) if f]
    source.close()

    assert numbers == [0, 1, 2, 3, 4, 5]
    assert source.reconnects == 1


def test_missing_camera_lists_the_cameras_that_exist() -> None:
    # This machine has no cameras, so the real OpenCV capture fails to open index 5.
    with pytest.raises(SourceError, match=r"Camera 5 could not be opened\.") as info:
        CameraSource(5).open()
    assert "Cameras found: none" in info.value.hint
    assert "python main.py doctor" in info.value.hint

    with pytest.raises(SourceError) as info:
        CameraSource(5, list_cameras=lambda: [0, 1]).open()
    assert info.value.hint.startswith(f"Cameras found: 0, 1 — run `{app_command('doctor')}` to list them.")
    assert camera_access_hint() in info.value.hint  # e.g. macOS: allow camera access in Privacy


class StuckCapture:
    """A capture whose second read blocks in the 'driver' until `wake` is set (V4L2 waits up to 10 s
    for a frame that does not come); records whether release() ran during a read."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.in_read = threading.Event()
        self.reads = 0
        self.released = 0
        self.released_while_reading = False
        self._reading = False

    def isOpened(self) -> bool:
        return True

    def read(self) -> tuple[bool, Any]:
        self.reads += 1
        if self.reads > 1:
            self._reading = True
            self.in_read.set()
            self.wake.wait(5)
            self._reading = False
        return True, synthetic_frame(self.reads, (96, 64))

    def set(self, propId: int, value: float) -> bool:
        return True

    def get(self, propId: int) -> float:
        return 30.0

    def release(self) -> None:
        self.released += 1
        self.released_while_reading |= self._reading


def test_close_during_a_stuck_read_leaves_the_release_to_the_reader() -> None:
    cap = StuckCapture()
    source = CameraSource(0, capture_factory=lambda i, api: cap)
    source.open()
    assert source.read() is not None  # the picture read by open()
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(source.read()))
    reader.start()
    assert cap.in_read.wait(2)
    t0 = time.perf_counter()
    source.close()  # from another thread, while the read is in the driver
    assert time.perf_counter() - t0 < 0.5 and cap.released == 0  # not under the running read
    cap.wake.set()
    reader.join(2)
    assert result == [None]  # closed: the frame that came late is not handed out
    assert cap.released == 1 and not cap.released_while_reading
    assert source.read() is None


def test_close_ends_a_reconnect_wait_at_once_and_leaks_no_device() -> None:
    camera = FakeCamera(frames_before_outage=1)
    source = CameraSource(0, capture_factory=camera.factory, reconnect_s=30.0, retry_delay_s=10.0)
    source.open()
    source.read()
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(source.read()))
    reader.start()
    time.sleep(0.2)  # the read failed; the source now waits before reconnecting
    t0 = time.perf_counter()
    source.close()
    reader.join(2)
    assert not reader.is_alive() and time.perf_counter() - t0 < 1.0
    assert result == [None] and camera.opens == 1  # no reconnect after close()


def test_a_different_camera_at_the_same_index_is_not_taken_for_ours() -> None:
    class Swapped(FakeCamera):
        def factory(self, index: int, api: int) -> FakeCapture:
            self.opens += 1
            cap = FakeCapture(self)
            if self.opens > 1:  # after the unplug, index 0 is the laptop's 640x480 camera
                cap.read = lambda: (True, synthetic_frame(0, (640, 480)))  # type: ignore[method-assign]
            return cap

    camera = Swapped(frames_before_outage=2)
    source = quick_camera(camera)
    source.open()
    source.read()
    source.read()
    with pytest.raises(SourceError, match="disconnected"):
        source.read()
    assert source.reconnects == 0


def test_grey_and_bgra_pictures_become_bgr() -> None:
    for picture in (np.full((64, 96), 77, np.uint8), np.full((64, 96, 4), 77, np.uint8)):
        cap = StuckCapture()
        cap.read = lambda p=picture: (True, p)  # type: ignore[method-assign]
        source = CameraSource(0, capture_factory=lambda i, api, c=cap: c)
        source.open()
        frame = source.read()
        source.close()
        assert frame is not None and frame.image.shape == (64, 96, 3) and (frame.image == 77).all()


def test_a_slow_starting_camera_gets_a_moment_for_its_first_picture() -> None:
    camera = FakeCamera(frames_before_outage=0, outage_reads=3)  # three empty reads, then pictures
    source = CameraSource(0, capture_factory=camera.factory, first_frame_s=2.0)
    source.open()
    frame = source.read()
    source.close()
    assert frame is not None and camera.opens == 1
    with pytest.raises(SourceError, match="sent no picture"):
        CameraSource(0, capture_factory=FakeCamera(0).factory, first_frame_s=0.2).open()


def test_a_camera_whose_picture_cannot_be_used_is_said_so_and_released() -> None:
    """A camera handing out a format FaceCast cannot read (raw 2-channel YUYV): the message says
    so, and the device is let go at once (held, no other app could use it)."""
    released: list[bool] = []

    class RawYuyv(FakeCapture):
        def read(self) -> tuple[bool, Any]:
            return True, np.zeros((48, 64, 2), np.uint8)

        def release(self) -> None:
            released.append(True)

    source = CameraSource(0, capture_factory=lambda i, api: RawYuyv(FakeCamera(0)), first_frame_s=0.2)
    with pytest.raises(SourceError, match="2 channels"):
        source.open()
    assert released == [True]


@pytest.mark.parametrize(
    ("backend", "order"),
    [
        (
            cv2.CAP_V4L2,
            [cv2.CAP_PROP_FOURCC, cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT, cv2.CAP_PROP_FPS],
        ),
        # DirectShow rebuilds its graph (YUY2 before MJPG) on a size or rate change: MJPG goes last.
        (
            cv2.CAP_DSHOW,
            [cv2.CAP_PROP_FPS, cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT, cv2.CAP_PROP_FOURCC],
        ),
    ],
)
def test_camera_requests_come_in_the_order_the_backend_keeps(backend: int, order: list[int]) -> None:
    camera = FakeCamera(frames_before_outage=10)
    source = CameraSource(0, backend=backend, width=1280, height=720, fps=30, capture_factory=camera.factory)
    source.open()
    source.close()
    assert [prop for prop, _ in camera.requests] == order


# ---- files as players show them, looped by every container, paced without freezes ---------------


def test_a_phone_video_tagged_as_rotated_comes_out_upright(tmp_path: Path) -> None:
    """Portrait phone videos are stored sideways with a display-rotation tag players obey; the
    source obeys it too, so the camera and recordings show them upright."""
    path = make_test_video(tmp_path / "phone.mp4", frames=5, size=(96, 64), rotation=-90)
    source = VideoFileSource(path)
    source.open()
    frames = read_all(source)
    source.close()
    assert source.size == (64, 96)  # as displayed: portrait
    assert [f.image.shape for f in frames] == [(96, 64, 3)] * 5
    # The tag says: turn the stored picture 90 degrees clockwise to show it. Turned back, it is
    # the stored picture again.
    assert [read_frame_number(np.ascontiguousarray(np.rot90(f.image, 1))) for f in frames] == list(range(5))


@pytest.mark.parametrize("name", ["clip.ts", "clip.h264"])
def test_looping_starts_every_pass_at_the_first_frame(tmp_path: Path, name: str) -> None:
    """Every pass of a looped raw H.264 or MPEG-TS file starts at its first frame: a seek to the
    start fails on raw H.264 ('Operation not permitted') and lands after the first keyframe group
    in MPEG-TS (25 frames here)."""
    path = tmp_path / name
    with av.open(str(path), mode="w") as container:  # x264's default preset: B-frames, as cameras
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        stream.options = {"g": "25", "keyint_min": "25", "sc_threshold": "0", "crf": "18"}
        for n in range(75):
            av_frame = av.VideoFrame.from_ndarray(synthetic_frame(n), format="bgr24")
            av_frame.pts = n
            container.mux(stream.encode(av_frame))
        container.mux(stream.encode(None))
    source = VideoFileSource(path, loop=True)
    source.open()
    numbers = [read_frame_number(f.image) for f in (source.read() for _ in range(225)) if f]
    source.close()
    assert numbers == list(range(75)) * 3


def test_a_jump_in_a_files_time_does_not_freeze_real_time_playback(tmp_path: Path) -> None:
    """A 5 s jump in the timestamps plays on at the frame rate, with no 5 s freeze."""
    path = tmp_path / "gap.mp4"
    images = [synthetic_frame(n) for n in range(20)]
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        stream.bit_rate = 2_000_000
        for n, image in enumerate(images):
            av_frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            av_frame.pts = n + (125 if n >= 10 else 0)  # 5 s (125 frames at 25 fps) missing
            container.mux(stream.encode(av_frame))
        container.mux(stream.encode(None))
    source = VideoFileSource(path, realtime=True)
    source.open()
    t0 = time.perf_counter()
    frames = read_all(source)
    elapsed = time.perf_counter() - t0
    source.close()
    assert len(frames) == 20 and elapsed < 1.5  # 20 frames at 25 fps, no 5 s hold
    assert 110 <= source.frames_missing <= 130  # counted at the file's frame rate, not its average


def test_a_slow_video_is_paced_at_its_own_rate(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A timelapse under 2 fps plays at its own rate: its frame gaps are not taken for jumps in
    time (which would play it as fast as it decodes, with a warning per frame)."""
    path = make_test_video(tmp_path / "timelapse.mp4", frames=4, fps=1.0)
    source = VideoFileSource(path, realtime=True)
    source.open()
    t0 = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        frames = read_all(source)
    elapsed = time.perf_counter() - t0
    source.close()
    assert len(frames) == 4 and 2.8 <= elapsed < 4.0  # frames at 0, 1, 2, 3 s
    assert source.frames_missing == 0 and not any("jumps" in r.getMessage() for r in caplog.records)


def test_stopping_ends_a_real_time_wait_at_once(tmp_path: Path) -> None:
    path = make_test_video(tmp_path / "slow.mp4", frames=3, fps=2.5)  # one frame every 0.4 s
    source = VideoFileSource(path, realtime=True)
    source.open()
    source.read()
    done: list[float] = []
    reader = threading.Thread(target=lambda: (source.read(), done.append(time.perf_counter())))
    t0 = time.perf_counter()
    reader.start()
    time.sleep(0.1)
    assert not done  # the read is waiting for its frame's time
    source.interrupt()
    reader.join(2)
    assert done and done[0] - t0 < 0.3  # ended by the interrupt, not by the frame falling due
    source.close()
    # Opened again (the engine after the CLI's check), it paces again.
    source.open()
    t1 = time.perf_counter()
    assert len(read_all(source)) == 3 and time.perf_counter() - t1 >= 0.7
    source.close()


def test_a_file_address_is_the_file(tmp_path: Path) -> None:
    """file:// paths (copied from a browser or a file manager) are files, not network streams."""
    path = make_test_video(tmp_path / "my clip.mp4", frames=3)
    source = open_source(path.as_uri(), realtime=None, loop=False)
    assert isinstance(source, VideoFileSource) and source.path == path


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rtsp://192.0.2.1/stream", "Network streams are not read by the CPU decoder"),
        ("99999999999", "cannot exist"),
    ],
)
def test_inputs_that_cannot_work_say_why(spec: str, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        open_source(spec, realtime=None, loop=False)


def test_a_v4l2_device_node_is_that_camera() -> None:
    """`--input /dev/video0` (ffmpeg's and OBS's spelling) is that camera, not a missing video file."""
    source = open_source("/dev/video2", realtime=None, loop=False)
    assert isinstance(source, CameraSource) and source.settings.index == 2


def test_a_device_or_pipe_given_as_a_video_file_is_named_as_such(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this platform")
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match="not a regular file") as info:
        open_source(str(fifo), realtime=None, loop=False).open()
    assert "--input 0" in info.value.hint


@pytest.mark.parametrize("suffix", [".jfif", ".jpe", ".ppm"])
def test_other_still_image_files_repeat_like_a_png(tmp_path: Path, suffix: str) -> None:
    """A .jfif (how Windows and browsers save JPEGs) is a still image that repeats, not a one-frame
    video."""
    ok, data = cv2.imencode(".ppm" if suffix == ".ppm" else ".jpg", synthetic_frame(0))
    assert ok
    path = tmp_path / f"photo{suffix}"
    path.write_bytes(data.tobytes())
    source = open_source(str(path), realtime=True, loop=False)
    assert isinstance(source, ImageSource)
    source.open()
    assert all(source.read() is not None for _ in range(3))
    source.close()


def test_a_picture_size_change_mid_file_keeps_its_shape(tmp_path: Path) -> None:
    """A 96x64 (3:2) file continuing at 160x120 (4:3) keeps the later part's shape, letterboxed
    into 96x64 rather than squeezed."""
    parts = []
    for n, size in ((0, (96, 64)), (1, (160, 120))):
        part = tmp_path / f"part{n}.h264"
        with av.open(str(part), mode="w", format="h264") as container:
            stream = container.add_stream("libx264", rate=25)
            stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
            for i in range(5):
                frame = av.VideoFrame.from_ndarray(
                    np.full((size[1], size[0], 3), 200, np.uint8), format="bgr24"
                )
                frame.pts = i
                container.mux(stream.encode(frame))
            container.mux(stream.encode(None))
        parts.append(part.read_bytes())
    joined = tmp_path / "joined.h264"
    joined.write_bytes(b"".join(parts))
    source = VideoFileSource(joined)
    source.open()
    frames = read_all(source)
    source.close()
    assert source.size == (96, 64) and {f.image.shape for f in frames} == {(64, 96, 3)}
    later = frames[-1].image
    # 160x120 into 96x64 keeps 4:3: 85x64, with black bars left and right.
    assert later[:, :3].max() < 20 and later[:, -3:].max() < 20 and later[:, 40:56].min() > 150


# ---------------------------------------------------------------------------------------------- router


def test_the_input_router_opens_each_kind_of_input_on_the_cpu(tmp_path: Path, clip: Path) -> None:
    from realtime.io.inputs import open_input
    from realtime.io.test_pattern import TestPatternSource

    pattern, note = open_input("", realtime=True, loop=True, width=320, height=240, fps=15.0, kind="pattern")
    assert isinstance(pattern, TestPatternSource) and pattern.is_live and note == ""
    camera, _ = open_input("2", realtime=True, loop=True, width=640, height=480, fps=30.0, kind="camera")
    assert isinstance(camera, CameraSource) and camera.settings.index == 2 and camera.settings.width == 640
    video, _ = open_input(str(tmp_path / "not-yet.mp4"), realtime=True, loop=True, kind="video")
    assert isinstance(video, VideoFileSource) and video.realtime and video.loop  # checked at open()
    image = tmp_path / "still.png"
    cv2.imwrite(str(image), synthetic_frame(0, (96, 64)))
    still, _ = open_input(str(image), realtime=False, loop=False)  # the command line's reading
    assert isinstance(still, ImageSource) and not still.is_live
    file, _ = open_input(str(clip), realtime=None, loop=False, decoder="auto", provider="cpu")
    assert isinstance(file, VideoFileSource) and not file.is_live


def test_the_input_router_refuses_a_stream_as_a_video_file_and_an_unresolved_provider() -> None:
    from realtime.io.inputs import open_input

    with pytest.raises(SourceError, match="Network streams are not read by the CPU decoder"):
        open_input("rtsp://camera.local/stream", realtime=True, loop=True, provider="cuda", kind="video")
    with pytest.raises(ValueError, match="auto"):
        open_input("0", realtime=True, loop=False, provider="auto")


def test_the_input_router_asks_the_nvdec_side_only_where_the_models_run_on_the_gpu(
    monkeypatch: pytest.MonkeyPatch, clip: Path
) -> None:
    from realtime.io import nvdec
    from realtime.io.inputs import open_input

    asked: list[tuple[str, object]] = []

    def nvdec_side(spec: str, **kwargs: object) -> tuple[object, str]:
        asked.append((spec, kwargs["decoder"]))
        return object(), "decoding with NVDEC"

    monkeypatch.setattr(nvdec, "open_nvdec_input", nvdec_side)
    assert open_input(str(clip), realtime=None, loop=False, provider="cuda")[1] == "decoding with NVDEC"
    open_input(str(clip), realtime=None, loop=False, provider="tensorrt", decoder="cpu")
    open_input(str(clip), realtime=None, loop=False, provider="cpu", decoder="nvdec")  # asked for
    source, _ = open_input(str(clip), realtime=None, loop=False, provider="cpu")
    assert isinstance(source, VideoFileSource)
    assert asked == [(str(clip), "auto"), (str(clip), "cpu"), (str(clip), "nvdec")]
