"""A worker's loaded models, kept for the settings it saw last: a queue worker takes chunks of
jobs with different settings, and loading models for every chunk would cost seconds each, while
keeping every set it ever loaded grows its memory by about a gigabyte a set."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LoadedModels(Generic[T]):
    """At most `max_settings` entries, the least recently used dropped first. Thread-safe; a load
    runs under the lock, so two chunks of one job never load the same models twice."""

    def __init__(self, max_settings: int) -> None:
        if max_settings < 1:
            raise ValueError("max_settings must be at least 1")
        self._max = max_settings
        self._entries: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, load: Callable[[], T]) -> T:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            value = load()
            self._entries[key] = value
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)  # its models are freed with the last chunk using them
            return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._entries)
