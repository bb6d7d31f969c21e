"""The remote client: the local input to the server over WebRTC, the swapped video back to the
local output, and a visible "reconnecting" state (the local picture, labelled) while the link is down.

Two modes, by the input. A live one (a camera, a clip played in real time) is latest-wins: the
newest picture is sent, the newest returned one shown, each once, at its capture time. A file
played as fast as it goes is every-frame (realtime/remote/file_pacing.py): the client waits for the
call before it reads, sends at the pace frames come back, sends again what did not, and writes
each frame in order at its own media time; a frame that never comes back fails the run
(FramesMissingError) with nothing written.

Threads: capture (reads the local source, hands frames to the sending track), output (sends the
returned frames to the local sink), and the event loop (signalling, WebRTC, reconnecting with
exponential backoff).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
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
from realtime.remote.encoder import TunedVp8Encoder, VideoRate, tuned_senders
from realtime.remote.errors import (
    FramesMissingError,
    LinkLostError,
    RemoteError,
    ServerFullError,
    StreamEndedError,
    UnreachableError,
)
from realtime.remote.file_pacing import AckedSending, InOrderFrames
from realtime.remote.media import AsyncHandOff, Fifo, HandOff, Received, i420_of, pump_track, to_av
from realtime.remote.options import RemoteOptions
from realtime.remote.settings_push import overrides_for
from realtime.remote.signalling import Signalling, StreamHandle
from realtime.remote.timeline import CaptureOrder, ReturnGaps, SentFrame, Timeline
from realtime.remote.transport import bytes_received, quicken_receivers

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
    # The video each way while linked (the bitrate a call used: bytes * 8 / linked_s).
    bytes_sent: int = 0
    bytes_received: int = 0
    linked_s: float = 0.0
    # A file (every-frame mode): its frames, those sent again, and whether all came back in order.
    file_frames: int = 0
    frames_resent: int = 0
    file_complete: bool = False
    # The sender's rate when the last connection ended, and how often it followed the link.
    send_rate_bps: int = 0
    rate_changes: int = 0

    def bitrate_bps(self) -> tuple[float, float]:
        """(sent, received) video bit/s over the time linked."""
        if self.linked_s <= 0:
            return 0.0, 0.0
        return self.bytes_sent * 8 / self.linked_s, self.bytes_received * 8 / self.linked_s


@dataclass(frozen=True, slots=True)
class ToSend:
    """A picture for the sending track: converted for the encoder, and what it is."""

    image: ImageBGR
    frame: av.VideoFrame  # the picture in I420, converted on the thread that handed it over
    sent: SentFrame


class SendingTrack(MediaStreamTrack):
    """The local input as a WebRTC track: the frames handed to it, each stamped when the encoder
    takes it."""

    kind = "video"

    def __init__(self, slot: AsyncHandOff[ToSend], timeline: Timeline) -> None:
        super().__init__()
        self._slot = slot
        self._timeline = timeline

    async def recv(self) -> av.VideoFrame:
        item = await self._slot.get()
        if item is None:
            self.stop()
            raise MediaStreamError
        return to_av(item.image, self._timeline.stamp(item.sent), item.frame)


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
        link: Callable[[RTCPeerConnection], object] | None = None,
    ) -> None:
        self.options = options
        self.source = source
        self.sink = sink
        self.notify = notify
        # ("connecting" | "connected" | "reconnecting", a one-line why), from the loop thread
        self.on_state = on_state
        self._link = link  # given each peer connection before it connects (the bench's slow link)
        self.metrics = Metrics()
        self.stats = ClientStats()
        self.stop_event = threading.Event()
        self._returns: HandOff[tuple[Received, SentFrame | None]] | Fifo[tuple[Received, SentFrame | None]]
        self._returns = HandOff()
        self._pacing: AckedSending | None = None  # a file: every frame, in order
        self._needs_primer = False  # a file's new connection: its timeline starts with a frame not counted
        self._newest_local: VideoFrame | None = None
        self._sending: AsyncHandOff[ToSend] | None = None
        self._linked = threading.Event()
        self._last_remote = 0.0
        self._size = (0, 0)
        self._opened = False
        self.stopped_by: int | None = None  # the signal that ended the call (SIGINT, SIGTERM), if one did
        # Where update_settings sends a change: set while a stream is open (on the loop thread).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalling: Signalling | None = None
        self._handle: StreamHandle | None = None

    @property
    def every_frame(self) -> bool:
        """Whether the input is a file played as fast as it goes (known once open)."""
        return self._pacing is not None

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

    def _read(self) -> VideoFrame | None:
        frame = self.source.read()
        if frame is not None:
            self.metrics.frame_in(frame.capture_ts)
            self.stats.frames_captured += 1
            self._newest_local = frame
        return frame

    def _capture_live(self) -> None:
        try:
            while not self.stop_event.is_set():
                frame = self._read()
                if frame is None:
                    break
                sending = self._sending
                if sending is not None and self._linked.is_set():
                    self.stats.frames_linked += 1
                    # Converted here, on this thread: the event loop carries the packets.
                    sent = SentFrame(frame.capture_ts, frame.index)
                    sending.put_threadsafe(ToSend(frame.image, i420_of(frame.image), sent))
        finally:
            self.stop_event.set()

    def _capture_file(self, pacing: AckedSending) -> None:
        """Every frame of the file, as the pacing allows; the output thread ends the run once all
        are written."""
        while True:
            item = pacing.next_frame(self._read, self.stop_event, self._linked)
            if item is None:
                return
            sending = self._sending
            if sending is None:
                continue  # the link went down just now: the pacing sends it again on the next
            frame = item.frame
            if self._needs_primer:
                self._needs_primer = False
                primer = SentFrame(frame.capture_ts, -1)  # RTP 0: what comes back under it is not used
                sending.put_threadsafe(ToSend(frame.image, i420_of(frame.image), primer))
            self.stats.frames_linked += 1
            sent = SentFrame(frame.capture_ts, frame.index, frame.pts, item.seq, item.ordinal)
            sending.put_threadsafe(ToSend(frame.image, i420_of(frame.image), sent))

    def _output_live(self) -> None:
        """Each returned frame once, at its capture time (`CaptureOrder`); the local picture,
        labelled, while the link is down."""
        period = 1.0 / (self.source.fps or 30.0)
        order = CaptureOrder(period)
        while not self.stop_event.is_set():
            got = self._returns.take(period * 1.5)
            self.stats.remote_skipped = self._returns.dropped + order.late
            if self.stop_event.is_set():
                break
            now = time.perf_counter()
            down = not self._linked.is_set() or now - self._last_remote > self.options.stale_s
            if got is not None:
                item, sent = got
                captured = order.place(sent.capture_ts if sent is not None else None, item.arrived)
                if captured is None:
                    continue
                self.stats.remote_frames += 1
                self._send(VideoFrame(self._fit(item.image), sent.index if sent else -1, captured))
                if sent is not None:
                    self.metrics.frame_out(sent.capture_ts, time.perf_counter())
            elif down and self._newest_local is not None:
                local = self._newest_local
                if order.place(local.capture_ts, local.capture_ts) is None:
                    continue  # shown already: the camera has no newer picture yet
                image = local.image.copy()
                draw_reconnecting(image)
                draw_disclosure_label(image)
                self.stats.reconnecting_frames += 1
                self._send(VideoFrame(image, local.index, local.capture_ts))

    def _output_file(self, pacing: AckedSending) -> None:
        """The returned frames in the file's order, each at its own media time; sets stop_event
        once the last is written (or one never came back)."""
        order = InOrderFrames()
        try:
            while not self.stop_event.is_set():
                if pacing.input_ended and order.next >= pacing.frames_read:
                    self.stats.file_complete = True
                    return
                if pacing.given_up:
                    return
                got = self._returns.take(0.2)
                if got is None:
                    continue
                item, sent = got
                assert sent is not None  # only frames of the file are queued here
                self.stats.remote_frames += 1
                frame = VideoFrame(self._fit(item.image), sent.index, sent.capture_ts, sent.media_pts)
                for ready in order.add(sent.ordinal, frame):
                    self._send(ready)
                    self.metrics.frame_out(ready.capture_ts, time.perf_counter())
        finally:
            self.stats.file_frames = pacing.frames_read
            self.stats.frames_resent = pacing.resent
            self.stop_event.set()

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

    def open(self) -> None:
        """Open the input and the output (run() does, if not done): their real size and rate are
        known from here on, for the run's first line."""
        if self._opened:
            return
        self.source.open()
        try:
            self._size = self.source.size
            self.sink.open(self._size[0], self._size[1], self.source.fps)
        except BaseException:
            self.source.close()
            raise
        self._opened = True
        if not self.source.is_live:
            self._pacing = AckedSending()
            self._returns = Fifo()

    def run(self) -> ClientStats:
        """Connect, run until the input ends, stop_event is set or (a live input) duration_s has
        passed. A file that did not come back whole raises FramesMissingError, nothing written."""
        self.open()
        pacing = self._pacing
        threads = [
            threading.Thread(
                target=self._capture_live if pacing is None else lambda: self._capture_file(pacing),
                name="remote-capture",
                daemon=True,
            ),
            threading.Thread(
                target=self._output_live if pacing is None else lambda: self._output_file(pacing),
                name="remote-output",
                daemon=True,
            ),
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
            self._returns.close()
            for t in threads:
                t.join(3.0)
            self.source.close()
            if pacing is not None and failure is None and not self.stats.file_complete:
                failure = self._missing(pacing)
            self._finish_output(failure, whole=pacing is None or self.stats.file_complete)
        self.stats.latency_ms = Summary.of(self.metrics.latencies_ms(whole_run=True))
        stopped = isinstance(failure, FramesMissingError) and self.stopped_by is not None
        if failure is not None and not stopped:  # a signal's stop is said by the exit status
            raise failure
        return self.stats

    def _finish_output(self, failure: BaseException | None, whole: bool) -> None:
        """A live output keeps what it showed when the link failed; a file is written only whole.
        Refused before a connection (a photo too large, no face), the output holds only the local
        picture: it is dropped, and a file it would replace is left as it was."""
        refused_before_call = isinstance(failure, RemoteError) and self.stats.connects == 0
        local_fault = failure is not None and not isinstance(failure, RemoteError)
        if not whole or refused_before_call or local_fault:
            self.sink.abort()
        else:
            self.sink.close()

    def _missing(self, pacing: AckedSending) -> FramesMissingError:
        back, read = len(pacing.done), pacing.frames_read
        total = f"{read}" if pacing.input_ended else f"the {read} read so far"
        lost = sorted(pacing.given_up)
        which = (
            f"; frame {lost[0] + 1} never came back in {pacing.max_tries} sends" if lost else ""
        )
        if self.stopped_by is not None:
            self.notify(f"stopped: {back} of {total} frames came back; nothing was written")
        return FramesMissingError(
            f"Only {back} of {total} frames of {self.source.description} came back from the server"
            f"{which}; nothing was written.",
            hint="Run it again; if it keeps happening, the server or the link is overloaded.",
        )

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
        duration = None if self.every_frame else self.options.duration_s  # a file runs to its end
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
        sending: AsyncHandOff[ToSend] = AsyncHandOff(loop)
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        handle: StreamHandle | None = None
        ended = asyncio.Event()
        pumps: list[asyncio.Task[None]] = []
        encoders: list[TunedVp8Encoder] = []
        linked_at: float | None = None
        try:
            pc.addTransceiver(SendingTrack(sending, timeline), direction="sendrecv")
            quicken_receivers(pc)

            gaps = ReturnGaps()

            @pc.on("track")
            def on_track(track: MediaStreamTrack) -> None:
                def on_frame(item: Received) -> None:
                    self._last_remote = time.perf_counter()
                    # RTP 0 is the call's first frame, or the server's first returned one sent
                    # under it a second time: which of the two is unknown.
                    sent = timeline.lookup(item.pts) if item.pts > 0 else None
                    if sent is not None:
                        self.stats.remote_matched += 1
                        lost, settled = gaps.back(sent.index, sent.capture_ts)
                        self.stats.frames_lost += lost
                        self.stats.frames_lost_settled += lost if settled else 0
                    pacing = self._pacing
                    if pacing is None:
                        self._returns.put((item, sent))
                    elif sent is not None and sent.ordinal >= 0 and pacing.returned(sent.ordinal, sent.seq):
                        self._returns.put((item, sent))  # a file's frame, the first time it is back

                async def pump() -> None:
                    await pump_track(track, on_frame)
                    ended.set()

                pumps.append(asyncio.ensure_future(pump()))

            offer = await pc.createOffer()
            await pc.setLocalDescription(offer)
            if self._link is not None:
                self._link(pc)
            signalling.options = self.options  # with any settings changed while reconnecting
            if not self.stats.connects:
                self._report("connecting", f"connecting to {self.options.url} ...")
            handle = await signalling.open_stream(str(pc.localDescription.sdp))
            self._handle = handle
            await pc.setRemoteDescription(RTCSessionDescription(sdp=handle.answer, type="answer"))
            # Negotiated, and no frame handed over yet.
            encoders = tuned_senders(pc, VideoRate(self.options.max_bitrate))
            self._sending = sending
            self._needs_primer = self.every_frame
            self._last_remote = linked_at = time.perf_counter()
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
            if self._pacing is not None:
                self._pacing.link_down()  # what was on its way goes out again on the next connection
            sending.close_threadsafe()
            self.stats.frames_unsent += sending.dropped
            if linked_at is not None:
                self.stats.linked_s += time.perf_counter() - linked_at
                self.stats.bytes_sent += sum(e.bytes_out for e in encoders)
                self.stats.bytes_received += bytes_received(pc)
                self.stats.send_rate_bps = max((e.target_bitrate for e in encoders), default=0)
                self.stats.rate_changes += sum(e.rate_changes for e in encoders)
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
