"""The names the file-job queue and its HTTP routes share (realtime/jobs/queue.py, which runs the
queue, and realtime/remote/jobs_api.py, which puts jobs on it from the server): declared once here,
below both, so neither re-declares the other's."""

from __future__ import annotations

from pathlib import Path

BROKER_ENV = "FACECAST_BROKER_URL"  # the queue's Redis URL
JOB_TASK = "facecast.job"  # a submitted job: plans its chunks and puts them on the queue
CHUNK_TASK = "facecast.chunk"
ASSEMBLE_TASK = "facecast.assemble"
JOB_KEY = "facecast:job:"  # + job id: the job's spec, for status, list and cancel
CANCELLED = "cancelled"  # a marker file in the job's folder: chunk tasks still queued skip
FINISHED_STATES = frozenset({"SUCCESS", "FAILURE", "REVOKED"})  # a job in these is over


def job_folder(output: Path) -> Path:
    """The hidden folder beside a job's output where its plan and finished chunks are kept."""
    return output.with_name(f".{output.name}.facecast-job")
