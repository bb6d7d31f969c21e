"""`run --remote URL --input clip.mp4 --output out.mp4`: a video file swapped on a `serve` server.

Every frame goes through the call (the client's every-frame mode: realtime/remote/file_pacing.py)
into a video-only work file at the input's own timestamps; then the file job's assembly writes the
output: the input's sound and subtitles copied beside it, its tags and rotation, the provenance
manifest, under a hidden name renamed into place. Nothing exists under the output's name until the
whole file came back; an existing output is refused without --overwrite, as in a local file job.

Why not the server's jobs API (POST /v1/jobs): it takes files already in the server's jobs folder
and needs a job queue (Redis, workers) beside the server; this needs only the call the live path
already has, and the frames never touch the server's disk.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from functools import partial
from pathlib import Path
from typing import TextIO

from realtime.api import (
    FaceCastError,
    VideoFileSink,
    VideoFileSource,
    VideoFrame,
    can_sign,
    provenance_tags,
    sign_video,
)
from realtime.jobs.assemble import assemble
from realtime.jobs.filejob import JobSpec, check_paths
from realtime.remote.cli import console, remote_options
from realtime.remote.client import RemoteClient
from realtime.remote.client_run import run_call
from realtime.remote.errors import FramesMissingError, RemoteError

WORK_FILE = "video.nut"  # NUT keeps any time base exactly (as a file job's chunks)


class _AtMediaTime:
    """The work file's sink: at open (the source is open by then) it takes the input's time base,
    so each frame lands at its own timestamp, and its rotation, so frames are stored as the input
    stores them (the assembly tags them the same)."""

    def __init__(self, inner: VideoFileSink, source: VideoFileSource) -> None:
        self._inner = inner
        self._source = source

    def open(self, width: int, height: int, fps: float) -> None:
        self._inner.time_base = self._source.time_base
        self._inner.stored_rotation = self._source.rotation
        self._inner.open(width, height, fps)

    def send(self, frame: VideoFrame) -> None:
        self._inner.send(frame)

    def close(self) -> None:
        self._inner.close()

    def abort(self) -> None:
        self._inner.abort()

    @property
    def description(self) -> str:
        return self._inner.description

    @property
    def frames_written(self) -> int:
        return self._inner.frames_written


def run_remote_file(args: argparse.Namespace, out: TextIO) -> int:
    """The file through the server, then assembled; the exit status."""
    say = console(out)
    source_path, output = Path(args.input).expanduser(), Path(args.output).expanduser()
    try:
        options = remote_options(args)
        check_paths(JobSpec(str(source_path), str(output), overwrite=bool(getattr(args, "overwrite", False))))
    except RemoteError as exc:
        say(f"error: {exc.user_message()}")
        return exc.exit_code
    work = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".facecast-remote", dir=output.parent))
    try:
        source = VideoFileSource(source_path)
        sink = _AtMediaTime(VideoFileSink(work / WORK_FILE, b_frames=False), source)
        client = RemoteClient(options, source, sink, say)
        try:
            client.open()  # the input's real size and rate for the line below
            say(f"running: {source.description} -> {args.remote} -> {output}, every frame; Ctrl+C stops")
            stats, code = run_call(client, say)
        except RemoteError as exc:
            say(f"error: {exc.user_message()}")
            return exc.exit_code
        if code:
            return code  # a signal ended it: nothing was written (the file must come back whole)
        if sink.frames_written != stats.file_frames:  # the client checks it; the file must agree
            error = FramesMissingError(
                f"Only {sink.frames_written} of {stats.file_frames} frames reached the work file; "
                "nothing was written."
            )
            say(f"error: {error.user_message()}")
            return error.exit_code
        if output.exists() and not getattr(args, "overwrite", False):
            raise FaceCastError(f"{output} appeared while the file was processed; it is left as it is.")
        # One run id for the whole file: the server marked every frame with it, reconnects included.
        signer = partial(sign_video, title=output.name, run_id=options.run_id) if can_sign(output) else None
        report = assemble(source_path, [work / WORK_FILE], output, extra_tags=provenance_tags(), sign=signer)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kept = ", ".join(report.copied) or "video only"
    lat = stats.latency_ms
    say(
        f"done: {output} ({report.video_frames} of {stats.file_frames} frames, every one swapped by the "
        f"server; {stats.frames_resent} sent again; {kept}); {stats.connects} connection(s), "
        f"frame round trip p50 {lat.p50:.0f} / p99 {lat.p99:.0f} ms"
    )
    for what in report.dropped:
        say(f"warning: the input's {what} stream was left out: {output.suffix} cannot hold it")
    return 0
