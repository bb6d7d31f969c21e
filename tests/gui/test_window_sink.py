"""`--output window`: the newest frame is what the window shows, and closing the window stops the run."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

import threading
import time

import numpy as np
from PyQt6.QtGui import QColor
from pytestqt.qtbot import QtBot

from gui.window_sink import WindowSink
from realtime.core.contracts import FrameSink
from realtime.core.frames import VideoFrame


def frame_of(colour_bgr: tuple[int, int, int], index: int) -> VideoFrame:
    image = np.empty((48, 64, 3), np.uint8)
    image[:] = colour_bgr
    return VideoFrame(image, index, time.perf_counter())


def centre_colour(sink: WindowSink) -> QColor:
    pixmap = sink.window.pixmap()
    assert pixmap is not None and not pixmap.isNull()
    image = pixmap.toImage()
    return image.pixelColor(image.width() // 2, image.height() // 2)


def test_window_shows_the_newest_frame_and_drops_stale_ones(qtbot: QtBot) -> None:
    sink = WindowSink("test")
    qtbot.addWidget(sink.ensure_window())
    assert isinstance(sink, FrameSink)
    sink.open(64, 48, 30.0)
    qtbot.waitUntil(sink.window.isVisible)

    # The engine thread sends a burst faster than the GUI thread gets to run: only the last counts.
    colours = [(0, 0, 255), (0, 255, 0), (255, 0, 0)]  # BGR red, green, blue

    def engine() -> None:
        for i, colour in enumerate(colours):
            sink.send(frame_of(colour, i))

    sender = threading.Thread(target=engine)
    sender.start()
    sender.join()
    qtbot.waitUntil(lambda: sink.last_shown_index == 2)

    assert sink.frames_shown == 1  # red and green were replaced before they were ever painted
    colour = centre_colour(sink)
    assert (colour.red(), colour.green(), colour.blue()) == (0, 0, 255)  # blue on screen
    sink.close()
    qtbot.waitUntil(lambda: not sink.window.isVisible())


def test_closing_the_window_sets_closed(qtbot: QtBot) -> None:
    sink = WindowSink("test")
    qtbot.addWidget(sink.ensure_window())
    sink.open(64, 48, 30.0)
    qtbot.waitUntil(sink.window.isVisible)
    assert not sink.closed.is_set()

    sink.window.close()  # what the user's click on the close button does

    assert sink.closed.is_set()
    sink.send(frame_of((0, 0, 255), 0))  # frames after closing are ignored, not an error
    qtbot.wait(20)
    assert sink.frames_shown == 0


def test_open_from_another_thread_before_the_window_exists_is_refused(qtbot: QtBot) -> None:
    sink = WindowSink("test")  # built before any window, as main.py does before the QApplication
    errors: list[BaseException] = []

    def engine() -> None:
        try:
            sink.open(64, 48, 30.0)
        except RuntimeError as err:
            errors.append(err)

    thread = threading.Thread(target=engine)
    thread.start()
    thread.join()
    assert errors and "ensure_window" in str(errors[0])

    sink.open(64, 48, 30.0)  # on the GUI thread the window is created on demand
    qtbot.addWidget(sink.window)
    qtbot.waitUntil(sink.window.isVisible)
    sink.close()
    qtbot.waitUntil(lambda: not sink.window.isVisible())
