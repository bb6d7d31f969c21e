"""A file's frames through a call: sent at the pace they come back, sent again when lost, given up
after their tries, written in order; a live output's frames in capture order, each once."""

from __future__ import annotations

import threading

import numpy as np

from realtime.api import VideoFrame
from realtime.remote.file_pacing import AckedSending, InFlight, InOrderFrames
from realtime.remote.timeline import CaptureOrder


class File:
    """A file's frames, read one by one."""

    def __init__(self, frames: int) -> None:
        self.frames = frames
        self.read = 0

    def __call__(self) -> VideoFrame | None:
        if self.read >= self.frames:
            return None
        self.read += 1
        return VideoFrame(np.zeros((2, 2, 3), np.uint8), self.read - 1, float(self.read))


def sending(window: int = 2, **kw: float) -> tuple[AckedSending, threading.Event, threading.Event]:
    linked = threading.Event()
    linked.set()
    return AckedSending(window=window, **kw), threading.Event(), linked  # type: ignore[arg-type]


def take(pacing: AckedSending, read: File, stop: threading.Event, linked: threading.Event) -> InFlight:
    item = pacing.next_frame(read, stop, linked)
    assert item is not None
    return item


def test_no_more_than_the_window_is_on_its_way_and_a_return_lets_the_next_go() -> None:
    pacing, stop, linked = sending(window=2)
    read = File(5)
    first, second = take(pacing, read, stop, linked), take(pacing, read, stop, linked)
    assert (first.ordinal, second.ordinal) == (0, 1) and (first.seq, second.seq) == (0, 1)
    waiting: list[InFlight | None] = []
    thread = threading.Thread(target=lambda: waiting.append(pacing.next_frame(read, stop, linked)))
    thread.start()
    thread.join(0.3)
    assert thread.is_alive() and read.read == 2  # the third waits: two are on their way
    assert pacing.returned(0, first.seq)
    thread.join(5)
    assert waiting and waiting[0] is not None and waiting[0].ordinal == 2


def test_a_frame_sent_before_one_that_came_back_is_sent_again_and_a_duplicate_is_ignored() -> None:
    pacing, stop, linked = sending(window=3)
    read = File(3)
    sent = [take(pacing, read, stop, linked) for _ in range(3)]
    assert pacing.returned(1, sent[1].seq)  # 0 went missing on the way (the call keeps order)
    again = take(pacing, read, stop, linked)
    assert again.ordinal == 0 and again.tries == 2 and again.seq == 3 and pacing.resent == 1
    assert pacing.returned(0, again.seq) and not pacing.returned(0, sent[0].seq)  # the late first
    assert pacing.returned(2, sent[2].seq)
    assert pacing.next_frame(read, stop, linked) is None and pacing.finished()
    assert pacing.done == {0, 1, 2} and not pacing.given_up


def test_a_dropped_link_sends_what_was_on_its_way_again_once_it_is_back() -> None:
    pacing, stop, linked = sending(window=2)
    read = File(4)
    take(pacing, read, stop, linked), take(pacing, read, stop, linked)
    linked.clear()
    pacing.link_down()
    linked.set()
    assert [take(pacing, read, stop, linked).ordinal for _ in range(2)] == [0, 1]


def test_a_frame_that_never_comes_back_is_given_up_after_its_tries() -> None:
    pacing, stop, linked = sending(window=1, resend_after_s=0.05, max_tries=2)
    read = File(1)
    take(pacing, read, stop, linked)
    again = take(pacing, read, stop, linked)  # not back in time: once more
    assert again.tries == 2
    assert pacing.next_frame(read, stop, linked) is None  # and then no more
    assert pacing.given_up == [0] and pacing.finished()


def test_frames_that_come_back_early_wait_for_those_before_them() -> None:
    order = InOrderFrames()
    frame = [VideoFrame(np.zeros((2, 2, 3), np.uint8), i, 0.0) for i in range(4)]
    assert order.add(1, frame[1]) == [] and order.add(2, frame[2]) == []
    assert [f.index for f in order.add(0, frame[0])] == [0, 1, 2]
    assert order.add(1, frame[1]) == []  # a duplicate
    assert [f.index for f in order.add(3, frame[3])] == [3] and order.waiting == 0


def test_a_live_output_places_each_frame_once_in_capture_order() -> None:
    order = CaptureOrder(period_s=0.04)
    assert order.place(None, arrived=1.00) == 1.00  # the call's first frame: at its arrival
    assert order.place(0.98, arrived=1.02) is None  # captured before it: left out
    assert order.place(1.04, arrived=1.06) == 1.04
    assert order.place(1.04, arrived=1.10) is None  # the same frame again: left out
    assert order.place(None, arrived=1.05) == 1.08  # no original: a period after the last
    assert order.place(1.10, arrived=1.13) is None  # too close to it: one slot of a recording
    assert order.place(1.12, arrived=1.14) == 1.12 and order.late == 3
