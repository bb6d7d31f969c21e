"""A file job's failures, each with its own exit code (docs/JOBS.md lists them; every command's
codes are distinct: README.md has the whole table)."""

from __future__ import annotations

from realtime.api import FaceCastError

EXIT_OUTPUT_EXISTS = 16  # the output file is there and --overwrite was not given
EXIT_INPUT_ENDS_EARLY = 17  # the input is truncated or damaged: only part of it was processed
EXIT_SOME_JOBS_FAILED = 18  # a batch finished with at least one job failed
EXIT_JOB_BUSY = 12  # another process works on the same job right now
EXIT_BROKER = 13  # the job queue (broker) cannot be reached
EXIT_JOB_FAILED = 14  # a queued job failed or was cancelled
EXIT_SIGINT = 130  # stopped by Ctrl+C (128 + SIGINT)
EXIT_SIGTERM = 143  # stopped by `kill` (128 + SIGTERM)


class OutputExistsError(FaceCastError):
    exit_code = EXIT_OUTPUT_EXISTS


class InputEndsEarlyError(FaceCastError):
    exit_code = EXIT_INPUT_ENDS_EARLY


class JobBusyError(FaceCastError):
    exit_code = EXIT_JOB_BUSY


class BrokerError(FaceCastError):
    exit_code = EXIT_BROKER


class JobFailedError(FaceCastError):
    exit_code = EXIT_JOB_FAILED


class JobInterrupted(FaceCastError):
    """A signal stopped the job; what is finished is kept for the next run to resume."""

    def __init__(self, message: str, signum: int, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.exit_code = 128 + signum
