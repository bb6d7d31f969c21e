"""A slow link on loopback, without privileges: the bench and the tests put one between a peer
connection and its socket to see how a call copes with a link that carries less than it sends.

Each direction is a bottleneck of `rate_bps` with a drop-tail queue of `queue_s` (as a home
router's): a datagram waits until the ones before it have gone through at the link's rate, and is
lost when it would wait longer than the queue holds. The receiver's bandwidth estimator sees the
growing delay, as on a real link; retransmissions and keyframe requests go through the same queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiortc import RTCPeerConnection


@dataclass
class Bottleneck:
    """One direction of the link: when each datagram may leave, and what was lost."""

    rate_bps: float
    queue_s: float = 0.2
    free_at: float = 0.0  # when the link has sent everything queued so far (the loop's clock)
    passed: int = 0
    dropped: int = 0
    bytes_passed: int = 0

    def admit(self, size: int, now: float) -> float | None:
        """When a datagram of `size` bytes arriving `now` leaves the link; None: lost."""
        start = max(now, self.free_at)
        if start - now > self.queue_s:
            self.dropped += 1
            return None
        self.free_at = start + size * 8 / self.rate_bps
        self.passed += 1
        self.bytes_passed += size
        return self.free_at


@dataclass
class ShapedLink:
    """Both directions of a peer connection's link at `rate_bps` each."""

    rate_bps: float
    queue_s: float = 0.2
    up: Bottleneck = field(init=False)
    down: Bottleneck = field(init=False)

    def __post_init__(self) -> None:
        self.up = Bottleneck(self.rate_bps, self.queue_s)
        self.down = Bottleneck(self.rate_bps, self.queue_s)

    def apply(self, pc: RTCPeerConnection) -> int:
        """Put the link under every ICE transport of `pc` (once its local description is set);
        the number of transports shaped."""
        loop = asyncio.get_running_loop()
        shaped = 0
        seen: set[int] = set()
        for transceiver in pc.getTransceivers():
            dtls = transceiver.sender.transport
            ice = getattr(dtls, "transport", None)
            if ice is None or id(ice) in seen:
                continue
            seen.add(id(ice))
            self._shape_sending(ice, loop)
            self._shape_receiving(ice._connection, loop)
            shaped += 1
        return shaped

    def _shape_sending(self, ice: Any, loop: asyncio.AbstractEventLoop) -> None:
        send: Callable[[bytes], Any] = ice._send
        tasks: set[asyncio.Task[Any]] = set()

        async def sent_or_gone(data: bytes) -> None:
            try:
                await send(data)
            except ConnectionError:
                self.up.dropped += 1  # the connection closed while the datagram was on the link

        def leave(data: bytes) -> None:
            task = asyncio.ensure_future(sent_or_gone(data))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        async def shaped_send(data: bytes) -> None:
            at = self.up.admit(len(data), loop.time())
            if at is not None:
                loop.call_at(at, leave, data)

        ice._send = shaped_send

    def _shape_receiving(self, connection: Any, loop: asyncio.AbstractEventLoop) -> None:
        received: Callable[[bytes, int], None] = connection.data_received

        def shaped_received(data: bytes, component: int) -> None:
            at = self.down.admit(len(data), loop.time())
            if at is not None:
                loop.call_at(at, received, data, component)

        connection.data_received = shaped_received

