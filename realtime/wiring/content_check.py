"""The content classifier of a process (the server's content policy), loaded once from the store.

Its session is the process's inference hub's, so every stream's samples and every upload share one
model (and its batches); each calling thread gets its own wrapper (its input buffer) on one client.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from models.runtime.inference_hub import InferenceHub
from models.runtime.session import wrap_checked
from models.types import ImageBGR
from models.wrappers.content import ContentClassifier, ContentVerdict
from realtime.core.settings import Settings
from realtime.wiring.face_swap import ModelOptions, session_factory

CONTENT_MODEL = "nsfw_2"  # the catalogue's entry


class ContentCheck:
    """`verdict(picture)` from any thread. Raises the store's ModelError when the model is missing
    or damaged (its message names the download command)."""

    def __init__(self, options: ModelOptions, provider: str = "auto") -> None:
        path: Path = options.paths().path(CONTENT_MODEL)
        settings = Settings().with_overrides({"pipeline.provider": provider, "pipeline.frames_in_flight": 1})
        factory = session_factory(settings, options)
        hub = options.inference or InferenceHub()

        def check(session: Any) -> None:
            wrap_checked(path, session, ContentClassifier)

        self._service = hub.service(path, factory, label=CONTENT_MODEL, check=check)
        self._client = self._service.service.client("content-check")
        self._local = threading.local()
        self.model = CONTENT_MODEL

    def verdict(self, picture: ImageBGR) -> ContentVerdict:
        wrapper: ContentClassifier | None = getattr(self._local, "wrapper", None)
        if wrapper is None:
            wrapper = ContentClassifier(self._service.session)
            wrapper.served.attach(self._client)
            self._local.wrapper = wrapper
        return wrapper.verdict(picture)


__all__ = ["CONTENT_MODEL", "ContentCheck", "ContentVerdict"]
