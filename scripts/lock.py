#!/usr/bin/env python3
"""Regenerate the lock files from the human-edited requirements: one command after editing them.

    python scripts/lock.py [--check]

requirements.txt            -> requirements.lock       (what the app runs: every platform, hashed)
requirements-cuda.txt       -> requirements-cuda.lock  (the CUDA/cuDNN wheels, NVIDIA machines)
requirements-dev.txt        -> requirements-dev.lock   (test, lint and benchmark tools)

Each lock is universal (one file for Linux, Windows and macOS, environment markers per package)
and pins every transitive package with its SHA-256 hashes, so `pip install --require-hashes`
installs exactly these files. The CUDA and dev locks hold only what they add to requirements.lock
(resolved together with it, so the shared packages keep its versions): scripts/install.py passes
them to pip together with it. requirements-overrides.txt replaces what dependencies declare
(plain onnxruntime and opencv-python). Needs uv (`pip install uv`) and the package index.
`--check` regenerates into a temporary folder and fails if a lock is out of date.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OVERRIDES = "requirements-overrides.txt"
PYTHON_FLOOR = "3.11"  # pyproject's requires-python: the lock covers it and every newer one
# Named by overrides with an impossible marker: never installed, so not written either.
NOT_EMITTED = ("opencv-python",)
COMMAND = "python scripts/lock.py"


class LockError(Exception):
    """A one-line reason the locks could not be made."""


@dataclass(frozen=True)
class Lock:
    output: str
    inputs: tuple[str, ...]
    extra_of: str | None = None  # keep only what this lock adds to that one


LOCKS = (
    Lock("requirements.lock", ("requirements.txt",)),
    Lock("requirements-cuda.lock", ("requirements.txt", "requirements-cuda.txt"), "requirements.lock"),
    Lock("requirements-dev.lock", ("requirements.txt", "requirements-dev.txt"), "requirements.lock"),
)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def split_entries(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """A compiled lock as (header lines, [(normalised name, entry text)]); an entry is its pin
    line with the hash and `# via` lines indented under it."""
    header: list[str] = []
    entries: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
            if match is None:
                raise LockError(f"unexpected line in uv's output: {line!r}")
            entries.append((normalise(match.group(0)), [line]))
        elif entries:
            entries[-1][1].append(line)
        else:
            header.append(line)
    return header, [(name, "\n".join(lines)) for name, lines in entries]


def names_in(text: str) -> set[str]:
    return {name for name, _ in split_entries(text)[1]}


def only_additions(text: str, base: str, note: str) -> str:
    """`text` without the packages `base` already pins (same versions: `base` constrained it)."""
    header, entries = split_entries(text)
    known = names_in(base)
    kept = [entry for name, entry in entries if name not in known]
    return "\n".join([*header, note, *kept]) + "\n"


def find_uv() -> tuple[str, ...]:
    exe = shutil.which("uv")
    if exe:
        return (exe,)
    probe = subprocess.run(
        (sys.executable, "-m", "uv", "--version"), capture_output=True, text=True, check=False
    )
    if probe.returncode == 0:
        return (sys.executable, "-m", "uv")
    raise LockError("uv is not installed: `python -m pip install uv`, then run this again")


def compile_command(uv: tuple[str, ...], lock: Lock, output: Path, constraint: Path | None) -> list[str]:
    argv = [
        *uv, "pip", "compile", "--universal", "--generate-hashes", "--quiet",
        "--python-version", PYTHON_FLOOR, "--override", OVERRIDES,
        "--custom-compile-command", COMMAND, "--no-strip-markers",
    ]  # fmt: skip
    for name in NOT_EMITTED:
        argv += ["--no-emit-package", name]
    if constraint is not None:
        argv += ["--constraint", str(constraint)]
    return [*argv, *lock.inputs, "--output-file", str(output)]


def generate(into: Path, uv: tuple[str, ...]) -> dict[str, str]:
    """Every lock's text, compiled in `into` (the repository's own files are not touched)."""
    texts: dict[str, str] = {}
    for lock in LOCKS:
        target = into / lock.output
        base = into / lock.extra_of if lock.extra_of else None
        argv = compile_command(uv, lock, target, base)
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            why = [line for line in proc.stderr.splitlines() if line.strip()]
            raise LockError(f"{lock.output}: uv pip compile failed: {' '.join(why[-6:]) or proc.returncode}")
        text = target.read_text(encoding="utf-8")
        if lock.extra_of:
            note = f"# Only what this adds to {lock.extra_of}: install the two together."
            text = only_additions(text, texts[lock.extra_of], note)
        texts[lock.output] = text
        target.write_text(text, encoding="utf-8")
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if a lock differs from its inputs")
    args = parser.parse_args(argv)
    try:
        uv = find_uv()
        with tempfile.TemporaryDirectory(prefix="facecast-lock-") as tmp:
            texts = generate(Path(tmp), uv)
    except LockError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    stale = [name for name, text in texts.items() if _read(ROOT / name) != text]
    if args.check:
        for name in stale:
            print(f"{name} is out of date: run `{COMMAND}`", file=sys.stderr)
        return 1 if stale else 0
    for name, text in texts.items():
        # Written whole, then renamed: an interrupted run leaves the old lock, never half a new one.
        part = ROOT / f"{name}.part"
        part.write_text(text, encoding="utf-8")
        part.replace(ROOT / name)
        print(f"{name}: {len(names_in(text))} packages{' (changed)' if name in stale else ''}")
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
