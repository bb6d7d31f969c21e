"""The remote client's failures, each with its own exit code (docs/REMOTE.md lists them; every
command's codes are distinct: README.md has the whole table)."""

from __future__ import annotations

from realtime.api import FaceCastError

EXIT_OK = 0
EXIT_USAGE = 2  # a bad argument or local setup problem (every FaceCastError's default)
EXIT_UNREACHABLE = 3  # no server answered (connection refused, DNS, timeout)
EXIT_AUTH = 4  # the server refused the token (401) or the request (403)
EXIT_FULL = 5  # the server is at --max-streams (503)
EXIT_TLS = 6  # the server's certificate is not the pinned one
EXIT_REFUSED = 7  # the server refused the request as given (400, 404, 413, 415, 422)
EXIT_LOST = 8  # the link dropped and did not come back within --reconnect-for
EXIT_ENDED = 15  # the server ended the stream for good (its --max-session limit)
EXIT_FRAMES_MISSING = 19  # a file through the server did not come back whole (nothing was written)


class RemoteError(FaceCastError):
    exit_code = EXIT_REFUSED


class BadUrlError(RemoteError):
    """The server's address is not a URL (the command line names --remote, the panel its field)."""


class UnreachableError(RemoteError):
    exit_code = EXIT_UNREACHABLE


class AuthError(RemoteError):
    exit_code = EXIT_AUTH


class ServerFullError(RemoteError):
    exit_code = EXIT_FULL

    def __init__(self, message: str, hint: str = "", retry_after_s: float = 5.0) -> None:
        super().__init__(message, hint)
        self.retry_after_s = retry_after_s


class FingerprintError(RemoteError):
    exit_code = EXIT_TLS


class LinkLostError(RemoteError):
    exit_code = EXIT_LOST


class StreamEndedError(RemoteError):
    exit_code = EXIT_ENDED


class FramesMissingError(RemoteError):
    exit_code = EXIT_FRAMES_MISSING
