"""When the requests queued for a model make a batch: a maximum batch and a maximum delay, as
Triton's dynamic batcher has, and no waiting for streams that are not there.

A fixed delay costs a lone stream that delay on every call. Here the window closes as soon as
every *active* stream (one that sent a request within `active_s`) has a request in: a lone stream
is served at once, four streams in phase meet in one batch, and a stream that stalls or leaves
holds the others for `max_delay_us` at most (and not at all once it has been quiet `active_s`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    max_batch: int = 8  # requests in one model call
    max_delay_us: int = 1000  # the longest a request waits for others to join it
    active_s: float = 0.5  # a stream heard from this recently is expected in the next batch

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.max_delay_us < 0 or self.active_s <= 0.0:
            raise ValueError(f"bad batch policy {self}")


@dataclass(frozen=True, slots=True)
class WindowState:
    """The queue as the window sees it."""

    queued: int  # requests waiting
    streams_in: int  # streams with at least one request waiting
    active_streams: int  # streams heard from within active_s (those waiting included)
    waited_us: float  # how long the oldest request has waited


class BatchWindow:
    """Decides whether the queue makes a batch now, and how long to wait for more otherwise."""

    def __init__(self, policy: BatchPolicy) -> None:
        self.policy = policy

    def ready(self, state: WindowState) -> bool:
        if state.queued == 0:
            return False
        if state.queued >= self.policy.max_batch:
            return True
        if state.streams_in >= state.active_streams:
            return True  # nobody else is expected
        return state.waited_us >= self.policy.max_delay_us

    def wait_s(self, state: WindowState) -> float:
        """Seconds until the deadline of the oldest request (0 when it has passed)."""
        return max(self.policy.max_delay_us - state.waited_us, 0.0) / 1e6


__all__ = ["BatchPolicy", "BatchWindow", "WindowState"]
