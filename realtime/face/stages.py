"""The two face stages of a frame, by their usual names: analyse (realtime.face.analyser, sequential)
and swap + composite (realtime.face.swap_worker, parallel workers running realtime.face.chain)."""

from __future__ import annotations

from realtime.face.analyser import FaceAnalyser
from realtime.face.model_api import embedding_distance
from realtime.face.swap_worker import FaceSwapWorker, StageUnavailableError

__all__ = ["FaceAnalyser", "FaceSwapWorker", "StageUnavailableError", "embedding_distance"]
