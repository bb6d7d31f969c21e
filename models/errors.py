"""User-facing errors: one line that says what went wrong and what to do about it."""

from __future__ import annotations

from enum import IntEnum, unique


@unique
class ExitCode(IntEnum):
    """Every exit code of every command, in this one place (README.md lists them): each means one
    thing whichever command gives it, so a script that checks `$?` can tell the failures apart.
    `unique` refuses two names for one number."""

    OK = 0  # done: the input ended, the window was closed, the job finished
    CHECK_FAILED = 1  # the panel's consent dialog declined; `doctor` or `models verify` found a problem
    USAGE = 2  # a bad argument, input, output or model file (every FaceCastError's default)
    UNREACHABLE = 3  # run --remote: no server answered (connection refused, DNS, timeout)
    AUTH = 4  # run --remote: the server refused the token (401) or the request (403)
    FULL = 5  # run --remote: the server is at --max-streams (503)
    TLS = 6  # run --remote: the server's certificate is not the pinned one
    REFUSED = 7  # run --remote: the server refused the request as given (400, 404, 413, 415, 422)
    LOST = 8  # run --remote: the link dropped and did not come back within --reconnect-for
    IMAGE_TOO_LARGE = 9  # a picture over the pixel limit, refused before decoding
    NO_CONSENT = 10  # the consent confirmation was not given
    MODELS_FOLDER = 11  # the models folder (or a model file's place in it) is the wrong kind of thing
    JOB_BUSY = 12  # file jobs: another process works on the same job right now
    BROKER = 13  # file jobs: the job queue (broker) cannot be reached
    JOB_FAILED = 14  # file jobs: a queued job failed, was cancelled or vanished from the queue
    ENDED = 15  # run --remote: the server ended the stream for good (its --max-session limit)
    OUTPUT_EXISTS = 16  # the output file is there and --overwrite was not given
    INPUT_ENDS_EARLY = 17  # file jobs: the input is truncated or damaged: only part of it was processed
    SOME_JOBS_FAILED = 18  # file jobs: a batch finished with at least one job failed
    NO_WORKER = 19  # file jobs: `jobs submit --wait` gave up: no worker took the job (it stays queued)
    FRAMES_MISSING = 20  # run --remote: a file through the server did not come back whole (nothing written)
    NOT_MARKED = 21  # verify: the file was read; it carries neither FaceCast's watermark nor a C2PA manifest
    UNREADABLE = 22  # verify: the file (or standard input) is not a video or picture that can be read
    INTERNAL = 70  # a fault of FaceCast itself (a bug): `--debug` shows its traceback
    SIGHUP = 129  # the terminal closed (128 + SIGHUP): the output was finished first
    SIGINT = 130  # Ctrl+C (128 + SIGINT, as a shell reports it)
    SIGTERM = 143  # `kill` (128 + SIGTERM): as Ctrl+C


class FaceCastError(Exception):
    """An error the user can act on. `str(err)` is the one-line message shown by the CLI/GUI.

    `hint` (optional) is the next step, printed after the message.
    """

    exit_code: int = ExitCode.USAGE

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def user_message(self) -> str:
        return f"{self.message} {self.hint}".strip() if self.hint else self.message


class ModelError(FaceCastError):
    """A model file is missing, corrupt, unverified or has the wrong contract."""


class ModelMissingError(ModelError):
    pass


class ModelHashError(ModelError):
    pass


class ModelsFolderError(ModelError):
    """The models folder is a file, or a model file's name is taken by a folder."""

    exit_code = ExitCode.MODELS_FOLDER


class ModelContractError(ModelError):
    pass


class ModelOutputError(ModelError):
    """A model returned values that cannot be a picture (NaN or infinity: an fp16 overflow)."""


class DownloadError(ModelError):
    pass


class LicenceNotAcceptedError(ModelError):
    pass
