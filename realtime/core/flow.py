"""Flow policies between threads: what is kept, what is dropped, what waits.

Each is plain state with no lock of its own: its user holds one (the engine guards all of them
with one lock, so one condition wait can cover two at once: the analyser waits for a frame in the
slot *and* a free permit). Call every method with that lock held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class CatchUpSlot(Generic[T]):
    """Up to two pending items, for live hand-offs (GStreamer's leaky=downstream queue of size 2,
    plus a catch-up rule), so a taken item never has more than one newer one waiting behind it.

    A consumer that finds two waiting takes the older one while it is catching up: after a one-off
    stall (a collection, a busy core) it works through both and loses nothing. It is behind, and
    the older is dropped for the newer, when two or more items came in since its previous take (it
    is slower than the producer) or when it has found two waiting `patience` takes running (it
    keeps pace but never gains: without this it would stay one item late for good). A third item
    offered while two wait pushes the oldest out (dropped).

    `put` is for a producer that waits for room rather than drop (files): it needs an empty slot.
    """

    def __init__(self, patience: int = 3) -> None:
        self._items: deque[T] = deque()
        self._patience = patience
        self._late_takes = 0  # takes running that found two waiting
        self._offered = 0  # items offered since the last take
        self.dropped = 0

    @property
    def full(self) -> bool:
        """Whether an item waits (the consumer has something to take)."""
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def offer(self, item: T) -> T | None:
        """Put `item` in; the item pushed out (dropped) when two already waited, else None."""
        self._items.append(item)
        self._offered += 1
        if len(self._items) > 2:
            self.dropped += 1
            return self._items.popleft()
        return None

    def put(self, item: T) -> None:
        if self._items:
            raise RuntimeError("CatchUpSlot.put() into a full slot: wait until it is taken, or offer()")
        self._items.append(item)

    def take(self) -> T | None:
        """The item to work on next (see the class), or None when none waits."""
        offered, self._offered = self._offered, 0
        if not self._items:
            return None
        if len(self._items) == 1:
            self._late_takes = 0
            return self._items.popleft()
        self._late_takes += 1
        slower = offered >= 2 and self._late_takes > 1
        if slower or self._late_takes >= self._patience:
            self._items.popleft()
            self.dropped += 1
        return self._items.popleft()


class InFlightPermits:
    """At most `limit` items between acquire and release (MediaPipe's FlowLimiterCalculator): the
    producer takes a permit per item it lets in and the far end gives it back, which bounds the
    work in flight and, with a CatchUpSlot in front, the latency. `limit` is read at each acquire,
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
