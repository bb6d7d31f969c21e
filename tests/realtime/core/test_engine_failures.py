"""What the engine does when a part around it misbehaves: a sink that crashes or cannot close, a
preview that raises, a source that raises something unexpected or hands out odd pictures. The run
says why, keeps what can be kept, and never reports an end without its reason."""

from __future__ import annotations

import time

import numpy as np
import pytest

from models.types import ImageBGR
from realtime.core.engine import Engine
from realtime.core.errors import SinkError, SourceError
from realtime.core.events import EngineEvent
from realtime.core.frames import VideoFrame
from realtime.core.settings import Settings
from realtime.io.camera_source import as_bgr
from tests.engine_fakes import FakeSource, RecordingSink


class CrashingSink(RecordingSink):
    """A sink with a bug (a deleted window): it raises something that is not a SinkError."""

    def send(self, frame: VideoFrame) -> None:
        if len(self.indices) >= 3:
            raise RuntimeError("wrapped C/C++ object has been deleted")
        super().send(frame)


def test_a_run_seen_over_after_a_sink_crash_already_has_its_error() -> None:
    """The GUI polls `running` and, seeing the run over with no error, says "The input ended".
    So the sink thread's crash is recorded before the run reads as over: no tight poll sees the
    end without the error."""
    for _ in range(20):
        engine = Engine(
            FakeSource(frames=1000, fps=500.0, is_live=True, pace=True), CrashingSink(), Settings()
        )
        engine.start()
        deadline = time.monotonic() + 5.0
        while engine.running and time.monotonic() < deadline:
            pass
        error_when_over = engine.error
        engine.stop()
        assert error_when_over is not None, "the run was seen over before its error was set"
        assert "Internal error" in error_when_over.user_message()


def test_a_preview_that_raises_is_dropped_and_the_video_goes_on() -> None:
    """A preview window closed under the run raises from its callback: that preview is dropped,
    and the run (the virtual camera, a recording) goes on for the outputs someone uses."""
    sink = RecordingSink()
    engine = Engine(FakeSource(frames=100_000, fps=200.0, is_live=True, pace=True), sink, Settings())
    shown: list[int] = []

    def preview(frame: VideoFrame) -> None:
        shown.append(frame.index)
        if len(shown) == 10:
            raise RuntimeError("wrapped C/C++ object of type PreviewFeed has been deleted")

    engine.subscribe_preview(preview)
    engine.start()
    try:
        deadline = time.monotonic() + 5.0
        while len(sink.indices) < 60 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine.running and engine.error is None
        assert len(sink.indices) >= 60, "the output stopped after the preview raised"
        assert len(shown) == 10, "the failed preview was called again"
    finally:
        engine.stop()


class FailingClose(RecordingSink):
    def close(self) -> None:
        raise SinkError("The disk holding out.mp4 is full: the last seconds of the recording may be cut.")


@pytest.mark.parametrize("how", ["stop", "input ends"])
def test_a_sink_that_fails_to_close_is_reported_and_the_run_still_finishes(how: str) -> None:
    """A full disk found at the recording's end is the run's error, told as an error event, and
    the run still says "finished" (the CLI keeps its summary)."""
    events: list[EngineEvent] = []
    live = how == "stop"
    source = FakeSource(frames=100_000 if live else 30, fps=200.0, is_live=live, pace=live)
    engine = Engine(source, FailingClose(), Settings(), on_event=events.append)
    engine.start()
    if live:
        time.sleep(0.2)
        engine.stop()
    else:
        assert engine.wait(5.0)
    assert isinstance(engine.error, SinkError)
    kinds = [e.kind for e in events]
    assert "error" in kinds and kinds[-1] == "finished"
    assert any("disk holding out.mp4 is full" in e.message for e in events if e.kind == "error")
    assert source.closed


class BrokenDriver(FakeSource):
    def read(self) -> VideoFrame | None:
        if self._next >= 12:
            raise OSError(5, "Input/output error")
        return super().read()


def test_a_source_that_raises_something_unexpected_ends_as_an_input_failure() -> None:
    """A driver's OSError (not a SourceError) is the input failing, like a camera unplugged, not an
    internal error: every frame read reaches the output, which is finished (not discarded)."""
    events: list[EngineEvent] = []
    sink = RecordingSink()
    engine = Engine(BrokenDriver(frames=1000), sink, Settings(), on_event=events.append)
    engine.start()
    assert engine.wait(5.0)
    assert isinstance(engine.error, SourceError)
    assert "The input failed: OSError" in engine.error.user_message()
    assert sink.indices == list(range(12))
    assert sink.closed and not sink.aborted


def _grey(image: ImageBGR) -> np.ndarray:
    return image[..., 0].copy()


CUSTOM_PICTURES = {
    "grey": lambda img: _grey(img),
    "grey with a channel axis": lambda img: _grey(img)[..., None],
    "bgra": lambda img: np.dstack([img, np.full(img.shape[:2], 255, np.uint8)]),
    "16-bit grey": lambda img: _grey(img).astype(np.uint16) * 257,
    # The same picture as a non-contiguous view (a mirror of a mirrored copy).
    "mirrored view": lambda img: np.ascontiguousarray(img[:, ::-1])[:, ::-1],
}


class CustomSource(FakeSource):
    convert: str = "grey"

    def read(self) -> VideoFrame | None:
        frame = super().read()
        if frame is not None:
            frame.image = CUSTOM_PICTURES[self.convert](frame.image)
        return frame


@pytest.mark.parametrize("convert", list(CUSTOM_PICTURES))
def test_pictures_a_custom_source_hands_out_reach_the_output_as_bgr(convert: str) -> None:
    """A plug-in source's grey, BGRA, 16-bit or view pictures reach the sink and the swap as
    contiguous 8-bit BGR, 16-bit scaled rather than turned into noise."""
    source = CustomSource(frames=20)
    source.convert = convert
    received: list[ImageBGR] = []
    contiguous: list[bool] = []
    engine = Engine(source, RecordingSink(), Settings())
    engine.subscribe_preview(
        lambda f: (received.append(f.image.copy()), contiguous.append(f.image.flags.c_contiguous))
    )
    engine.start()
    assert engine.wait(5.0)
    assert engine.error is None, engine.error and engine.error.user_message()
    assert len(received) == 20 and all(contiguous)
    for i, image in enumerate(received):
        assert image.dtype == np.uint8 and image.shape == (48, 64, 3)
        # The fakes write the frame's index into pixel (0, 0): it survives the conversion.
        assert int(image[0, 0, 0]) // 8 == i % 32  # (tests.engine_fakes.frame_with_index)


def test_float_pictures_end_the_run_with_a_message_naming_them() -> None:
    class FloatSource(FakeSource):
        def read(self) -> VideoFrame | None:
            frame = super().read()
            if frame is not None:
                frame.image = frame.image.astype(np.float32) / 255.0
            return frame

    sink = RecordingSink()
    engine = Engine(FloatSource(frames=20), sink, Settings())
    engine.start()
    assert engine.wait(5.0)
    assert isinstance(engine.error, SourceError)
    assert "float32" in engine.error.user_message()
    assert sink.indices == [] and sink.closed


def test_an_infrared_cameras_16_bit_picture_is_scaled_not_wrapped() -> None:
    """A Y16 camera's picture is scaled to 8 bits, so it keeps its brightness: wrapped by a cast,
    32768 (mid-grey) would come out black."""
    y16 = np.array([[0, 32768, 65535, 1000]], dtype=np.uint16)
    out = as_bgr(y16)
    assert out.shape == (1, 4, 3) and out.dtype == np.uint8
    assert out[0, :, 0].tolist() == [0, 128, 255, 4]


class SlowDisk(RecordingSink):
    """Slower than the source (frames pile up in flight), then full after 3 frames."""

    def send(self, frame: VideoFrame) -> None:
        time.sleep(0.05)
        if len(self.indices) >= 3:
            raise SinkError("No space left on the disk while writing out.mp4.")
        super().send(frame)


def test_an_output_that_fails_while_the_last_frames_drain_is_discarded_not_finished() -> None:
    """The input fails first (its frames in flight are still written out), then the output fails
    mid-write: the half-written output is discarded, as for any output failing, not finalised
    under the user's name because the run's first error was the input's."""

    class FailsAfterSix(FakeSource):
        def read(self) -> VideoFrame | None:
            if self._next >= 6:
                raise OSError(5, "Input/output error")
            return super().read()

    sink = SlowDisk()
    reading_ahead = Settings().with_overrides({"pipeline.read_ahead": 8})
    engine = Engine(FailsAfterSix(frames=1000), sink, reading_ahead)
    engine.start()
    assert engine.wait(5.0)
    assert isinstance(engine.error, SourceError)
    assert sink.aborted and not sink.closed


def test_a_failing_close_is_named_as_the_output_failing() -> None:
    """An OSError from the output's close (a full disk) names the output and the reason, not an
    internal error."""

    class FullDiskAtClose(RecordingSink):
        def close(self) -> None:
            raise OSError(28, "No space left on device")

    events: list[EngineEvent] = []
    sink = FullDiskAtClose(description="video file out.mp4")
    engine = Engine(FakeSource(frames=5), sink, Settings(), on_event=events.append)
    engine.start()
    assert engine.wait(5.0)
    assert isinstance(engine.error, SinkError)
    message = engine.error.user_message()
    assert "out.mp4" in message and "No space left" in message and "Internal" not in message


def test_a_read_only_picture_is_copied_before_the_face_is_drawn_into_it() -> None:
    class ReadOnly(FakeSource):
        def read(self) -> VideoFrame | None:
            frame = super().read()
            if frame is not None:
                frame.image.flags.writeable = False
            return frame

    received: list[bool] = []
    engine = Engine(
        ReadOnly(frames=10), RecordingSink(), Settings().with_overrides({"composite.disclosure_label": True})
    )
    engine.subscribe_preview(lambda f: received.append(f.image.flags.writeable))
    engine.start()
    assert engine.wait(5.0)
    assert engine.error is None, engine.error.user_message()
    assert received == [True] * 10


def test_big_endian_16_bit_pictures_are_scaled_like_any_16_bit_picture() -> None:
    y16 = np.array([[0, 32768, 65535]], dtype=">u2")
    assert as_bgr(y16)[0, :, 0].tolist() == [0, 128, 255]
