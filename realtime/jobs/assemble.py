"""The finished file: the chunks' video joined, the input's audio and subtitle streams copied
beside it in sync (packets as they are, re-encoded only where the container cannot hold them),
its metadata kept; written under a hidden name and renamed into place in one step."""

from __future__ import annotations

import heapq
import logging
import os
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import av
import av.error

from realtime.api import ASSEMBLING, PartialLock, SinkError, new_partial_path

log = logging.getLogger(__name__)

# Tags the muxer writes itself; copied over they would describe the input's file, not this one.
_OWN_TAGS = frozenset({"encoder", "major_brand", "minor_version", "compatible_brands", "duration"})

# Plain-text subtitles MP4 and MOV cannot hold as they are: rewritten as MP4's own timed text.
_TEXT_SUBTITLES = frozenset({"subrip", "srt", "text", "webvtt"})
# The one style ffmpeg's timed-text writer needs to start (it builds the sample description from it).
_TIMED_TEXT_STYLE = (
    b"[Script Info]\r\nScriptType: v4.00+\r\nPlayResX: 384\r\nPlayResY: 288\r\n\r\n[V4+ Styles]\r\n"
    b"Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, Bold, "
    b"Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, Shadow, "
    b"Alignment, MarginL, MarginR, MarginV, Encoding\r\n"
    b"Style: Default,Arial,16,&Hffffff,&Hffffff,&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,0\r\n\r\n"
    b"[Events]\r\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\r\n"
)
_MARKUP = re.compile(rb"<[^>]*>|\{[^}]*\}")  # SubRip/WebVTT tags and ASS overrides: timed text has none


@dataclass(slots=True)
class AssembleReport:
    copied: list[str] = field(default_factory=list)  # "audio aac (copied)", "subtitle srt (as mov_text)", ...
    dropped: list[str] = field(default_factory=list)  # streams the output's container cannot hold
    video_frames: int = 0  # what the chunks held: fewer than planned where the input was damaged
    unsigned: str = ""  # why the output carries no C2PA manifest although one was asked for, if so


Signer = Callable[[Path, Path], None]  # (finished file, signed copy to write)


def assemble(
    source: Path,
    chunks: Sequence[Path],
    output: Path,
    *,
    extra_tags: dict[str, str] | None = None,
    sign: Signer | None = None,
) -> AssembleReport:
    """Write `output` from the video of `chunks` (in order) and the other streams of `source`;
    `sign` embeds the provenance manifest before the file takes its name."""
    temp = new_partial_path(output, ASSEMBLING)
    signed = new_partial_path(output, ASSEMBLING)
    output.parent.mkdir(parents=True, exist_ok=True)
    lock = PartialLock(temp)
    report = AssembleReport()
    try:
        with ExitStack() as stack:
            src = stack.enter_context(av.open(str(source)))
            parts = [stack.enter_context(av.open(str(p))) for p in chunks]
            options = {"movflags": "+faststart"} if output.suffix.lower() in (".mp4", ".mov", ".m4v") else {}
            out = stack.enter_context(av.open(str(temp), mode="w", options=options))
            out.metadata.update({k: v for k, v in src.metadata.items() if k.lower() not in _OWN_TAGS})
            out.metadata.update(extra_tags or {})
            video_out = out.add_stream_from_template(parts[0].streams.video[0])
            rotation = _display_rotation(source)
            if rotation:
                video_out.set_display_rotation(rotation)  # stored as the input was, tagged the same
            _copy_stream_tags(src.streams.video[0], video_out)
            others = _add_other_streams(src, out, report)
            streams: list[Iterator[tuple[float, int, av.Packet, av.stream.Stream]]] = [
                _chunk_packets(parts, video_out)
            ]
            if others:
                streams.append(_source_packets(src, others))
            for _, kind, packet, stream in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
                packet.stream = stream
                out.mux(packet)
                report.video_frames += kind == 0
        if sign is not None and _signed(sign, temp, signed, output, report):
            os.replace(signed, output)
            _remove(temp)
        else:
            os.replace(temp, output)
    except (OSError, av.error.FFmpegError, ValueError) as err:
        _remove(temp)
        _remove(signed)
        raise SinkError(f"Could not write {output} ({getattr(err, 'strerror', None) or err}).") from err
    except BaseException:
        _remove(temp)
        _remove(signed)
        raise
    finally:
        lock.release()
    return report


def _signed(sign: Signer, temp: Path, signed: Path, output: Path, report: AssembleReport) -> bool:
    """Sign the finished file into `signed`. A signer that fails (a full disk, a bad key) leaves the
    output unsigned, with a warning, as a recording is: the video is not thrown away for it."""
    try:
        sign(temp, signed)
    except Exception as err:  # c2pa raises its own errors, a full disk among them
        _remove(signed)
        report.unsigned = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        log.warning("Could not sign %s with its C2PA manifest; it is kept unsigned: %s", output, err)
        return False
    return True


def _add_other_streams(
    src: av.container.InputContainer, out: av.container.OutputContainer, report: AssembleReport
) -> dict[int, av.stream.Stream]:
    """Audio and subtitle streams of the input, by input index, as streams of the output."""
    mapped: dict[int, av.stream.Stream] = {}
    for stream in src.streams:
        if stream.type not in ("audio", "subtitle"):
            continue
        what = f"{stream.type} {stream.codec_context.name}"
        if _needs_timed_text(out, stream):
            timed = _timed_text_stream(out, stream, what, report)
            if timed is not None:
                mapped[stream.index] = timed
            continue
        if not _container_holds(out, stream.codec_context.name):
            report.dropped.append(what)
            log.warning("%s cannot hold the %s stream; it is left out.", out.format.name, what)
            continue
        try:
            copy = out.add_stream_from_template(stream)
        except (ValueError, av.error.FFmpegError) as err:
            report.dropped.append(what)
            log.warning("The %s stream cannot be copied (%s); it is left out.", what, err)
            continue
        _copy_stream_tags(stream, copy)
        mapped[stream.index] = copy
        report.copied.append(f"{what} (copied)")
    return mapped


def _display_rotation(source: Path) -> int:
    """The input video's display rotation (degrees counterclockwise), from its first frame."""
    try:
        with av.open(str(source)) as src:
            frame = next(src.decode(video=0), None)
    except av.error.FFmpegError as err:
        log.debug("The input's rotation could not be read (%s); none is written.", err)
        return 0
    return 0 if frame is None else round(frame.rotation or 0) % 360


def _needs_timed_text(out: av.container.OutputContainer, stream: av.stream.Stream) -> bool:
    name = stream.codec_context.name
    return (
        stream.type == "subtitle"
        and name in _TEXT_SUBTITLES
        and not _container_holds(out, name)
        and _container_holds(out, "mov_text")
    )


def _timed_text_stream(
    out: av.container.OutputContainer, stream: av.stream.Stream, what: str, report: AssembleReport
) -> av.stream.Stream | None:
    """A timed-text (mov_text) stream for a plain-text subtitle stream; None, said, when it fails."""
    try:
        timed = out.add_stream("mov_text")
        timed.time_base = stream.time_base
        timed.codec_context.subtitle_header = _TIMED_TEXT_STYLE
        timed.codec_context.open()
    except (ValueError, av.error.FFmpegError) as err:
        report.dropped.append(what)
        log.warning("The %s stream cannot be written as timed text (%s); it is left out.", what, err)
        return None
    _copy_stream_tags(stream, timed)
    report.copied.append(f"{what} (as mov_text)")
    return timed


def timed_text_sample(text: bytes) -> bytes:
    """One subtitle's text as an MP4 timed-text sample: its length (16 bits, big-endian), then
    the UTF-8 text without markup."""
    plain = _MARKUP.sub(b"", text).strip()[:0xFFFF]
    return struct.pack(">H", len(plain)) + plain


def _container_holds(out: av.container.OutputContainer, codec: str) -> bool:
    supported = getattr(out, "supported_codecs", None)
    return supported is None or codec in supported


def _copy_stream_tags(src: av.stream.Stream, dst: av.stream.Stream) -> None:
    for key in ("language", "title", "handler_name"):
        if key in src.metadata:
            dst.metadata[key] = src.metadata[key]


def _chunk_packets(
    parts: Sequence[av.container.InputContainer], stream: av.stream.Stream
) -> Iterator[tuple[float, int, av.Packet, av.stream.Stream]]:
    for part in parts:
        for packet in part.demux(part.streams.video[0]):
            if packet.size == 0 or packet.pts is None:
                continue
            if packet.dts is None:  # no B-frames in a chunk: each packet decodes when it shows
                packet.dts = packet.pts
            yield float(packet.dts * packet.time_base), 0, packet, stream


def _source_packets(
    src: av.container.InputContainer, mapped: dict[int, av.stream.Stream]
) -> Iterator[tuple[float, int, av.Packet, av.stream.Stream]]:
    wanted = [s for s in src.streams if s.index in mapped]
    try:
        for packet in src.demux(wanted):
            dts = packet.dts
            if packet.size == 0 or dts is None:
                continue
            target = mapped[packet.stream.index]
            if target.codec_context.name == "mov_text" and packet.stream.codec_context.name != "mov_text":
                packet = _as_timed_text(packet)
            yield float(dts * packet.time_base), 1, packet, target
    except av.error.FFmpegError as err:  # a damaged input: its sound ends where its picture does
        log.warning("Reading the input's other streams stopped early (%s).", err)


def _as_timed_text(packet: av.Packet) -> av.Packet:
    timed = av.Packet(timed_text_sample(bytes(packet)))
    timed.pts, timed.dts, timed.duration = packet.pts, packet.dts, packet.duration
    timed.time_base = packet.time_base
    return timed


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        log.warning("Could not remove %s: %s", path, err)
