"""Frame sinks: what reaches the virtual camera or the output file, and what is left when writing fails."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
import types
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest
import pyvirtualcam.camera

from realtime.core.errors import SinkError, VirtualCameraUnavailableError
from realtime.core.frames import VideoFrame
from realtime.io import file_sinks
from realtime.io.file_sinks import ImageFileSink, VideoFileSink
from realtime.io.frame_fit import letterbox_into
from realtime.io.outputs import open_output
from realtime.io.sinks import NullSink
from realtime.io.vcam_sink import VirtualCameraSink, virtual_camera_fix
from realtime.io.video_file import VideoFileSource
from tests.fixtures_media import read_frame_number, synthetic_frame
from tests.paths import REPO_ROOT
from tests.small_disk import pages_for, small_disk
from tests.vcam_recorder import OpenRequest, RecordingBackendHandle

COLOUR = (30, 160, 220)  # BGR


def solid(width: int, height: int, index: int = 0, colour: tuple[int, int, int] = COLOUR) -> VideoFrame:
    image = np.empty((height, width, 3), np.uint8)
    image[:] = colour
    return VideoFrame(image, index, time.perf_counter())


def numbered(index: int, size: tuple[int, int] = (96, 64), *, live: bool = False) -> VideoFrame:
    """Frame `index` of a 25 fps file (a media time), or of a live source (none: its capture clock)."""
    return VideoFrame(
        synthetic_frame(index, size), index, time.perf_counter(), None if live else index / 25.0
    )


def decoded_numbers(path: Path) -> list[int]:
    source = VideoFileSource(path)
    source.open()
    numbers = []
    while (frame := source.read()) is not None:
        numbers.append(read_frame_number(frame.image))
    source.close()
    return numbers


# ------------------------------------------------------------------------------------------ letterbox


def test_letterbox_keeps_aspect_with_black_bars_left_and_right() -> None:
    src = solid(64, 48).image  # 4:3
    dst = np.full((90, 160, 3), 77, np.uint8)  # 16:9, dirty on purpose
    letterbox_into(src, dst)
    # 4:3 scaled to 90 rows is 120 columns, centred: 20 black columns each side.
    assert (dst[:, :20] == 0).all() and (dst[:, 140:] == 0).all()
    assert (dst[:, 20:140] == COLOUR).all()


def test_letterbox_puts_bars_above_and_below_a_wide_picture() -> None:
    dst = np.full((90, 160, 3), 77, np.uint8)
    letterbox_into(solid(320, 80).image, dst)  # 4:1, wider than 16:9
    # Scaled by half to 160x40, centred: 25 black rows above and below.
    assert (dst[:25] == 0).all() and (dst[65:] == 0).all()
    assert (dst[25:65] == COLOUR).all()


def test_letterbox_bars_stay_black_when_the_picture_changes_shape() -> None:
    dst = np.zeros((90, 160, 3), np.uint8)
    letterbox_into(solid(160, 45).image, dst)  # fills the middle rows edge to edge
    letterbox_into(solid(64, 48, colour=(0, 0, 255)).image, dst)  # now 4:3: bars at the sides
    assert (dst[:, :20] == 0).all() and (dst[:, 140:] == 0).all()
    assert (dst[:, 20:140] == (0, 0, 255)).all()


def test_letterbox_same_size_is_an_exact_copy() -> None:
    src = synthetic_frame(5, (96, 64))
    dst = np.zeros_like(src)
    letterbox_into(src, dst)
    assert np.array_equal(src, dst)


# ------------------------------------------------------------------------------------- virtual camera


def test_vcam_sends_letterboxed_frames_at_a_fixed_size_and_rate(
    vcam_recorder: RecordingBackendHandle,
) -> None:
    sink = VirtualCameraSink(width=160, height=90, fps=50, backend=vcam_recorder.name)
    sink.open(64, 48, 25.0)  # the source's size and rate lose to the configured ones
    start = time.perf_counter()
    for i in range(6):
        sink.send(solid(64, 48, i))
    elapsed = time.perf_counter() - start
    sink.close()

    assert vcam_recorder.opens == [OpenRequest(160, 90, 50.0, "BGR", None)]
    assert sink.frames_sent == 6 and len(vcam_recorder.frames) == 6
    for image in vcam_recorder.frames:
        assert image.shape == (90, 160, 3)
        assert (image[:, :20] == 0).all() and (image[:, 140:] == 0).all()
        assert (image[:, 20:140] == COLOUR).all()
    assert elapsed >= 0.8 * 6 / 50  # paced: each send waits for the next frame slot
    assert vcam_recorder.closes == 1


def test_vcam_defaults_to_the_source_size_and_rate(vcam_recorder: RecordingBackendHandle) -> None:
    sink = VirtualCameraSink(backend=vcam_recorder.name, pace=False)
    sink.open(96, 64, 25.0)
    frame = numbered(9)
    sink.send(frame)
    sink.close()
    assert vcam_recorder.opens[0] == OpenRequest(96, 64, 25.0, "BGR", None)
    assert np.array_equal(vcam_recorder.frames[0], frame.image)  # same size: passed through untouched


def test_vcam_rounds_odd_sizes_to_even(vcam_recorder: RecordingBackendHandle) -> None:
    sink = VirtualCameraSink(backend=vcam_recorder.name, pace=False)
    sink.open(97, 63, 30.0)
    sink.send(solid(97, 63))
    sink.close()
    assert (vcam_recorder.opens[0].width, vcam_recorder.opens[0].height) == (98, 64)
    assert vcam_recorder.frames[0].shape == (64, 98, 3)


def test_vcam_delivers_every_frame_in_order(vcam_recorder: RecordingBackendHandle) -> None:
    sink = VirtualCameraSink(backend=vcam_recorder.name, pace=False)
    sink.open(96, 64, 30.0)
    for i in range(3):
        sink.send(numbered(i))
    sink.close()
    assert [read_frame_number(f) for f in vcam_recorder.frames] == [0, 1, 2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fix text checked here is Linux's")
def test_vcam_without_driver_explains_the_fix() -> None:
    # No v4l2loopback here, so the real pyvirtualcam.Camera raises.
    with pytest.raises(VirtualCameraUnavailableError) as info:
        VirtualCameraSink(pace=False).open(64, 48, 30.0)
    assert "modprobe v4l2loopback" in info.value.message
    assert "--output window" in info.value.user_message()


def test_vcam_error_text_picks_the_matching_fix() -> None:
    def busy(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("'v4l2loopback' backend: Device /dev/video2 is already in use.")

    with pytest.raises(VirtualCameraUnavailableError, match="already sending"):
        VirtualCameraSink(camera_factory=busy).open(64, 48, 30.0)


def test_unknown_vcam_backend_is_a_sink_error() -> None:
    with pytest.raises(SinkError, match="Unknown virtual camera backend 'nope'"):
        VirtualCameraSink(backend="nope").open(64, 48, 30.0)


def test_a_backend_of_another_system_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyvirtualcam.camera, "BACKENDS", {"v4l2loopback": object()})
    with pytest.raises(
        SinkError, match=r"'unitycapture' is not available on this system \(it is for Windows\)"
    ) as err:
        VirtualCameraSink(backend="unitycapture").open(64, 48, 30.0)
    assert "Installed backends: v4l2loopback" in err.value.user_message()


@pytest.mark.parametrize(
    ("platform", "error_text", "expected"),
    [
        ("linux", "No v4l2 loopback device found at /dev/video[0-99].", "v4l2loopback-dkms"),
        (
            "linux",
            "Could not access /dev/video3 due to missing permissions. Did you add your user to the "
            "'video' group?",
            "usermod -a -G video",
        ),
        ("linux", "Device /dev/video0 is not a video output device.", "v4l2-ctl --list-devices"),
        ("win32", "'obs' backend: OBS Virtual Camera device not found! Did you install OBS?", "OBS Studio"),
        ("win32", "virtual camera output could not be started", "stop 'Virtual Camera' in OBS"),
        ("darwin", "OBS Virtual Camera is not installed in your system.", "system extension"),
    ],
)
def test_virtual_camera_fix_per_platform(platform: str, error_text: str, expected: str) -> None:
    assert expected in virtual_camera_fix(platform, error_text)


def test_a_loopback_device_taken_by_another_program_is_not_called_a_missing_module() -> None:
    """pyvirtualcam says "no device found" when every device is busy: the fix said to run modprobe,
    which does nothing when the module is loaded."""
    text = "'v4l2loopback' backend: No v4l2 loopback device found at /dev/video[0-99]. Did you run modprobe?"
    assert "v4l2loopback-dkms" in virtual_camera_fix("linux", text, loopback_devices=0)
    busy = virtual_camera_fix("linux", text, loopback_devices=1)
    assert "another program is sending" in busy and "devices=2" in busy and "apt install" not in busy


@pytest.mark.parametrize("text", ["virtual camera output could not be started", "Couldn't start stream"])
def test_macos_says_to_stop_obss_own_virtual_camera_when_it_holds_the_device(text: str) -> None:
    fix = virtual_camera_fix("darwin", text)
    assert "stop it in OBS" in fix and "Install OBS" not in fix


# ------------------------------------------------------------------------------------------ video file


def test_video_file_round_trip_keeps_every_frame(tmp_path: Path) -> None:
    out = tmp_path / "result.mp4"
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    for i in range(20):
        sink.send(numbered(i))
    assert not out.exists()  # nothing under the user's name until the file is complete
    sink.close()

    assert decoded_numbers(out) == list(range(20))
    assert [p.name for p in tmp_path.iterdir()] == ["result.mp4"]  # the temporary file is gone


def test_dropped_frames_leave_gaps_in_time_instead_of_speeding_up(tmp_path: Path) -> None:
    out = tmp_path / "gappy.mp4"
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    indices = [10, 11, 12, 15, 16]  # the engine dropped 13 and 14; indices need not start at 0
    for i in indices:
        sink.send(numbered(i))
    sink.close()

    source = VideoFileSource(out)
    source.open()
    frames = []
    while (frame := source.read()) is not None:
        frames.append(frame)
    source.close()
    assert [read_frame_number(f.image) for f in frames] == indices
    assert [f.pts for f in frames] == pytest.approx([0.0, 0.04, 0.08, 0.2, 0.24], abs=1e-3)


def test_video_file_with_odd_size_is_padded_not_scaled(tmp_path: Path) -> None:
    out = tmp_path / "odd.mp4"
    sink = VideoFileSink(out)
    sink.open(97, 65, 25.0)
    for i in range(5):
        sink.send(numbered(i, (97, 65)))
    sink.close()

    source = VideoFileSource(out)
    source.open()
    assert source.size == (98, 66)
    source.close()
    assert decoded_numbers(out) == list(range(5))


def test_abort_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "clip.mp4"
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    for i in range(5):
        sink.send(numbered(i))
    sink.abort()
    assert list(tmp_path.iterdir()) == []


def test_closing_without_frames_writes_no_file(tmp_path: Path) -> None:
    sink = VideoFileSink(tmp_path / "never.mp4")
    sink.open(96, 64, 25.0)
    sink.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sink_type", [VideoFileSink, ImageFileSink])
def test_unwritable_output_path_fails_at_open(tmp_path: Path, sink_type: type) -> None:
    # Tests run as root, which ignores permissions, so make the parent a regular file instead.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    suffix = ".mp4" if sink_type is VideoFileSink else ".png"
    target = blocker / f"out{suffix}"
    with pytest.raises(SinkError, match="not-a-folder"):
        sink_type(target).open(96, 64, 25.0)


def test_unknown_video_extension_fails_at_open(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match=r"result\.xyz"):
        VideoFileSink(tmp_path / "result.xyz").open(96, 64, 25.0)
    assert list(tmp_path.iterdir()) == []


class _DiskFullContainer:
    """Wraps a real output container; writes of packets fail like a full disk after `room` of them."""

    def __init__(self, container: Any, room: int = 0) -> None:
        self._container = container
        self._room = room

    def add_stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._container.add_stream(*args, **kwargs)

    def mux(self, packets: Any) -> None:
        if packets and self._room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= len(packets)
        self._container.mux(packets)

    def close(self) -> None:
        self._container.close()


def test_disk_full_while_writing_reports_it_and_removes_the_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = av.open
    monkeypatch.setattr(file_sinks.av, "open", lambda *a, **kw: _DiskFullContainer(real_open(*a, **kw)))
    out = tmp_path / "long.mp4"
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    with pytest.raises(SinkError, match="Disk full") as info:
        for i in range(40):
            sink.send(numbered(i))
        sink.close()
    assert "long.mp4" in info.value.message
    assert list(tmp_path.iterdir()) == []  # the partial file is gone without any further call
    sink.abort()  # the engine aborts the sink after a SinkError; that must be harmless
    assert list(tmp_path.iterdir()) == []


def test_disk_full_keeps_what_was_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk used to delete a whole recording (an hour of a stream) on purpose."""
    real_open = av.open
    monkeypatch.setattr(
        file_sinks.av, "open", lambda *a, **kw: _DiskFullContainer(real_open(*a, **kw), room=60)
    )
    out = tmp_path / "long.mp4"
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    with pytest.raises(SinkError, match=r"Disk full.*what was recorded is kept") as info:
        for i in range(200):
            sink.send(numbered(i))
    assert "long.mp4" in info.value.message
    sink.abort()  # what the engine does after a SinkError: it must not delete the kept file
    assert [p.name for p in tmp_path.iterdir()] == ["long.mp4"]
    monkeypatch.undo()  # av.open is the reader's too
    kept = decoded_numbers(out)
    assert len(kept) >= 40 and kept == list(range(len(kept)))  # playable from the start, in order


def test_a_full_disk_at_the_final_flush_is_said(tmp_path: Path) -> None:
    """The last fragment is written inside close(), where PyAV does not raise a failed write: the
    file's own boxes (or a disk without a free block) say that its end is cut."""
    size = _record(tmp_path / "measure.mp4", 10).path.stat().st_size
    with small_disk(tmp_path / "disk", pages_for(size) - 4096) as disk:
        out = disk / "end.mp4"
        with pytest.raises(SinkError, match="is full: the last seconds of the recording may be cut"):
            _record(out, 10)
        assert out.is_file()  # kept: what is there plays


def test_a_recording_said_to_be_kept_in_the_partial_file_is_not_deleted_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open, real_replace = av.open, os.replace
    monkeypatch.setattr(
        file_sinks.av, "open", lambda *a, **kw: _DiskFullContainer(real_open(*a, **kw), room=30)
    )

    def no_rename(src: Any, dst: Any) -> None:
        if str(src).endswith(".partial.mp4"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(file_sinks.os, "replace", no_rename)
    sink = VideoFileSink(tmp_path / "long.mp4")
    sink.open(96, 64, 25.0)
    with pytest.raises(SinkError, match="kept") as info:
        for i in range(200):
            sink.send(numbered(i))
    sink.abort()  # what the engine does next
    (partial,) = tmp_path.glob(".long.*.partial.mp4")
    assert partial.name in info.value.message and partial.stat().st_size > 0


def test_a_live_sources_frames_are_placed_by_their_capture_clock(tmp_path: Path) -> None:
    """A camera reporting 30 fps that delivers 15 (low light) recorded a file playing at 2x speed."""
    out = tmp_path / "cam.mp4"
    sink = VideoFileSink(out)
    sink.open(96, 64, 30.0)
    t0 = time.perf_counter()
    for i in range(8):
        frame = numbered(i, live=True)
        frame.capture_ts = t0 + i / 15.0 + (1.0 if i >= 6 else 0.0)  # and a 1 s reconnect pause
        sink.send(frame)
    sink.close()
    source = VideoFileSource(out)
    source.open()
    times = []
    while (frame := source.read()) is not None:
        times.append(frame.pts)
    source.close()
    expected = [i / 15.0 + (1.0 if i >= 6 else 0.0) for i in range(8)]
    assert times == pytest.approx(expected, abs=0.02)


_CRASHING_WRITER = """
import os, sys, time
sys.path.insert(0, {root!r})
from realtime.core.frames import VideoFrame
from realtime.io.file_sinks import VideoFileSink
from tests.realtime.io.test_sinks import synthetic_frame
sink = VideoFileSink({out!r})
sink.open(96, 64, 25.0)
for i in range(150):
    sink.send(VideoFrame(synthetic_frame(i, (96, 64)), i, time.perf_counter(), i / 25.0))
os._exit(0)  # a crash, a kill -9, a power cut: the file is never closed
"""


def test_a_recording_cut_by_a_crash_is_playable_and_recovered_by_the_next_one(tmp_path: Path) -> None:
    out = tmp_path / "take.mp4"
    root = str(REPO_ROOT)
    subprocess.run([sys.executable, "-c", _CRASHING_WRITER.format(root=root, out=str(out))], check=True)
    assert not out.exists()
    (partial,) = tmp_path.glob(".take.*.partial.mp4")
    # The very next recording, however soon: the crashed writer holds no lock any more.
    VideoFileSink(out).open(96, 64, 25.0)
    recovered = tmp_path / "take.recovered.mp4"
    kept = decoded_numbers(recovered)
    assert len(kept) >= 100 and kept == list(range(len(kept)))  # 150 sent; the encoder held a few
    assert not partial.exists()


def test_a_recording_still_being_written_is_left_alone_by_another(tmp_path: Path) -> None:
    out = tmp_path / "take.mp4"
    live = VideoFileSink(out)
    live.open(96, 64, 25.0)
    for i in range(30):
        live.send(VideoFrame(synthetic_frame(i, (96, 64)), i, time.perf_counter(), i / 25.0))
    (partial,) = tmp_path.glob(".take.*.partial.mp4")
    other = VideoFileSink(out)
    other.open(96, 64, 25.0)  # another writer of the same name, while the first one records
    other.abort()
    assert partial.exists() and not (tmp_path / "take.recovered.mp4").exists()
    live.close()
    assert decoded_numbers(out) == list(range(30))


def test_an_unlocked_partial_of_a_running_writer_is_left_alone_while_it_grows(tmp_path: Path) -> None:
    """A writer that takes no lock (NVENC's) is known live by its running process and fresh file."""
    out = tmp_path / "take.mp4"
    live = tmp_path / f".take.{os.getpid()}-0a1b2c3d.partial.mp4"
    live.write_bytes(b"\0" * 4096)
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    sink.abort()
    assert live.exists() and not (tmp_path / "take.recovered.mp4").exists()
    old = time.time() - 60.0
    os.utime(live, (old, old))  # a minute without a write: its writer is gone
    sink.open(96, 64, 25.0)
    sink.abort()
    assert not live.exists() and (tmp_path / "take.recovered.mp4").exists()


def test_a_partial_left_before_its_first_frame_is_removed_by_the_next_recording(tmp_path: Path) -> None:
    """A run killed before its first packet left a hidden 762-byte header that nothing removed."""
    out = tmp_path / "take.mp4"
    empty = tmp_path / ".take.4242-0a1b2c3d.partial.mp4"
    empty.write_bytes(b"\0" * 762)
    old = time.time() - 60.0
    os.utime(empty, (old, old))
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    sink.abort()
    assert not empty.exists() and not (tmp_path / "take.recovered.mp4").exists()


# ------------------------------------------------------------------------------------------ image file


def test_image_file_sink_writes_the_last_frame(tmp_path: Path) -> None:
    out = tmp_path / "ergebnis-ä.png"
    sink = ImageFileSink(out)
    sink.open(96, 64, 30.0)
    for i in range(3):
        sink.send(numbered(i))
    assert not out.exists()
    sink.close()

    written = cv2.imdecode(np.fromfile(out, np.uint8), cv2.IMREAD_COLOR)
    assert written is not None and np.array_equal(written, synthetic_frame(2, (96, 64)))
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_image_file_sink_abort_writes_nothing(tmp_path: Path) -> None:
    sink = ImageFileSink(tmp_path / "out.jpg")
    sink.open(96, 64, 30.0)
    sink.send(numbered(0))
    sink.abort()
    assert list(tmp_path.iterdir()) == []


# -------------------------------------------------------------------------------------------- routing


def test_null_sink_counts_frames() -> None:
    sink = NullSink()
    sink.open(96, 64, 30.0)
    for i in range(4):
        sink.send(numbered(i))
    sink.close()
    assert sink.frames_sent == 4


def test_the_output_router_picks_the_sink_by_spec(tmp_path: Path) -> None:
    assert isinstance(open_output("vcam"), VirtualCameraSink)
    assert isinstance(open_output("null"), NullSink)
    assert isinstance(open_output(str(tmp_path / "a.PNG")), ImageFileSink)
    assert isinstance(open_output(str(tmp_path / "a.mkv")), VideoFileSink)
    with pytest.raises(SinkError, match="window"):
        open_output("window")


# ------------------------------------------------------------------ the output router


def test_the_router_builds_the_window_with_the_callers_factory() -> None:
    from realtime.io.outputs import open_output

    window = NullSink()
    assert open_output("window", window=lambda: window) is window


def test_the_router_wraps_as_asked(tmp_path: Path) -> None:
    from realtime.io.fan_out import BackgroundSink, FanOutSink, OptionalSink
    from realtime.io.outputs import OutputRequest, open_outputs

    sink = open_outputs(
        [
            OutputRequest(str(tmp_path / "take.png"), file_kind="video", on_failed=lambda err: None),
            OutputRequest("vcam", pace=False, on_unavailable=lambda err: None),
        ]
    )
    assert isinstance(sink, FanOutSink)
    recorder, vcam = sink.sinks
    # A recording is a video whatever its name says; it runs on its own thread.
    assert isinstance(recorder, BackgroundSink) and isinstance(recorder.sink, VideoFileSink)
    assert isinstance(vcam, OptionalSink) and isinstance(vcam.sink, VirtualCameraSink)
    assert vcam.sink.pace is False


def test_the_router_passes_file_options_to_the_video_sink(tmp_path: Path) -> None:
    from realtime.io.outputs import open_output

    sink = open_output(str(tmp_path / "a.mp4"), crf=28, preset="ultrafast")
    assert isinstance(sink, VideoFileSink) and (sink.crf, sink.preset) == (28, "ultrafast")


def test_the_router_says_why_nvenc_is_not_used(tmp_path: Path) -> None:
    from realtime.io.outputs import OutputRequest, route_output

    sink, note = route_output(OutputRequest(str(tmp_path / "a.avi"), encoder="nvenc"))
    assert isinstance(sink, VideoFileSink) and "not a video file NVENC writes" in note
    sink, note = route_output(OutputRequest(str(tmp_path / "a.avi")))
    assert isinstance(sink, VideoFileSink) and note == ""


# ------------------------------------------------------------------ pacing: one clock, the camera's


def live_latency_p50(sink: Any) -> float:
    """Glass-to-glass p50 (ms) of a 30 fps camera into `sink` through a passthrough engine."""
    from realtime.core.engine import Engine
    from realtime.core.settings import Settings
    from tests.engine_fakes import FakeSource

    camera = FakeSource(frames=45, fps=30.0, is_live=True, pace=True, size=(320, 240))
    engine = Engine(camera, sink, Settings())
    engine.start()
    assert engine.wait(20)
    return float(engine.stats().latency_ms.p50)


def test_the_gui_virtual_camera_adds_no_frame_of_latency_to_a_live_camera(
    vcam_recorder: RecordingBackendHandle,
) -> None:
    from gui.config import OutputConfig
    from gui.controller import make_sink

    sink = make_sink(
        OutputConfig(vcam=True, vcam_width=320, vcam_height=240), lambda err: None, vcam_recorder.name
    )
    # A second 30 fps clock in the sink held each frame up to a frame period (19-33 ms p50).
    assert live_latency_p50(sink) < 12.0
    assert len(vcam_recorder.frames) == 45


@pytest.mark.parametrize(("realtime", "paced"), [(True, False), (False, True)])
def test_the_cli_virtual_camera_paces_only_sources_that_do_not(
    vcam_recorder: RecordingBackendHandle, tmp_path: Path, realtime: bool, paced: bool
) -> None:
    import argparse

    from realtime.io.sources import open_source
    from realtime.tools.cli_run import sink_for_args

    clip = tmp_path / "clip.mp4"
    sink_for_clip = VideoFileSink(clip)
    sink_for_clip.open(96, 64, 25.0)
    for i in range(3):
        sink_for_clip.send(numbered(i))
    sink_for_clip.close()
    source = open_source(str(clip), realtime=realtime, loop=False)
    args = argparse.Namespace(output="vcam", width=None, height=None, fps=None)
    sink = sink_for_args(args, source)
    assert isinstance(sink, VirtualCameraSink) and sink.pace is paced


def test_recordings_say_which_yuv_they_hold(tmp_path: Path) -> None:
    # Untagged HD video is shown as BT.709 by browsers and most players; ours is BT.601 limited.
    path = tmp_path / "hd.mp4"
    sink = VideoFileSink(path)
    sink.open(1280, 720, 30.0)
    red = VideoFrame(np.full((720, 1280, 3), (40, 60, 200), np.uint8), 0, 0.0)
    sink.send(red)
    sink.close()
    with av.open(str(path)) as container:
        ctx = container.streams.video[0].codec_context
        assert (ctx.colorspace, ctx.color_range) == (6, 1)  # SMPTE 170M (BT.601), limited range
        frame = next(container.decode(video=0))
    assert np.abs(frame.to_ndarray(format="bgr24")[360, 640].astype(int) - (40, 60, 200)).max() <= 3


def test_image_file_on_a_full_disk_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = open

    class FullFile:
        def __init__(self, f: Any) -> None:
            self._f = f

        def __enter__(self) -> FullFile:
            return self

        def __exit__(self, *exc: object) -> None:
            self._f.close()

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    def fake_open(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real_open(path, mode, *args, **kwargs)
        return FullFile(f) if "w" in mode and str(path).endswith(".partial.png") else f

    sink = ImageFileSink(tmp_path / "out.png")
    sink.open(96, 64, 30.0)
    sink.send(numbered(1))
    monkeypatch.setattr("builtins.open", fake_open)
    with pytest.raises(SinkError, match="Disk full"):
        sink.close()
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_recordings_have_a_keyframe_every_two_seconds(tmp_path: Path) -> None:
    """Each keyframe starts a fragment: a crash loses at most 2 s (x264's default is every 10 s)."""
    out = tmp_path / "gop.mp4"
    sink = VideoFileSink(out)
    sink.open(96, 64, 25.0)
    still = synthetic_frame(7, (96, 64))  # no scene cuts for x264 to add keyframes at
    for i in range(130):
        sink.send(VideoFrame(still.copy(), i, time.perf_counter(), i / 25.0))
    sink.close()
    with av.open(str(out)) as container:
        keys = [i for i, frame in enumerate(container.decode(video=0)) if frame.key_frame]
    assert keys == [0, 50, 100]


def test_two_recordings_of_one_name_at_once_keep_both(tmp_path: Path) -> None:
    """Two windows recording to the default path each renamed their file onto the same name at
    the end: the later one replaced the other's recording."""
    out = tmp_path / "facecast.mp4"
    first, second = VideoFileSink(out), VideoFileSink(out)
    first.open(96, 64, 25.0)
    second.open(96, 64, 25.0)
    for i in range(6):
        first.send(numbered(i))
        second.send(numbered(100 + i))
    first.close()
    second.close()
    assert second.path == tmp_path / "facecast-2.mp4"
    assert decoded_numbers(out)[0] == 0 and decoded_numbers(second.path)[0] == 100


def test_two_image_runs_of_one_name_at_once_keep_both(tmp_path: Path) -> None:
    """Two `run --output o.png` at once: the later rename replaced the earlier picture (the
    last wins); now the later one is kept beside it, as two recordings are."""
    out = tmp_path / "o.png"
    first, second = ImageFileSink(out), ImageFileSink(out)
    first.open(96, 64, 25.0)
    second.open(96, 64, 25.0)
    first.send(solid(96, 64, colour=(0, 0, 255)))
    second.send(solid(96, 64, colour=(255, 0, 0)))
    first.close()
    second.close()
    assert second.path == tmp_path / "o-2.png"
    assert tuple(cv2.imread(str(out))[0, 0]) == (0, 0, 255)
    assert tuple(cv2.imread(str(second.path))[0, 0]) == (255, 0, 0)


def test_an_image_that_was_there_at_open_is_replaced_as_asked(tmp_path: Path) -> None:
    out = tmp_path / "o.png"
    cv2.imwrite(str(out), np.zeros((8, 8, 3), np.uint8))
    sink = ImageFileSink(out)
    sink.open(96, 64, 25.0)
    sink.send(solid(96, 64))
    sink.close()
    assert sink.path == out and tuple(cv2.imread(str(out))[0, 0]) == COLOUR


class _X264AsNvenc:
    """PyNvVideoCodec's encoder (CreateEncoder/Encode/EndEncode, Annex B packets as dicts) played
    by libx264 on the CPU: no GPU here, and the sink's file handling is what is under test."""

    def __init__(self, width: int, height: int, fmt: str, host_input: bool, **options: Any) -> None:
        assert fmt == "NV12" and host_input and options["bf"] == 0
        self.width, self.height = width, height
        self.codec = av.CodecContext.create("libx264", "w")
        self.codec.width, self.codec.height, self.codec.pix_fmt = width, height, "yuv420p"
        self.codec.time_base = Fraction(1, 25)
        self.codec.options = {"bf": "0", "g": str(options["gop"]), "annexb": "1"}
        self.codec.open()
        self.pts = 0

    def _packets(self, frame: av.VideoFrame | None) -> list[dict[str, bytes]]:
        return [{"data": bytes(p)} for p in self.codec.encode(frame)]

    def Encode(self, nv12: np.ndarray) -> list[dict[str, bytes]]:
        picture = nv12.reshape(self.height * 3 // 2, self.width)
        frame = av.VideoFrame.from_ndarray(picture, format="nv12").reformat(format="yuv420p")
        frame.pts, self.pts = self.pts, self.pts + 1
        return self._packets(frame)

    def EndEncode(self) -> list[dict[str, bytes]]:
        return self._packets(None)


@pytest.fixture
def cpu_nvenc(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("PyNvVideoCodec")
    module.CreateEncoder = _X264AsNvenc  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", module)


def test_nvenc_output_is_finished_as_the_cpu_encoders_is(tmp_path: Path, cpu_nvenc: None) -> None:
    """The NVENC sink had its own copy of the finishing: no fragmented MP4 (a crash lost the whole
    take), no writer's lock, no recovery of a crashed take, and a same-named take replaced."""
    from realtime.io.nvenc import NvencFileSink

    out = tmp_path / "take.mp4"
    crashed = tmp_path / ".take.999999-deadbeef.partial.mp4"  # a writer killed mid-take
    crashed.write_bytes(b"\x00" * 4096)
    first, second = NvencFileSink(out), NvencFileSink(out)
    first.open(96, 64, 25.0)
    assert first.fallback_reason == ""
    assert (tmp_path / "take.recovered.mp4").is_file() and not crashed.exists()
    second.open(96, 64, 25.0)
    for i in range(60):  # a keyframe at least every 2 s: a first fragment is on disk by frame 50
        first.send(numbered(i))
        second.send(numbered(100 + i))
    partial = first._file.temp
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(partial.read_bytes())  # what a kill -9 now would leave: playable up to here
    kept = decoded_numbers(cut)
    assert kept and kept == list(range(len(kept)))
    first.close()
    second.close()
    assert first.path == out and second.path == tmp_path / "take-2.mp4"
    assert decoded_numbers(out) == list(range(60))
    assert decoded_numbers(second.path) == list(range(100, 160))
    assert not list(tmp_path.glob(".*partial*"))


def _record(path: Path, frames: int = 40) -> VideoFileSink:
    sink = VideoFileSink(path)
    sink.open(96, 64, 25.0)
    for i in range(frames):
        sink.send(numbered(i))
    sink.close()
    return sink


def test_a_recording_that_fits_with_little_room_left_is_not_called_cut(tmp_path: Path) -> None:
    """Under 256 KB free after a recording that fit, it was reported as "disk full ... may be cut"
    (and a file job deleted its finished chunk for it)."""
    size = _record(tmp_path / "measure.mp4").path.stat().st_size
    with small_disk(tmp_path / "disk", pages_for(size) + 100 * 1024) as disk:
        sink = _record(disk / "take.mp4")  # raised SinkError here
        assert 0 < shutil.disk_usage(disk).free < 256 * 1024
        assert decoded_numbers(sink.path) == list(range(40))


def test_a_recording_the_disk_cannot_hold_keeps_what_fit_and_says_so(tmp_path: Path) -> None:
    size = _record(tmp_path / "measure.mp4", 200).path.stat().st_size
    with small_disk(tmp_path / "disk", size // 2) as disk:
        with pytest.raises(SinkError, match=r"Disk full|is full") as info:
            _record(disk / "take.mp4", 200)
        kept = decoded_numbers(disk / "take.mp4")
        assert "kept" in info.value.user_message() or "may be cut" in info.value.user_message()
        assert 0 < len(kept) < 200 and kept == list(range(len(kept)))
