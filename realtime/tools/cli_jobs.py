"""`main.py run` for a video file into a video file (a file job: everything kept, resumable),
and the batch and queue commands around it (docs/JOBS.md)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from realtime.lifecycle.signals import SafeOutput

if TYPE_CHECKING:  # imported lazily, so that `--help` stays instant
    from realtime.jobs.filejob import JobSpec, Progress, StopRequest

_LIVE_OUTPUTS = ("vcam", "window", "null")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")


def video_files_in_and_out(args: argparse.Namespace) -> bool:
    """A video file (or an s3:// object) in and a video file out."""
    output = str(args.output).strip()
    if output.lower() in _LIVE_OUTPUTS or output.isdigit() or Path(output).suffix.lower() in _IMAGE_SUFFIXES:
        return False
    text = str(args.input)
    if text.startswith("s3://"):
        return True
    if "://" in text or text.isdigit() or text.startswith("/dev/"):
        return False
    return Path(text).suffix.lower() not in _IMAGE_SUFFIXES


def is_file_job(args: argparse.Namespace) -> bool:
    """A video file in and a video file out, played as fast as it goes: the file-job path."""
    live = getattr(args, "remote", None) or args.loop or args.realtime or args.decoder == "nvdec"
    return video_files_in_and_out(args) and not live


def is_remote_file_job(args: argparse.Namespace) -> bool:
    """The same through a `serve` server (`--remote`): every frame through the call, then the
    file job's assembly (realtime.jobs.remote_file); --realtime and --loop keep the live path."""
    local_only = str(args.input).startswith("s3://") or args.loop or args.realtime
    return bool(getattr(args, "remote", None)) and video_files_in_and_out(args) and not local_only


def spec_from_args(
    args: argparse.Namespace, input_path: str | None = None, output: str | None = None
) -> JobSpec:
    from realtime.jobs.filejob import JobSpec
    from realtime.tools.cli_overrides import checked_overrides

    checked_overrides(args)  # a bogus --set, or one a flag contradicts, is refused here
    overrides = list(args.overrides)
    if args.provider:
        overrides.append(f"pipeline.provider={args.provider}")
    if args.detector:
        overrides.append(f"detector.model={args.detector}")
    if args.swapper:
        overrides.append(f"swap.model={args.swapper}")
    if getattr(args, "frame_enhancer", None):
        overrides.append(f"frame_enhancer.model={args.frame_enhancer}")
    if args.label:
        overrides.append("composite.disclosure_label=true")
    return JobSpec(
        input=_location(input_path or args.input),
        output=_location(output or args.output),
        source=tuple(str(p) for p in args.source or ()),
        maps=tuple(args.maps),
        reference=str(args.reference) if args.reference else None,
        models_dir=str(args.models_dir) if args.models_dir else None,
        allow_unverified=args.allow_unverified,
        preset=args.preset,
        overrides=tuple(overrides),
        chunk_s=getattr(args, "chunk_seconds", 4.0),
        overwrite=getattr(args, "overwrite", False),
    )


def _location(text: str) -> str:
    """A path (with ~ expanded), or an s3:// object as it is."""
    return text if str(text).startswith("s3://") else str(Path(text).expanduser())


@contextmanager
def stop_on_signals(say: Callable[[str], None]) -> Iterator[StopRequest]:
    """SIGINT/SIGTERM/SIGHUP (a closed terminal) ask the job to stop after the frame in progress
    (the finished chunks are kept); the second says to wait; the third quits at once (the next
    run redoes the chunk)."""
    import os

    from realtime.jobs.filejob import StopRequest

    stop = StopRequest()
    count = [0]

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        count[0] += 1
        if count[0] == 1:
            stop.request(signum)
        elif count[0] == 2:
            say("stopping after this frame; please wait (once more quits at once)")
        else:
            os._exit(128 + signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        wanted = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
        previous = {int(s): signal.signal(s, on_signal) for s in wanted}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def progress_bar(out: TextIO, label: str) -> Iterator[Progress]:
    """Frames, fps and ETA on a terminal; nothing when the output is a file or a pipe."""
    if not getattr(out, "isatty", lambda: False)():
        yield lambda done, total: None
        return
    from tqdm import tqdm

    bar = tqdm(total=0, unit="frame", desc=label, file=out, dynamic_ncols=True, leave=True)
    lock = threading.Lock()

    def update(done: int, total: int) -> None:
        with lock:
            if bar.total != total:
                bar.total = total
                bar.refresh()
            bar.update(done - bar.n)

    try:
        yield update
    finally:
        bar.close()


def cmd_file_job(args: argparse.Namespace, out: TextIO) -> int:
    """`main.py run --input VIDEO --output VIDEO`: the file job, on this machine."""
    from realtime.io.provenance import provenance_tags
    from realtime.jobs.filejob import build_stages, check_paths, run_file_job

    spec = spec_from_args(args)
    check_paths(spec)  # before the models load: a typo must not wait for them
    show = SafeOutput(out)
    settings, stages = build_stages(spec)
    for note in getattr(stages, "fallbacks", []):
        show(f"warning: {note}")
    with stop_on_signals(SafeOutput(sys.stderr)) as stop, progress_bar(out, Path(spec.output).name) as bar:
        result = run_file_job(spec, settings, stages, stop, bar, provenance_tags())
    kept = ", ".join(result.report.copied) or "video only"
    show(f"done: {result.output} ({result.frames} frames, {result.chunks} chunks; {kept})")
    for what in result.report.dropped:
        show(f"warning: the input's {what} stream was left out: {Path(spec.output).suffix} cannot hold it")
    if result.report.unsigned:
        show(f"warning: {result.output} carries no C2PA manifest (signing failed: {result.report.unsigned})")
    return 0


def cmd_jobs(args: argparse.Namespace, out: TextIO) -> int:
    """`main.py jobs batch ...`."""
    if args.jobs_command == "batch":
        return _cmd_batch(args, out)
    if args.jobs_command == "submit":
        return _cmd_submit(args, out)
    if args.jobs_command in ("status", "cancel", "list"):
        return _cmd_queue(args, out)
    raise AssertionError(f"unknown jobs command {args.jobs_command}")


def _cmd_batch(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.api import ExitCode, SourceError
    from realtime.io.provenance import provenance_tags
    from realtime.jobs.batch import BatchItem, run_batch, specs_for_folder, specs_from_jobs_file

    template = spec_from_args(args, input_path=".", output=".")
    if args.jobs is not None:
        specs = specs_from_jobs_file(args.jobs, template)
    else:
        if args.output_dir is None:
            raise SourceError("--targets needs --output-dir FOLDER: where the results go.")
        specs = specs_for_folder(args.targets, args.output_dir, template)
    show = SafeOutput(out)

    def on_done(item: BatchItem) -> None:
        if item.ok and item.result is not None:
            show(f"ok      {item.spec.input} -> {item.spec.output} ({item.result.frames} frames)")
        else:
            show(f"FAILED  {item.spec.input}: {item.error}")

    with stop_on_signals(SafeOutput(sys.stderr)) as stop:
        items = run_batch(specs, stop, on_done, tags=provenance_tags())
    failed = [i for i in items if not i.ok]
    show(f"batch: {len(items) - len(failed)} of {len(specs)} jobs done, {len(failed)} failed")
    return ExitCode.SOME_JOBS_FAILED if failed else 0


def cmd_bench_jobs(args: argparse.Namespace, out: TextIO) -> int:
    """`main.py bench --jobs`: the file-job benchmark on the model doubles (offline)."""
    import json
    import tempfile
    from dataclasses import asdict

    import cv2

    from realtime.api import write_model_doubles
    from realtime.jobs.bench import bench_jobs
    from realtime.tools.bench import astronaut_bgr, make_clip_with_faces

    with tempfile.TemporaryDirectory(prefix="facecast-bench-") as tmp:
        folder = Path(tmp)
        models = Path(args.models_dir) if args.models_dir else folder / "models"
        if args.models_dir is None:
            write_model_doubles(models)
        photo = folder / "me.png"
        cv2.imwrite(str(photo), astronaut_bgr()[:, ::-1].copy())
        images, _ = make_clip_with_faces(args.frames, args.width, args.height)
        result = bench_jobs(images, photo, models)
    if args.json:
        print(json.dumps(asdict(result), indent=1), file=out)
    else:
        for line in result.lines():
            print(line, file=out)
    return 0


def _app(args: argparse.Namespace, required: bool = True, worker_models: Any = None) -> Any:
    from realtime.api import job_names
    from realtime.jobs.errors import BrokerError
    from realtime.jobs.queue import broker_url, make_app

    url = broker_url(getattr(args, "broker", None))
    if url is None:
        if not required:
            return None
        raise BrokerError(
            "No job queue is set.", hint=f"Pass --broker redis://HOST:6379/0 or set {job_names.BROKER_ENV}."
        )
    return make_app(url, getattr(args, "visibility_timeout", None), worker_models)


def cmd_worker(args: argparse.Namespace, out: TextIO) -> int:
    """`main.py worker`: take chunks from the queue until stopped (SIGTERM: after the chunk in hand)."""
    from realtime.api import ModelOptions
    from realtime.jobs.queue import check_broker, run_worker

    models = ModelOptions(models_dir=args.models_dir, allow_unverified=args.allow_unverified)
    app = _app(args, worker_models=models if args.models_dir or args.allow_unverified else None)
    check_broker(app)
    print(f"worker: taking file-job chunks from {app.conf.broker_url}; Ctrl+C stops", file=out, flush=True)
    run_worker(app, concurrency=args.concurrency)
    return 0


def _cmd_submit(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.io.provenance import provenance_tags
    from realtime.jobs import queue
    from realtime.jobs.process_pool import run_with_workers

    spec = spec_from_args(args)
    show = SafeOutput(out)
    app = _app(args, required=False)
    if app is None:  # no queue: the job runs here, now
        if args.workers > 1:
            result = run_with_workers(spec, args.workers, provenance_tags())
            show(f"done: {result.output} ({result.frames} frames, {result.chunks} chunks)")
            return 0
        return cmd_file_job(args, out)
    job_id = queue.submit(app, spec)
    show(job_id)
    if not args.wait:
        return 0
    limits = queue.WaitLimits(worker_s=args.worker_wait)
    value = queue.wait(app, job_id, say=SafeOutput(sys.stderr), limits=limits)
    show(f"done: {value['output']} ({value['frames']} frames, {value['chunks']} chunks)")
    return 0


def _cmd_queue(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.jobs import queue

    app = _app(args)
    show = SafeOutput(out)
    if args.jobs_command == "list":
        jobs = queue.list_jobs(app)
        for job in jobs:
            show(job.line())
        if not jobs:
            show("no jobs on this queue")
        return 0
    job = queue.status(app, args.job_id) if args.jobs_command == "status" else queue.cancel(app, args.job_id)
    show(job.line())
    return 0
