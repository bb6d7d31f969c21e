"""The remote GPU server: HTTPS signalling (aiohttp), WebRTC media (aiortc), one engine per stream.

POST /v1/faces              a source photo as the body -> {"id": ...}
POST /v1/streams            an SDP offer (application/sdp) -> 201, Location, the SDP answer
PATCH /v1/streams/{id}      new settings, applied live
DELETE /v1/streams/{id}     hang up
POST /v1/jobs               a video file job on the queue (realtime/remote/jobs_api.py)
GET, DELETE /v1/jobs/{id}   its state; cancel it
GET /v1/streams/{id}        whether it runs; once ended, why (kept for the last ENDED_KEPT)
GET /v1/token               whether the token is accepted (the panel's "Check server")
GET /v1/health              liveness for probes (no token)
GET /metrics                Prometheus text (token), GPU memory included
GET /                       the browser page
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from aiohttp import web
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

from realtime.api import (
    DEFAULT_PRESET,
    ContentCheck,
    ContentVerdict,
    FaceCastError,
    ImageBGR,
    InferenceHub,
    ModelOptions,
    SessionPool,
    Settings,
    available_presets,
    load_preset,
    new_run_id,
    parse_override,
    prepare_face_swap,
    resolve_provider,
)
from realtime.remote.audit import AuditLog, AuditRecord
from realtime.remote.content_policy import (
    UPLOAD_REFUSED,
    ContentPolicy,
    stream_refused_reason,
    verdict_text,
)
from realtime.remote.encoder import VideoRate, tuned_senders
from realtime.remote.faces import FaceStore, StoredFace, UploadRefused
from realtime.remote.gpu import gpu_memory_lines, gpu_memory_used
from realtime.remote.jobs_api import JobsApi, RequestChecks
from realtime.remote.limits import SERVER_ONLY_SETTINGS, ContentMode, Limits
from realtime.remote.session import StreamSession
from realtime.remote.tokens import TokenFile, bearer
from realtime.remote.transport import quicken_receivers

log = logging.getLogger(__name__)

TOKEN_NAME = web.RequestKey("token_name", str)
JANITOR = web.AppKey("janitor", asyncio.Task[None])

ENDED_KEPT = 256  # ended streams whose reason a client can still ask for
RUN_ID = re.compile(r"[0-9a-f]{8}")  # a watermark run id a client may name (docs/PROVENANCE.md)

CONSENT_HELP = (
    "Confirm that you have the consent of the person in the photo and will disclose the swap: "
    "add consent=yes to the request."
)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    data_dir: Path
    token_file: Path
    limits: Limits = field(default_factory=Limits)
    models: ModelOptions = field(default_factory=ModelOptions)
    provider: str = "auto"
    default_preset: str = DEFAULT_PRESET
    force_label: bool = True  # every swapped frame carries the "AI-modified" mark
    # Every swapped frame carries the invisible watermark (docs/PROVENANCE.md); a client cannot
    # turn it off, only the operator (tests that measure the transport's own loss do).
    watermark: bool = True
    # The most video a stream sends back, in bit/s (`serve --max-bitrate`); None: what the
    # picture's size needs (realtime/remote/encoder.py). A client may ask for less (max_kbps=).
    max_bitrate: int | None = None
    # What the content classifier does with uploads and streams (realtime/remote/content_policy.py);
    # "off" loads no model.
    content_policy: ContentMode = "off"


class EndedStream(NamedTuple):
    """What the server keeps of a stream that ended, for a client asking why."""

    token_name: str
    reason: str
    final: bool  # ended by a limit a reconnect must not get round
    refused_by: str = ""  # "content": the content policy ended it


def _error(status: int, message: str, refused_by: str = "", **headers: str) -> web.Response:
    body = {"error": message, **({"refused_by": refused_by} if refused_by else {})}
    return web.json_response(body, status=status, headers=headers)


def _consented(request: web.Request) -> bool:
    value = request.query.get("consent") or request.headers.get("X-FaceCast-Consent") or ""
    return value.strip().lower() in ("yes", "true", "1")


@dataclass
class Server:
    config: ServerConfig
    tokens: TokenFile = field(init=False)
    faces: FaceStore = field(init=False)
    audit: AuditLog = field(init=False)
    sessions: dict[str, StreamSession] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    ended: OrderedDict[str, EndedStream] = field(default_factory=OrderedDict)
    content: ContentPolicy = field(init=False)
    streams_total: int = 0
    _prepare_lock: asyncio.Lock | None = None

    def __post_init__(self) -> None:
        if self.config.models.session_pool is None:
            # Every stream's engine opens its models through one pool: each model once per process.
            models = replace(self.config.models, session_pool=SessionPool())
            self.config = replace(self.config, models=models)
        if self.config.models.inference is None:
            # ... and runs its swapper through one shared service: the streams' faces are batched.
            self.config = replace(self.config, models=replace(self.config.models, inference=InferenceHub()))
        self.tokens = TokenFile(self.config.token_file)
        self.faces = FaceStore(self.config.data_dir / "faces", self.config.limits)
        self.audit = AuditLog(self.config.data_dir / "audit.jsonl")
        mode = self.config.content_policy
        # Loaded now: a missing classifier stops `serve` at its start, with the download command.
        check = ContentCheck(self.config.models, self.config.provider) if mode != "off" else None
        self.content = ContentPolicy(mode, check.verdict if check is not None else None)

    # ---- app ---------------------------------------------------------------------------------

    def app(self) -> web.Application:
        limits = self.config.limits
        app = web.Application(client_max_size=limits.max_upload_bytes + 64 * 1024, middlewares=[self._auth])
        app.router.add_get("/", self.page)
        app.router.add_get("/app.js", self.page_script)
        app.router.add_get("/v1/health", self.health)
        app.router.add_get("/v1/token", self.token)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/v1/faces", self.upload_face)
        app.router.add_post("/v1/streams", self.create_stream)
        app.router.add_get("/v1/streams/{stream_id}", self.get_stream)
        app.router.add_patch("/v1/streams/{stream_id}", self.patch_stream)
        app.router.add_delete("/v1/streams/{stream_id}", self.delete_stream)
        JobsApi(self, RequestChecks(lambda r: r[TOKEN_NAME], _consented, CONSENT_HELP)).add_routes(app)
        app.on_startup.append(self._on_startup)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self._prepare_lock = asyncio.Lock()
        app[JANITOR] = asyncio.ensure_future(self._janitor())

    async def _on_shutdown(self, app: web.Application) -> None:
        app[JANITOR].cancel()
        for session in list(self.sessions.values()):
            await session.close("the server is shutting down")
        self.faces.remove_all()

    async def _janitor(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, self.config.limits.face_ttl_s / 2))
            in_use = {f.face_id for s in self.sessions.values() for f in s.faces}
            self.faces.expire(self.config.limits.face_ttl_s, in_use)

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in ("/", "/app.js", "/v1/health"):
            response: web.StreamResponse = await handler(request)
            return response
        token = bearer(request.headers.get("Authorization"))
        name = self.tokens.check(token) if token else None
        if name is None:
            self._count_refusal("token")
            why = "wrong or revoked token" if token else "no token"
            return _error(
                401,
                f"Unauthorized: {why}. Send `Authorization: Bearer TOKEN` with a token from the "
                "server's token file.",
                **{"WWW-Authenticate": 'Bearer realm="facecast"'},
            )
        request[TOKEN_NAME] = name
        response = await handler(request)
        return response

    def _count_refusal(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1

    # ---- public routes -----------------------------------------------------------------------

    async def page(self, request: web.Request) -> web.Response:
        text = resources.files("realtime.remote").joinpath("static/index.html").read_text(encoding="utf-8")
        return web.Response(text=text, content_type="text/html")

    async def page_script(self, request: web.Request) -> web.Response:
        text = resources.files("realtime.remote").joinpath("static/app.js").read_text(encoding="utf-8")
        return web.Response(text=text, content_type="application/javascript")

    async def health(self, request: web.Request) -> web.Response:
        limits = self.config.limits
        return web.json_response(
            {"status": "ok", "streams": len(self.sessions), "max_streams": limits.max_streams}
        )

    async def token(self, request: web.Request) -> web.Response:
        """The token passed the check (the middleware refuses any other with 401): its name."""
        return web.json_response({"name": request[TOKEN_NAME]})

    async def metrics(self, request: web.Request) -> web.Response:
        lines = [
            "# HELP facecast_streams Streams running now.",
            "# TYPE facecast_streams gauge",
            f"facecast_streams {len(self.sessions)}",
            "# TYPE facecast_streams_max gauge",
            f"facecast_streams_max {self.config.limits.max_streams}",
            "# TYPE facecast_streams_total counter",
            f"facecast_streams_total {self.streams_total}",
            "# HELP facecast_model_sessions Model sessions open, shared by every stream.",
            "# TYPE facecast_model_sessions gauge",
            f"facecast_model_sessions {len(self._pool())}",
            *self._inference_lines(),
            "# TYPE facecast_requests_refused_total counter",
        ]
        lines += [
            f'facecast_requests_refused_total{{reason="{r}"}} {n}' for r, n in sorted(self.refused.items())
        ]
        lines += [
            "# TYPE facecast_stream_fps_in gauge",
            "# TYPE facecast_stream_fps_out gauge",
            "# TYPE facecast_stream_latency_ms gauge",
            "# TYPE facecast_stream_frames_in_total counter",
            "# TYPE facecast_stream_frames_out_total counter",
            "# HELP facecast_stream_frames_dropped_total Frames a stream left out, by where: on arrival,"
            " in the engine, before the encoder.",
            "# TYPE facecast_stream_frames_dropped_total counter",
        ]
        for session in list(self.sessions.values()):
            lines += session.stats_lines()
        lines += gpu_memory_lines(await asyncio.to_thread(gpu_memory_used))
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    def _inference_lines(self) -> list[str]:
        """The shared model services: calls and requests (faces) so far, by model."""
        hub = self.config.models.inference
        lines = [
            "# HELP facecast_inference_calls_total Model calls of the shared services (faces batched).",
            "# TYPE facecast_inference_calls_total counter",
            "# TYPE facecast_inference_requests_total counter",
        ]
        for shared in hub.services() if hub is not None else []:
            stats = shared.service.stats()
            model = shared.service.name
            lines.append(f'facecast_inference_calls_total{{model="{model}"}} {stats.calls}')
            lines.append(f'facecast_inference_requests_total{{model="{model}"}} {stats.requests}')
        return lines

    def _pool(self) -> SessionPool:
        pool = self.config.models.session_pool
        assert pool is not None  # made in __post_init__
        return pool

    # ---- faces -------------------------------------------------------------------------------

    async def upload_face(self, request: web.Request) -> web.Response:
        if not _consented(request):
            self._count_refusal("consent")
            return _error(403, CONSENT_HELP)
        limits = self.config.limits
        if request.content_length is not None and request.content_length > limits.max_upload_bytes:
            self._count_refusal("upload_size")
            return _error(413, f"The photo is over {limits.max_upload_bytes} bytes.")
        seen: list[ContentVerdict] = []
        try:
            data = await request.read()
            screen = partial(self._screen_upload, seen) if self.content.on else None
            face = await asyncio.to_thread(self.faces.add, data, request[TOKEN_NAME], screen)
        except web.HTTPRequestEntityTooLarge:
            self._count_refusal("upload_size")
            return _error(413, f"The photo is over {limits.max_upload_bytes} bytes.")
        except UploadRefused as exc:
            self._count_refusal(exc.refused_by or "upload")
            if exc.refused_by:
                record = AuditRecord(
                    "refused",
                    _client(request),
                    request[TOKEN_NAME],
                    detail="an upload: " + exc.message,
                    content="; ".join(verdict_text(v) for v in seen),
                )
                self.audit.write(record)
            return _error(exc.status, exc.message, exc.refused_by)
        content = "; ".join(verdict_text(v) for v in seen)
        self.audit.write(
            AuditRecord("upload", _client(request), request[TOKEN_NAME], (face.sha256,), content=content)
        )
        return web.json_response({"id": face.face_id, "sha256": face.sha256}, status=201)

    def _screen_upload(self, seen: list[ContentVerdict], picture: ImageBGR) -> None:
        """(On a worker thread.) The content policy's look at an uploaded photo."""
        verdict = self.content.screen(picture)
        if verdict is None:
            return
        seen.append(verdict)
        if verdict.flagged and self.content.mode == "refuse":
            raise UploadRefused(422, UPLOAD_REFUSED, refused_by="content")

    # ---- streams -----------------------------------------------------------------------------

    def settings_from(self, preset: str | None, overrides: list[str]) -> Settings:
        """A client's choice of preset and overrides, within what the server allows."""
        name = preset or self.config.default_preset
        if name not in available_presets():  # checked before the name goes near a file name
            raise FaceCastError(
                f"Unknown preset {name!r}.", hint=f"Choose one of: {', '.join(available_presets())}."
            )
        settings = load_preset(name)
        values: dict[str, Any] = {}
        for text in overrides:
            key, value = parse_override(text)
            if key in SERVER_ONLY_SETTINGS:
                raise FaceCastError(f"Setting {key!r} is the server's to choose.")
            if key == "frame_enhancer.upscale" and str(value).lower() in ("true", "1", "on", "yes"):
                # A stream's pictures come back at their own size; a larger file is a local job.
                raise FaceCastError(
                    "frame_enhancer.upscale is for files processed on this machine: a stream comes "
                    "back at its own size.",
                    hint="Leave it off (the frame enhancer then sharpens at the same size).",
                )
            values[key] = value
        values["pipeline.provider"] = self.config.provider
        if self.config.force_label:
            values["composite.disclosure_label"] = True
        values["watermark.enabled"] = self.config.watermark
        return resolve_provider(settings.with_overrides(values)).validate()

    async def create_stream(self, request: web.Request) -> web.Response:
        token_name: str = request[TOKEN_NAME]
        limits = self.config.limits
        if not _consented(request):
            self._count_refusal("consent")
            return _error(403, CONSENT_HELP)
        if len(self.sessions) >= limits.max_streams:
            self._count_refusal("full")
            return _error(
                503,
                f"The server is full ({limits.max_streams} streams).",
                **{"Retry-After": str(limits.retry_after_s)},
            )
        if request.content_type != "application/sdp":
            return _error(415, "Send the SDP offer with Content-Type: application/sdp.")
        face_ids = request.query.getall("face", [])
        if not face_ids or len(face_ids) > limits.max_faces_per_stream:
            return _error(400, f"Name 1 to {limits.max_faces_per_stream} uploaded faces: face=ID.")
        faces: list[StoredFace] = []
        for face_id in face_ids:
            face = self.faces.get(face_id, token_name)
            if face is None:
                return _error(
                    404, f"No uploaded face {face_id[:40]!r} (faces are deleted when their stream ends)."
                )
            faces.append(face)
        try:
            settings = self.settings_from(request.query.get("preset"), request.query.getall("set", []))
            rate = self.rate_from(request.query.get("max_kbps"))
            run_id = _run_id(request.query.get("run"))
        except FaceCastError as exc:
            return _error(422, exc.user_message())
        try:
            offer = (await request.read()).decode("utf-8")
        except UnicodeDecodeError:
            return _error(400, "The SDP offer is not UTF-8 text.")
        if "m=video" not in offer:
            return _error(400, "The offer has no video.")
        assert self._prepare_lock is not None
        async with self._prepare_lock:  # one model preparation at a time: they share the store
            if len(self.sessions) >= limits.max_streams:
                return _error(503, "The server is full.", **{"Retry-After": str(limits.retry_after_s)})
            try:
                stages = await asyncio.to_thread(
                    prepare_face_swap, [f.path for f in faces], settings, self.config.models
                )
            except FaceCastError as exc:
                return _error(422, _without_paths(exc.user_message(), faces))
            stream_id = secrets.token_hex(12)
            pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
            session = StreamSession(
                stream_id,
                token_name,
                _client(request),
                tuple(faces),
                settings,
                stages,
                pc,
                limits,
                self._closed,
                run_id=run_id,
                content=self.content.for_stream(),
                on_content=self._content_seen,
            )
            self.sessions[stream_id] = session
        try:
            answer = await self._answer(session, offer, rate)
        except Exception as exc:
            await session.close("the offer was refused")
            return _error(400, f"The SDP offer was refused: {exc}")
        self.streams_total += 1
        session.start_watch()
        return web.Response(
            status=201,
            text=answer,
            content_type="application/sdp",
            headers={
                "Location": f"/v1/streams/{stream_id}",
                "X-FaceCast-Stream": stream_id,
                "X-FaceCast-Run": run_id,
            },
        )

    def rate_from(self, max_kbps: str | None) -> VideoRate:
        """The rate a stream's video may use back: the server's ceiling, or the client's if lower."""
        ceiling = self.config.max_bitrate
        if max_kbps is not None:
            try:
                asked = int(max_kbps) * 1000
            except ValueError:
                raise FaceCastError(f"max_kbps must be whole kbit/s, not {max_kbps[:20]!r}.") from None
            if asked <= 0:
                raise FaceCastError("max_kbps must be above 0.")
            ceiling = asked if ceiling is None else min(ceiling, asked)
        return VideoRate(ceiling)

    async def _answer(self, session: StreamSession, offer: str, rate: VideoRate) -> str:
        pc = session.pc
        outgoing = session.outgoing_track()

        @pc.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "video":
                pc.addTrack(outgoing)
                session.take_track(track)

        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        quicken_receivers(pc)  # before the answer: no media flows yet
        answer = await pc.createAnswer()
        await pc.setLocalDescription(answer)
        tuned_senders(pc, rate)  # negotiated; the engine sends nothing before the first frame comes in
        return str(pc.localDescription.sdp)

    async def _content_seen(self, session: StreamSession, verdict: ContentVerdict, refuse: bool) -> None:
        """A stream's sampled frame was classified: a flagged one is written down; `refuse`
        (the policy's decision over its recent samples) ends the stream."""
        if not verdict.flagged:
            return
        detail = f"stream {session.stream_id}: a sampled frame was flagged"
        self.audit.write(
            AuditRecord(
                "content",
                session.client,
                session.token_name,
                detail=detail,
                run_id=session.run_id or "",
                content=verdict_text(verdict),
            )
        )
        if refuse and session.content is not None:
            self._count_refusal("content")
            recent = session.content.recent
            why = stream_refused_reason(recent.flagged, recent.window)
            await session.close(why, final=True, refused_by="content")

    async def _closed(self, session: StreamSession, reason: str) -> None:
        self.sessions.pop(session.stream_id, None)
        self.ended[session.stream_id] = EndedStream(
            session.token_name, reason, session.final, session.refused_by
        )
        while len(self.ended) > ENDED_KEPT:
            self.ended.popitem(last=False)
        for face in session.faces:
            self.faces.remove(face.face_id)
        self.audit.write(
            AuditRecord(
                "stream",
                session.client,
                session.token_name,
                tuple(f.sha256 for f in session.faces),
                round(time.monotonic() - session.created, 3),
                reason,
                run_id=session.run_id or "",
                content=session.content.summary() if session.content is not None else "",
            )
        )
        log.info("stream %s ended: %s", session.stream_id, reason)

    def _owned(self, request: web.Request) -> StreamSession | web.Response:
        session = self.sessions.get(request.match_info["stream_id"])
        if session is None or session.token_name != request[TOKEN_NAME]:
            return _error(404, "No such stream (it may have ended).")
        return session

    async def get_stream(self, request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        session = self.sessions.get(stream_id)
        if session is not None and session.token_name == request[TOKEN_NAME]:
            if session.closed:
                return _ended(stream_id, session.close_reason, session.final, session.refused_by)
            return web.json_response({"id": stream_id, "state": "running"})
        ended = self.ended.get(stream_id)
        if ended is not None and ended.token_name == request[TOKEN_NAME]:
            return _ended(stream_id, ended.reason, ended.final, ended.refused_by)
        return _error(404, "No such stream.")

    async def patch_stream(self, request: web.Request) -> web.Response:
        session = self._owned(request)
        if isinstance(session, web.Response):
            return session
        try:
            body = await request.json() if request.can_read_body else {}
        except json.JSONDecodeError:
            return _error(400, 'Send JSON: {"preset": NAME, "set": ["section.key=value", ...]}.')
        preset = body.get("preset") if isinstance(body, dict) else None
        overrides = body.get("set", []) if isinstance(body, dict) else []
        overrides = list(overrides) + request.query.getall("set", [])
        if not isinstance(preset, str | None) or not all(isinstance(o, str) for o in overrides):
            return _error(400, '"preset" must be a name and "set" a list of "section.key=value".')
        try:
            settings = self.settings_from(preset or request.query.get("preset"), overrides)
        except FaceCastError as exc:
            return _error(422, exc.user_message())
        session.update(settings)
        return web.json_response({"id": session.stream_id, "settings": settings.to_dict()})

    async def delete_stream(self, request: web.Request) -> web.Response:
        session = self._owned(request)
        if isinstance(session, web.Response):
            return session
        await session.close("the client hung up")
        return web.Response(status=204)


def _without_paths(message: str, faces: list[StoredFace]) -> str:
    """A message about an uploaded photo names it as the client knows it (its place in the request),
    never by the file the server stored it in."""
    for number, face in enumerate(faces, 1):
        message = message.replace(str(face.path), f"#{number} of this stream")
    return message


def _ended(stream_id: str, reason: str, final: bool, refused_by: str = "") -> web.Response:
    body = {"id": stream_id, "state": "ended", "reason": reason, "final": final}
    return web.json_response({**body, **({"refused_by": refused_by} if refused_by else {})})


def _run_id(asked: str | None) -> str:
    """The run id a stream's watermark carries: the client's (so its recording's manifest names
    the same run, across reconnects too), else a new one."""
    if asked is None:
        return new_run_id()
    if not RUN_ID.fullmatch(asked):
        raise FaceCastError(f"run must be 8 hex digits (a watermark run id), not {asked[:20]!r}.")
    return asked


def _client(request: web.Request) -> str:
    return request.remote or "unknown"
