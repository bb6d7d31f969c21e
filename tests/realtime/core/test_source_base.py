"""Sources' shared parts: the defaults, wrappers' forwarding, completing a BasicSource."""

from __future__ import annotations

from realtime.core.contracts import FrameSource
from realtime.core.source_base import SourceBase, SourceWrapper, complete_source
from tests.engine_fakes import FakeSource


class Interruptible(SourceBase):
    size = (8, 8)
    fps = 30.0
    is_live = True
    description = "interruptible"

    def __init__(self) -> None:
        self.interrupts = 0

    def open(self) -> None:
        return None

    def read(self) -> None:
        return None

    def close(self) -> None:
        return None

    def interrupt(self) -> None:
        self.interrupts += 1


def test_a_basic_source_is_completed_with_nothing_to_interrupt_and_its_news_unheard() -> None:
    plain = FakeSource(frames=2)
    source = complete_source(plain)
    assert isinstance(source, FrameSource) and not isinstance(plain, FrameSource)
    source.interrupt()  # nothing waits: nothing happens
    source.notify = lambda level, message: None
    source.open()
    assert plain.opened and source.size == plain.size and source.description == "fake source"
    frame = source.read()
    assert frame is not None and frame.index == 0
    source.close()
    assert plain.closed


def test_a_frame_source_is_used_as_it_is() -> None:
    source = Interruptible()
    assert complete_source(source) is source


def test_a_wrapper_forwards_notify_and_interrupt_and_moves_notify_to_a_new_inner_source() -> None:
    first, second = Interruptible(), Interruptible()

    class Switching(SourceWrapper):
        def switch(self) -> None:
            self._use(second)

    wrapper = Switching(first)
    said: list[str] = []
    wrapper.notify = lambda level, message: said.append(message)
    assert first.notify is wrapper.notify
    wrapper.interrupt()
    assert first.interrupts == 1
    wrapper.switch()
    assert second.notify is wrapper.notify and wrapper.inner is second
    wrapper.interrupt()
    assert (first.interrupts, second.interrupts) == (1, 1)
    assert wrapper.description == "interruptible" and wrapper.is_live
