"""A run on a FaceCast server, shaped like the engine the controller drives.

RemoteEngine wraps realtime.remote's RemoteClient: the controller starts, stops and polls it as it
does a local Engine (start/stop/running/error/stats/...), so its state machine and the window's
banners stay the same. The token lives in a file of its own beside settings.toml, mode 0600: the
settings file is copied to .bak and shared in bug reports, the token must not travel with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from realtime.api import (
    EngineEvent,
    FaceCastError,
    FrameSink,
    FrameSource,
    Metrics,
    Settings,
    StatsSnapshot,
    VideoFrame,
)
from realtime.remote.client import RemoteClient
from realtime.remote.errors import AuthError, BadUrlError, FingerprintError
from realtime.remote.options import RemoteOptions
from realtime.remote.signalling import Endpoint, Signalling, default_known_hosts
from realtime.remote.tls import KnownHosts, fetch_fingerprint

if TYPE_CHECKING:
    from realtime.api import Engine

log = logging.getLogger(__name__)

TOKEN_FILE_NAME = "remote-token"
STOP_WAIT_S = 8.0  # the client's threads join within 3 s each and the hang-up has its own timeout


# ---- the token ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenStore:
    """One token in a file only its owner can read (0600, written through a 0600 temp file)."""

    path: Path

    @staticmethod
    def beside(settings_path: Path) -> TokenStore:
        return TokenStore(settings_path.with_name(TOKEN_FILE_NAME))

    def load(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return ""
        except OSError as exc:
            log.warning("the server token in %s cannot be read: %s", self.path, exc.strerror)
            return ""

    def save(self, token: str) -> None:
        token = token.strip()
        if not token:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a stale temp file may have had another mode
            os.write(fd, (token + "\n").encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(temp, self.path)


# ---- trust on first use ---------------------------------------------------------------------------


class UntrustedServer(FaceCastError):
    """A first connection: the user compares the fingerprint with the server's and trusts it."""

    def __init__(self, host_port: str, fingerprint: str) -> None:
        super().__init__(
            f"First connection to {host_port}: compare its certificate fingerprint (Process on tab) "
            "with the one the server printed, press Trust, then Start again."
        )
        self.host_port = host_port
        self.fingerprint = fingerprint


@dataclass(frozen=True, slots=True)
class ServerCheck:
    host_port: str
    fingerprint: str | None  # None: a plain-HTTP server
    known: bool
    token_name: str | None = None  # the name the server knows the token by, once it accepted it


# The panel's words for a refused token (the command line's name its flags).
TOKEN_REFUSED = (
    "The server refused the token: check the Token field above (paste the token `serve` printed, "
    "or a line of the server's tokens file)."
)


def panel_error(exc: FaceCastError) -> FaceCastError:
    """`exc` in the panel's words: what to fix on the Process on tab, not a command-line flag."""
    if isinstance(exc, AuthError):
        return FaceCastError(TOKEN_REFUSED)
    if isinstance(exc, BadUrlError):
        return FaceCastError(
            "The Server URL field does not hold a server's address.",
            hint="Give https://HOST:PORT, e.g. https://gpu-box:8443 (http:// for a server with --no-tls).",
        )
    return exc


def check_server(url: str, known_hosts: Path, token: str = "") -> ServerCheck:
    """(Blocking.) The certificate the server presents now, and whether it is the pinned one
    (FingerprintError when another one is pinned); then, over a trusted connection only, whether
    it accepts `token` (AuthError when it refuses it; a token is never sent to a server not yet
    trusted)."""
    ep = Endpoint.parse(url)
    host_port = f"{ep.host}:{ep.port}"
    if ep.scheme != "https":
        check = ServerCheck(host_port, None, True)
    else:
        seen = fetch_fingerprint(ep.host, ep.port)
        pinned = KnownHosts(known_hosts).lookup(host_port)
        if pinned is not None and pinned != seen:
            raise FingerprintError(
                f"The server at {host_port} presents certificate {seen}, not the pinned {pinned}: "
                "someone may be intercepting the connection.",
                hint=f"If its certificate really changed, remove its line from {known_hosts}.",
            )
        check = ServerCheck(host_port, seen, pinned is not None)
    if not check.known or not token.strip():
        return check
    options = RemoteOptions(url.strip(), token.strip(), (), pinned=check.fingerprint, known_hosts=known_hosts)
    return replace(check, token_name=asyncio.run(_token_name(options)))


async def _token_name(options: RemoteOptions) -> str:
    signalling = Signalling(options)
    try:
        signalling.check_trust(lambda _: None)  # the fingerprint pinned just now, for the request
        return await signalling.token_name()
    finally:
        await signalling.close()


def trust(host_port: str, fingerprint: str, known_hosts: Path) -> None:
    KnownHosts(known_hosts).remember(host_port, fingerprint)


# ---- the run --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RemoteRun:
    """What a remote Start needs, captured on the GUI thread."""

    url: str
    token: str
    photo: Path | None
    known_hosts: Path = field(default_factory=default_known_hosts)

    def options(self, pinned: str | None) -> RemoteOptions:
        if not self.url.strip():
            raise FaceCastError(
                "No server URL.", hint="Enter it under Process on, e.g. https://gpu-box:8443."
            )
        if not self.token.strip():
            raise FaceCastError("No token for the server.", hint="Paste the one `serve` printed.")
        if self.photo is None:
            raise FaceCastError("No source face chosen.", hint="Add a photo under Faces.")
        # The window's consent dialog was accepted before any Start.
        return RemoteOptions(
            url=self.url.strip(), token=self.token.strip(), photos=(self.photo,), consent=True, pinned=pinned
        )


# ("connecting" | "connected" | "reconnecting" | "error" | "ended", a one-line text)
StateCallback = Callable[[str, str], None]


class _PreviewSink:
    """The run's sink, also offering every frame to the preview (as the engine does)."""

    def __init__(self, sink: FrameSink) -> None:
        self._sink = sink
        self.subscribers: list[Callable[[VideoFrame], None]] = []

    def open(self, width: int, height: int, fps: float) -> None:
        self._sink.open(width, height, fps)

    def send(self, frame: VideoFrame) -> None:
        self._sink.send(frame)
        for subscriber in self.subscribers:
            subscriber(frame)

    def close(self) -> None:
        self._sink.close()

    def abort(self) -> None:
        self._sink.abort()

    @property
    def description(self) -> str:
        return self._sink.description

    @property
    def inner_sinks(self) -> Sequence[FrameSink]:
        return (self._sink,)


class RemoteEngine:
    """The controller's Engine, run by a server: start() checks the certificate (blocking, on the
    controller's thread), then the client runs on a thread of its own."""

    def __init__(
        self,
        run: RemoteRun,
        source: FrameSource,
        sink: FrameSink,
        settings: Settings,
        on_event: Callable[[EngineEvent], None],
        on_state: StateCallback,
        on_untrusted: Callable[[str, str], None],
    ) -> None:
        self._run = run
        self._source = source
        self._sink = _PreviewSink(sink)
        self._settings = settings
        self._on_event = on_event
        self._on_state = on_state
        self._on_untrusted = on_untrusted
        self._client: RemoteClient | None = None
        self._thread: threading.Thread | None = None
        self.error: FaceCastError | None = None
        self._label = run.url

    def as_engine(self) -> Engine:
        """For the controller, which drives only what this class has."""
        return cast("Engine", self)

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def stages_label(self) -> str:
        return f"on {self._label}"

    def subscribe_preview(self, callback: Callable[[VideoFrame], None]) -> None:
        self._sink.subscribers.append(callback)

    def start(self) -> None:
        """(The controller's thread.) Check the server and the token, open the input and the
        outputs (their real size and rate are in the run's first line), then call on a thread."""
        self._run.options(None)  # what is missing is said before the network is asked
        try:
            check = check_server(self._run.url, self._run.known_hosts, self._run.token)
        except FaceCastError as exc:
            error = panel_error(exc)
            self._on_state("error", error.user_message())
            raise error from exc
        if not check.known and check.fingerprint is not None:
            self._on_untrusted(check.host_port, check.fingerprint)
            raise UntrustedServer(check.host_port, check.fingerprint)
        options = self._run.options(check.fingerprint)
        self._label = Endpoint.parse(options.url).base
        client = RemoteClient(options, self._source, self._sink, self._note, self._on_state)
        client.update_settings(self._settings)  # the panel's stages, sent with the offer
        client.open()
        self._client = client
        self._thread = threading.Thread(target=self._main, name="remote-client", daemon=True)
        self._thread.start()

    def _note(self, line: str) -> None:
        log.info("remote: %s", line)

    def _main(self) -> None:
        assert self._client is not None
        try:
            self._client.run()
        except FaceCastError as exc:
            self.error = panel_error(exc)
            self._on_state("error", self.error.user_message())
            self._on_event(EngineEvent("error", self.error.user_message(), self.error))
            return
        except Exception as exc:
            log.exception("the remote run failed")
            self.error = FaceCastError(f"The remote run failed: {exc}")
            self._on_state("error", self.error.user_message())
            self._on_event(EngineEvent("error", self.error.user_message(), self.error))
            return
        self._on_state("ended", "The call ended.")

    def stop(self, timeout: float = 1.0) -> None:
        if self._client is not None:
            self._client.stop_event.set()
        if self._thread is not None:
            self._thread.join(max(timeout, STOP_WAIT_S))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stats(self) -> StatsSnapshot:
        client = self._client
        return client.metrics.snapshot() if client is not None else Metrics().snapshot()

    def update_settings(self, settings: Settings) -> None:
        """The panel's edits reach the server's stream live (the server keeps its provider, its
        precision and its label)."""
        self._settings = settings
        if self._client is not None:
            self._client.update_settings(settings)

    def loads_finished(self, timeout: float) -> bool:
        return True
