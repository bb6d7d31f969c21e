"""The remote client's failures, each with its own exit code (models/errors.py's ExitCode holds
every command's; docs/REMOTE.md lists the client's)."""

from __future__ import annotations

from realtime.api import ExitCode, FaceCastError


class RemoteError(FaceCastError):
    exit_code = ExitCode.REFUSED


class BadUrlError(RemoteError):
    """The server's address is not a URL (the command line names --remote, the panel its field)."""


class UnreachableError(RemoteError):
    exit_code = ExitCode.UNREACHABLE


class AuthError(RemoteError):
    exit_code = ExitCode.AUTH


class ServerFullError(RemoteError):
    exit_code = ExitCode.FULL

    def __init__(self, message: str, hint: str = "", retry_after_s: float = 5.0) -> None:
        super().__init__(message, hint)
        self.retry_after_s = retry_after_s


class FingerprintError(RemoteError):
    exit_code = ExitCode.TLS


class LinkLostError(RemoteError):
    exit_code = ExitCode.LOST


class StreamEndedError(RemoteError):
    exit_code = ExitCode.ENDED


class FramesMissingError(RemoteError):
    exit_code = ExitCode.FRAMES_MISSING
