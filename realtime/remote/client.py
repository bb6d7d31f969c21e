"""The remote client: the local camera to the server over WebRTC, the swapped video back to the
local output, and a visible "reconnecting" state (the local picture, labelled) while the link is down.

Threads: capture (reads the local source, hands the newest frame to the sending track), output
(sends the newest returned frame to the local sink, at the camera's rate), and the event loop
(signalling, WebRTC, reconnecting with exponential backoff).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import av
import cv2
import numpy as np
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from realtime.api import (
    DEFAULT_PRESET,
    FrameSink,
    FrameSource,
    ImageBGR,
    Metrics,
    Settings,
    Summary,
    VideoFrame,
    draw_disclosure_label,
    freeze_heap,
)
from realtime.remote.errors import (
    LinkLostError,
    RemoteError,
    ServerFullError,
    StreamEndedError,
    UnreachableError,
)
from realtime.remote.media import (
    VIDEO_CLOCK,
    AsyncHandOff,
    HandOff,
    Received,
    Tagged,
    i420_of,
    pump_track,
    to_av,
)
from realtime.remote.options import RemoteOptions
from realtime.remote.settings_push import overrides_for
from realtime.remote.signalling import Signalling, StreamHandle
from realtime.remote.transport import quicken_receivers, steady_senders

log = logging.getLogger(__name__)

RECONNECTING_TEXT = "reconnecting to the server ..."


@dataclass
class ClientStats:
    frames_captured: int = 0
    frames_linked: int = 0  # captured while the link was up: handed to the sending track
    frames_unsent: int = 0  # of those, left out because the encoder was still busy
    # Sent and never returned: the gaps between the frames that came back (the frames still on
    # their way when the call ends are not lost).
    frames_lost: int = 0
    frames_lost_settled: int = 0  # of those, lost once the call had run a second (not its start-up)
    frames_out: int = 0
    remote_frames: int = 0  # returned from the server and shown
    remote_matched: int = 0  # returned and matched to the captured frame they were made from
    remote_skipped: int = 0  # returned, decoded, and left out on arrival (the output was behind)
    reconnecting_frames: int = 0  # the local picture, shown while the link was down
    connects: int = 0
    states: list[str] = field(default_factory=list)  # "connected", "reconnecting", in order
    latency_ms: Summary = field(default_factory=lambda: Summary(0.0, 0.0, 0.0, 0.0, 0))


# Timestamps go out in steps of 9 ticks (100 us): PyAV's encoder rebases a frame to its own
# microsecond clock and aiortc truncates it back to 90 kHz, which turns 5969 into 5968 but keeps
# every multiple of 9, so each returned frame finds the one it was made from.
PTS_STEP = 9


class Timeline:
    """One connection's RTP clock: the first frame sent is 0, later ones rise; `lookup` maps a
    returned frame's timestamp back to when its picture was captured and its index at the source
    (so the latency is measured on every frame and the preview pairs it with its own original)."""

    def __init__(self, keep: int = 600) -> None:
        self._t0: float | None = None
        self._sent: OrderedDict[int, tuple[float, int]] = OrderedDict()
        self._keep = keep
        self._last = -PTS_STEP
        self._lock = threading.Lock()

    def stamp(self, capture_ts: float, index: int = -1) -> int:
        with self._lock:
            if self._t0 is None:
                self._t0 = capture_ts
            pts = round((capture_ts - self._t0) * VIDEO_CLOCK / PTS_STEP) * PTS_STEP
            pts = max(pts, self._last + PTS_STEP)  # the encoder wants rising timestamps
            self._last = pts
            self._sent[pts] = (capture_ts, index)
            while len(self._sent) > self._keep:
                self._sent.popitem(last=False)
            return pts

    def lookup(self, pts: int) -> tuple[float, int] | None:
        with self._lock:
            return self._sent.get(pts)


class ReturnGaps:
    """One connection's lost frames, from the source indices of the frames that come back (every
    frame captured while linked is sent): a gap between two returned frames was lost on the way;
    the frames still on their way when the call ends are not counted. Losses among the frames
    captured in the call's first `settle_s` (after the first one back: the stream's engine and
    both codecs starting) are told apart from those of the running call."""

    def __init__(self, settle_s: float = 1.0) -> None:
        self._last = -1
        self._settle_s = settle_s
        self._first_ts: float | None = None

    def back(self, index: int, captured_ts: float) -> tuple[int, bool]:
        """Frame `index`, captured at `captured_ts`, came back: how many sent before it, after the
        last one back, never will, and whether the call had settled by then."""
        if self._first_ts is None:
            self._first_ts = captured_ts
        if index <= self._last:
            return 0, False  # an unknown or repeated index
        gap = index - self._last - 1 if self._last >= 0 else 0
        self._last = index
        return gap, captured_ts - self._first_ts >= self._settle_s


class SendingTrack(MediaStreamTrack):
    """The local camera as a WebRTC track: the captured frames through a live hand-off, each
    stamped when the encoder takes it."""

    kind = "video"

    def __init__(self, slot: AsyncHandOff[Tagged], timeline: Timeline) -> None:
        super().__init__()
        self._slot = slot
        self._timeline = timeline

    async def recv(self) -> av.VideoFrame:
        item = await self._slot.get()
        if item is None:
            self.stop()
            raise MediaStreamError
        return to_av(item.image, self._timeline.stamp(item.arrived, item.index), item.frame)


def draw_reconnecting(image: ImageBGR) -> None:
    h = image.shape[0]
    band = max(18, h // 14)
    image[:band] = image[:band] // 3
    scale = band / 40.0
    cv2.putText(image, RECONNECTING_TEXT, (8, int(band * 0.72)), cv2.FONT_HERSHEY_SIMPLEX, scale,
                (0, 200, 255), max(1, int(scale * 2)), cv2.LINE_AA)  # fmt: skip


class RemoteClient:
    def __init__(
        self,
        options: RemoteOptions,
        source: FrameSource,
        sink: FrameSink,
        notify: Callable[[str], None],
        on_state: Callable[[str, str], None] | None = None,
    ) -> None:
        self.options = options
        self.source = source
        self.sink = sink
        self.notify = notify
        self.on_state = on_state  # ("connected" | "reconnecting", a one-line why), from the loop thread
        self.metrics = Metrics()
        self.stats = ClientStats()
        self.stop_event = threading.Event()
        self._remote: HandOff[tuple[Received, tuple[float, int] | None]] = HandOff()
        self._newest_local: VideoFrame | None = None
        self._sending: AsyncHandOff[Tagged] | None = None
        self._linked = threading.Event()
        self._last_remote = 0.0
        self._size = (0, 0)
        self.stopped_by: int | None = None  # the signal that ended the call (SIGINT, SIGTERM), if one did
        # Where update_settings sends a change: set while a stream is open (on the loop thread).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalling: Signalling | None = None
        self._handle: StreamHandle | None = None

    def update_settings(self, settings: Settings) -> None:
        """(Any thread.) Run the stream with `settings` from now on: sent to the server at once
        when a stream is open (PATCH), and with every reconnect."""
        preset = self.options.preset or DEFAULT_PRESET
        self.options = replace(self.options, preset=preset, overrides=tuple(overrides_for(settings, preset)))
        loop, signalling = self._loop, self._signalling
        if loop is None or signalling is None or loop.is_closed():
            return
        signalling.options = self.options
        asyncio.run_coroutine_threadsafe(self._send_settings(), loop)

    async def _send_settings(self) -> None:
        handle, signalling = self._handle, self._signalling
        if handle is None or signalling is None:
            return  # between connections: the next one opens with them
        try:
            await signalling.update(handle, self.options.preset, list(self.options.overrides))
        except RemoteError as exc:
            self.notify(f"the new settings did not reach the server: {exc.user_message()}")

    # ---- threads -------------------------------------------------------------------------------

    def _capture(self) -> None:
        try:
            while not self.stop_event.is_set():
                frame = self.source.read()
                if frame is None:
                    break
                self.metrics.frame_in(frame.capture_ts)
                self.stats.frames_captured += 1
                self._newest_local = frame
                sending = self._sending
                if sending is not None and self._linked.is_set():
                    self.stats.frames_linked += 1
                    # Converted here, on this thread: the event loop carries the packets.
                    sending.put_threadsafe(
                        Tagged(frame.image, -1, frame.capture_ts, i420_of(frame.image), frame.index)
                    )
        finally:
            self.stop_event.set()

    def _output(self) -> None:
        period = 1.0 / (self.source.fps or 30.0)
        last: VideoFrame | None = None
        while not self.stop_event.is_set():
            got = self._remote.take(period * 1.5)
            self.stats.remote_skipped = self._remote.dropped
            if self.stop_event.is_set():
                break
            now = time.perf_counter()
            down = not self._linked.is_set() or now - self._last_remote > self.options.stale_s
            if got is not None:
                item, sent = got
                captured, index = sent if sent is not None else (item.arrived, self.stats.remote_frames)
                frame = VideoFrame(self._fit(item.image), index, captured)
                self.stats.remote_frames += 1
                self._send(frame)
                if sent is not None:
                    self.metrics.frame_out(captured, time.perf_counter())
                last = frame
            elif down and self._newest_local is not None:
                local = self._newest_local
                image = local.image.copy()
                draw_reconnecting(image)
                draw_disclosure_label(image)
                self.stats.reconnecting_frames += 1
                self._send(VideoFrame(image, local.index, local.capture_ts))
            elif last is not None:
                self._send(last)  # the output keeps the camera's rate while a frame is late

    def _fit(self, image: ImageBGR) -> ImageBGR:
        """The returned picture at the local output's size (the server may process a smaller one)."""
        w, h = self._size
        if (image.shape[1], image.shape[0]) != (w, h):
            return np.asarray(cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR), dtype=np.uint8)
        return image

    def _send(self, frame: VideoFrame) -> None:
        self.sink.send(frame)
        self.stats.frames_out += 1

    # ---- the run -------------------------------------------------------------------------------

    def run(self) -> ClientStats:
        """Connect, run until the input ends, stop_event is set or duration_s has passed."""
        self.source.open()
        try:
            self._size = self.source.size
            self.sink.open(self._size[0], self._size[1], self.source.fps)
        except BaseException:
            self.source.close()
            raise
        threads = [
            threading.Thread(target=self._capture, name="remote-capture", daemon=True),
            threading.Thread(target=self._output, name="remote-output", daemon=True),
        ]
        failure: BaseException | None = None
        try:
            for t in threads:
                t.start()
            asyncio.run(self._main())
        except BaseException as exc:
            failure = exc
        finally:
            self.stop_event.set()
            interrupt = getattr(self.source, "interrupt", None)
            if callable(interrupt):
                interrupt()
            self._remote.close()
            for t in threads:
                t.join(3.0)
            self.source.close()
            if failure is None or (isinstance(failure, RemoteError) and self.stats.connects > 0):
                self.sink.close()  # what the call returned is kept, up to where the link was lost
            else:
                # Refused before a connection (a photo too large, no face): the output holds only the
                # local picture, and a file it would replace is left as it was.
                self.sink.abort()
        self.stats.latency_ms = Summary.of(self.metrics.latencies_ms(whole_run=True))
        if failure is not None:
            raise failure
        return self.stats

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        if threading.current_thread() is threading.main_thread():
            # Ctrl+C and SIGTERM end the call cleanly: the server hears the hang-up.
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._on_signal, sig)
        signalling = Signalling(self.options)
        self._loop, self._signalling = loop, signalling
        await asyncio.to_thread(signalling.check_trust, self.notify)
        try:
            await self._keep_linked(signalling, loop, started)
        finally:
            self._signalling = None
            await signalling.close()

    async def _keep_linked(
        self, signalling: Signalling, loop: asyncio.AbstractEventLoop, started: float
    ) -> None:
        """Connect; when the link drops, reconnect with exponential backoff until reconnect_for_s."""
        down_since: float | None = None
        backoff = self.options.first_backoff_s
        first = True
        while not self._should_stop(started):
            try:
                await self._connect_and_stream(signalling, loop, started)
                down_since, backoff = None, self.options.first_backoff_s
            except ServerFullError as exc:
                if first:
                    raise
                wait = max(backoff, exc.retry_after_s)
                self._report("reconnecting", f"the server is full; trying again in {wait:.0f} s")
                await self._sleep(wait, started)
                continue
            except RemoteError as exc:
                if first or not _retryable(exc):
                    raise
                self._report("reconnecting", f"reconnecting: {exc.user_message()}")
            first = False
            if self._should_stop(started):
                break
            now = time.monotonic()
            down_since = down_since or now
            if now - down_since > self.options.reconnect_for_s:
                raise LinkLostError(
                    f"The link to {self.options.url} did not come back within "
                    f"{self.options.reconnect_for_s:g} s.",
                    hint="Check that the server is running and reachable.",
                )
            self._report("reconnecting", f"link down: reconnecting in {backoff:.2g} s")
            await self._sleep(backoff, started)
            backoff = min(backoff * 2, self.options.max_backoff_s)

    def _on_signal(self, signum: int) -> None:
        """(On the loop.) The call ends as at the input's end; `stopped_by` keeps the first signal."""
        if self.stopped_by is None:
            self.stopped_by = signum
            self.notify(f"stopping ({signal.Signals(signum).name}): hanging up ...")
        self.stop_event.set()

    def _report(self, state: str, text: str) -> None:
        self.notify(text)
        if self.on_state is not None:
            self.on_state(state, text)

    def _should_stop(self, started: float) -> bool:
        duration = self.options.duration_s
        return self.stop_event.is_set() or (duration is not None and time.monotonic() - started > duration)

    async def _sleep(self, seconds: float, started: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not self._should_stop(started):
            await asyncio.sleep(0.05)

    async def _connect_and_stream(
        self, signalling: Signalling, loop: asyncio.AbstractEventLoop, started: float
    ) -> None:
        """One connection: returns when the link is down (or the run stops)."""
        timeline = Timeline()
        sending: AsyncHandOff[Tagged] = AsyncHandOff(loop)
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        handle: StreamHandle | None = None
        ended = asyncio.Event()
        pumps: list[asyncio.Task[None]] = []
        try:
            pc.addTransceiver(SendingTrack(sending, timeline), direction="sendrecv")
            quicken_receivers(pc)

            gaps = ReturnGaps()

            @pc.on("track")
            def on_track(track: MediaStreamTrack) -> None:
                def on_frame(item: Received) -> None:
                    self._last_remote = time.perf_counter()
                    captured = timeline.lookup(item.pts) if item.pts > 0 else None
                    if captured is not None:
                        self.stats.remote_matched += 1
                        lost, settled = gaps.back(captured[1], captured[0])
                        self.stats.frames_lost += lost
                        self.stats.frames_lost_settled += lost if settled else 0
                    self._remote.put((item, captured))

                async def pump() -> None:
                    await pump_track(track, on_frame)
                    ended.set()

                pumps.append(asyncio.ensure_future(pump()))

            offer = await pc.createOffer()
            await pc.setLocalDescription(offer)
            signalling.options = self.options  # with any settings changed while reconnecting
            handle = await signalling.open_stream(str(pc.localDescription.sdp))
            self._handle = handle
            await pc.setRemoteDescription(RTCSessionDescription(sdp=handle.answer, type="answer"))
            steady_senders(pc)  # negotiated, and no frame handed over yet
            self._sending = sending
            self._last_remote = time.perf_counter()
            self._linked.set()
            self.stats.connects += 1
            self.stats.states.append("connected")
            self._report("connected", f"connected to {self.options.url} (stream {handle.stream_id})")
            freeze_heap(collect=False)  # the call's lasting objects out of the collector's scans
            while not self._should_stop(started):
                await asyncio.sleep(0.05)
                stale = time.perf_counter() - self._last_remote > self.options.stale_s
                if ended.is_set() or stale or pc.connectionState in ("failed", "closed"):
                    break
            else:
                self.stop_event.set()  # before the link is marked down: no "reconnecting" frames at the end
            if not self._should_stop(started):
                why = await signalling.why_ended(handle)
                if why is not None and why[1]:
                    raise StreamEndedError(f"The server ended the stream: {why[0]}.")
                if why is not None:
                    self.notify(f"the server ended the stream: {why[0]}")
        finally:
            self._handle = None
            was_linked = self._linked.is_set()
            self._linked.clear()
            self._sending = None
            sending.close_threadsafe()
            self.stats.frames_unsent += sending.dropped
            if was_linked and not self._should_stop(started):
                self.stats.states.append("reconnecting")
            if handle is not None and self._should_stop(started):
                await signalling.hang_up(handle)
            await pc.close()
            for task in pumps:
                task.cancel()


def _retryable(exc: RemoteError) -> bool:
    """While reconnecting, a server that is not up yet is expected; a refused token is not."""
    return isinstance(exc, UnreachableError)
