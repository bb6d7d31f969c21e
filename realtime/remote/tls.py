"""TLS for the signalling channel: the server's certificate, its fingerprint, and the client's
trust-on-first-use store (like SSH's known_hosts).

The media itself travels over DTLS-SRTP, whose fingerprint is in the SDP; the SDP travels over
this channel, so pinning the HTTPS certificate authenticates the media too.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from realtime.remote.errors import FingerprintError, UnreachableError

CERT_NAME = "server-cert.pem"
KEY_NAME = "server-key.pem"


def fingerprint_of_der(der: bytes) -> str:
    """SHA-256 of a DER certificate as AA:BB:... (the form `openssl x509 -fingerprint` prints)."""
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def fingerprint_of_pem(pem: str) -> str:
    return fingerprint_of_der(ssl.PEM_cert_to_DER_cert(pem))


def normalise_fingerprint(text: str) -> str:
    hexdigits = "".join(c for c in text if c not in ": ").upper()
    if len(hexdigits) != 64 or any(c not in "0123456789ABCDEF" for c in hexdigits):
        raise FingerprintError(
            f"{text!r} is not a SHA-256 fingerprint.", hint="Give 64 hex digits (colons allowed)."
        )
    return ":".join(hexdigits[i : i + 2] for i in range(0, 64, 2))


def fingerprint_bytes(fingerprint: str) -> bytes:
    return bytes.fromhex(normalise_fingerprint(fingerprint).replace(":", ""))


@dataclass(frozen=True, slots=True)
class ServerCertificate:
    cert: Path
    key: Path
    fingerprint: str
    generated: bool  # made now, on this start


def ensure_certificate(data_dir: Path, hostnames: tuple[str, ...] = ("localhost",)) -> ServerCertificate:
    """The self-signed certificate in `data_dir`, made on first start (ECDSA P-256, 10 years)."""
    cert_path, key_path = data_dir / CERT_NAME, data_dir / KEY_NAME
    generated = False
    if not (cert_path.is_file() and key_path.is_file()):
        _write_self_signed(cert_path, key_path, hostnames)
        generated = True
    return ServerCertificate(
        cert_path, key_path, fingerprint_of_pem(cert_path.read_text(encoding="ascii")), generated
    )


def _write_self_signed(cert_path: Path, key_path: Path, hostnames: tuple[str, ...]) -> None:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "FaceCast server")])
    now = datetime.datetime.now(datetime.UTC)
    alt: list[x509.GeneralName] = [x509.DNSName(h) for h in hostnames]
    alt.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    key_bytes = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # The key is written readable by its owner only, before any byte of it lands.
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_bytes)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def fetch_fingerprint(host: str, port: int, timeout: float = 5.0) -> str:
    """The fingerprint of the certificate the server at host:port presents (not verified: the
    caller compares it with the pinned one)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as sock,
            ctx.wrap_socket(sock, server_hostname=host) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except ssl.SSLError as exc:
        raise UnreachableError(
            f"{host}:{port} does not speak TLS ({exc.reason}).",
            hint="Is it a --no-tls server? Then use an http:// URL.",
        ) from exc
    except OSError as exc:
        raise UnreachableError(
            f"No FaceCast server answers at {host}:{port} ({exc.strerror or exc}).",
            hint="Is `main.py serve` running there, and the port open?",
        ) from exc
    if not der:
        raise FingerprintError(f"{host}:{port} presented no certificate.")
    return fingerprint_of_der(der)


@dataclass(frozen=True, slots=True)
class KnownHosts:
    """`host:port FINGERPRINT` lines; the first connection to a server records its fingerprint."""

    path: Path

    def lookup(self, host_port: str) -> str | None:
        if not self.path.is_file():
            return None
        for line in self.path.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == host_port:
                return parts[1]
        return None

    def remember(self, host_port: str, fingerprint: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"{host_port} {fingerprint}\n")


@dataclass(frozen=True, slots=True)
class Trust:
    """What a client decided about a server: the fingerprint to pin, and whether it is new."""

    fingerprint: str
    first_use: bool


def trust_server(host: str, port: int, known: KnownHosts, pinned: str | None) -> Trust:
    """Pin `pinned` when given, else the known_hosts entry, else the fingerprint seen now (first use)."""
    seen = fetch_fingerprint(host, port)
    host_port = f"{host}:{port}"
    expected = normalise_fingerprint(pinned) if pinned else known.lookup(host_port)
    if expected is None:
        known.remember(host_port, seen)
        return Trust(seen, True)
    if seen != expected:
        raise FingerprintError(
            f"The server at {host_port} presents certificate {seen}, not the pinned {expected}: "
            "someone may be intercepting the connection.",
            hint=f"If the server's certificate really changed, remove its line from {known.path}.",
        )
    return Trust(expected, False)
