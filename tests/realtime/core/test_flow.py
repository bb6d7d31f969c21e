"""The flow policies on their own: the catch-up slot, in-flight permits, reorder buffer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from realtime.core.flow import CatchUpSlot, InFlightPermits, ReorderBuffer


def test_a_one_off_stall_loses_nothing() -> None:
    """The consumer kept up, then missed one turn: both waiting frames are worked on, in order."""
    slot: CatchUpSlot[int] = CatchUpSlot()
    slot.offer(0)
    assert slot.take() == 0
    assert slot.offer(1) is None and slot.offer(2) is None  # the stall: two wait
    assert slot.take() == 1 and slot.take() == 2  # caught up
    assert slot.dropped == 0 and not slot.full and slot.take() is None


def test_a_consumer_catching_up_while_frames_keep_coming_loses_nothing() -> None:
    """After a stall the consumer takes one frame for each that arrives, then gains: every frame is
    worked on, in order."""
    slot: CatchUpSlot[int] = CatchUpSlot()
    slot.offer(1)
    slot.offer(2)  # the stall
    assert slot.take() == 1
    slot.offer(3)
    assert slot.take() == 2  # one came in since: it keeps pace, still catching up
    assert slot.take() == 3 and slot.dropped == 0  # and gained


def test_a_consumer_slower_than_the_producer_gets_the_newest() -> None:
    slot: CatchUpSlot[int] = CatchUpSlot()
    slot.offer(1)
    slot.offer(2)
    assert slot.take() == 1  # maybe a one-off
    slot.offer(3)
    assert slot.offer(4) == 2  # two more came in: the oldest is pushed out
    assert slot.take() == 4 and slot.dropped == 2  # slower than the producer: the newest
    slot.offer(5)
    assert slot.take() == 5  # one waiting: caught up
    slot.offer(6)
    slot.offer(7)
    assert slot.take() == 6 and slot.dropped == 2  # a new stall is a one-off again


def test_a_consumer_that_keeps_pace_but_never_gains_is_not_left_one_late() -> None:
    """One take per offer after a stall: without the patience rule it would stay one frame late
    for good; with it the older goes at the third late take."""
    slot: CatchUpSlot[int] = CatchUpSlot(patience=3)
    slot.offer(0)
    slot.offer(1)
    taken = [slot.take()]
    for item in range(2, 6):
        slot.offer(item)
        taken.append(slot.take())
    assert taken == [0, 1, 3, 4, 5] and slot.dropped == 1  # 2 went; then on time (one waiting)
    assert not slot.full


@given(st.lists(st.integers(min_value=0, max_value=3), max_size=60))
def test_every_item_is_taken_in_order_or_dropped_and_the_wait_stays_bounded(takes: list[int]) -> None:
    """Any pattern of offers and takes (`takes[i]` takes after offer i): nothing is lost
    uncounted, nothing comes twice or out of order, at most two wait, and a taken item has at
    most one newer item waiting behind it."""
    slot: CatchUpSlot[int] = CatchUpSlot()
    taken: list[int] = []
    for item, n in enumerate(takes):
        slot.offer(item)
        assert len(slot) <= 2
        for _ in range(n):
            waiting = len(slot)
            got = slot.take()
            if got is None:
                break
            assert len(slot) <= 1 and waiting - len(slot) in (1, 2)
            taken.append(got)
    while (got := slot.take()) is not None:
        taken.append(got)
    assert taken == sorted(set(taken))
    assert len(taken) + slot.dropped == len(takes)
    if takes:
        assert taken[-1] == len(takes) - 1  # the newest is never the one dropped


def test_put_fills_an_empty_slot_and_refuses_a_full_one() -> None:
    slot: CatchUpSlot[str] = CatchUpSlot()
    slot.put("a")
    with pytest.raises(RuntimeError, match="full slot"):
        slot.put("b")
    assert slot.take() == "a" and slot.dropped == 0
    slot.put("b")
    assert slot.take() == "b"


def test_permits_bound_what_is_in_flight_until_released() -> None:
    permits = InFlightPermits(2)
    assert permits.try_acquire() and permits.try_acquire()
    assert not permits.try_acquire() and permits.in_flight == 2 and not permits.available
    permits.release()
    assert permits.available and permits.try_acquire() and permits.in_flight == 2


def test_a_permit_limit_that_changes_applies_at_the_next_acquire() -> None:
    limit = [1]
    permits = InFlightPermits(lambda: limit[0])
    assert permits.try_acquire() and not permits.try_acquire()
    limit[0] = 3
    assert permits.limit == 3 and permits.try_acquire() and permits.try_acquire()
    assert not permits.try_acquire()
    limit[0] = 1  # lowered below what is out: nothing new until enough come back
    permits.release()
    permits.release()
    assert not permits.try_acquire()
    permits.release()
    assert permits.in_flight == 0 and permits.try_acquire()


def test_releasing_more_permits_than_were_taken_is_an_error() -> None:
    permits = InFlightPermits(1)
    with pytest.raises(RuntimeError, match="without a permit"):
        permits.release()


def test_the_reorder_buffer_releases_results_in_index_order() -> None:
    buffer: ReorderBuffer[str] = ReorderBuffer()
    buffer.add(2, "c")
    buffer.add(1, "b")
    assert not buffer.ready and buffer.pop_next() is None  # 0 still being worked on
    buffer.add(0, "a")
    assert [buffer.pop_next(), buffer.pop_next(), buffer.pop_next()] == ["a", "b", "c"]
    assert buffer.next_index == 3 and len(buffer) == 0 and buffer.pop_next() is None


def test_the_reorder_buffer_refuses_an_index_twice() -> None:
    buffer: ReorderBuffer[int] = ReorderBuffer(first=5)
    buffer.add(6, 60)
    with pytest.raises(ValueError, match="already added"):
        buffer.add(6, 61)
    buffer.add(5, 50)
    assert buffer.pop_next() == 50
    with pytest.raises(ValueError, match="already added"):
        buffer.add(5, 51)  # released already
    assert buffer.pop_next() == 60
