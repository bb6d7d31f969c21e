"""The recording ("take") of the run started with Start, as restarts go on: the REC indicator, the
Output page's take line, and the note when a restart began a new take."""

from __future__ import annotations

from pathlib import Path

from gui.messages import MessageBar
from gui.output_panel import OutputPanel
from gui.run_status import RecIndicator


class Takes:
    def __init__(self, messages: MessageBar, indicator: RecIndicator, output_panel: OutputPanel) -> None:
        self._messages = messages
        self._indicator = indicator
        self._output_panel = output_panel
        self._take: Path | None = None  # the recording of the run started with Start
        self._note = ""  # the "a new take began" note on show, if any

    def started(self) -> None:
        """Start: a take of its own."""
        self._take = None

    def recording(self, path: Path | None) -> None:
        """The run is up, writing `path` (None: no recording); a path that differs from the take
        before it in this run is a new take a restart began, and the user is told."""
        if path is None:
            self._indicator.stop()
            self._output_panel.set_take(self._take, running=False)
            return
        if self._take is not None and path != self._take:
            before = self._take
            same = before.parent == path.parent  # names alone; in two folders, where each is
            new, old = (path.name, before.name) if same else (str(path), str(before))
            self._show_note(
                f"Recording: a new take began, {new}. The run restarted for the change; the take "
                f"before it, {old}, is complete{' in the same folder' if same else ''}."
            )
        self._take = path
        self._indicator.start(path)
        self._output_panel.set_take(path, running=True)

    def stopped(self) -> None:
        """The run ended: the last take stays on the Output page; the note was about the run."""
        self._drop_note()
        self._indicator.stop()
        self._output_panel.set_take(self._take, running=False)

    def _show_note(self, text: str) -> None:
        self._drop_note()
        self._messages.show_message("info", text)
        self._note = text

    def _drop_note(self) -> None:
        if self._note:
            self._messages.dismiss("info", self._note)
            self._note = ""
