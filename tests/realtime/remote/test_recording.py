"""A recording made during a remote call plays as long as the call ran, each frame once: the
returned frames are written at their capture times, none repeated while the next is late (before,
a 25 fps input recorded through a call played ~19 % slow with a quarter of its frames doubled)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np
import pytest

from realtime.api import FrameSink, VideoFrame, open_output
from realtime.remote.client import RemoteClient
from realtime.remote.options import RemoteOptions
from realtime.remote.picture import FaceScene
from realtime.remote.runner import ServerThread
from tests.realtime.remote.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)

FPS = 25.0


@dataclass
class Watched:
    """The real file sink, and the capture time of every frame sent to it."""

    inner: FrameSink
    captured: list[float] = field(default_factory=list)

    def open(self, width: int, height: int, fps: float) -> None:
        self.inner.open(width, height, fps)

    def send(self, frame: VideoFrame) -> None:
        self.captured.append(frame.capture_ts)
        self.inner.send(frame)

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        self.inner.abort()

    @property
    def description(self) -> str:
        return self.inner.description


def played_back(path: Path) -> tuple[list[float], list[np.ndarray]]:
    """Each frame's time (s) and its frame counter's corner, as a player shows them."""
    times: list[float] = []
    corners: list[np.ndarray] = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            assert frame.pts is not None and frame.time_base is not None
            times.append(float(frame.pts * frame.time_base))
            corners.append(frame.to_ndarray(format="gray")[:24, :160].astype(np.int16))
    return times, corners


def test_a_recording_of_a_call_lasts_as_long_as_it_and_holds_each_frame_once(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    take = tmp_path / "take.mp4"
    sink = Watched(open_output(str(take)))
    options = RemoteOptions(
        url=server.url, token=TOKEN, photos=(photo,), consent=True, known_hosts=tmp_path / "known_hosts",
        duration_s=4.0,
    )  # fmt: skip
    client = RemoteClient(options, FaceScene(320, 240, FPS), sink, lambda _: None)
    stats = client.run()
    assert stats.connects == 1 and stats.remote_frames > 20, stats
    times, corners = played_back(take)
    assert len(times) == len(sink.captured)  # every frame written is in the take, once
    # Each frame at its capture time: the take lasts what the frames in it spanned on the clock.
    period = 1 / FPS
    recorded = times[-1] - times[0] + period
    spanned = sink.captured[-1] - sink.captured[0] + period
    assert recorded == pytest.approx(spanned, abs=period), (recorded, spanned)
    assert spanned > 3.0  # and that is the call's length, less the frames still on their way at its end
    assert sorted(set(times)) == times  # rising: nothing written out of order
    # No frame twice: the frame counter in the corner changes from each frame to the next.
    same = [i for i in range(1, len(corners)) if np.abs(corners[i] - corners[i - 1]).mean() < 1.0]
    assert not same, f"frames repeated at {same}"

