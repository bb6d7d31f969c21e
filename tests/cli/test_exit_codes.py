"""Every exit code means one thing, whichever command gives it, and the README's table lists it:
a script that checks `$?` after `run`, `process` or `run --remote` can tell the failures apart."""

from __future__ import annotations

import re
from pathlib import Path

from models.errors import ExitCode
from tests.paths import REPO_ROOT


def test_no_two_meanings_share_a_code() -> None:
    # ExitCode is @unique: a second name for a number fails at import; this says it in words.
    numbers = [int(code) for code in ExitCode]
    assert len(numbers) == len(set(numbers)) == len(ExitCode.__members__)


def test_exit_codes_are_defined_in_one_place_only() -> None:
    """No module declares a code of its own beside the table (EXIT_USAGE, 130 and EXIT_OK were
    defined twice once)."""
    declared = re.compile(r"^\s*(EXIT_\w+|\w*exit_code\w*)\s*(?::\s*int)?\s*=\s*\d+\b", re.MULTILINE)
    offenders = []
    for folder in ("realtime", "models", "gui"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            for match in declared.finditer(path.read_text(encoding="utf-8")):
                offenders.append(f"{Path(path).relative_to(REPO_ROOT)}: {match.group(0).strip()}")
    assert not offenders, offenders


def test_the_readme_lists_every_code() -> None:
    table = (REPO_ROOT / "README.md").read_text().split("Exit codes of `main.py run`", 1)[1]
    listed: set[int] = set()
    for first, last in re.findall(r"^\|\s*(\d+)(?:-(\d+))?\s*\|", table, flags=re.MULTILINE):
        listed.update(range(int(first), int(last or first) + 1))
    every = {int(code) for code in ExitCode}
    assert every <= listed, sorted(every - listed)
