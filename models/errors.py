"""User-facing errors: one line that says what went wrong and what to do about it."""

from __future__ import annotations


class FaceCastError(Exception):
    """An error the user can act on. `str(err)` is the one-line message shown by the CLI/GUI.

    `hint` (optional) is the next step, printed after the message.
    """

    exit_code: int = 2

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


class ModelContractError(ModelError):
    pass


class ModelOutputError(ModelError):
    """A model returned values that cannot be a picture (NaN or infinity: an fp16 overflow)."""


class DownloadError(ModelError):
    pass


class LicenceNotAcceptedError(ModelError):
    pass








