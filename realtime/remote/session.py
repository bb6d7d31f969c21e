"""One stream on the server: a peer connection, its own engine, and the watch that ends it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiortc import MediaStreamTrack, RTCPeerConnection

from realtime.api import (
    ContentVerdict,
    Engine,
    EngineEvent,
    ImageBGR,
    Run,
    Settings,
    StageFactory,
    freeze_heap,
    told,
)
from realtime.remote.content_policy import StreamContent
from realtime.remote.faces import StoredFace
from realtime.remote.limits import Limits
from realtime.remote.media import (
    AsyncHandOff,
    OutgoingTrack,
    Received,
    Tagged,
    TrackSink,
    TrackSource,
    pump_track,
)

log = logging.getLogger(__name__)

WATCH_S = 0.25  # how often a session checks its limits


@dataclass
class StreamSession:
    stream_id: str
    token_name: str
    client: str
    faces: tuple[StoredFace, ...]
    settings: Settings
    stages: StageFactory
    pc: RTCPeerConnection
    limits: Limits
    on_closed: Callable[[StreamSession, str], Awaitable[None]]
    run_id: str | None = None  # what the frames' watermark carries (None: the engine makes one)
    content: StreamContent | None = None  # the content policy's sampling (None: off)
    # Told each sampled frame's verdict and whether the policy refuses the stream now.
    on_content: Callable[[StreamSession, ContentVerdict, bool], Awaitable[None]] | None = None
    created: float = field(default_factory=time.monotonic)
    run: Run | None = None
    source: TrackSource | None = None
    close_reason: str = ""
    final: bool = False  # ended by a limit a reconnect must not get round (the session's length)
    refused_by: str = ""  # "content": the content policy ended it
    _out: AsyncHandOff[Tagged] | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _closing: bool = False
    _engine_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _content_task: asyncio.Task[None] | None = None

    def outgoing_track(self) -> OutgoingTrack:
        self._out = AsyncHandOff(asyncio.get_running_loop())
        return OutgoingTrack(self._out)

    def start_watch(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._watch()))

    def take_track(self, track: MediaStreamTrack) -> None:
        self._tasks.append(asyncio.ensure_future(self._consume(track)))

    @property
    def engine(self) -> Engine | None:
        """The running stream's engine (None before the first picture came)."""
        return self.run.engine if self.run is not None else None

    @property
    def closed(self) -> bool:
        return self._closing

    def last_activity(self) -> float:
        return self.source.last_arrival if self.source is not None else self.created

    async def _consume(self, track: MediaStreamTrack) -> None:
        """The first picture opens the engine (its size is the stream's); later ones feed it."""

        def on_frame(item: Received) -> None:
            if self.content is not None and not self._closing and self.content.due():
                # A copy: the engine draws on the frame it gets.
                picture = item.image.copy()
                self._content_task = asyncio.ensure_future(self._check_content(picture))
            if self.source is not None:
                self.source.feed(item)
            elif not self._engine_lock.locked():
                self._tasks.append(asyncio.ensure_future(self._start_engine(item)))

        await pump_track(track, on_frame)
        if not self._closing:
            await self.close("the client hung up")

    async def _check_content(self, picture: ImageBGR) -> None:
        content = self.content
        assert content is not None
        try:
            verdict = await asyncio.to_thread(content.classify, picture)
        except Exception as exc:  # the stream goes on; the operator reads why in the log
            content.failed_once()
            log.warning("stream %s: the content check failed: %s", self.stream_id, told(exc).message)
            return
        refuse = content.record(verdict)
        if self.on_content is not None and not self._closing:
            await self.on_content(self, verdict, refuse)

    async def _start_engine(self, first: Received) -> None:
        async with self._engine_lock:
            if self.source is not None or self._closing or self._out is None:
                return
            source = TrackSource(first, idle_s=self.limits.idle_s)
            run = Run(
                source,
                TrackSink(self._out),
                self.settings,
                self.stages,
                on_event=self._on_event,
                run_id=self.run_id,
            )
            self.source = source
            try:
                await asyncio.to_thread(run.start)
            except Exception as exc:
                why = told(exc).message
                log.warning("stream %s: the engine did not start: %s", self.stream_id, why)
                await self.close(f"the engine did not start: {why}")
                return
            self.run = run
            # The first stream's models are what this server keeps: out of the collector's scans
            # from now on (no collection now: the other streams run).
            freeze_heap(collect=False)
            if self._closing:
                await asyncio.to_thread(run.stop)

    def _on_event(self, event: EngineEvent) -> None:
        if event.kind in ("error", "warning"):
            log.warning("stream %s: %s", self.stream_id, event.message)

    async def _watch(self) -> None:
        while not self._closing:
            await asyncio.sleep(WATCH_S)
            now = time.monotonic()
            if now - self.created > self.limits.max_session_s:
                limit = self.limits.max_session_s
                await self.close(f"the stream reached the server's time limit ({limit:g} s)", final=True)
            elif now - self.last_activity() > self.limits.idle_s:
                await self.close(f"no video for {self.limits.idle_s:g} s")
            elif self.pc.connectionState in ("failed", "closed"):
                await self.close(f"the connection {self.pc.connectionState}")
            elif self.run is not None and self.run.ended():
                error = self.run.engine.error
                why = f": {error.user_message()}" if error is not None else ""
                await self.close(f"the engine stopped{why}")

    async def close(self, reason: str, final: bool = False, refused_by: str = "") -> None:
        if self._closing:
            return
        self._closing = True
        self.close_reason = reason  # first, so a client asking why the media stopped hears it
        self.final = final
        self.refused_by = refused_by
        current = asyncio.current_task()
        for task in [*self._tasks, self._content_task]:
            if task is not None and task is not current:
                task.cancel()
        if self.source is not None:
            self.source.close()
        if self.run is not None:
            await asyncio.to_thread(self.run.stop)
        if self._out is not None:
            self._out.close_threadsafe()
        await self.pc.close()
        await self.on_closed(self, reason)

    def update(self, settings: Settings) -> None:
        self.settings = settings
        if self.run is not None:
            self.run.engine.update_settings(settings)

    def stats_lines(self) -> list[str]:
        if self.run is None:
            return []
        s = self.run.stats()
        # Where frames were left out: on arrival (the engine had two waiting already), in the
        # engine (its analyser behind), before the encoder (still busy with an earlier one).
        dropped = {
            "arrival": self.source.dropped if self.source is not None else 0,
            "engine": s.frames_dropped,
            "sending": self._out.dropped if self._out is not None else 0,
        }
        label = f'stream="{self.stream_id}"'
        return [
            f"facecast_stream_fps_in{{{label}}} {s.fps_in:.3f}",
            f"facecast_stream_fps_out{{{label}}} {s.fps_out:.3f}",
            f'facecast_stream_latency_ms{{{label},quantile="0.5"}} {s.latency_ms.p50:.3f}',
            f'facecast_stream_latency_ms{{{label},quantile="0.99"}} {s.latency_ms.p99:.3f}',
            f"facecast_stream_frames_in_total{{{label}}} {s.frames_in}",
            f"facecast_stream_frames_out_total{{{label}}} {s.frames_out}",
        ] + [f'facecast_stream_frames_dropped_total{{{label},at="{at}"}} {n}' for at, n in dropped.items()]
