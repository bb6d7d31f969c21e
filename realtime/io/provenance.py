"""What every file FaceCast writes says about itself: a C2PA manifest (Content Credentials)
stating that faces in it were changed by AI, by FaceCast and its version, signed offline with a
local key, and container tags that any player shows.

File jobs sign before the output takes its name (sign_video); recordings and image outputs are
signed in place once renamed into place (sign_in_place). Formats c2pa cannot embed into (MKV, BMP)
keep the container tags alone.

The key and its certificate (ES256, a local CA and a signing certificate it issued, as C2PA
requires a chain) are made on first use in FaceCast's data folder, or $FACECAST_PROVENANCE_DIR.
Readers show the manifest; its signer is "untrusted" until a verifier is told to trust that CA.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from realtime.core.version import facecast_version
from realtime.core.watermark.design import DEFAULT_KEY
from realtime.core.watermark.payload import FORMAT
from realtime.io.partial_files import _partial_path, _remove

log = logging.getLogger(__name__)

PROVENANCE_DIR_ENV = "FACECAST_PROVENANCE_DIR"
AI_MODIFIED_TEXT = "Faces in this video were modified by AI (FaceCast face swap)."
AI_MODIFIED_IMAGE_TEXT = "Faces in this image were modified by AI (FaceCast face swap)."
# IPTC's term for media that mixes captured content with content a trained model made.
DIGITAL_SOURCE_TYPE = "http://cv.iptc.org/newscodes/digitalsourcetype/compositeWithTrainedAlgorithmicMedia"
# The formats c2pa-python's Builder.sign embeds a manifest into (tested: MKV and BMP are refused).
SIGNABLE_VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".m4v", ".avi"})
SIGNABLE_IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff"})
SIGNABLE_SUFFIXES = SIGNABLE_VIDEO_SUFFIXES | SIGNABLE_IMAGE_SUFFIXES
TAGGED_SUFFIXES = frozenset({".mkv", ".webm", ".mp4", ".mov", ".m4v", ".avi"})  # containers with tags


def provenance_tags() -> dict[str, str]:
    """Container tags (MP4/MKV/MOV keep them) that any player or `ffprobe` shows."""
    return {"comment": AI_MODIFIED_TEXT, "description": AI_MODIFIED_TEXT}


@dataclass(frozen=True, slots=True)
class SigningKey:
    chain_pem: bytes  # the signing certificate, then the CA's
    key_pem: bytes


def key_folder() -> Path:
    given = os.environ.get(PROVENANCE_DIR_ENV)
    return Path(given) if given else Path(platformdirs.user_data_dir("FaceCast")) / "provenance"


def signing_key(folder: Path | None = None) -> SigningKey:
    """The local key, made now if there is none. Made in a folder of its own and renamed into
    place, so two workers starting together end up with one matching key and certificate."""
    folder = folder or key_folder()
    if not (folder / "chain.pem").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        temp = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}")
        temp.mkdir(mode=0o700)
        chain, key = _make_key()
        fd = os.open(temp / "key.pem", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        (temp / "chain.pem").write_bytes(chain)
        try:
            os.rename(temp, folder)
        except OSError:  # another process made it first: use theirs
            for entry in temp.iterdir():
                entry.unlink()
            temp.rmdir()
    return SigningKey((folder / "chain.pem").read_bytes(), (folder / "key.pem").read_bytes())


def _make_key() -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "FaceCast"),
                x509.NameAttribute(NameOID.COMMON_NAME, cn),
            ]
        )

    def usage(*, sign: bool, ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=sign, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=ca, crl_sign=ca, encipher_only=False, decipher_only=False,
        )  # fmt: skip

    now = datetime.datetime.now(datetime.UTC)
    ca_name = name("FaceCast local CA")
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    valid = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=3650))
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(valid[0]).not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage(sign=False, ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    leaf = (
        x509.CertificateBuilder().subject_name(name("FaceCast signer")).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(valid[0]).not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage(sign=True, ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    chain = leaf.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return chain, pem


WATERMARK_ASSERTION = "com.facecast.watermark"


def manifest_definition(
    title: str, description: str = AI_MODIFIED_TEXT, run_id: str | None = None
) -> dict[str, Any]:
    """The manifest FaceCast signs; `run_id`: the run whose invisible watermark the frames carry
    (an assertion of its own names it, so the mark and the manifest can be matched)."""
    version = facecast_version()
    agent = {"name": "FaceCast", "version": version}
    definition: dict[str, Any] = {
        "claim_generator_info": [agent],
        "title": title,
        "assertions": [
            {
                "label": "c2pa.actions",
                "data": {
                    "actions": [
                        {
                            "action": "c2pa.created",
                            "digitalSourceType": DIGITAL_SOURCE_TYPE,
                            "softwareAgent": agent,
                        },
                        {
                            "action": "c2pa.edited",
                            "digitalSourceType": DIGITAL_SOURCE_TYPE,
                            "description": description,
                            "softwareAgent": agent,
                        },
                    ]
                },
            }
        ],
    }
    if run_id is not None:
        definition["assertions"].append(
            {
                "label": WATERMARK_ASSERTION,
                "data": {"run_id": run_id, "key": DEFAULT_KEY, "format": FORMAT},
            }
        )
    return definition


def can_sign(path: Path) -> bool:
    return path.suffix.lower() in SIGNABLE_SUFFIXES


def ai_modified_text(path: Path) -> str:
    return AI_MODIFIED_IMAGE_TEXT if path.suffix.lower() in SIGNABLE_IMAGE_SUFFIXES else AI_MODIFIED_TEXT


def sign_video(source: Path, dest: Path, title: str, run_id: str | None = None) -> None:
    """Write `source` with a signed C2PA manifest embedded to `dest` (a new file); `run_id`: the
    watermark's run id the manifest names."""
    import c2pa

    key = signing_key()
    signer = c2pa.Signer.from_info(
        c2pa.C2paSignerInfo(c2pa.C2paSigningAlg.ES256, key.chain_pem, key.key_pem, None)
    )
    definition = manifest_definition(title, ai_modified_text(dest), run_id)
    with signer, c2pa.Builder(definition) as builder:
        builder.sign_file(str(source), str(dest), signer)


_said_lock = threading.Lock()
_said: set[str] = set()  # the suffixes already logged as not signable


def sign_in_place(path: Path, run_id: str | None = None) -> bool:
    """Embed the manifest into the finished file `path`: the signed copy is written beside it
    under a hidden partial name, then replaces it. A format c2pa cannot embed into is left as it
    is (said once per suffix); a failure leaves the file unsigned, with a warning. True: signed."""
    suffix = path.suffix.lower()
    if not can_sign(path):
        with _said_lock:
            first = suffix not in _said
            _said.add(suffix)
        if first:
            tags = (
                "their tags alone say faces were modified by AI"
                if suffix in TAGGED_SUFFIXES
                else "nothing in them says faces were modified by AI"
            )
            log.info(
                "%s files get no C2PA manifest (c2pa cannot embed one): %s. Use .mp4 or .png to sign.",
                suffix or "Extensionless",
                tags,
            )
        return False
    temp = _partial_path(path)
    try:
        sign_video(path, temp, path.name, run_id)
        os.replace(temp, path)
    except Exception as err:  # whatever the signer raises, the recording is kept (unsigned)
        _remove(temp)
        log.warning("Could not sign %s with its C2PA manifest; it is kept unsigned: %s", path, err)
        return False
    return True


def read_provenance(path: Path) -> dict[str, Any] | None:
    """The active C2PA manifest of `path` as JSON, or None when it has none."""
    import c2pa

    try:
        with c2pa.Reader(str(path)) as reader:
            store = json.loads(reader.json())
    except c2pa.C2paError as err:
        log.debug("no C2PA manifest in %s: %s", path, err)
        return None
    active = store.get("active_manifest")
    manifest: dict[str, Any] | None = store.get("manifests", {}).get(active)
    return manifest
