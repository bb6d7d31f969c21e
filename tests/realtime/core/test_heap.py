"""The heap is frozen once per process: a second freeze (a second stream) must not keep that
stream's garbage for ever."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from realtime.core.heap import freeze_heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_the_first_freeze_takes_everything_alive_and_a_second_is_refused(unfrozen: None) -> None:
    assert freeze_heap(collect=False)
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the interpreter, numpy, the test session: all out of the scans
    later = [[] for _ in range(100)]  # made after the freeze: a later stream's objects
    assert not freeze_heap(collect=False)
    assert gc.get_freeze_count() == frozen  # they stay collectable
    del later
