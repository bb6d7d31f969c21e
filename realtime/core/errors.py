"""Errors of the engine's inputs and outputs, told to the user in one line."""

from __future__ import annotations

from models.errors import ExitCode, FaceCastError


class SourceError(FaceCastError):
    """An input (camera, video, image, source photo) cannot be used."""


class ImageTooLargeError(SourceError):
    """A picture whose header says it is larger than FaceCast decodes (checked before decoding)."""

    exit_code = ExitCode.IMAGE_TOO_LARGE


class NoFaceError(SourceError):
    pass


class SinkError(FaceCastError):
    """An output (virtual camera, file, window) cannot be opened or written."""


class VirtualCameraUnavailableError(SinkError):
    pass


class OutputExistsError(SinkError):
    """The output file is there and replacing it was not asked for (--overwrite)."""

    exit_code = ExitCode.OUTPUT_EXISTS
