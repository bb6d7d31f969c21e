"""The banners of inputs and outputs that failed, each kept up until a later run is running."""

from __future__ import annotations

from dataclasses import dataclass, field

from gui.messages import Level, MessageBar


@dataclass
class IoBanners:
    """(level, text) -> the run it came from, over the window's message bar."""

    messages: MessageBar
    shown: dict[tuple[Level, str], int] = field(default_factory=dict)

    def show(self, level: Level, text: str, run: int) -> None:
        """An input or output that failed (a Start that could not open it, a recording that
        stopped): shown until a later run is running, which has opened them. A later run's banner
        replaces the earlier runs' copy of it (its count climbed with each Start, as if the camera
        failed again and again within one run), and its error their errors (a second failed Start
        left the first one's error up, about a file already replaced)."""
        for (old_level, old_text), earlier in list(self.shown.items()):
            same = (old_level, old_text) == (level, text)
            if earlier < run and (same or old_level == level == "error"):
                self.messages.dismiss(old_level, old_text)
                del self.shown[(old_level, old_text)]
        self.messages.show_message(level, text)
        self.shown[(level, text)] = run

    def clear_before(self, run: int) -> None:
        """Take down the banners of runs before `run` (it is running: it opened them)."""
        for (level, text), earlier in list(self.shown.items()):
            if earlier < run:
                self.messages.dismiss(level, text)
                del self.shown[(level, text)]

    def forget(self, level: Level, text: str) -> None:
        self.shown.pop((level, text), None)


__all__ = ["IoBanners"]
