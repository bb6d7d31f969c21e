"""Every exit code means one thing, whichever command gives it, and the README's table lists it:
a script that checks `$?` after `run`, `process` or `run --remote` can tell the failures apart."""

from __future__ import annotations

import re
from types import ModuleType

import models.errors
import realtime.jobs.errors
import realtime.remote.errors
from tests.paths import REPO_ROOT

TABLES = (models.errors, realtime.jobs.errors, realtime.remote.errors)
# Names for one meaning in two tables (the signal a shell reports as 128 + its number).
SAME_MEANING = {"EXIT_INTERRUPTED": "EXIT_SIGINT"}


def codes(module: ModuleType) -> dict[str, int]:
    return {k: v for k, v in vars(module).items() if k.startswith("EXIT_") and isinstance(v, int)}


def test_no_two_meanings_share_a_code() -> None:
    meanings: dict[int, set[str]] = {}
    for module in TABLES:
        for name, code in codes(module).items():
            meanings.setdefault(code, set()).add(SAME_MEANING.get(name, name))
    shared = {code: names for code, names in meanings.items() if len(names) > 1}
    assert not shared, shared


def test_the_readme_lists_every_code() -> None:
    table = (REPO_ROOT / "README.md").read_text().split("Exit codes of `main.py run`", 1)[1]
    listed: set[int] = set()
    for first, last in re.findall(r"^\|\s*(\d+)(?:-(\d+))?\s*\|", table, flags=re.MULTILINE):
        listed.update(range(int(first), int(last or first) + 1))
    every = {code for module in TABLES for code in codes(module).values()}
    assert every <= listed, sorted(every - listed)
