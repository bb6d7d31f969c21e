"""What every file FaceCast writes says about itself: that faces in it were changed by AI, and by
which program."""

from __future__ import annotations

from importlib import metadata

AI_MODIFIED_TEXT = "Faces in this video were modified by AI (FaceCast face swap)."


def facecast_version() -> str:
    try:
        return metadata.version("facecast")
    except metadata.PackageNotFoundError:
        return "0+local"


def provenance_tags() -> dict[str, str]:
    """Container tags (MP4/MKV/MOV keep them) that any player or `ffprobe` shows."""
    return {"comment": AI_MODIFIED_TEXT, "encoder": f"FaceCast {facecast_version()}"}
