"""What the mark says, as 64 bits: 48 bits of payload and a CRC-16 over them.

    bits 0-3    format (1)
    bits 4-7    flags: bit 4 = the picture is AI-modified (always set by FaceCast)
    bits 8-15   FaceCast's version: major (high 4 bits) and minor (low 4 bits), each capped at 15
    bits 16-47  the run's id: 32 random bits, shown as 8 hex digits; a recording's C2PA manifest
                names the same id
    bits 48-63  CRC-16/CCITT-FALSE of bits 0-47

The CRC is what turns "a pattern that correlates" into "FaceCast's payload, read whole": a read
whose CRC fails is not reported as marked, which also divides the false-positive rate by 65,536.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import numpy as np

FORMAT = 1
FLAG_AI_MODIFIED = 1
PAYLOAD_BITS = 48
CRC_BITS = 16
CODE_BITS = PAYLOAD_BITS + CRC_BITS


def new_run_id() -> str:
    """A fresh run id: 8 hex digits."""
    return secrets.token_hex(4)


def _version_byte(version: str) -> int:
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]] + [0, 0]
    return (min(numbers[0], 15) << 4) | min(numbers[1], 15)


@dataclass(frozen=True, slots=True)
class Payload:
    run_id: str  # 8 hex digits
    version: str = "0.1"  # FaceCast's major.minor as carried (each capped at 15)
    ai_modified: bool = True
    format: int = FORMAT

    @classmethod
    def for_run(cls, facecast_version: str, run_id: str | None = None) -> Payload:
        byte = _version_byte(facecast_version)
        return cls(run_id or new_run_id(), f"{byte >> 4}.{byte & 15}")

    def to_bits(self) -> np.ndarray:
        """The 64 code bits (0/1, uint8), payload then CRC."""
        flags = FLAG_AI_MODIFIED if self.ai_modified else 0
        value = (self.format & 15) | (flags << 4) | (_version_byte(self.version) << 8)
        value |= int(self.run_id, 16) << 16
        payload = _int_to_bits(value, PAYLOAD_BITS)
        return np.concatenate([payload, _int_to_bits(crc16(payload), CRC_BITS)])

    @classmethod
    def from_bits(cls, bits: np.ndarray) -> Payload | None:
        """The payload the 64 bits carry, or None when their CRC does not match."""
        bits = np.asarray(bits, dtype=np.uint8)
        payload, crc = bits[:PAYLOAD_BITS], bits[PAYLOAD_BITS:CODE_BITS]
        if crc16(payload) != _bits_to_int(crc):
            return None
        value = _bits_to_int(payload)
        fmt, flags, version = value & 15, (value >> 4) & 15, (value >> 8) & 255
        ai_modified = bool(flags & FLAG_AI_MODIFIED)
        return cls(f"{value >> 16:08x}", f"{version >> 4}.{version & 15}", ai_modified, fmt)


def _int_to_bits(value: int, count: int) -> np.ndarray:
    return np.array([(value >> i) & 1 for i in range(count)], dtype=np.uint8)


def _bits_to_int(bits: np.ndarray) -> int:
    return sum(int(b) << i for i, b in enumerate(bits))


def crc16(bits: np.ndarray) -> int:
    """CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF) over bits, least significant first."""
    crc = 0xFFFF
    for bit in bits:
        top = (crc >> 15) & 1
        crc = (crc << 1) & 0xFFFF
        if top ^ int(bit):
            crc ^= 0x1021
    return crc
