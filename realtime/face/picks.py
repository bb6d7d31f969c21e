"""A face picked in the live preview: "swap this one", no reference photo needed.

The control panel's thread hands over the picture and the clicked face's landmarks; the analysis
thread, which owns the recogniser, embeds it on its next frame and locks onto that person exactly
as `--reference` would (the reference taken from the live frame).

A pick can also map its person to one of the run's identities ("this person becomes gallery face
2"): the live map, person embedding -> identity, swaps each mapped person with their own identity,
as `--map REF=SOURCE` does, while the faces nobody mapped keep the panel's choice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from models.types import FloatArray, ImageBGR


@dataclass(frozen=True, slots=True)
class FacePick:
    """The picture a face was picked in and that face's five landmarks (frame pixels)."""

    image: ImageBGR
    kps: FloatArray
    identity: int | None = None  # mapped to this identity of the run; None: lock onto the person
    key: str = ""  # the identity's stable key (the gallery photo's path)


@dataclass(frozen=True, slots=True)
class PickedIdentity:
    """A picked person remembered across restarts: the recogniser that embedded them and the
    embedding (used only by a run with the same recogniser)."""

    recognizer: str
    embedding: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class MappedPerson:
    """One entry of the live map: a person (embedded by `recognizer`) swapped with identity
    `identity` of the run (None: their identity is not in this run). `key` names that identity
    across runs and restarts (the gallery photo's path)."""

    recognizer: str
    embedding: tuple[float, ...]
    identity: int | None
    key: str = ""


class LivePicks:
    """The latest pick or unpick, from any thread; the analyser takes it once. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: FacePick | PickedIdentity | Literal["unpick"] | None = None
        self._picked = False
        self._remembered: PickedIdentity | None = None
        self._to_map: list[FacePick] = []  # clicked faces waiting to be embedded and mapped
        self._map: tuple[MappedPerson, ...] = ()
        self._map_version = 0
        self._notes: list[str] = []  # what the analysis has to say about a pick (see tell)

    def pick(self, image: ImageBGR, kps: FloatArray) -> None:
        with self._lock:
            self._pending = FacePick(np.ascontiguousarray(image).copy(), np.asarray(kps, np.float32).copy())
            self._picked = True

    def unpick(self) -> None:
        """Back to the panel's own choice (largest, all)."""
        with self._lock:
            self._pending = "unpick"
            self._picked = False
            self._remembered = None

    def restore(self, identity: PickedIdentity) -> None:
        """Pick a person remembered from an earlier session."""
        with self._lock:
            self._pending = identity
            self._picked = True
            self._remembered = identity

    def remember(self, recognizer: str, embedding: npt.ArrayLike) -> None:
        """The analysis thread: the picked person as embedded (what `remembered` hands back)."""
        vector = tuple(float(v) for v in np.asarray(embedding, dtype=np.float32).ravel())
        with self._lock:
            if self._picked:
                self._remembered = PickedIdentity(recognizer, vector)

    @property
    def remembered(self) -> PickedIdentity | None:
        with self._lock:
            return self._remembered

    @property
    def picked(self) -> bool:
        with self._lock:
            return self._picked

    def map_face(self, image: ImageBGR, kps: FloatArray, identity: int, key: str = "") -> None:
        """The clicked person becomes `identity` (from the analysis thread's next frame on)."""
        pick = FacePick(
            np.ascontiguousarray(image).copy(), np.asarray(kps, np.float32).copy(), int(identity), key
        )
        with self._lock:
            self._to_map.append(pick)

    def clear_map(self) -> None:
        with self._lock:
            self._to_map = []
            self._map = ()
            self._map_version += 1

    def restore_map(self, people: Sequence[MappedPerson]) -> None:
        """The map remembered from an earlier session (or rebuilt by the panel)."""
        with self._lock:
            self._map = tuple(people)
            self._map_version += 1

    def reindex(self, identities: Mapping[str, int]) -> None:
        """A new run's identities by key: each entry follows its key (None where it is not in the run)."""
        with self._lock:
            self._map = tuple(replace(p, identity=identities.get(p.key)) for p in self._map)
            self._map_version += 1

    def take_map_picks(self) -> list[FacePick]:
        """The analysis thread: the faces clicked to be mapped since it last asked."""
        with self._lock:
            picks, self._to_map = self._to_map, []
        return picks

    def add_mapped(self, person: MappedPerson, same_person: Callable[[MappedPerson], bool]) -> None:
        """The analysis thread: a mapped person as embedded; earlier entries of the same person go."""
        with self._lock:
            kept = tuple(p for p in self._map if not same_person(p))
            self._map = (*kept, person)
            self._map_version += 1

    def mapping(self) -> tuple[int, tuple[MappedPerson, ...]]:
        """The live map and its version (which changes with every change of the map)."""
        with self._lock:
            return self._map_version, self._map

    def tell(self, note: str) -> None:
        """The analysis thread: something the user should know about their last click (the run's
        detector finds no face where they clicked)."""
        with self._lock:
            self._notes.append(note)

    def take_notes(self) -> list[str]:
        """The panel: what the analysis said about the clicks since it last asked."""
        with self._lock:
            notes, self._notes = self._notes, []
        return notes

    def take(self) -> FacePick | PickedIdentity | Literal["unpick"] | None:
        with self._lock:
            pending, self._pending = self._pending, None
        return pending


__all__ = ["FacePick", "LivePicks", "MappedPerson", "PickedIdentity"]
