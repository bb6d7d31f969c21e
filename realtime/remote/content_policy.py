"""The server's content policy (`serve --content-policy off|log|refuse`, docs/REMOTE.md).

A content classifier (realtime.api.ContentCheck: the catalogue's nsfw_2) looks at every uploaded
source photo and at one frame a second of what each stream sends. `log` writes its verdicts to the
audit log; `refuse` also turns a flagged photo away (HTTP 422, the client exits with
ExitCode.CONTENT_REFUSED) and ends a stream whose recent frames keep being flagged (the client
hears why and exits with the same code). `off` (the default) loads no model.

A single flagged frame does not end a call (a classifier errs now and then, and a frame in motion
is often blurred): a stream is refused when TO_REFUSE of its last WINDOW samples were flagged, so
within a few seconds of content that stays.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from realtime.api import ContentVerdict, ImageBGR
from realtime.remote.limits import ContentMode

SAMPLE_EVERY_S = 1.0  # one frame a second of each stream is looked at
WINDOW = 5  # samples the stream's decision looks back over
TO_REFUSE = 2  # flagged samples among them that end the stream

UPLOAD_REFUSED = (
    "The server's content policy refused this photo: it was classified as not safe for work. "
    "This server does not swap faces in such pictures."
)

Classify = Callable[[ImageBGR], ContentVerdict]


def stream_refused_reason(flagged: int, window: int) -> str:
    return (
        f"the content policy refused the stream's picture: {flagged} of the last {window} sampled "
        "frames were classified as not safe for work"
    )


@dataclass
class RecentVerdicts:
    """The decision over a stream's last `window` samples: refuse once `to_refuse` were flagged."""

    window: int = WINDOW
    to_refuse: int = TO_REFUSE
    _recent: deque[bool] = field(default_factory=deque, repr=False)

    def add(self, flagged: bool) -> bool:
        self._recent.append(flagged)
        while len(self._recent) > self.window:
            self._recent.popleft()
        return self.flagged >= self.to_refuse

    @property
    def flagged(self) -> int:
        return sum(self._recent)


@dataclass
class StreamContent:
    """One stream's sampling and verdicts: `due()` says when to take the next frame (one sample
    in flight at most), `record()` what the policy makes of its verdict."""

    classify: Classify
    refuse: bool  # the policy's mode is "refuse" (else "log")
    every_s: float = SAMPLE_EVERY_S
    recent: RecentVerdicts = field(default_factory=RecentVerdicts)
    checked: int = 0
    flagged: int = 0
    failed: int = 0
    highest: float = float("-inf")
    _next_at: float = 0.0
    _in_flight: bool = False

    def due(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if self._in_flight or now < self._next_at:
            return False
        self._in_flight = True
        self._next_at = now + self.every_s
        return True

    def record(self, verdict: ContentVerdict) -> bool:
        """Count the verdict; True when the stream is to be refused now."""
        self._in_flight = False
        self.checked += 1
        self.flagged += verdict.flagged
        self.highest = max(self.highest, verdict.score)
        return self.recent.add(verdict.flagged) and self.refuse

    def failed_once(self) -> None:
        self._in_flight = False
        self.failed += 1

    def summary(self) -> str:
        if not self.checked:
            return "no frame checked" + (f" ({self.failed} check(s) failed)" if self.failed else "")
        text = f"{self.checked} frame(s) checked, {self.flagged} flagged, highest score {self.highest:.2f}"
        return text + (f", {self.failed} check(s) failed" if self.failed else "")


@dataclass(frozen=True)
class ContentPolicy:
    """The operator's choice and the classifier it needs (None when off)."""

    mode: ContentMode = "off"
    classify: Classify | None = None

    def __post_init__(self) -> None:
        if self.mode != "off" and self.classify is None:
            raise ValueError("a content policy that is on needs its classifier")

    @property
    def on(self) -> bool:
        return self.mode != "off"

    def for_stream(self) -> StreamContent | None:
        if self.classify is None or not self.on:
            return None
        return StreamContent(self.classify, refuse=self.mode == "refuse")

    def screen(self, picture: ImageBGR) -> ContentVerdict | None:
        """The verdict on an uploaded photo (None when the policy is off)."""
        return self.classify(picture) if self.classify is not None and self.on else None


def verdict_text(verdict: ContentVerdict) -> str:
    return f"content score {verdict.score:.2f}: " + ("flagged" if verdict.flagged else "not flagged")
