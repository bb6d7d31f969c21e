"""What a run's outputs write, read from the sinks: the recording's file and the virtual camera's device."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from models.errors import FaceCastError
from realtime.core.errors import VirtualCameraUnavailableError
from realtime.core.frames import VideoFrame
from realtime.io.fan_out import BackgroundSink, FanOutSink, OptionalSink
from realtime.io.file_sinks import VideoFileSink
from realtime.io.output_info import OutputInfo, collect_output_info
from realtime.io.outputs import OutputRequest, open_outputs
from realtime.io.sinks import NullSink
from realtime.io.vcam_sink import VirtualCameraSink
from tests.vcam_recorder import RecordingBackendHandle


def _ignore(error: FaceCastError) -> None:
    pass


def test_a_fan_out_reports_the_recordings_path_and_the_open_cameras_device(
    tmp_path: Path, vcam_recorder: RecordingBackendHandle
) -> None:
    take = tmp_path / "take.mp4"
    unavailable: list[VirtualCameraUnavailableError] = []
    sink = open_outputs(
        [
            OutputRequest(str(take), file_kind="video", on_failed=_ignore),
            OutputRequest("vcam", 160, 90, 25, vcam_backend=vcam_recorder.name, pace=False,
                          on_unavailable=unavailable.append),
        ]
    )  # fmt: skip
    assert collect_output_info(sink) == OutputInfo(take, None)  # the camera is not open yet
    sink.open(320, 180, 30)
    try:
        sink.send(VideoFrame(np.zeros((180, 320, 3), np.uint8), 0, time.perf_counter()))
        assert collect_output_info(sink) == OutputInfo(take, f"{vcam_recorder.device_name}, 160x90 @ 25")
    finally:
        sink.close()
    assert not unavailable and take.is_file()
    assert collect_output_info(sink).vcam is None  # closed


def test_the_sinks_inside_wrappers_are_found_in_any_order(
    tmp_path: Path, vcam_recorder: RecordingBackendHandle
) -> None:
    take = tmp_path / "inner.mkv"
    camera = VirtualCameraSink(backend=vcam_recorder.name, device="/dev/video9", pace=False)
    sink = FanOutSink([NullSink(), FanOutSink([camera, BackgroundSink(VideoFileSink(take), _ignore)])])
    sink.open(64, 48, 30)
    try:
        assert collect_output_info(sink) == OutputInfo(take, "/dev/video9, 64x48 @ 30")
    finally:
        sink.abort()


def test_no_recording_and_a_missing_camera_report_nothing(failing_vcam_backend: str) -> None:
    told: list[VirtualCameraUnavailableError] = []
    camera = VirtualCameraSink(backend=failing_vcam_backend, pace=False)
    sink = FanOutSink([OptionalSink(camera, told.append)])
    sink.open(64, 48, 30)
    assert told and collect_output_info(sink) == OutputInfo()
    sink.close()
    assert collect_output_info(FanOutSink([])) == OutputInfo()


def test_the_first_recording_found_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a.mp4", tmp_path / "b.mp4"
    sink = FanOutSink([VideoFileSink(first), BackgroundSink(VideoFileSink(second), _ignore)])
    assert collect_output_info(sink).record_path == first
