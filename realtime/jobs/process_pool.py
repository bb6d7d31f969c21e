"""A pool of worker processes on this machine sharing one job's chunks (`jobs submit --workers N`
with no queue): each loads the models once, then takes the next chunk nobody has taken, until none
is left. The job's folder is the only thing they share, so the same steps run on other machines
as the queue's tasks (realtime/jobs/queue.py, `main.py worker`)."""

from __future__ import annotations

import logging
import multiprocessing
import queue
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from realtime.jobs.filejob import (
    JobResult,
    JobSpec,
    build_stages,
    check_paths,
    finish_job,
    prepare_job,
    process_chunk,
)
from realtime.jobs.manifest import JobLock, done_chunks, job_folder
from realtime.jobs.probe import probe
from realtime.jobs.storage import deliver, place

log = logging.getLogger(__name__)


def _worker_main(spec_json: str, todo: Any, news: Any) -> None:
    spec = JobSpec.from_json(spec_json)
    built = build_stages(spec)
    news.put(("ready", time.monotonic()))
    with JobLock(job_folder(Path(spec.output)), shared=True):  # a one-process run of it waits
        while True:
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            news.put(("chunk", process_chunk(spec, index, built)))


def run_with_workers(
    spec: JobSpec,
    workers: int,
    tags: dict[str, str] | None = None,
    on_ready: Callable[[float], None] | None = None,
) -> JobResult:
    """The job with `workers` processes here; the result equals a one-process run's.
    on_ready: told the time.monotonic() at which each worker had its models loaded."""
    check_paths(spec)
    placed = place(spec)
    spec = placed.spec
    info = probe(Path(spec.input))
    folder = job_folder(Path(spec.output))
    with JobLock(folder, shared=True):
        manifest, finished = prepare_job(spec, info)
    context = multiprocessing.get_context("spawn")
    todo, news = context.Queue(), context.Queue()
    for chunk in manifest.chunks:
        if chunk.index not in finished:
            todo.put(chunk.index)
    procs = [context.Process(target=_worker_main, args=(spec.to_json(), todo, news)) for _ in range(workers)]
    for p in procs:
        p.start()
    # Read the news while they work: a worker whose queue is unread cannot exit (its pipe fills).
    while any(p.is_alive() for p in procs) or not news.empty():
        try:
            kind, value = news.get(timeout=0.2)
        except queue.Empty:
            continue
        if kind == "ready" and on_ready is not None:
            on_ready(value)
    for p in procs:
        p.join()
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    with JobLock(folder):
        left = {c.index for c in manifest.chunks} - done_chunks(folder, manifest)
        if failed or left:
            from realtime.jobs.errors import JobFailedError

            raise JobFailedError(
                f"{len(left)} chunks of {spec.input} were not finished (worker exit codes {failed})."
            )
        result = finish_job(spec, manifest, info, tags)
    deliver(placed)
    return result if placed.upload_to is None else replace(result, output=placed.upload_to)
