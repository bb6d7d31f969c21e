"""A file job's failures, each with its own exit code (models/errors.py's ExitCode holds every
command's; docs/JOBS.md lists a job's)."""

from __future__ import annotations

from realtime.api import ExitCode, FaceCastError, OutputExistsError

__all__ = [
    "BrokerError",
    "InputEndsEarlyError",
    "JobBusyError",
    "JobFailedError",
    "JobInterrupted",
    "NoWorkerError",
    "OutputExistsError",
]


class InputEndsEarlyError(FaceCastError):
    exit_code = ExitCode.INPUT_ENDS_EARLY


class JobBusyError(FaceCastError):
    exit_code = ExitCode.JOB_BUSY


class BrokerError(FaceCastError):
    exit_code = ExitCode.BROKER


class JobFailedError(FaceCastError):
    exit_code = ExitCode.JOB_FAILED


class NoWorkerError(FaceCastError):
    """`jobs submit --wait` gave up: no worker answered on the queue; the job stays queued."""

    exit_code = ExitCode.NO_WORKER


class JobInterrupted(FaceCastError):
    """A signal stopped the job; what is finished is kept for the next run to resume."""

    def __init__(self, message: str, signum: int, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.exit_code = 128 + signum
