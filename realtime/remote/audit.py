"""The server's audit log: one JSON object per line, appended, in the data folder.

Events: "upload" (a source photo kept), "stream" (a stream ended: its length, why, the run id its
frames' watermark carries, what the content policy saw), "refused" (an upload or a stream the
content policy turned away), "content" (a stream's sampled frame the content policy flagged).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class AuditRecord:
    event: str  # "stream" (a stream ended), "upload", "refused", "content"
    client: str  # the client's address
    token_name: str
    photo_sha256: tuple[str, ...] = ()
    duration_s: float = 0.0
    detail: str = ""
    run_id: str = ""  # the stream's watermark run id (docs/PROVENANCE.md)
    content: str = ""  # the content policy's verdict(s), when it is on
    time: float = field(default_factory=time.time)


@dataclass
class AuditLog:
    path: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def write(self, record: AuditRecord) -> None:
        data = asdict(record)
        data["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.time))
        data["photo_sha256"] = list(record.photo_sha256)
        line = json.dumps(data, sort_keys=True)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")

    def records(self) -> list[dict[str, object]]:
        if not self.path.exists():
            return []
        return [json.loads(x) for x in self.path.read_text(encoding="utf-8").splitlines() if x.strip()]
