"""What the command-line tests share: a folder of every model's double, and a photo of a real face."""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest

from models.fakes.doubles import write_all
from realtime.tools.bench import astronaut_bgr


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(tmp_path_factory.mktemp("doubles"))
    write_all(folder)
    return folder


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The astronaut as a source photo (a test whose clip shows the astronaut mirrors it instead)."""
    path = Path(tmp_path_factory.mktemp("photo")) / "me.png"
    cv2.imwrite(str(path), astronaut_bgr())
    return path
