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
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery, Task, chord
from celery.exceptions import ChordError, Ignore, Reject, Retry, TaskRevokedError
from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from realtime.api import FaceCastError, ModelOptions, Settings, StageFactory, job_names, provenance_tags
from realtime.jobs.errors import BrokerError, JobFailedError, NoWorkerError
from realtime.jobs.filejob import (
    JobSpec,
    build_stages,
    check_paths,
    finish_job,
    prepare_job,
    process_chunk,
    read_job,
)
from realtime.jobs.manifest import JobLock, done_chunks, job_folder, write_atomically
from realtime.jobs.model_cache import LoadedModels
from realtime.jobs.probe import probe
from realtime.jobs.storage import deliver, output_path, place

log = logging.getLogger(__name__)

# What a queue that went away raises, by the layer that noticed (redis directly, or kombu's transport).
_QUEUE_DOWN = (RedisConnectionError, RedisTimeoutError, OperationalError, ConnectionError, TimeoutError)

VISIBILITY_ENV = "FACECAST_VISIBILITY_TIMEOUT"
DEFAULT_VISIBILITY_S = 3600  # far longer than a chunk takes (seconds, or minutes on a CPU)
MODEL_SETTINGS_KEPT = 2  # a worker keeps the models of this many settings loaded (each is ~1 GB)


def broker_url(given: str | None = None) -> str | None:
    return given or os.environ.get(job_names.BROKER_ENV) or None


def make_app(
    url: str, visibility_s: float | None = None, worker_models: ModelOptions | None = None
) -> Celery:
    """The Celery app with FaceCast's tasks; the models are loaded once per worker process.
    `worker_models`: this worker's own models folder (`main.py worker --models-dir`), used
    instead of the one the job was submitted with."""
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
        # A broker that restarts (with its data kept, as the Kubernetes config runs it) must not fail
        # the chunks in progress: they finish, and a chunk done twice is written once.
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    loaded: LoadedModels[tuple[Settings, StageFactory]] = LoadedModels(
        MODEL_SETTINGS_KEPT
    )  # this worker's models, by settings

    def local(spec: JobSpec) -> JobSpec:
        """The spec as this worker runs it: its own models folder, where it was given one."""
        if worker_models is None:
            return spec
        folder = worker_models.models_dir
        return dataclasses.replace(
            spec,
            models_dir=str(folder) if folder is not None else spec.models_dir,
            allow_unverified=spec.allow_unverified or worker_models.allow_unverified,
        )

    def stages_for(spec: JobSpec) -> tuple[Settings, StageFactory]:
        key = spec.settings_key() + repr((spec.models_dir, spec.allow_unverified))
        return loaded.get(key, lambda: build_stages(spec))

    @app.task(name=job_names.JOB_TASK, bind=True)
    def job_task(self: Task, spec_json: str) -> Any:
        with _told_as_failures("planning a job"):
            spec = JobSpec.from_json(spec_json)
            check_paths(spec)
            spec = place(spec).spec  # S3 objects: the input fetched into the (shared) work folder
            check_paths(spec)
            info = probe(Path(spec.input))
            folder = job_folder(Path(spec.output))
            with JobLock(folder, shared=True):
                manifest, done = prepare_job(spec, info)
                (folder / job_names.CANCELLED).unlink(missing_ok=True)  # submitted again after a cancel
            todo = [c.index for c in manifest.chunks if c.index not in done]
            # The job's result becomes the assembly's: status and --wait follow the whole job.
            return self.replace(chord([chunk_task.s(spec_json, i) for i in todo], assemble_task.s(spec_json)))

    @app.task(name=job_names.CHUNK_TASK, bind=True)
    def chunk_task(self: Task, spec_json: str, index: int) -> int:
        with _told_as_failures(f"chunk {index}"):
            spec = local(JobSpec.from_json(spec_json))
            folder = job_folder(output_path(spec.output))
            if (folder / job_names.CANCELLED).exists():
                return 0
            spec = place(spec).spec
            with JobLock(folder, shared=True):  # a run of the same job on one machine waits its turn
                return process_chunk(spec, index, stages_for(spec))

    @app.task(name=job_names.ASSEMBLE_TASK, bind=True)
    def assemble_task(self: Task, _frames: list[int], spec_json: str) -> dict[str, Any]:
        with _told_as_failures("assembling a job"):
            spec = JobSpec.from_json(spec_json)
            folder = job_folder(output_path(spec.output))
            if (folder / job_names.CANCELLED).exists():
                return {"output": spec.output, "cancelled": True}
            placed = place(spec)
            local_spec = placed.spec
            manifest = read_job(local_spec)
            left = {c.index for c in manifest.chunks} - done_chunks(folder, manifest)
            if left:
                raise JobFailedError(f"Chunks {sorted(left)} of {spec.output} are missing.")
            result = finish_job(local_spec, manifest, probe(Path(local_spec.input)), provenance_tags())
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

    def progress(self) -> str:
        """Where the job is, in words: its chunks once planned, else what its state says."""
        if self.chunks:
            return f"{self.chunks_done}/{self.chunks} chunks"
        return _UNPLANNED.get(self.state, "not planned yet")

    def line(self) -> str:
        extra = f"; {self.detail}" if self.detail else ""
        return f"{self.job_id}  {self.state:<9} {self.progress()}  {self.input} -> {self.output}{extra}"


# A job without a plan to count chunks in: not planned yet, or its folder is gone because it ended.
_UNPLANNED = {
    "PENDING": "queued, not planned yet",
    "SUCCESS": "finished",
    "FAILURE": "failed",
    "REVOKED": "cancelled",
    "CANCELLED": "cancelled",
}


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
            hint=f"Start Redis there, or unset {job_names.BROKER_ENV} to run jobs on this machine.",
        ) from err


def submit(app: Celery, spec: JobSpec) -> str:
    check_broker(app)
    check_paths(spec)
    result = app.send_task(job_names.JOB_TASK, args=[spec.to_json()])
    _redis(app).set(
        job_names.JOB_KEY + result.id, json.dumps({"spec": spec.to_json(), "submitted": time.time()})
    )
    return str(result.id)


def _spec_of(app: Celery, job_id: str) -> JobSpec:
    raw = _redis(app).get(job_names.JOB_KEY + job_id)
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
    if (folder / job_names.CANCELLED).exists():
        state = "CANCELLED"
    elif state == "FAILURE":
        cause = result.result
        detail = _chord_cause(app, cause) if isinstance(cause, ChordError) else str(cause)
    done = chunks = 0
    manifest = None
    try:
        manifest = read_job(dataclasses.replace(spec, output=str(output_path(spec.output))))
    except Exception as err:  # finished (folder gone) or not planned yet
        log.debug("no plan for %s: %s", job_id, err)
    if manifest is not None:
        chunks, done = len(manifest.chunks), len(done_chunks(folder, manifest))
    if state == "SUCCESS":
        detail = f"{spec.output} written"
    return JobStatus(job_id, state, spec.input, spec.output, done, chunks, detail)


def list_jobs(app: Celery) -> list[JobStatus]:
    check_broker(app)
    keys = sorted(
        k.decode()[len(job_names.JOB_KEY) :] for k in _redis(app).scan_iter(job_names.JOB_KEY + "*")
    )
    return [status(app, k) for k in keys]


def cancel(app: Celery, job_id: str) -> JobStatus:
    """Queued chunks are skipped, the one in progress finishes, nothing is assembled; the output
    is not written. The finished chunks are removed with the folder when the job is next run."""
    check_broker(app)
    spec = _spec_of(app, job_id)
    folder = job_folder(output_path(spec.output))
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / job_names.CANCELLED, "cancelled\n")
    app.control.revoke(job_id)
    return status(app, job_id)


class TaskFailure(Exception):
    """A task's failure as the user is told it, in one line: rebuilt as it is on the waiting side
    (a FaceCastError's hint would not survive the queue's JSON)."""


@contextmanager
def _told_as_failures(what: str) -> Iterator[None]:
    """A task's own errors as TaskFailure, so the waiting client says them in one line; the
    traceback of an unexpected one stays in the worker's log."""
    try:
        yield
    except (Ignore, Retry, Reject):
        raise  # the queue's own control flow (a job replaced by its chunks)
    except FaceCastError as exc:
        raise TaskFailure(exc.user_message()) from None
    except Exception as exc:
        log.exception("%s failed", what)
        raise TaskFailure(f"{type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class WaitLimits:
    """How long `jobs submit --wait` waits for what it needs, and how often it looks."""

    worker_s: float = 60.0  # no worker answering this long: give up (the job stays queued)
    broker_s: float = 60.0  # the queue not answering this long: give up
    poll_s: float = 0.5
    ping_every_s: float = 5.0


def wait(
    app: Celery,
    job_id: str,
    timeout_s: float | None = None,
    say: Callable[[str], None] | None = None,
    limits: WaitLimits | None = None,
) -> dict[str, Any]:
    """The finished job's result. Says why it waits when that changes (queued, no worker, the
    chunks done); raises JobFailedError when the job failed, was cancelled or vanished from the
    queue, NoWorkerError when no worker answered for `limits.worker_s`, BrokerError when the
    queue stopped answering for `limits.broker_s`."""
    limits = limits or WaitLimits()
    tell = say or (lambda _text: None)
    result = app.AsyncResult(job_id)
    spec = _spec_of(app, job_id)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    said, next_ping, progress = "", 0.0, "queued"
    no_worker_since: float | None = None
    unreachable_since: float | None = None
    while True:
        now = time.monotonic()
        try:
            if result.ready():
                return _result_of(app, job_id, spec, result)
            known = bool(_redis(app).exists(job_names.JOB_KEY + job_id))
            if now >= next_ping:
                next_ping = now + limits.ping_every_s
                answering = bool(app.control.ping(timeout=1.0))
                no_worker_since = None if answering else (no_worker_since or now)
                progress = status(app, job_id).progress()
        except _QUEUE_DOWN as err:
            unreachable_since = unreachable_since or now
            said = _say_once(tell, said, f"waiting: the job queue at {app.conf.broker_url} does not answer")
            if now - unreachable_since > limits.broker_s:
                raise BrokerError(
                    f"The job queue at {app.conf.broker_url} stopped answering ({err}).",
                    hint=f"When it is back, `main.py jobs status {job_id}` says where the job is.",
                ) from err
            time.sleep(limits.poll_s)
            continue
        unreachable_since = None
        if not known:
            folder = job_folder(output_path(spec.output))
            raise JobFailedError(
                f"Job {job_id} is no longer on the queue (it restarted without keeping its data?).",
                hint=f"Submit the same job again: it resumes from the chunks finished in {folder}.",
            )
        if no_worker_since is not None:
            said = _say_once(
                tell,
                said,
                f"waiting: no worker takes jobs from {app.conf.broker_url}; "
                f"start one: main.py worker --broker {app.conf.broker_url}",
            )
            if now - no_worker_since > limits.worker_s:
                raise NoWorkerError(
                    f"No worker took job {job_id} in {limits.worker_s:g} s; it stays queued.",
                    hint=f"Start `main.py worker --broker {app.conf.broker_url}`; "
                    f"`main.py jobs status {job_id}` follows it.",
                )
        else:
            said = _say_once(tell, said, f"waiting: {progress}")
        if deadline is not None and now > deadline:
            raise JobFailedError(f"Job {job_id} did not finish in {timeout_s:g} s; it goes on.")
        time.sleep(limits.poll_s)


def _say_once(tell: Callable[[str], None], said: str, text: str) -> str:
    if text != said:
        tell(text)
    return text


def _result_of(app: Celery, job_id: str, spec: JobSpec, result: Any) -> dict[str, Any]:
    """A finished job's value, or its failure as one JobFailedError line."""
    try:
        value = result.get(timeout=30, propagate=True, interval=0.2)
        while hasattr(value, "get") and not isinstance(value, dict):  # a replaced task's chord
            value = value.get(timeout=30, interval=0.2)
    except TaskRevokedError:
        value = {"cancelled": True}
    except ChordError as exc:
        raise JobFailedError(f"Job {job_id} failed: {_chord_cause(app, exc)}") from None
    except TaskFailure as exc:
        raise JobFailedError(f"Job {job_id} failed: {exc}") from None
    except Exception as exc:  # a failure the worker could not word (its log has the traceback)
        raise JobFailedError(f"Job {job_id} failed: {type(exc).__name__}: {exc}") from None
    if value.get("cancelled"):
        raise JobFailedError(f"Job {job_id} was cancelled; {spec.output} was not written.")
    return dict(value)


_DEPENDENCY = re.compile(r"Dependency (\S+) raised")


def _chord_cause(app: Celery, exc: ChordError) -> str:
    """The failed chunk's own message (a chord only says which chunk failed, as a repr)."""
    found = _DEPENDENCY.search(str(exc))
    if found is not None:
        cause = app.AsyncResult(found.group(1)).result
        if isinstance(cause, BaseException):
            return str(cause) if isinstance(cause, TaskFailure) else f"{type(cause).__name__}: {cause}"
    return str(exc)


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
