"""A run's life as every client drives it: it ends when its input does, when it is asked to, when
its duration is over or when something fails; the output is finished whatever ended it; and the
exit code says which."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import av
import pytest

from realtime.api import (
    Ending,
    ExitCode,
    FaceCastError,
    NullSink,
    Run,
    SinkError,
    TestPatternSource,
    VideoFileSink,
    VideoFileSource,
    load_preset,
    told,
)
from tests.engine_fakes import RecordingSink
from tests.fixtures_media import make_test_video, read_frame_number

SETTINGS = load_preset("balanced")


def frames_in(path: Path) -> list[int]:
    with av.open(str(path)) as container:
        return [read_frame_number(f.to_ndarray(format="bgr24")) for f in container.decode(video=0)]


def test_a_run_ends_with_its_input_and_its_file_is_finished(tmp_path: Path) -> None:
    clip = make_test_video(tmp_path / "in.mp4", frames=20)
    run = Run(VideoFileSource(clip), VideoFileSink(tmp_path / "out.mp4"), SETTINGS)
    run.start()
    assert run.watch() == Ending.INPUT_ENDED
    outcome = run.stop()
    assert outcome.exit_code == ExitCode.OK and outcome.output_finished
    assert outcome.stats.frames_out == 20 and frames_in(tmp_path / "out.mp4") == list(range(20))


def test_its_duration_ends_a_run_that_would_go_on(tmp_path: Path) -> None:
    run = Run(TestPatternSource(160, 120, 15.0), VideoFileSink(tmp_path / "out.mp4"), SETTINGS)
    run.start()
    assert run.watch(duration_s=0.5) == Ending.DURATION
    outcome = run.stop()
    assert outcome.exit_code == ExitCode.OK and outcome.stats.frames_out > 0
    assert (tmp_path / "out.mp4").is_file()


def test_a_stop_request_ends_it_and_the_command_exits_with_the_requests_code(tmp_path: Path) -> None:
    sink = RecordingSink()
    run = Run(TestPatternSource(160, 120, 15.0), sink, SETTINGS)
    run.start()
    asked = threading.Event()
    ticks: list[int] = []

    def on_tick() -> None:
        ticks.append(len(sink.indices))
        if sink.indices:
            asked.set()  # a signal, once frames flow

    assert run.watch(asked.wait, every_s=0.05, on_tick=on_tick) == Ending.STOPPED
    outcome = run.stop(stop_code=ExitCode.SIGTERM)
    assert outcome.exit_code == ExitCode.SIGTERM and sink.closed and ticks


def test_request_stop_ends_a_watch_from_another_thread() -> None:
    run = Run(TestPatternSource(160, 120, 15.0), NullSink(), SETTINGS)
    run.start()
    threading.Timer(0.3, run.request_stop).start()
    assert run.watch() == Ending.STOPPED
    assert run.stop().exit_code == ExitCode.OK


def test_an_output_failing_mid_run_ends_it_with_that_error() -> None:
    run = Run(TestPatternSource(160, 120, 30.0, realtime=False), RecordingSink(fail_at=3), SETTINGS)
    run.start()
    assert run.watch() == Ending.FAILED
    outcome = run.stop()
    assert isinstance(outcome.error, SinkError) and outcome.exit_code == ExitCode.USAGE


def test_an_output_that_cannot_open_fails_the_start_and_leaves_the_input_closed(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    clip = make_test_video(tmp_path / "in.mp4", frames=5)
    source = VideoFileSource(clip)
    run = Run(source, VideoFileSink(tmp_path / "file" / "out.mp4"), SETTINGS)
    with pytest.raises(SinkError, match="Cannot write output"):
        run.start()
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


class _DeniedSource(TestPatternSource):
    def open(self) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/dev/video7")


def test_a_system_error_at_start_is_one_line_not_a_traceback() -> None:
    """The panel said "Could not start: [Errno 13] ..." and logged a traceback."""
    run = Run(_DeniedSource(160, 120), NullSink(), SETTINGS)
    with pytest.raises(FaceCastError) as caught:
        run.start()
    assert caught.value.user_message() == "Could not start: Permission denied (/dev/video7)."


def test_stopping_waits_for_an_output_still_writing_and_says_so() -> None:
    said: list[str] = []
    sink = RecordingSink(send_delay_s=1.5)  # a slow disk: a write outlives the engine's stop
    run = Run(TestPatternSource(160, 120, 30.0), sink, SETTINGS)
    run.start()
    run.watch(duration_s=0.2)
    outcome = run.stop(timeout=0.1, say=said.append)
    assert said == ["finishing the output ..."] and outcome.output_finished and sink.closed


def test_every_failure_is_told_once_with_its_own_exit_code() -> None:
    from realtime.lifecycle.signals import Stopped

    assert told(SinkError("Disk full.", hint="Free some.")) == told(SinkError("Disk full.", "Free some."))
    assert told(SinkError("Disk full.", hint="Free some.")).message == "Disk full. Free some."
    assert told(Stopped(ExitCode.SIGHUP)).exit_code == ExitCode.SIGHUP
    assert told(Stopped(ExitCode.SIGHUP)).message == ""
    assert told(KeyboardInterrupt()).exit_code == ExitCode.SIGINT
    denied = told(PermissionError(errno.EACCES, "Permission denied", "/rec"))
    assert denied.message == "Permission denied (/rec)." and denied.exit_code == ExitCode.USAGE
    bug = told(ZeroDivisionError("division by zero"))
    assert bug.exit_code == ExitCode.INTERNAL and "--debug" in bug.message
