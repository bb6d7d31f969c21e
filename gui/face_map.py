"""The panel's side of the live map (people clicked in the preview and mapped to gallery faces):
what the click menu offers, each run's identities by photo path, and the map saved and restored
with the config. An entry whose gallery face is gone is dropped with a note."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from gui.config import MapEntry
from gui.face_picker import GalleryChoice
from realtime.api import LivePicks, MappedPerson


class FaceMapKeeper:
    """Keeps `picks`' map in step with the gallery; `note` says what was dropped."""

    def __init__(self, picks: LivePicks, note: Callable[[str], None]) -> None:
        self._picks = picks
        self._note = note
        self._run_faces: tuple[Path, ...] = ()

    def restore(self, entries: Sequence[MapEntry], photos: Sequence[str]) -> None:
        """The saved map, less the entries whose photo is no longer in the gallery."""
        kept = [e for e in entries if e.face in photos]
        self._note_gone(e.face for e in entries if e.face not in photos)
        if kept:
            people = [MappedPerson(e.recognizer, e.embedding, None, e.face) for e in kept]
            self._picks.restore_map(people)

    def entries(self) -> tuple[MapEntry, ...]:
        """The map as saved in the config."""
        return tuple(MapEntry(p.recognizer, p.embedding, p.key) for p in self._picks.mapping()[1] if p.key)

    def choices(self) -> list[GalleryChoice]:
        """The running swap's faces, as the click menu lists them."""
        return [GalleryChoice(str(p), p.name, i) for i, p in enumerate(self._run_faces)]

    def on_run(self, run_faces: Sequence[Path]) -> None:
        """A run starts with these faces as its identities: each entry follows its photo."""
        self._run_faces = tuple(run_faces)
        self._picks.reindex({str(p): i for i, p in enumerate(self._run_faces)})

    def on_photos(self, photos: Sequence[Path]) -> None:
        """The gallery changed: entries whose photo was removed go."""
        names = {str(p) for p in photos}
        people = self._picks.mapping()[1]
        gone = [p for p in people if p.key not in names]
        if gone:
            self._picks.restore_map([p for p in people if p.key in names])
            self._note_gone(p.key for p in gone)

    def _note_gone(self, faces: Iterable[str]) -> None:
        names = sorted({Path(f).name for f in faces})
        if names:
            self._note(f"Dropped the face map for {', '.join(names)}: no longer in the gallery.")


__all__ = ["FaceMapKeeper"]
