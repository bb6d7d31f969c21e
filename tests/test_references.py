"""Every path a comment, a docstring or a doc names exists: a pointer to a file that moved or never
was (the jobs' tasks module, the build folder renamed wiring) sends the reader nowhere."""

from __future__ import annotations

import re

from tests.paths import REPO_ROOT

_PATH = re.compile(r"(?<![\w/.-])((?:realtime|models|gui|tests|docs|configs|scripts)/[\w./*-]*\w)")
_WHERE = ("realtime", "models", "gui", "docs", "scripts", "tests", "configs")
_KINDS = (".py", ".md", ".toml", ".yaml", ".yml")


def test_every_path_named_in_the_code_and_docs_exists() -> None:
    sources = [REPO_ROOT / "README.md", REPO_ROOT / "main.py"]
    for folder in _WHERE:
        sources += [p for p in (REPO_ROOT / folder).rglob("*") if p.suffix in _KINDS]
    # Messages a test feeds the code on purpose name files in a made-up models folder.
    sources = [p for p in sources if p.name != "test_gui_banners_and_layout.py"]
    missing = []
    for source in sources:
        for match in _PATH.finditer(source.read_text(encoding="utf-8", errors="replace")):
            named = match.group(1).rstrip(".")
            if not any(REPO_ROOT.glob(named)):  # a glob such as tests/gui/test_gui_*.py is fine
                missing.append(f"{source.relative_to(REPO_ROOT)}: {named}")
    assert not missing, missing
