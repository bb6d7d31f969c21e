"""A file job's building blocks in the I/O layer: a part of a video read by its timestamps, and
frames written at their own media times (variable frame rate kept, frame for frame)."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import av
import pytest

from realtime.core.frames import VideoFrame
from realtime.io.file_sinks import VideoFileSink
from realtime.io.video_file import VideoFileSource
from tests.fixtures_media import make_test_video, read_frame_number, synthetic_frame


def stream_pts(path: Path) -> tuple[Fraction, list[int]]:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        assert s.time_base is not None
        return s.time_base, sorted(p.pts for p in c.demux(s) if p.size and p.pts is not None)


def test_a_part_of_a_file_is_read_from_its_start_to_before_its_end(tmp_path: Path) -> None:
    clip = make_test_video(tmp_path / "clip.mp4", frames=60, gop=10)
    tb, pts = stream_pts(clip)
    source = VideoFileSource(clip, start_pts=pts[23], end_pts=pts[41])  # 23 is mid-GOP: seek, then skip
    source.open()
    numbers, times = [], []
    while (frame := source.read()) is not None:
        numbers.append(read_frame_number(frame.image))
        times.append(frame.pts)
    source.close()
    assert numbers == list(range(23, 41))
    assert times == pytest.approx([float(p * tb) for p in pts[23:41]])
    assert source.time_base == tb


@pytest.mark.parametrize("suffix", [".nut", ".mkv", ".mp4"])
def test_frames_keep_their_own_times_when_a_time_base_is_given(tmp_path: Path, suffix: str) -> None:
    tb = Fraction(1, 12800)
    ticks = [0, 512, 1024, 2560, 3072, 5120, 5632]  # 25 fps with pauses: a variable frame rate
    out = tmp_path / f"vfr{suffix}"
    sink = VideoFileSink(out, time_base=tb, b_frames=False)
    sink.open(96, 64, 25.0)
    for i, tick in enumerate(ticks):
        sink.send(VideoFrame(synthetic_frame(i, (96, 64)), i, time.perf_counter(), float(tick * tb)))
    sink.close()
    got_tb, got = stream_pts(out)
    assert [float(p * got_tb) for p in got] == pytest.approx([float(t * tb) for t in ticks], abs=1e-3)
    with av.open(str(out)) as c:  # without B-frames, packets come in the order they are shown
        in_file_order = [p.pts for p in c.demux(video=0) if p.size]
    assert in_file_order == got
