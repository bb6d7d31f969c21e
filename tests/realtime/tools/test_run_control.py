"""How a command-line run ends: signals only ask (nothing is raised into the middle of closing a
file or a Qt slot), and a stdout that went away does not take the run down with it."""

from __future__ import annotations

import io
import os
import signal
import sys

import pytest

from realtime.tools.run_control import SafeOutput, StopSignals

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals sent to ourselves")


def test_a_signal_asks_to_stop_without_raising_anywhere() -> None:
    said: list[str] = []
    with StopSignals(said.append) as signals:
        assert not signals.requested
        os.kill(os.getpid(), signal.SIGINT)  # a KeyboardInterrupt here would cut a file's close
        assert signals.wait(2.0) and signals.requested
        os.kill(os.getpid(), signal.SIGTERM)
        signals.wait(0.05)
        assert said == ["finishing the output; please wait (once more quits without it)"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was


def test_closed_output_is_dropped_not_raised() -> None:
    stream = io.StringIO()
    show = SafeOutput(stream)
    show("one")
    stream.close()  # `| head -1` exited
    show("two")  # no exception
    assert show.broken
