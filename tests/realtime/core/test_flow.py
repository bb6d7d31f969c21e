"""The flow policies on their own: latest-wins slot, in-flight permits, reorder buffer."""

from __future__ import annotations

import pytest

from realtime.core.flow import InFlightPermits, LatestSlot, ReorderBuffer


def test_a_new_item_replaces_the_waiting_one_and_counts_it_as_dropped() -> None:
    slot: LatestSlot[int] = LatestSlot()
    assert slot.offer(1) is None and slot.full and slot.dropped == 0
    assert slot.offer(2) == 1  # the stale one comes back, dropped
    assert slot.offer(3) == 2
    assert slot.dropped == 2
    assert slot.take() == 3  # the newest is what the consumer gets
    assert not slot.full and slot.take() is None


def test_put_fills_an_empty_slot_and_refuses_a_full_one() -> None:
    slot: LatestSlot[str] = LatestSlot()
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
