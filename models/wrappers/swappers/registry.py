"""The swapper router: a catalogue entry's family name -> its class, and loading one from files.

Which swap models exist, and their files, is the catalogue's (models.files.catalogue: one entry
each, role "swapper", with its `family`); how a family is fed is its class's (`facts`). A new model
of a known family is one catalogue entry; a new family is one class here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from models.errors import ModelContractError, ModelMissingError
from models.files.catalogue import CATALOGUE, ModelEntry, get_entry
from models.runtime.session import SessionFactory
from models.wrappers.router import check_role, named_error, open_for_role
from models.wrappers.swappers.base import FaceSwapper
from models.wrappers.swappers.converter import EmbeddingConverter
from models.wrappers.swappers.families import (
    BlendSwap,
    Ghost,
    HifiFace,
    HyperSwap,
    ReSwapper128,
    ReSwapper256,
    SimSwap256,
    SimSwap512,
    UniFace,
)
from models.wrappers.swappers.inswapper import InSwapper, read_emap_cached

FAMILIES: Mapping[str, type[FaceSwapper]] = MappingProxyType(
    {
        cls.facts.family: cls
        for cls in (
            InSwapper,
            HyperSwap,
            SimSwap256,
            SimSwap512,
            Ghost,
            HifiFace,
            BlendSwap,
            UniFace,
            ReSwapper128,
            ReSwapper256,
        )
    }
)


def swapper_entries() -> tuple[ModelEntry, ...]:
    """Every swap model the catalogue offers, in its order."""
    return tuple(e for e in CATALOGUE if e.role == "swapper")


def swapper_names() -> tuple[str, ...]:
    return tuple(e.name for e in swapper_entries())


def family_of(name: str) -> type[FaceSwapper]:
    """The class of the swapper called `name` (a catalogue entry); ModelMissingError otherwise."""
    entry = get_entry(name)
    if entry.role != "swapper" or entry.family is None:
        raise ModelMissingError(
            f"'{name}' is not a face swapper.", hint=f"Face swappers: {', '.join(swapper_names())}."
        )
    family = FAMILIES.get(entry.family)
    if family is None:  # a catalogue entry without its class: a programming error, said plainly
        raise ModelMissingError(f"No swapper class for the family '{entry.family}' of '{name}'.")
    return family


@dataclass(frozen=True, slots=True)
class SwapperInfo:
    """What a user choosing a swap model sees: its crop, its download (converter included), its
    licence and a note on its cost."""

    name: str
    family: str  # as users know it ("HyperSwap")
    crop: int  # px
    download_bytes: int | None  # None: not published
    licence: str
    licence_url: str
    note: str  # the catalogue's description: resolution, cost
    requires: tuple[str, ...]  # entries downloaded with it (its embedding converter)

    def summary(self) -> str:
        """One line: "HyperSwap, 256 px crop, 403 MB: <note>"."""
        size = "size not published" if self.download_bytes is None else f"{self.download_bytes / 1e6:,.0f} MB"
        return f"{self.family}, {self.crop} px crop, {size}: {self.note}"


def swapper_info(name: str) -> SwapperInfo:
    entry = get_entry(name)
    cls = family_of(name)
    sizes = [entry.shown_size, *(get_entry(r).shown_size for r in entry.requires)]
    total = None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)
    return SwapperInfo(
        entry.name,
        cls.label,
        cls.facts.size,
        total,
        entry.licence,
        entry.licence_url,
        entry.description,
        entry.requires,
    )


def converter_entry(name: str) -> str | None:
    """The catalogue entry of the embedding converter the swapper called `name` needs, or None."""
    if not family_of(name).facts.needs_converter:
        return None
    for required in get_entry(name).requires:
        if get_entry(required).role == "converter":
            return required
    raise ModelMissingError(f"The catalogue names no embedding converter for '{name}'.")


def load_swapper(
    path: Path | str,
    factory: SessionFactory,
    family: str = "inswapper",
    converter: Path | None = None,
    *,
    session: Any = None,
) -> FaceSwapper:
    """The swapper of `family` in `path` (and its embedding converter), contracts checked: a file
    of another kind, another family's shapes or a missing converter is a ModelContractError naming
    the file. session: the file's session opened already (an inference service's, with its batch
    axis), checked the same way."""
    cls = FAMILIES[family]
    if session is None:
        p, session = open_for_role(path, factory, "swapper", expected=cls.contract_text())
    else:
        p = Path(path)
        check_role(p, session, "swapper", cls.contract_text())
    try:
        if issubclass(cls, InSwapper):
            # Cached: parsing the 554 MB protobuf for its emap holds the GIL ~1 s per load.
            return cls(session, read_emap_cached(p))
        loaded = None if converter is None else _load_converter(converter, factory)
        return cls(session, loaded)
    except ModelContractError as err:
        if err.message.startswith(p.name):  # read_emap(_cached) already names the file
            raise
        raise named_error(p, err) from err


def check_swapper_file(path: Path, session: Any, family: str) -> None:
    """ModelContractError naming `path` when its session is no swapper of `family` (checked before
    anything else is done with the file: giving it a batch axis, loading its wrapper)."""
    cls = FAMILIES[family]
    check_role(path, session, "swapper", cls.contract_text())
    try:
        cls.check_contract(session.get_inputs(), session.get_outputs())
    except ModelContractError as err:
        raise named_error(path, err) from err


def _load_converter(path: Path, factory: SessionFactory) -> EmbeddingConverter:
    return EmbeddingConverter.from_file(path, factory)


__all__ = [
    "FAMILIES",
    "SwapperInfo",
    "check_swapper_file",
    "converter_entry",
    "family_of",
    "load_swapper",
    "swapper_entries",
    "swapper_info",
    "swapper_names",
]
