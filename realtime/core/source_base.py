"""What sources share: the parts of FrameSource with a sensible default, forwarding for wrappers,
and the adapter that completes a BasicSource."""

from __future__ import annotations

from typing import Generic, TypeVar

from realtime.core.contracts import BasicSource, FrameSource, Notify
from realtime.core.frames import VideoFrame

S = TypeVar("S", bound=BasicSource)


class SourceBase:
    """`notify` and `interrupt()` for a source that has no news to tell and never waits in read();
    a source that does overrides interrupt() (and calls `notify` when set)."""

    notify: Notify | None = None

    def interrupt(self) -> None:
        """Nothing waits in read(): nothing to end."""


class _Forwarding(SourceBase, Generic[S]):
    """A source in front of another (`inner`), forwarding what BasicSource has."""

    def __init__(self, inner: S) -> None:
        self._inner = inner

    @property
    def inner(self) -> S:
        return self._inner

    def open(self) -> None:
        self._inner.open()

    def read(self) -> VideoFrame | None:
        return self._inner.read()

    def close(self) -> None:
        self._inner.close()

    @property
    def size(self) -> tuple[int, int]:
        return self._inner.size

    @property
    def fps(self) -> float:
        return self._inner.fps

    @property
    def is_live(self) -> bool:
        return self._inner.is_live

    @property
    def description(self) -> str:
        return self._inner.description


class SourceWrapper(_Forwarding[FrameSource]):
    """The base of a source that wraps another: everything is forwarded, `notify` and interrupt()
    included, so a wrapper overrides only what it changes. A wrapper that switches to another inner
    source calls _use() so `notify` follows it."""

    def __init__(self, inner: FrameSource) -> None:
        super().__init__(inner)
        self._notify: Notify | None = None

    def _use(self, inner: FrameSource) -> None:
        self._inner = inner
        inner.notify = self._notify

    @property
    def notify(self) -> Notify | None:
        return self._notify

    @notify.setter
    def notify(self, value: Notify | None) -> None:
        self._notify = value
        self._inner.notify = value

    def interrupt(self) -> None:
        self._inner.interrupt()


class _Completed(_Forwarding[BasicSource]):
    """A BasicSource with SourceBase's defaults: nothing to interrupt, its news unheard."""


def complete_source(source: BasicSource) -> FrameSource:
    """`source` as a FrameSource: itself when it is one, else behind SourceBase's defaults."""
    if isinstance(source, FrameSource):
        return source
    return _Completed(source)
