"""The arguments of `main.py jobs ...` (file jobs in batches and on a queue)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from models.files.catalogue import names_of_role


def _seconds(text: str) -> float:
    """A finite, positive number of seconds (nan, inf and negatives are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds above 0")
    return value


def chunk_seconds(text: str) -> float:
    """A chunk length: 0 (the whole video as one chunk) or a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: 0 (one chunk) or a number of seconds above 0")
    return value


def _add_job_options(
    p: argparse.ArgumentParser, add_model_args: Callable[[argparse.ArgumentParser], None]
) -> None:
    p.add_argument(
        "--source",
        nargs="+",
        type=Path,
        default=None,
        metavar="PHOTO",
        help="photo(s) of the face to swap in",
    )
    p.add_argument("--map", dest="maps", action="append", default=[], metavar="REF_PHOTO=SOURCE_PHOTO")
    p.add_argument("--reference", type=Path, default=None, help="photo of the person in the videos to swap")
    p.add_argument("--preset", default=None, help="latency preset: ultra-low-latency, balanced, quality")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--provider", default=None, help="ONNX Runtime execution provider (default: auto)")
    p.add_argument("--detector", choices=["det_10g", "scrfd_2.5g", "mtcnn"], default=None)
    p.add_argument(
        "--swapper",
        choices=names_of_role("swapper"),
        default=None,
        metavar="MODEL",
        help="face swap model (default: inswapper_128); `models list` shows them",
    )
    p.add_argument(
        "--frame-enhancer",
        choices=names_of_role("frame_enhancer"),
        default=None,
        metavar="MODEL",
        help="whole-frame super-resolution (Real-ESRGAN x2/x4); --set frame_enhancer.upscale=true "
        "makes the output that many times larger",
    )
    p.add_argument("--label", action="store_true", help='draw a small "AI-modified" mark on the output')
    p.add_argument("--overwrite", action="store_true", help="replace output files that exist")
    p.add_argument(
        "--chunk-seconds", type=chunk_seconds, default=4.0, metavar="S", help="chunk length (default: 4)"
    )
    add_model_args(p)


def add_jobs_arguments(sub: Any, add_model_args: Callable[[argparse.ArgumentParser], None]) -> None:
    jobs = sub.add_parser("jobs", help="video files in, video files out: many at once (docs/JOBS.md)")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True)
    batch = jsub.add_parser(
        "batch",
        help="run many file jobs here, each on its own, with a summary at the end",
        description='Either --jobs FILE (JSON: [{"input": ..., "output": ..., "source": ...}]) or '
        "--targets FOLDER --output-dir FOLDER with one --source for every video in the folder.",
    )
    group = batch.add_mutually_exclusive_group(required=True)
    group.add_argument("--jobs", type=Path, metavar="FILE", help="a JSON jobs file")
    group.add_argument("--targets", type=Path, metavar="FOLDER", help="every video in this folder")
    batch.add_argument("--output-dir", type=Path, default=None, metavar="FOLDER", help="with --targets")
    _add_job_options(batch, add_model_args)
    add_queue_arguments(sub, jsub, add_model_args)


def _add_broker(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        default=None,
        metavar="URL",
        help="the job queue, e.g. redis://host:6379/0 (default: $FACECAST_BROKER_URL; none: this machine)",
    )


def add_queue_arguments(
    sub: Any, jsub: Any, add_model_args: Callable[[argparse.ArgumentParser], None]
) -> None:
    submit = jsub.add_parser("submit", help="queue one file job (or run it here when no queue is set)")
    submit.add_argument(
        "--input", required=True, metavar="VIDEO", help="the video file (a path all workers see)"
    )
    submit.add_argument("--output", required=True, metavar="VIDEO", help="where the result goes")
    submit.add_argument("--wait", action="store_true", help="wait for the job to finish")
    submit.add_argument(
        "--worker-wait",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="with --wait: give up (exit 19, the job stays queued) when no worker answers for S "
        "seconds (default: 60)",
    )
    submit.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="with no queue: worker processes here (default: 1)",
    )
    _add_broker(submit)
    _add_job_options(submit, add_model_args)
    for name, text in (
        ("status", "where a queued job is"),
        ("cancel", "stop a queued job; nothing is written"),
    ):
        p = jsub.add_parser(name, help=text)
        p.add_argument("job_id", metavar="JOB_ID")
        _add_broker(p)
    _add_broker(jsub.add_parser("list", help="the jobs on the queue"))
    worker = sub.add_parser("worker", help="take file-job chunks from the job queue (docs/JOBS.md)")
    _add_broker(worker)
    add_model_args(worker)  # this machine's models folder, instead of the one a job names
    worker.add_argument("--concurrency", type=int, default=1, help="chunks at once (default: 1, one per GPU)")
    worker.add_argument(
        "--visibility-timeout",
        type=float,
        default=None,
        metavar="S",
        help="a task a dead worker held goes to another after S seconds (default: 3600; longer than a chunk)",
    )
