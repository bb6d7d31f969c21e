"""What a video or a picture says about itself: FaceCast's invisible watermark (with its payload and
confidence) and its C2PA manifest (valid or not, signed by whom, saying what). Behind `main.py
verify` and the panel's "Check a video or picture"; docs/PROVENANCE.md is the page for people who
receive such a file.

A video is read for up to MAX_SECONDS; the watermark is looked for every 2 s of it, so a marked
one is usually told after its first 2 s. A picture (a frame grab, a screenshot) is one frame.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from models.errors import ExitCode, FaceCastError
from realtime.core.image_header import check_pixel_count, picture_size
from realtime.core.watermark.detect import Detection, MarkDetector
from realtime.io.provenance import WATERMARK_ASSERTION

log = logging.getLogger(__name__)

MAX_SECONDS = 10.0
STEP_FRAMES = 60  # look every 2 s of 30 fps video
# What standard input holds, from its first bytes: the suffix a temporary copy gets (c2pa reads the
# format from it).
_MAGIC = ((b"\x89PNG", ".png"), (b"\xff\xd8", ".jpg"), (b"RIFF", ".avi"), (b"\x1a\x45\xdf\xa3", ".webm"))


class UnreadableMediaError(FaceCastError):
    """The file is not a video or picture that can be read."""

    exit_code = ExitCode.UNREADABLE


@dataclass(frozen=True, slots=True)
class Credentials:
    """The active C2PA manifest, as a reader needs it."""

    valid: bool  # the signature and the hashes check out (the signer may still be unknown)
    trusted: bool  # the signer's certificate chains to a trusted authority
    signer: str  # the certificate's common name and issuer
    generator: str  # the software that made the claim
    title: str
    statements: tuple[str, ...]  # what the assertions say, one line each
    run_id: str | None  # the watermark run id the manifest names
    problems: tuple[str, ...] = ()  # validation failures, by code


@dataclass(frozen=True, slots=True)
class MediaCheck:
    name: str
    kind: str  # "video" or "picture"
    watermark: Detection
    credentials: Credentials | None
    credentials_note: str = ""  # why there are none (no manifest, a format C2PA does not cover)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def marked(self) -> bool:
        """Marked as AI-modified by FaceCast: the watermark found, or a valid manifest."""
        return self.watermark.marked or (self.credentials is not None and self.credentials.valid)

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.marked else ExitCode.NOT_MARKED

    def lines(self) -> list[str]:
        out = [f"{self.name} ({self.kind}, {self.watermark.frames} frame(s) looked at)"]
        out.append(f"watermark: {self.watermark.summary()}")
        c = self.credentials
        if c is None:
            out.append(f"C2PA: {self.credentials_note or 'no manifest'}")
        else:
            state = "valid" if c.valid else "INVALID (" + ", ".join(c.problems) + ")"
            trust = "trusted" if c.trusted else "not on a trust list (a local key: check the signer yourself)"
            out.append(f"C2PA: {state} manifest, signed by {c.signer}, {trust}")
            out.append(f"  made by {c.generator}; title {c.title!r}")
            out.extend(f"  says: {s}" for s in c.statements)
            if c.run_id is not None and self.watermark.payload is not None:
                same = "the same run" if c.run_id == self.watermark.payload.run_id else "ANOTHER run"
                out.append(f"  names watermark run {c.run_id}: {same} as the watermark")
        out.extend(self.notes)
        verdict = "AI-modified by FaceCast" if self.marked else "no FaceCast mark found"
        out.append(f"verdict: {verdict}")
        return out


def check_media(path: Path, *, name: str | None = None) -> MediaCheck:
    """Read `path` (a video or a picture) and say what marks it carries. UnreadableMediaError when
    it is neither."""
    shown = name or str(path)
    if not path.is_file():
        raise UnreadableMediaError(f"{shown} is not a file that can be read.")
    head = path.open("rb").read(65536)
    if picture_size(head) is not None:
        check_pixel_count(path, head, "The picture")
        detection, kind = _picture_watermark(path), "picture"
    else:
        detection, kind = _video_watermark(path, shown), "video"
    credentials, note = _credentials(path)
    return MediaCheck(shown, kind, detection, credentials, note)


def check_media_bytes(data: bytes, name: str = "standard input") -> MediaCheck:
    """The same for a file given as bytes (`verify -`)."""
    if not data:
        raise UnreadableMediaError(f"{name} was empty: nothing to check.")
    suffix = next(
        (s for magic, s in _MAGIC if data.startswith(magic)), ".mp4" if data[4:8] == b"ftyp" else ""
    )
    with tempfile.TemporaryDirectory(prefix="facecast-verify-") as folder:
        path = Path(folder) / f"input{suffix}"
        path.write_bytes(data)
        return check_media(path, name=name)


def _picture_watermark(path: Path) -> Detection:
    image = cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise UnreadableMediaError(f"{path} looks like a picture but cannot be decoded.")
    detector = MarkDetector()
    detector.add(np.asarray(image, np.uint8))
    return detector.decide(wide=True)


def _video_watermark(path: Path, shown: str) -> Detection:
    detector = MarkDetector()
    try:
        with av.open(str(path), "r") as container:
            if not container.streams.video:
                raise UnreadableMediaError(f"{shown} has no video in it.")
            stream = container.streams.video[0]
            rate = float(stream.average_rate or 30)
            limit = int(MAX_SECONDS * rate)
            for frame in container.decode(stream):
                detector.add(np.asarray(frame.to_ndarray(format="bgr24"), np.uint8))
                if detector.frames % STEP_FRAMES == 0:
                    found = detector.decide(wide=False)
                    if found.marked and found.payload is not None:
                        return found
                if detector.frames >= limit:
                    break
    except av.error.FFmpegError as err:
        if detector.frames == 0:
            raise UnreadableMediaError(f"{shown} is not a video or picture FaceCast can read: {err}") from err
        log.info("%s: reading stopped after %d frames: %s", shown, detector.frames, err)
    if detector.frames == 0:
        raise UnreadableMediaError(f"{shown} holds no frame that can be decoded.")
    return detector.decide(wide=True)


def _credentials(path: Path) -> tuple[Credentials | None, str]:
    import c2pa

    try:
        with c2pa.Reader(str(path)) as reader:
            store = json.loads(reader.json())
    except c2pa.C2paError as err:
        text = str(err)
        if "ManifestNotFound" in text or "no JUMBF" in text.lower() or "not found" in text.lower():
            return None, "no manifest"
        if "NotSupported" in text or ("type" in text.lower() and "support" in text.lower()):
            return None, f"C2PA does not cover {path.suffix or 'this format'}: not checked"
        return None, f"no readable manifest ({text.splitlines()[0][:120]})"
    manifest: dict[str, Any] = store.get("manifests", {}).get(store.get("active_manifest"), {})
    if not manifest:
        return None, "no manifest"
    return _summarise(store, manifest), ""


def _summarise(store: dict[str, Any], manifest: dict[str, Any]) -> Credentials:
    statuses = store.get("validation_status") or []
    codes = [str(s.get("code", "")) for s in statuses]
    untrusted = "signingCredential.untrusted" in codes
    problems = tuple(c for c in codes if c != "signingCredential.untrusted")
    state = str(store.get("validation_state", "Invalid" if problems else "Valid"))
    signature = manifest.get("signature_info") or {}
    signer = f"{signature.get('common_name', '?')} (issued by {signature.get('issuer', '?')})"
    agents = manifest.get("claim_generator_info") or [{}]
    generator = " ".join(str(agents[0].get(k, "")) for k in ("name", "version")).strip() or "unknown"
    statements: list[str] = []
    run_id = None
    for assertion in manifest.get("assertions", []):
        label, data = assertion.get("label", ""), assertion.get("data", {})
        if label.startswith("c2pa.actions"):
            for action in data.get("actions", []):
                what = action.get("description") or action.get("action", "")
                source_type = str(action.get("digitalSourceType", "")).rsplit("/", 1)[-1]
                statements.append(
                    f"{action.get('action', '')}: {what}" + (f" [{source_type}]" if source_type else "")
                )
        elif label == WATERMARK_ASSERTION:
            run_id = str(data.get("run_id"))
            statements.append(f"its frames carry FaceCast's invisible watermark, run {run_id}")
    return Credentials(
        valid=state in ("Valid", "Trusted") and not problems,
        trusted=not untrusted and state == "Trusted",
        signer=signer,
        generator=generator,
        title=str(manifest.get("title", "")),
        statements=tuple(statements),
        run_id=run_id,
        problems=problems,
    )
