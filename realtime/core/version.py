"""FaceCast's own version, as installed (the C2PA manifests and the watermark's payload carry it)."""

from __future__ import annotations

from importlib import metadata


def facecast_version() -> str:
    try:
        return metadata.version("facecast")
    except metadata.PackageNotFoundError:
        return "0.1.0"
