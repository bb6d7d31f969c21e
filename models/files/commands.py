"""`python main.py models ...` subcommands. Each prints to `out` and returns a process exit code."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from models.cli_text import app_command
from models.errors import ExitCode, FaceCastError
from models.files.catalogue import ModelEntry, default_entries, get_entry
from models.files.download import Downloader
from models.files.store import ModelStore, VerifyResult

_BAD = ("mismatch", "truncated", "corrupt", "wrong_kind", "unreadable")


def _entry_status(results: list[VerifyResult]) -> str:
    statuses = {r.status for r in results}
    if statuses & set(_BAD):
        return "corrupt"
    if "missing" in statuses:
        return "missing"
    if "unpinned" in statuses:
        return "unverified"
    return "installed"


def _size_mb(entry: ModelEntry) -> str:
    if entry.total_size is not None:
        return f"{entry.total_size / 1e6:.1f}"
    shown = entry.shown_size  # the publisher's rounded figure
    return "?" if shown is None else f"~{shown / 1e6:.1f}"


def list_models(store: ModelStore, out: TextIO, notes: Callable[[ModelEntry], str] | None = None) -> int:
    """Table of catalogue entries: name, role, size, install status, a note (e.g. a swapper's
    crop size, from `notes`), licence; grouped by role."""
    rows = [("NAME", "ROLE", "SIZE MB", "STATUS", "NOTE", "LICENCE")]
    for entry in sorted(store.catalogue, key=lambda e: _ROLE_ORDER.index(e.role)):
        status = _entry_status([store.check(f) for f in entry.files])
        default = " *" if entry.default else ""
        note = notes(entry) if notes is not None else ""
        rows.append((entry.name + default, entry.role, _size_mb(entry), status, note, entry.licence))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row[:5], widths, strict=True)]
        print("  ".join([*cells, row[5]]).rstrip(), file=out)
    print(
        f"\n* = default set (`{app_command('models download default')}`); ~ = the publisher's rounded "
        f"size. Folder: {store.models_dir}",
        file=out,
    )
    return 0


_ROLE_ORDER = (
    "swapper",
    "converter",
    "detector",
    "recognizer",
    "landmarks",
    "enhancer",
    "occluder",
    "parser",
    "frame_enhancer",
    "content",
)


def _expand_names(store: ModelStore, names: list[str], out: TextIO) -> list[str]:
    if not names:
        print("No model named; downloading the default set.", file=out)
        names = ["default"]
    expanded: list[str] = []
    for name in names:
        batch = [e.name for e in default_entries(store.catalogue)] if name == "default" else [name]
        expanded.extend(n for n in batch if n not in expanded)
    return expanded


def download_models(
    store: ModelStore,
    names: list[str],
    yes: bool,
    out: TextIO,
    in_: TextIO,
    downloader: Downloader | None = None,
) -> int:
    """Download the named entries ("default" = the default set). Licences are shown and must be accepted
    once each ("Accept? [y/N]" on `in_`), unless `yes`. Keeps going after a failure; exit code is the worst.
    """
    names = _expand_names(store, names, out)
    try:
        for name in names:
            get_entry(name, store.catalogue)  # fail on a typo before fetching anything
    except FaceCastError as exc:
        print(f"error: {exc.user_message()}", file=out)
        return exc.exit_code
    downloader = downloader or Downloader(store)

    declined: set[str] = set()  # licences refused in this command: asked once, not once per model

    def accept(entry: ModelEntry) -> bool:
        if entry.licence in declined:
            return False
        print(f"\n{entry.name}: {entry.description}", file=out)
        print(f"Licence: {entry.licence} ({entry.licence_url})", file=out)
        if yes:
            print("Accepted (--yes).", file=out)
            return True
        out.write("Accept? [y/N] ")
        out.flush()
        answer = in_.readline()
        if not answer.endswith("\n"):
            out.write("\n")  # no terminal (end of input): keep the next message on its own line
        accepted = answer.strip().lower() in ("y", "yes")
        if not accepted:
            declined.add(entry.licence)
        return accepted

    code = 0
    try:
        for name in names:
            entry = get_entry(name, store.catalogue)
            if all(store.check(f).status in ("ok", "unpinned") for f in entry.files):
                print(f"{name}: already installed", file=out)
                continue
            try:
                paths = downloader.download(name, accept)
            except FaceCastError as exc:
                print(f"{name}: error: {exc.user_message()}", file=out)
                code = max(code, exc.exit_code)
                continue
            for path in paths:
                print(f"{name}: installed {path}", file=out)
    except KeyboardInterrupt:
        print(
            "\nDownload stopped. What arrived is kept (*.part) and the same command resumes it.",
            file=out,
        )
        return ExitCode.SIGINT
    return code


def verify_models(store: ModelStore, out: TextIO) -> int:
    """Check every catalogue file; exit 1 if any present file is corrupt (missing ones are only listed)."""
    results = store.verify_all()
    width = max(len(r.name) for r in results) if results else 0
    for r in results:
        print(f"{r.status:<9}  {r.name.ljust(width)}  {r.detail}", file=out)
    bad = [r for r in results if r.status in _BAD]
    if bad:
        names = ", ".join(r.name for r in bad)
        print(f"\n{len(bad)} corrupt file(s): {names}. Delete them and download again.", file=out)
        return ExitCode.CHECK_FAILED
    return 0


def print_models_path(store: ModelStore, out: TextIO) -> int:
    print(store.models_dir, file=out)
    return 0
