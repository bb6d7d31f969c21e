"""Clips for the file-job tests: the astronaut moving, at a constant or a variable frame rate,
with a real AAC sound track, keyframes where asked."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from realtime.tools.bench import make_clip_with_faces

TIME_BASE = Fraction(1, 12800)


def write_clip(
    path: Path,
    frames: int = 60,
    size: tuple[int, int] = (192, 144),
    *,
    fps: int = 25,
    steps: Sequence[int] | None = None,
    audio: bool = True,
    gop: int = 10,
    tags: dict[str, str] | None = None,
) -> Path:
    """steps: each frame's duration in 1/fps units, repeating (VFR: e.g. (1, 1, 3)); None: 1."""
    images, _ = make_clip_with_faces(frames, *size)
    with av.open(str(path), mode="w") as out:
        out.metadata.update(tags or {})
        video = out.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = size[0], size[1], "yuv420p"
        video.time_base = TIME_BASE
        video.codec_context.time_base = TIME_BASE
        video.options = {"crf": "18", "preset": "ultrafast", "g": str(gop), "keyint_min": str(gop)}
        sound = out.add_stream("aac", rate=48000) if audio else None
        if sound is not None:
            sound.metadata["language"] = "deu"
        tick = int(1 / (fps * TIME_BASE))
        pts = 0
        for i, image in enumerate(images):
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts = pts
            pts += tick * (steps[i % len(steps)] if steps else 1)
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        if sound is not None:
            seconds = float(pts * TIME_BASE)
            t = np.arange(int(seconds * 48000)) / 48000
            wave = (0.3 * np.sin(2 * np.pi * 440 * t) * (np.floor(t * 2) % 2)).astype(np.float32)
            for start in range(0, len(wave), 1024):
                block = wave[start : start + 1024][None, :]
                chunk = av.AudioFrame.from_ndarray(np.ascontiguousarray(block), format="fltp", layout="mono")
                chunk.sample_rate, chunk.pts = 48000, start
                out.mux(sound.encode(chunk))
            out.mux(sound.encode(None))
    return path


def video_times(path: Path) -> list[float]:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        tb = s.time_base or TIME_BASE
        return sorted(float(p.pts * tb) for p in c.demux(s) if p.size and p.pts is not None)


def _packets(path: Path, kind: str, digits: int) -> list[tuple[float, bytes]]:
    """The first `kind` stream's packets: (time in seconds, rounded to `digits`, bytes)."""
    with av.open(str(path)) as c:
        streams = [s for s in c.streams if s.type == kind]
        if not streams:
            return []
        tb = streams[0].time_base or TIME_BASE
        return [(round(float((p.pts or 0) * tb), digits), bytes(p)) for p in c.demux(streams[0]) if p.size]


def audio_packets(path: Path) -> list[tuple[float, bytes]]:
    return _packets(path, "audio", 4)


def decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="bgr24") for f in c.decode(video=0)]


# libx264 does not always give the same bitstream for the same frames: its macroblock tree reads
# memory it never set, so two runs of one job (cut and resumed or not) sometimes have a chunk
# encoded differently (docs/JOBS.md, Known issues): mean 0.3-0.6 levels off, single pixels up to
# ~60; up to 1.8 seen here, 1.63 once in CI.
# Frames of the moving clip one step apart differ by 2.4 levels or more, so "the same frame" is
# checked against that: below ENCODER_NOISE, and nearer its own frame than NEIGHBOUR_SHARE of the
# distance to either neighbour (a lost, doubled or swapped frame sits at about 0 from a neighbour
# and 2.4 or more from its own).
ENCODER_NOISE = 2.2  # mean absolute difference, levels
NEIGHBOUR_SHARE = 0.9


def assert_same_frames(output: Path, reference: Path) -> None:
    """`output` holds `reference`'s frames, each in its place (none lost, doubled or swapped for
    a neighbour), equal up to the encoder's own noise."""
    got, want = [f.astype(np.int16) for f in decode(output)], [f.astype(np.int16) for f in decode(reference)]
    assert len(got) == len(want), f"{len(got)} frames, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        own = float(np.abs(g - w).mean())
        assert own < ENCODER_NOISE, f"frame {i} is {own:.2f} levels off the one-run frame"
        for j in (i - 1, i + 1):
            if 0 <= j < len(want):
                other = float(np.abs(g - want[j]).mean())
                assert own < NEIGHBOUR_SHARE * other, (
                    f"frame {i} looks like one-run frame {j} ({other:.2f} vs {own:.2f})"
                )


def with_subtitles(clip: Path, out: Path, srt: str, language: str = "eng") -> Path:
    """`clip`'s streams plus a SubRip track (copied from an .srt file, as a muxer would)."""
    text = out.with_suffix(".srt")
    text.write_text(srt, encoding="utf-8")
    with av.open(str(clip)) as a, av.open(str(text)) as b, av.open(str(out), "w") as o:
        streams = {s.index: o.add_stream_from_template(s) for s in a.streams}
        sub = o.add_stream_from_template(b.streams[0])
        sub.metadata["language"] = language
        for packet in a.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                o.mux(packet)
        for packet in b.demux():
            if packet.dts is not None:
                packet.stream = sub
                o.mux(packet)
    return out


def subtitle_packets(path: Path) -> list[tuple[float, bytes]]:
    return _packets(path, "subtitle", 3)
