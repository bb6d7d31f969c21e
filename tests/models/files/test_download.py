"""Downloader against a local HTTP server that can honour/ignore Range, fail, lie and hang up."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import random
import re
import socket
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO

import pytest

import models.files.download as download_mod
from models.errors import DownloadError, LicenceNotAcceptedError
from models.files.catalogue import ModelEntry, ModelFile
from models.files.commands import download_models
from models.files.download import Downloader
from models.files.store import ModelStore

CHUNK = 4096
BODY = random.Random(0).randbytes(60_000)
OTHER = random.Random(1).randbytes(60_000)  # same size, different bytes: a mirror serving the wrong file
SHA = hashlib.sha256(BODY).hexdigest()


# ---- local server ----------------------------------------------------------------------------------


@dataclass
class Route:
    body: bytes
    status: int = 200
    ignore_range: bool = False
    drop_after: int = 0  # bytes sent before hanging up, while drops_left > 0
    drops_left: int = 0
    content_type: str | None = None
    errors_left: int = 0  # answer 503 (overloaded) this many times first


@dataclass
class Hit:
    path: str
    range: str | None
    sent: int


@dataclass
class ServerState:
    routes: dict[str, Route] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        return

    def do_GET(self) -> None:
        state = self.server.state
        rng = self.headers.get("Range")
        with state.lock:
            route = state.routes.get(self.path)
            drop = route is not None and route.drops_left > 0
            if route is not None and drop:
                route.drops_left -= 1
            busy = route is not None and route.errors_left > 0
            if route is not None and busy:
                route.errors_left -= 1
        if route is None or route.status != 200 or busy:
            self._record(rng, 0)
            self.send_error(404 if route is None else 503 if busy else route.status)
            return
        body, start = route.body, 0
        m = re.fullmatch(r"bytes=(\d+)-", rng or "")
        if m and not route.ignore_range:
            start = int(m.group(1))
            if start >= len(body):
                self._record(rng, 0)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Length", str(len(payload)))
        if route.content_type is not None:
            self.send_header("Content-Type", route.content_type)
        self.end_headers()
        if drop:
            payload = payload[: route.drop_after]
        # Recorded before sending: recorded after, a loaded machine can let the client finish and
        # the test read `hits` before this thread gets to it (a flaky empty list).
        self._record(rng, len(payload))
        self.wfile.write(payload)
        self.wfile.flush()
        if drop:
            self.connection.shutdown(socket.SHUT_RDWR)

    def _record(self, rng: str | None, sent: int) -> None:
        with self.server.state.lock:
            self.server.state.hits.append(Hit(self.path, rng, sent))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServerState


@dataclass
class FakeServer:
    state: ServerState
    base: str

    def add(self, path: str, route: Route) -> str:
        self.state.routes[path] = route
        return self.base + path

    def hits(self, path: str) -> list[Hit]:
        with self.state.lock:
            return [h for h in self.state.hits if h.path == path]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    httpd = _Server(("127.0.0.1", 0), Handler)
    httpd.state = ServerState()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield FakeServer(httpd.state, f"http://127.0.0.1:{httpd.server_address[1]}")
    finally:
        httpd.shutdown()
        httpd.server_close()


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/gone.onnx"


def entry(
    urls: tuple[str, ...],
    files: tuple[ModelFile, ...] = (ModelFile("tiny.onnx", SHA, len(BODY)),),
    name: str = "tiny",
    archive: str | None = None,
    licence: str = "test licence A",
) -> ModelEntry:
    return ModelEntry(
        name=name, role="swapper", files=files, urls=urls, archive=archive, licence=licence,
        licence_url="https://example.invalid/licence", description="test model", default=True,
    )  # fmt: skip


class Accept:
    """Licence callback that records what it was asked."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, e: ModelEntry) -> bool:
        self.asked.append(e.name)
        return self.answer


def make(tmp_path: Path, *entries: ModelEntry) -> tuple[ModelStore, Downloader]:
    store = ModelStore(tmp_path / "models", catalogue=entries)
    return store, Downloader(store, progress=False, chunk_size=CHUNK, timeout=5.0, retry_delay=0.0)


def writes_then(n: int, failure: BaseException) -> Callable[[BinaryIO, bytes], None]:
    """A write_chunk that writes `n` chunks, then raises `failure` (a full disk, a Ctrl+C)."""
    real_write = download_mod.write_chunk
    calls = {"n": 0}

    def write(fh: BinaryIO, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] > n:
            raise failure
        real_write(fh, data)

    return write


def leftovers(store: ModelStore) -> list[str]:
    if not store.models_dir.exists():
        return []
    return sorted(p.name for p in store.models_dir.iterdir() if p.suffix in (".part", ".zip", ".tmp"))


# ---- single files ----------------------------------------------------------------------------------


def test_happy_path_then_nothing_downloaded_again(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))
    accept = Accept()

    paths = dl.download("tiny", accept)

    assert paths == [store.models_dir / "tiny.onnx"]
    assert paths[0].read_bytes() == BODY
    assert accept.asked == ["tiny"]
    assert leftovers(store) == []
    assert "test licence A" in json.loads((store.models_dir / ".licences.json").read_text())
    assert store.resolve("tiny") == paths[0]

    assert dl.download("tiny", accept) == paths
    assert len(server.hits("/tiny.onnx")) == 1  # present and verified: not fetched again
    assert accept.asked == ["tiny"]


def test_resume_partial_part_fetches_only_the_remainder(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))
    store.models_dir.mkdir(parents=True)
    (store.models_dir / "tiny.onnx.part").write_bytes(BODY[:25_000])

    dl.download("tiny", Accept())

    hits = server.hits("/tiny.onnx")
    assert [(h.range, h.sent) for h in hits] == [("bytes=25000-", len(BODY) - 25_000)]
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY
    assert leftovers(store) == []


def test_server_ignoring_range_restarts_from_zero(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY, ignore_range=True))
    store, dl = make(tmp_path, entry((url,)))
    store.models_dir.mkdir(parents=True)
    # A stale prefix that must be discarded, not glued in front of the 200 body.
    (store.models_dir / "tiny.onnx.part").write_bytes(OTHER[:25_000])

    dl.download("tiny", Accept())

    hits = server.hits("/tiny.onnx")
    assert [(h.range, h.sent) for h in hits] == [("bytes=25000-", len(BODY))]
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY


def test_dropped_connection_resumes_on_the_same_mirror(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY, drop_after=20_000, drops_left=1))
    store, dl = make(tmp_path, entry((url,)))

    dl.download("tiny", Accept())

    hits = server.hits("/tiny.onnx")
    assert len(hits) == 2 and hits[0].range is None
    # urllib3 discards the incomplete last read, so the .part ends at a chunk boundary <= 20000
    m = re.fullmatch(r"bytes=(\d+)-", hits[1].range or "")
    assert m is not None and 0 < int(m.group(1)) <= 20_000
    assert hits[1].sent == len(BODY) - int(m.group(1))
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY


def test_wrong_hash_on_first_mirror_then_second_succeeds(
    tmp_path: Path, server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    bad = server.add("/m1/tiny.onnx", Route(OTHER))
    good = server.add("/m2/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((bad, good)))

    with caplog.at_level(logging.WARNING, logger="models.files.download"):
        dl.download("tiny", Accept())

    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY
    assert len(server.hits("/m1/tiny.onnx")) == 1 and len(server.hits("/m2/tiny.onnx")) == 1
    # mirror 2 started from zero: the bad .part of mirror 1 was removed, not resumed
    assert server.hits("/m2/tiny.onnx")[0].range is None
    assert any("wrong SHA-256" in r.getMessage() and "/m1/" in r.getMessage() for r in caplog.records)
    assert leftovers(store) == []


def test_resumed_part_that_fails_the_hash_is_refetched_cleanly(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))
    store.models_dir.mkdir(parents=True)
    (store.models_dir / "tiny.onnx.part").write_bytes(OTHER[:25_000])  # wrong prefix, honoured Range

    dl.download("tiny", Accept())

    assert [h.range for h in server.hits("/tiny.onnx")] == ["bytes=25000-", None]
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY


def test_all_mirrors_fail_names_file_hash_and_folder(tmp_path: Path, server: FakeServer) -> None:
    e500 = server.add("/a/tiny.onnx", Route(BODY, status=500))
    e404 = server.base + "/b/tiny.onnx"
    store, dl = make(tmp_path, entry((e500, e404, closed_port_url())))

    with pytest.raises(DownloadError) as info:
        dl.download("tiny", Accept())

    msg = str(info.value)
    assert "tiny.onnx" in msg and SHA in msg and str(store.models_dir) in msg
    assert "HTTP 500" in msg and "HTTP 404" in msg and "cannot connect" in msg
    assert "\n" not in info.value.user_message()
    assert "by path" not in info.value.user_message()  # no option takes a model file by path
    assert not (store.models_dir / "tiny.onnx").exists()


def test_server_announcing_wrong_size_is_skipped(tmp_path: Path, server: FakeServer) -> None:
    short = server.add("/a/tiny.onnx", Route(BODY[:1000]))
    store, dl = make(tmp_path, entry((short,)))

    with pytest.raises(DownloadError) as info:
        dl.download("tiny", Accept())

    assert "serves 1,000 bytes, expected 60,000" in str(info.value)
    assert leftovers(store) == []
    assert not (store.models_dir / "tiny.onnx").exists()


def test_licence_declined_downloads_nothing(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))

    with pytest.raises(LicenceNotAcceptedError) as info:
        dl.download("tiny", Accept(answer=False))

    assert "test licence A" in str(info.value)
    assert server.hits("/tiny.onnx") == []
    assert not (store.models_dir / "tiny.onnx").exists()
    assert not dl.licence_accepted("test licence A")


def test_licence_asked_once_per_licence(tmp_path: Path, server: FakeServer) -> None:
    body2 = BODY[:1000]
    f2 = ModelFile("two.onnx", hashlib.sha256(body2).hexdigest(), len(body2))
    f3 = ModelFile("three.onnx", hashlib.sha256(body2).hexdigest(), len(body2))
    a = entry((server.add("/tiny.onnx", Route(BODY)),), name="a")
    b = entry((server.add("/two.onnx", Route(body2)),), files=(f2,), name="b")
    c = entry((server.add("/three.onnx", Route(body2)),), files=(f3,), name="c", licence="other")
    _store, dl = make(tmp_path, a, b, c)
    accept = Accept()

    for name in ("a", "b", "c"):
        dl.download(name, accept)

    assert accept.asked == ["a", "c"]


def test_disk_full_keeps_part_for_resume(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))
    real_write = download_mod.write_chunk
    monkeypatch.setattr(
        download_mod, "write_chunk", writes_then(3, OSError(errno.ENOSPC, "No space left on device"))
    )
    with pytest.raises(DownloadError) as info:
        dl.download("tiny", Accept())

    assert "full" in str(info.value) and str(store.models_dir) in str(info.value)
    part = store.models_dir / "tiny.onnx.part"
    assert part.read_bytes() == BODY[: 3 * CHUNK]
    assert not (store.models_dir / "tiny.onnx").exists()

    monkeypatch.setattr(download_mod, "write_chunk", real_write)
    dl.download("tiny", Accept())
    assert server.hits("/tiny.onnx")[-1].range == f"bytes={3 * CHUNK}-"
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY


# ---- archives --------------------------------------------------------------------------------------


def make_zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pack/", b"")
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


A_BYTES, B_BYTES = random.Random(2).randbytes(30_000), random.Random(3).randbytes(20_000)
A = ModelFile("a.onnx", hashlib.sha256(A_BYTES).hexdigest(), len(A_BYTES))
B = ModelFile("b.onnx", hashlib.sha256(B_BYTES).hexdigest(), len(B_BYTES))


def test_archive_members_extracted_by_basename(tmp_path: Path, server: FakeServer) -> None:
    blob = make_zip({"pack/a.onnx": A_BYTES, "pack/sub/b.onnx": B_BYTES, "pack/readme.txt": b"hi"})
    url = server.add("/pack.zip", Route(blob))
    store, dl = make(tmp_path, entry((url,), files=(A, B), name="pack", archive="pack.zip"))

    paths = dl.download("pack", Accept())

    assert [p.read_bytes() for p in paths] == [A_BYTES, B_BYTES]
    assert sorted(p.name for p in store.models_dir.iterdir() if not p.name.startswith(".")) == [
        "a.onnx",
        "b.onnx",
    ]  # zip deleted, nothing else extracted
    assert store.resolve("a.onnx") == paths[0]


def test_archive_member_with_bad_hash_installs_nothing(tmp_path: Path, server: FakeServer) -> None:
    blob = make_zip({"pack/a.onnx": A_BYTES, "pack/b.onnx": B_BYTES[:-1] + b"\0"})
    url = server.add("/pack.zip", Route(blob))
    store, dl = make(tmp_path, entry((url,), files=(A, B), name="pack", archive="pack.zip"))

    with pytest.raises(DownloadError) as info:
        dl.download("pack", Accept())

    assert "b.onnx" in str(info.value) and "wrong SHA-256" in str(info.value)
    assert B.sha256 is not None and B.sha256 in str(info.value)
    assert not (store.models_dir / "a.onnx").exists()  # a.onnx was fine but is not half-installed
    assert not (store.models_dir / "b.onnx").exists()
    assert leftovers(store) == []


def test_archive_bad_on_mirror_one_good_on_mirror_two(tmp_path: Path, server: FakeServer) -> None:
    bad = server.add("/m1/pack.zip", Route(make_zip({"a.onnx": B_BYTES, "b.onnx": B_BYTES})))
    good = server.add("/m2/pack.zip", Route(make_zip({"x/a.onnx": A_BYTES, "x/b.onnx": B_BYTES})))
    store, dl = make(tmp_path, entry((bad, good), files=(A, B), name="pack", archive="pack.zip"))

    dl.download("pack", Accept())

    assert (store.models_dir / "a.onnx").read_bytes() == A_BYTES
    assert leftovers(store) == []


def test_archive_not_a_zip_and_missing_member(tmp_path: Path, server: FakeServer) -> None:
    junk = server.add("/junk.zip", Route(b"<html>not found</html>"))
    partial = server.add("/partial.zip", Route(make_zip({"a.onnx": A_BYTES})))
    store, dl = make(tmp_path, entry((junk, partial), files=(A, B), name="pack", archive="pack.zip"))

    with pytest.raises(DownloadError) as info:
        dl.download("pack", Accept())

    assert "not a valid zip" in str(info.value) and "lacks b.onnx" in str(info.value)
    assert not (store.models_dir / "a.onnx").exists()


# ---- CLI command -----------------------------------------------------------------------------------


def test_download_command_prompts_and_reports(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))

    out = io.StringIO()
    code = download_models(store, ["tiny"], yes=False, out=out, in_=io.StringIO("n\n"), downloader=dl)
    assert code == LicenceNotAcceptedError.exit_code
    assert "Accept? [y/N]" in out.getvalue() and "test licence A" in out.getvalue()
    assert server.hits("/tiny.onnx") == []

    out = io.StringIO()
    code = download_models(store, ["default"], yes=False, out=out, in_=io.StringIO("y\n"), downloader=dl)
    assert code == 0
    assert "installed" in out.getvalue()
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY

    out = io.StringIO()
    assert download_models(store, ["tiny"], yes=False, out=out, in_=io.StringIO(""), downloader=dl) == 0
    assert "already installed" in out.getvalue()


def test_download_command_yes_and_unknown_name(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))

    out = io.StringIO()
    assert download_models(store, ["tiny", "bogus"], yes=True, out=out, in_=io.StringIO(), downloader=dl) == 2
    assert "bogus" in out.getvalue() and server.hits("/tiny.onnx") == []  # typo caught before fetching

    out = io.StringIO()
    assert download_models(store, ["tiny"], yes=True, out=out, in_=io.StringIO(), downloader=dl) == 0
    assert "Accept?" not in out.getvalue()
    assert (store.models_dir / "tiny.onnx").exists()


def test_files_sharing_an_archive_come_from_one_download(tmp_path: Path, server: FakeServer) -> None:
    """det_10g and w600k_r50 are single-file entries that both live in buffalo_l.zip: asking for
    one after the other must not fetch the 280 MB zip twice."""
    url = server.add("/pack.zip", Route(make_zip({"pack/a.onnx": A_BYTES, "pack/b.onnx": B_BYTES})))
    only_a = entry((url,), files=(A,), name="a", archive="pack.zip")
    only_b = entry((url,), files=(B,), name="b", archive="pack.zip")
    store, dl = make(tmp_path, only_a, only_b)

    dl.download("a", Accept())
    assert store.path_for("b.onnx").read_bytes() == B_BYTES  # its sibling came along
    dl.download("b", Accept())
    assert len(server.hits("/pack.zip")) == 1


def test_a_models_folder_that_is_a_file_is_a_clear_error(tmp_path: Path, server: FakeServer) -> None:
    """A models folder that is a file is a DownloadError naming it, not a FileExistsError traceback."""
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))
    store.models_dir.write_text("not a folder")
    with pytest.raises(DownloadError, match="is a file, not a folder") as info:
        dl.download("tiny", Accept())
    assert "FACECAST_MODELS_DIR" in info.value.hint and server.hits("/tiny.onnx") == []


def test_a_models_folder_that_cannot_be_written_is_a_clear_error(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    _, dl = make(tmp_path, entry((url,)))

    def read_only(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("models.files.download.write_json_atomic", read_only)
    with pytest.raises(DownloadError, match=r"Cannot write to the models folder .*Read-only file system"):
        dl.download("tiny", Accept())


# ---- failures the user must not see as tracebacks or half files ----------------------------------


class _FullDisk(io.RawIOBase):
    """A file on a full disk: every write that reaches the OS fails."""

    def writable(self) -> bool:
        return True

    def write(self, _data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_is_a_message_even_when_closing_the_file_fails_again(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The buffered bytes left at close hit the full disk a second time: the user still sees the
    "disk is full" message, not a bare OSError traceback."""
    url = server.add("/tiny.onnx", Route(BODY))
    _store, dl = make(tmp_path, entry((url,)))
    real_open = Path.open

    def open_on_full_disk(self: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        if self.name.endswith(".part") and "b" in mode and ("w" in mode or "a" in mode):
            return io.BufferedWriter(_FullDisk(), buffer_size=3 * CHUNK // 2)
        return real_open(self, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", open_on_full_disk)
    with pytest.raises(DownloadError, match=r"is full while writing tiny\.onnx"):
        dl.download("tiny", Accept())


LOOSE_FILE = ModelFile("loose.onnx", None, None)  # no published size or hash (scrfd_2.5g, codeformer)


def _tiny_onnx() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "loose", [x], [y])
    return onnx.helper.make_model(graph).SerializeToString()


@pytest.mark.parametrize(
    ("route", "reason"),
    [
        (Route(b"<!DOCTYPE html><p>Sign in</p>", content_type="text/html; charset=utf-8"), "web page"),
        (Route(b"<!DOCTYPE html><p>Sign in</p>"), "web page"),
        (Route(_tiny_onnx()[:-7]), "not a readable ONNX model"),
    ],
    ids=["html by header", "html by content", "cut short"],
)
def test_a_file_without_a_hash_must_still_be_a_whole_model(
    tmp_path: Path, server: FakeServer, route: Route, reason: str
) -> None:
    """With no hash to check it against, a login page or a body cut off by a dropped connection is
    refused and nothing is installed under the model's name."""
    url = server.add("/loose.onnx", route)
    store, dl = make(tmp_path, entry((url,), files=(LOOSE_FILE,), name="loose"))
    with pytest.raises(DownloadError, match=reason):
        dl.download("loose", Accept())
    assert not (store.models_dir / "loose.onnx").exists() and leftovers(store) == []


def test_a_damaged_file_without_a_hash_is_replaced_by_the_next_download(
    tmp_path: Path, server: FakeServer
) -> None:
    good = _tiny_onnx()
    url = server.add("/loose.onnx", Route(good))
    store, dl = make(tmp_path, entry((url,), files=(LOOSE_FILE,), name="loose"))
    store.models_dir.mkdir(parents=True)
    (store.models_dir / "loose.onnx").write_bytes(b"<html>an old login page</html>")
    out = io.StringIO()
    assert download_models(store, ["loose"], yes=True, out=out, in_=io.StringIO(), downloader=dl) == 0
    assert "installed" in out.getvalue() and "already installed" not in out.getvalue()
    assert (store.models_dir / "loose.onnx").read_bytes() == good


def test_a_connection_dropped_before_a_whole_chunk_arrived_is_retried(
    tmp_path: Path, server: FakeServer
) -> None:
    """A drop less than one read into a response is retried, not taken for 'no progress': the
    only source delivers the file on a later request."""
    url = server.add("/tiny.onnx", Route(BODY, drop_after=100, drops_left=2))
    store, dl = make(tmp_path, entry((url,)))
    dl.download("tiny", Accept())
    assert len(server.hits("/tiny.onnx")) == 3
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY


def test_an_overloaded_server_is_asked_again(tmp_path: Path, server: FakeServer) -> None:
    url = server.add("/tiny.onnx", Route(BODY, errors_left=1))
    store, dl = make(tmp_path, entry((url,)))
    dl.download("tiny", Accept())
    assert len(server.hits("/tiny.onnx")) == 2
    assert (store.models_dir / "tiny.onnx").read_bytes() == BODY


def test_a_second_download_into_the_folder_waits_and_then_uses_what_the_first_installed(
    tmp_path: Path, server: FakeServer
) -> None:
    """A second download into the folder waits for the first (the folder lock), then finds the file
    installed and fetches nothing."""
    from models.files.folder_lock import FolderLock

    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))
    store.models_dir.mkdir(parents=True)
    done: list[object] = []
    with FolderLock(store.models_dir):  # the other process, mid-download
        waiter = threading.Thread(target=lambda: done.append(dl.download("tiny", Accept())))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and server.hits("/tiny.onnx") == []  # waiting, not fetching
        (store.models_dir / "tiny.onnx").write_bytes(BODY)  # the other process finishes
    waiter.join(10)
    assert done == [[store.models_dir / "tiny.onnx"]]
    assert server.hits("/tiny.onnx") == []  # it saw the file installed and fetched nothing


def test_hints_keep_the_models_folder_the_user_chose(tmp_path: Path) -> None:
    """The 'run models download X again' hint keeps --models-dir, so following it fills the folder
    the run reads."""
    store, dl = make(tmp_path, entry((closed_port_url(),)))
    with pytest.raises(DownloadError) as info:
        dl.download("tiny", Accept())
    assert f"models download tiny --models-dir {store.models_dir}" in info.value.hint


def test_a_declined_licence_is_asked_once_per_command(tmp_path: Path, server: FakeServer) -> None:
    """A licence declined once is not asked again in the same command for another model under it
    (inswapper_128, then buffalo_l)."""
    body2 = BODY[:1000]
    f2 = ModelFile("two.onnx", hashlib.sha256(body2).hexdigest(), len(body2))
    a = entry((server.add("/tiny.onnx", Route(BODY)),), name="a")
    b = entry((server.add("/two.onnx", Route(body2)),), files=(f2,), name="b")
    store, dl = make(tmp_path, a, b)
    out = io.StringIO()
    code = download_models(store, ["a", "b"], yes=False, out=out, in_=io.StringIO("n\ny\n"), downloader=dl)
    assert code == LicenceNotAcceptedError.exit_code
    assert out.getvalue().count("Accept? [y/N]") == 1
    assert server.hits("/tiny.onnx") == [] and server.hits("/two.onnx") == []


def test_ctrl_c_during_a_download_says_how_to_resume(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, dl = make(tmp_path, entry((url,)))
    monkeypatch.setattr(download_mod, "write_chunk", writes_then(2, KeyboardInterrupt()))
    out = io.StringIO()
    assert download_models(store, ["tiny"], yes=True, out=out, in_=io.StringIO(), downloader=dl) == 130
    assert "resumes" in out.getvalue()
    assert (store.models_dir / "tiny.onnx.part").stat().st_size == 2 * CHUNK
    assert not (store.models_dir / "tiny.onnx").exists()
