"""The client's side of the HTTPS signalling: uploads, offers, hang-ups; errors as one clear line."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import platformdirs

from realtime.remote.errors import (
    AuthError,
    BadUrlError,
    FingerprintError,
    RemoteError,
    ServerFullError,
    UnreachableError,
)
from realtime.remote.options import RemoteOptions
from realtime.remote.tls import KnownHosts, fingerprint_bytes, trust_server

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 20.0  # a stream's first request loads its models on the server


def default_known_hosts() -> Path:
    return Path(platformdirs.user_config_dir("FaceCast")) / "remote_known_hosts"


@dataclass(frozen=True, slots=True)
class StreamHandle:
    stream_id: str
    location: str
    answer: str


@dataclass(frozen=True, slots=True)
class Endpoint:
    scheme: str
    host: str
    port: int

    @staticmethod
    def parse(url: str) -> Endpoint:
        parts = urlsplit(url if "://" in url else f"https://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadUrlError(
                f"--remote {url!r} is not a server URL.",
                hint="Give https://HOST:PORT (or http:// for --no-tls).",
            )
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise BadUrlError(f"--remote {url!r} has a bad port.") from exc
        return Endpoint(parts.scheme, parts.hostname, port)

    @property
    def base(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


class Signalling:
    def __init__(self, options: RemoteOptions) -> None:
        self.options = options
        self.endpoint = Endpoint.parse(options.url)
        self._ssl: aiohttp.Fingerprint | bool = False
        self._session: aiohttp.ClientSession | None = None

    def check_trust(self, notify: Callable[[str], None]) -> None:
        """(Blocking.) Pin the server's certificate: the given fingerprint, the known one, or on first use."""
        ep = self.endpoint
        if ep.scheme != "https":
            notify("warning: no TLS: the token and the session setup travel unencrypted")
            return
        known = KnownHosts(self.options.known_hosts or default_known_hosts())
        trust = trust_server(ep.host, ep.port, known, self.options.pinned)
        if trust.first_use:
            notify(
                f"first connection to {ep.host}:{ep.port}: its certificate {trust.fingerprint} is now "
                f"pinned in {known.path}; compare it with the one the server printed"
            )
        self._ssl = aiohttp.Fingerprint(fingerprint_bytes(trust.fingerprint))

    async def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
                headers={"Authorization": f"Bearer {self.options.token}"},
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        client = await self._client()
        url = self.endpoint.base + path
        try:
            async with client.request(method, url, ssl=self._ssl, **kwargs) as resp:
                body = await resp.read()
                status, headers = resp.status, dict(resp.headers)
        except aiohttp.ServerFingerprintMismatch as exc:
            raise FingerprintError(
                f"The server at {self.endpoint.host}:{self.endpoint.port} now presents another certificate "
                "than the pinned one.",
                hint="If it really changed, remove its line from the known-hosts file.",
            ) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise UnreachableError(
                f"No FaceCast server answers at {self.endpoint.base} ({type(exc).__name__}: {exc}).".replace(
                    " ().", "."
                ),
                hint="Is `main.py serve` running there, and the port open?",
            ) from exc
        if status >= 400:
            raise _refusal(status, headers, body)
        return status, headers, body

    async def upload(self, photo: Path) -> str:
        try:
            data = photo.read_bytes()
        except OSError as exc:
            raise RemoteError(f"Source photo {photo} cannot be read ({exc.strerror}).") from exc
        params = {"consent": "yes" if self.options.consent else "no"}
        _, _, body = await self.request("POST", "/v1/faces", data=data, params=params)
        return str(json.loads(body)["id"])

    async def open_stream(self, offer: str) -> StreamHandle:
        """Upload the photos (the server deletes them when a stream ends) and send the offer."""
        faces = [await self.upload(p) for p in self.options.photos]
        params: list[tuple[str, str]] = [("face", f) for f in faces]
        params.append(("consent", "yes" if self.options.consent else "no"))
        if self.options.preset:
            params.append(("preset", self.options.preset))
        params += [("set", o) for o in self.options.overrides]
        if self.options.max_bitrate is not None:  # the video the server sends back, at most
            params.append(("max_kbps", str(max(1, self.options.max_bitrate // 1000))))
        _, headers, body = await self.request(
            "POST",
            "/v1/streams",
            data=offer.encode(),
            params=params,
            headers={"Content-Type": "application/sdp"},
        )
        location = headers.get("Location", "")
        return StreamHandle(location.rsplit("/", 1)[-1], location, body.decode("utf-8"))

    async def update(self, handle: StreamHandle, preset: str | None, overrides: list[str]) -> None:
        await self.request("PATCH", handle.location, json={"preset": preset, "set": overrides})

    async def why_ended(self, handle: StreamHandle) -> tuple[str, bool] | None:
        """Why the server ended the stream and whether for good; None while it runs or unknown."""
        try:
            _, _, body = await self.request("GET", handle.location, timeout=aiohttp.ClientTimeout(total=3.0))
            data = json.loads(body)
        except (RemoteError, ValueError) as exc:
            log.debug("the stream's state is unknown: %s", exc)
            return None
        if not isinstance(data, dict) or data.get("state") != "ended":
            return None
        return str(data.get("reason", "")), bool(data.get("final", False))

    async def token_name(self) -> str:
        """The name the server knows the token by (AuthError when it refuses it)."""
        _, _, body = await self.request("GET", "/v1/token")
        try:
            return str(json.loads(body).get("name", ""))
        except (ValueError, AttributeError):
            return ""

    async def hang_up(self, handle: StreamHandle) -> None:
        try:
            await self.request("DELETE", handle.location)
        except RemoteError as exc:
            log.debug("hang-up not heard: %s", exc)  # the server's idle timeout frees the stream anyway


def _refusal(status: int, headers: dict[str, str], body: bytes) -> RemoteError:
    try:
        message = str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        message = body.decode("utf-8", "replace")[:200]
    message = message or f"HTTP {status}"
    if status == 401:
        return AuthError(f"The server refused the token: {message}", hint="Check --token / --token-file.")
    if status == 503:
        try:
            retry = float(headers.get("Retry-After", "5"))
        except ValueError:
            retry = 5.0
        return ServerFullError(message, hint=f"Try again in {retry:.0f} s.", retry_after_s=retry)
    return RemoteError(f"The server refused the request (HTTP {status}): {message}")
