"""Files whose publisher gives a CRC-32 and no SHA-256 (FaceFusion's NAME.hash): checked against it,
pinned or read at download time and kept; and an entry's required entries (a swapper's converter)
come with it. Against the local HTTP server of test_download."""

from __future__ import annotations

import logging
import os
import zlib
from pathlib import Path

import onnx
import pytest

from models.errors import DownloadError, ModelHashError
from models.fakes.swapper_doubles import build_converter_double
from models.files.catalogue import ModelEntry, ModelFile
from models.files.store import PUBLISHER_CRC32, read_json_dict
from tests.models.files.test_download import BODY, OTHER, Accept, FakeServer, Route, make, server

__all__ = ["server"]  # the fixture, used by name


def crc(data: bytes) -> str:
    return f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"


def entry(
    urls: tuple[str, ...],
    file: ModelFile,
    name: str = "tiny",
    requires: tuple[str, ...] = (),
    role: str = "swapper",
    licence: str = "test licence A",
) -> ModelEntry:
    return ModelEntry(
        name=name, role=role, files=(file,), urls=urls, archive=None, licence=licence,  # type: ignore[arg-type]
        licence_url="https://example.invalid/licence", description="test model", default=False,
        requires=requires,
    )  # fmt: skip


def test_a_pinned_crc32_verifies_the_download_and_later_damage(server: FakeServer, tmp_path: Path) -> None:
    url = server.add("/tiny.onnx", Route(BODY))
    store, downloader = make(tmp_path, entry((url,), ModelFile("tiny.onnx", None, None, crc32=crc(BODY))))
    (path,) = downloader.download("tiny", Accept())
    result = store.check(store.catalogue[0].files[0])
    assert result.status == "ok" and "publisher's CRC-32" in result.detail
    damaged = bytearray(path.read_bytes())
    damaged[100] ^= 0xFF  # same size: only the checksum can tell
    path.write_bytes(bytes(damaged))
    os.utime(path, ns=(1, 1))
    result = store.check(store.catalogue[0].files[0])
    assert result.status == "mismatch" and crc(BODY) in result.detail
    with pytest.raises(ModelHashError, match=r"does not match: expected the publisher's CRC-32") as raised:
        store.resolve("tiny.onnx")
    assert "models download tiny" in raised.value.user_message()


def test_the_publishers_crc32_file_is_read_at_download_and_a_wrong_mirror_is_passed_over(
    server: FakeServer, tmp_path: Path
) -> None:
    wrong = server.add("/mirror-a/tiny.onnx", Route(OTHER))  # serves another file of the same size
    right = server.add("/mirror-b/tiny.onnx", Route(BODY))
    hash_url = server.add("/tiny.hash", Route(crc(BODY).encode()))
    spec = ModelFile("tiny.onnx", None, None, crc32_urls=(hash_url,))
    store, downloader = make(tmp_path, entry((wrong, right), spec))
    (path,) = downloader.download("tiny", Accept())
    assert path.read_bytes() == BODY
    assert read_json_dict(store.models_dir / PUBLISHER_CRC32) == {"tiny.onnx": crc(BODY)}
    assert store.check(spec).status == "ok"  # at every later start, without the network
    path.write_bytes(OTHER)
    os.utime(path, ns=(2, 2))
    assert store.check(spec).status == "mismatch"


def test_every_mirror_with_the_wrong_bytes_fails_the_download_saying_so(
    server: FakeServer, tmp_path: Path
) -> None:
    wrong = server.add("/tiny.onnx", Route(OTHER))
    hash_url = server.add("/tiny.hash", Route(crc(BODY).encode()))
    store, downloader = make(
        tmp_path, entry((wrong,), ModelFile("tiny.onnx", None, None, crc32_urls=(hash_url,)))
    )
    with pytest.raises(DownloadError, match="CRC-32"):
        downloader.download("tiny", Accept())
    assert not (store.models_dir / "tiny.onnx").exists()


def test_without_a_readable_crc32_the_file_must_at_least_be_a_whole_onnx_model(
    server: FakeServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = build_converter_double("crossface_ghost.onnx").SerializeToString()
    url = server.add("/conv.onnx", Route(model))
    missing_hash = server.base + "/conv.hash"  # 404
    spec = ModelFile("conv.onnx", None, None, crc32_urls=(missing_hash,))
    store, downloader = make(tmp_path, entry((url,), spec, name="conv"))
    with caplog.at_level(logging.WARNING):
        downloader.download("conv", Accept())
    assert "No publisher's CRC-32 for conv.onnx" in caplog.text
    assert store.check(spec).status == "unpinned"
    onnx.checker.check_model(onnx.load(str(store.models_dir / "conv.onnx")))


def test_a_swapper_brings_its_converter_with_its_own_licence_asked(
    server: FakeServer, tmp_path: Path
) -> None:
    swap_url = server.add("/swap.onnx", Route(BODY))
    conv_url = server.add("/conv.onnx", Route(OTHER))
    swapper = entry((swap_url,), ModelFile("swap.onnx", None, None, crc32=crc(BODY)), "swap", ("conv",))
    converter = entry(
        (conv_url,),
        ModelFile("conv.onnx", None, None, crc32=crc(OTHER)),
        "conv",
        role="converter",
        licence="B",
    )
    store, downloader = make(tmp_path, swapper, converter)
    accept = Accept()
    downloader.download("swap", accept)
    assert accept.asked == ["conv", "swap"]  # each licence shown before its own download
    assert (store.models_dir / "conv.onnx").read_bytes() == OTHER
    assert (store.models_dir / "swap.onnx").read_bytes() == BODY
