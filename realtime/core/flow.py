"""Flow policies between the engine's threads: what is kept, what is dropped, what waits.

Each is plain state with no lock of its own: the engine guards all of them with one lock, so one
condition wait can cover two at once (the analyser waits for a frame in the slot *and* a free
permit). Call every method with that lock held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LatestSlot(Generic[T]):
    """One pending item, newest wins (GStreamer's leaky=downstream queue of size 1): offering an
    item while one waits replaces it and counts the replaced one as dropped, so a slow consumer
    always gets the freshest item and nothing queues up behind it."""

    def __init__(self) -> None:
        self._item: T | None = None
        self.dropped = 0

    @property
    def full(self) -> bool:
        return self._item is not None

    def offer(self, item: T) -> T | None:
        """Put `item` in, replacing what waits there; the replaced (dropped) item, or None."""
        stale, self._item = self._item, item
        if stale is not None:
            self.dropped += 1
        return stale

    def put(self, item: T) -> None:
        """Put `item` into the empty slot (a producer that waits for room rather than drop)."""
        if self._item is not None:
            raise RuntimeError("LatestSlot.put() into a full slot: wait until it is taken, or offer()")
        self._item = item

    def take(self) -> T | None:
        """The waiting item (the slot is empty afterwards), or None."""
        item, self._item = self._item, None
        return item


class InFlightPermits:
    """At most `limit` items between acquire and release (MediaPipe's FlowLimiterCalculator): the
    producer takes a permit per item it lets in and the far end gives it back, which bounds the
    work in flight and, with a LatestSlot in front, the latency. `limit` is read at each acquire,
    so a new setting applies at the next item."""

    def __init__(self, limit: int | Callable[[], int]) -> None:
        self._limit = limit if callable(limit) else (lambda: limit)
        self._taken = 0

    @property
    def limit(self) -> int:
        return self._limit()

    @property
    def in_flight(self) -> int:
        return self._taken

    @property
    def available(self) -> bool:
        return self._taken < self._limit()

    def try_acquire(self) -> bool:
        """Take a permit if one is free; False (nothing taken) when all are out."""
        if not self.available:
            return False
        self._taken += 1
        return True

    def release(self) -> None:
        if self._taken <= 0:
            raise RuntimeError("InFlightPermits.release() without a permit out")
        self._taken -= 1


class ReorderBuffer(Generic[T]):
    """Results of parallel workers, added in any order, released in index order (0, 1, 2, ...).
    It holds at most as many entries as there are items in flight."""

    def __init__(self, first: int = 0) -> None:
        self._waiting: dict[int, T] = {}
        self._next = first

    @property
    def next_index(self) -> int:
        """The index released next (everything before it has been)."""
        return self._next

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, index: int, item: T) -> None:
        if index < self._next or index in self._waiting:
            raise ValueError(f"ReorderBuffer: index {index} was already added")
        self._waiting[index] = item

    @property
    def ready(self) -> bool:
        """Whether the next item in order is here."""
        return self._next in self._waiting

    def pop_next(self) -> T | None:
        """The next item in order, or None while it is still being worked on."""
        if self._next not in self._waiting:
            return None
        self._next += 1
        return self._waiting.pop(self._next - 1)
