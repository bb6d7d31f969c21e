"""The job queue: Celery with Redis as broker and result store.

A submitted job is one `facecast.job` task. The worker that takes it plans the chunks and puts
them on the queue as `facecast.chunk` tasks, which every worker shares, joined by one
`facecast.assemble` task (a chord). Tasks are acknowledged only when done (acks_late) and a worker
takes one at a time (prefetch 1): a worker that dies mid-chunk leaves its chunk on the queue, and
another does it again after the visibility timeout. A chunk's file appears by one rename, so a
chunk done twice is written once, and the output equals a one-machine run's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery, Task, chord

from realtime.api import Settings, StageFactory, provenance_tags
from realtime.jobs.errors import BrokerError
from realtime.jobs.filejob import JobSpec, build_stages, check_paths, finish_job, prepare_job, read_job
from realtime.jobs.manifest import JobLock, done_chunks, job_folder, write_atomically
from realtime.jobs.probe import probe
from realtime.jobs.storage import deliver, output_path, place
from realtime.jobs.workers import process_chunk

log = logging.getLogger(__name__)

BROKER_ENV = "FACECAST_BROKER_URL"
VISIBILITY_ENV = "FACECAST_VISIBILITY_TIMEOUT"
DEFAULT_VISIBILITY_S = 3600  # far longer than a chunk takes (seconds, or minutes on a CPU)
JOB_KEY = "facecast:job:"  # + job id: the job's spec, for status, list and cancel
CANCELLED = "cancelled"  # a marker file in the job's folder: chunk tasks still queued skip


def broker_url(given: str | None = None) -> str | None:
    return given or os.environ.get(BROKER_ENV) or None


def make_app(url: str, visibility_s: float | None = None) -> Celery:
    """The Celery app with FaceCast's tasks; the models are loaded once per worker process."""
    visibility = visibility_s or float(os.environ.get(VISIBILITY_ENV, DEFAULT_VISIBILITY_S))
    app = Celery("facecast", broker=url, backend=url)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_track_started=True,
        result_extended=True,
        broker_transport_options={
            "visibility_timeout": visibility,
            # How often a worker looks for the tasks of dead workers: a few times per timeout, at
            # most every 10 s (the default sweep, every 100 s, outlasted a short timeout many times).
            "unacked_restore_interval": max(1, min(10, int(visibility / 3))),
            "unacked_restore_throttle": 1,
        },
        result_backend_transport_options={"visibility_timeout": visibility},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )
    built: dict[str, tuple[Settings, StageFactory]] = {}  # this worker's loaded models, by settings
    lock = threading.Lock()

    def stages_for(spec: JobSpec) -> tuple[Settings, StageFactory]:
        key = spec.settings_key() + repr((spec.models_dir, spec.allow_unverified))
        with lock:
            if key not in built:
                built[key] = build_stages(spec)
            return built[key]

    @app.task(name="facecast.job", bind=True)
    def job_task(self: Task, spec_json: str) -> Any:
        spec = JobSpec.from_json(spec_json)
        check_paths(spec)
        spec = place(spec).spec  # S3 objects: the input fetched into the (shared) work folder
        check_paths(spec)
        info = probe(Path(spec.input))
        folder = job_folder(Path(spec.output))
        with JobLock(folder, shared=True):
            manifest, done = prepare_job(spec, info)
            (folder / CANCELLED).unlink(missing_ok=True)  # submitted again after a cancel
        todo = [c.index for c in manifest.chunks if c.index not in done]
        # The job's result becomes the assembly's: status and --wait follow the whole job.
        return self.replace(chord([chunk_task.s(spec_json, i) for i in todo], assemble_task.s(spec_json)))

    @app.task(name="facecast.chunk", bind=True)
    def chunk_task(self: Task, spec_json: str, index: int) -> int:
        spec = JobSpec.from_json(spec_json)
        folder = job_folder(output_path(spec.output))
        if (folder / CANCELLED).exists():
            return 0
        spec = place(spec).spec
        with JobLock(folder, shared=True):  # a run of the same job on one machine waits its turn
            return process_chunk(spec, index, stages_for(spec))

    @app.task(name="facecast.assemble", bind=True)
    def assemble_task(self: Task, _frames: list[int], spec_json: str) -> dict[str, Any]:
        spec = JobSpec.from_json(spec_json)
        folder = job_folder(output_path(spec.output))
        if (folder / CANCELLED).exists():
            return {"output": spec.output, "cancelled": True}
        placed = place(spec)
        local = placed.spec
        manifest = read_job(local)
        left = {c.index for c in manifest.chunks} - done_chunks(folder, manifest)
        if left:
            raise RuntimeError(f"chunks {sorted(left)} of {spec.output} are missing")
        result = finish_job(local, manifest, probe(Path(local.input)), provenance_tags())
        deliver(placed)
        return {"output": spec.output, "frames": result.frames, "chunks": result.chunks}

    return app


@dataclass(frozen=True, slots=True)
class JobStatus:
    job_id: str
    state: str  # PENDING, STARTED, SUCCESS, FAILURE, REVOKED, CANCELLED
    input: str
    output: str
    chunks_done: int
    chunks: int
    detail: str = ""

    def line(self) -> str:
        progress = f"{self.chunks_done}/{self.chunks} chunks" if self.chunks else "not planned yet"
        extra = f"; {self.detail}" if self.detail else ""
        return f"{self.job_id}  {self.state:<9} {progress}  {self.input} -> {self.output}{extra}"


def _redis(app: Celery) -> Any:
    import redis

    return redis.Redis.from_url(app.conf.broker_url)


def check_broker(app: Celery, timeout_s: float = 3.0) -> None:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout_s)
    except Exception as err:  # kombu raises its own, redis's and OSError by transport
        raise BrokerError(
            f"The job queue at {app.conf.broker_url} cannot be reached ({err}).",
            hint=f"Start Redis there, or unset {BROKER_ENV} to run jobs on this machine.",
        ) from err


def submit(app: Celery, spec: JobSpec) -> str:
    check_broker(app)
    check_paths(spec)
    result = app.send_task("facecast.job", args=[spec.to_json()])
    _redis(app).set(JOB_KEY + result.id, json.dumps({"spec": spec.to_json(), "submitted": time.time()}))
    return str(result.id)


def _spec_of(app: Celery, job_id: str) -> JobSpec:
    raw = _redis(app).get(JOB_KEY + job_id)
    if raw is None:
        from realtime.jobs.errors import JobFailedError

        raise JobFailedError(f"No job {job_id} on this queue.", hint="`main.py jobs list` shows the jobs.")
    return JobSpec.from_json(json.loads(raw)["spec"])


def status(app: Celery, job_id: str) -> JobStatus:
    check_broker(app)
    spec = _spec_of(app, job_id)
    result = app.AsyncResult(job_id)
    state, detail = str(result.state), ""
    folder = job_folder(output_path(spec.output))
    if (folder / CANCELLED).exists():
        state = "CANCELLED"
    elif state == "FAILURE":
        detail = str(result.result)
    done = chunks = 0
    manifest = None
    try:
        manifest = read_job(dataclasses.replace(spec, output=str(output_path(spec.output))))
    except Exception as err:  # finished (folder gone) or not planned yet
        log.debug("no plan for %s: %s", job_id, err)
    if manifest is not None:
        chunks, done = len(manifest.chunks), len(done_chunks(folder, manifest))
    if state == "SUCCESS":
        detail = "done"
    return JobStatus(job_id, state, spec.input, spec.output, done, chunks, detail)


def list_jobs(app: Celery) -> list[JobStatus]:
    check_broker(app)
    keys = sorted(k.decode()[len(JOB_KEY) :] for k in _redis(app).scan_iter(JOB_KEY + "*"))
    return [status(app, k) for k in keys]


def cancel(app: Celery, job_id: str) -> JobStatus:
    """Queued chunks are skipped, the one in progress finishes, nothing is assembled; the output
    is not written. The finished chunks are removed with the folder when the job is next run."""
    check_broker(app)
    spec = _spec_of(app, job_id)
    folder = job_folder(output_path(spec.output))
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / CANCELLED, "cancelled\n")
    app.control.revoke(job_id)
    return status(app, job_id)


def wait(app: Celery, job_id: str, timeout_s: float | None = None) -> dict[str, Any]:
    result = app.AsyncResult(job_id)
    value = result.get(timeout=timeout_s, propagate=True, interval=0.2)
    while hasattr(value, "get") and not isinstance(value, dict):  # a replaced task's chord
        value = value.get(timeout=timeout_s, interval=0.2)
    return dict(value)


def run_worker(
    app: Celery, concurrency: int = 1, queues: str | None = None, loglevel: str = "WARNING"
) -> None:
    argv = [
        "worker",
        f"--concurrency={concurrency}",
        f"--loglevel={loglevel}",
        "--without-gossip",
        "--without-mingle",
    ]
    if queues:
        argv.append(f"--queues={queues}")
    app.worker_main(argv)
