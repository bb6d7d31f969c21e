"""How a command-line run ends: signals only ask (nothing is raised into the middle of closing a
file or a Qt slot), and a stdout that went away does not take the run down with it."""

from __future__ import annotations

import io
import os
import signal
import sys
from collections.abc import Iterator

import pytest

from realtime.lifecycle.signals import SafeOutput, Stopped, StopSignals
from tests.signals import default_handlers

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals sent to ourselves")


@pytest.fixture(autouse=True)
def as_from_a_terminal() -> Iterator[None]:
    """These tests send signals to this process: they assume a terminal's dispositions."""
    with default_handlers():
        yield


def test_a_signal_asks_to_stop_without_raising_anywhere() -> None:
    said: list[str] = []
    with StopSignals(said.append) as signals:
        assert not signals.requested
        os.kill(os.getpid(), signal.SIGINT)  # a KeyboardInterrupt here would cut a file's close
        assert signals.wait(2.0) and signals.requested
        os.kill(os.getpid(), signal.SIGTERM)
        signals.wait(0.05)
        assert said == ["finishing the output; please wait (once more quits without it)"]
        assert signals.exit_code == 130  # the first signal's: Ctrl+C
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_stopped_run_exits_with_the_shells_code_for_its_signal(name: str, code: int) -> None:
    sig = getattr(signal, name, None)
    if sig is None:
        pytest.skip(f"no {name} on this platform")
    with StopSignals(lambda _text: None) as signals:
        assert signals.exit_code == 0  # no signal: the run ended by itself
        os.kill(os.getpid(), sig)
        assert signals.wait(2.0)
        assert signals.exit_code == code
        with pytest.raises(Stopped) as raised:  # start-up's checkpoint: a KeyboardInterrupt
            signals.checkpoint()
        assert isinstance(raised.value, KeyboardInterrupt) and raised.value.exit_code == code


def test_closed_output_is_dropped_not_raised() -> None:
    stream = io.StringIO()
    show = SafeOutput(stream)
    show("one")
    stream.close()  # `| head -1` exited
    show("two")  # no exception
    assert show.broken


def test_a_signal_the_process_was_started_ignoring_stays_ignored() -> None:
    """A background job of a script (Ctrl+C ignored) or `nohup` (hang-up ignored): as the panel does."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with StopSignals(lambda _text: None) as signals:
        os.kill(os.getpid(), signal.SIGHUP)
        assert not signals.wait(0.3)
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.wait(2.0) and signals.exit_code == 143
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
