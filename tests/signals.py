"""Signal dispositions for the tests that send signals. A process inherits an ignored SIGINT (a
background job, `nohup`, some CI runners) and keeps it across exec: a test that sends Ctrl+C to a
child, or to itself, gives it the disposition it assumes, so the suite passes however it is run."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_CAUGHT = ("SIGINT", "SIGTERM", "SIGHUP")


def _as_a_terminal_gives_them() -> None:
    """In the child, before exec: every stop signal at its default, as a terminal starts a program."""
    for name in _CAUGHT:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)


# Popen keyword arguments: a child that starts with the signals a terminal would give it.
CHILD_SIGNALS: dict[str, Any] = {} if sys.platform == "win32" else {"preexec_fn": _as_a_terminal_gives_them}


@contextmanager
def default_handlers() -> Iterator[None]:
    """In this process, for the block: Ctrl+C raises KeyboardInterrupt and SIGTERM/SIGHUP end the
    process, as when started from a terminal; what was there before is put back after."""
    before: dict[int, Any] = {}
    for name in _CAUGHT:
        sig = getattr(signal, name, None)
        if sig is not None:
            before[sig] = signal.getsignal(sig)
            signal.signal(sig, signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
