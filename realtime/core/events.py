"""What the engine tells its caller: started, models loading or ready, news, errors, finished."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from models.errors import FaceCastError

EventKind = Literal["started", "models_loading", "models_ready", "info", "error", "warning", "finished"]


@dataclass(frozen=True, slots=True)
class EngineEvent:
    kind: EventKind
    message: str = ""
    error: FaceCastError | None = None
