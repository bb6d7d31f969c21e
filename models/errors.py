"""User-facing errors: one line that says what went wrong and what to do about it."""

from __future__ import annotations

# Exit codes beside 0 (done): README lists every command's, all distinct; the remote client's
# own are in realtime/remote/errors.py, the file jobs' in realtime/jobs/errors.py.
EXIT_USAGE = 2  # a bad argument, input or model file (every FaceCastError's default)
EXIT_IMAGE_TOO_LARGE = 9  # a picture over the pixel limit, refused before decoding
EXIT_NO_CONSENT = 10  # the consent confirmation was not given
EXIT_MODELS_FOLDER = 11  # the models folder (or a model file's place in it) is the wrong kind of thing
EXIT_INTERRUPTED = 130  # Ctrl+C (128 + SIGINT, as a shell reports it)


class FaceCastError(Exception):
    """An error the user can act on. `str(err)` is the one-line message shown by the CLI/GUI.

    `hint` (optional) is the next step, printed after the message.
    """

    exit_code: int = EXIT_USAGE

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

    exit_code = EXIT_MODELS_FOLDER


class ModelContractError(ModelError):
    pass


class ModelOutputError(ModelError):
    """A model returned values that cannot be a picture (NaN or infinity: an fp16 overflow)."""


class DownloadError(ModelError):
    pass


class LicenceNotAcceptedError(ModelError):
    pass
