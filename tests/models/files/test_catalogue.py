"""The catalogue carries exactly the facts of docs/model-contracts.md."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

from models.errors import ModelMissingError
from models.files.catalogue import CATALOGUE, ModelEntry, Role, default_entries, entry_for_file, get_entry

# (file, bytes, sha256) straight from the contract table.
PINNED = {
    "inswapper_128.onnx": (554_253_681, "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af"),
    "inswapper_128_fp16.onnx": (
        277_680_638,
        "6d51a9278a1f650cffefc18ba53f38bf2769bf4bbff89267822cf72945f8a38b",
    ),
    "det_10g.onnx": (16_923_827, "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91"),
    "w600k_r50.onnx": (174_383_860, "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43"),
    "2d106det.onnx": (5_030_888, "f001b856447c413801ef5c42091ed0cd516fcd21f2d6b79635b1e733a7109dbf"),
    "1k3d68.onnx": (143_607_619, "df5c06b8a0c12e422b2ed8947b8869faa4105387f199c477af038aa01f9a45cc"),
    "GPEN-BFR-256.onnx": (75_715_262, "aa5bd3ab238640a378c59e4a560f7a7150627944cf2129e6311ae4720e833271"),
    "GPEN-BFR-512.onnx": (284_250_449, "0960f836488735444d508b588e44fb5dfd19c68fde9163ad7878aa24d1d5115e"),
}
UNPINNED = {
    "gfpgan_1.4.onnx": 340_299_087,
    "xseg_1.onnx": 70_324_286,
    "bisenet_resnet_34.onnx": 93_632_546,
    "scrfd_2.5g.onnx": None,
}
FF = "https://github.com/facefusion/facefusion-assets/releases/download"


def _all_files() -> dict[str, list[tuple[str, int | None, str | None]]]:
    seen: dict[str, list[tuple[str, int | None, str | None]]] = {}
    for entry in CATALOGUE:
        for f in entry.files:
            seen.setdefault(f.name, []).append((entry.name, f.size, f.sha256))
    return seen


def test_catalogue_is_immutable_tuple_of_frozen_entries() -> None:
    assert isinstance(CATALOGUE, tuple)
    entry = CATALOGUE[0]
    assert isinstance(entry.files, tuple) and isinstance(entry.urls, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.name = "x"  # type: ignore[misc]


def test_required_entries_present_and_names_unique() -> None:
    names = [e.name for e in CATALOGUE]
    assert len(names) == len(set(names))
    required = {
        "inswapper_128", "inswapper_128_fp16", "buffalo_l", "det_10g", "w600k_r50", "scrfd_2.5g",
        "GPEN-BFR-256", "GPEN-BFR-512", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34",
    }  # fmt: skip
    assert required <= set(names)


@pytest.mark.parametrize("filename", sorted(PINNED))
def test_pinned_sizes_and_hashes_match_contract(filename: str) -> None:
    size, sha = PINNED[filename]
    owners = _all_files()[filename]
    assert owners, filename
    for owner, got_size, got_sha in owners:
        assert (got_size, got_sha) == (size, sha), owner


@pytest.mark.parametrize("filename", sorted(UNPINNED))
def test_unpinned_files_have_no_hash(filename: str) -> None:
    for _owner, size, sha in _all_files()[filename]:
        assert sha is None
        assert size == UNPINNED[filename]


def test_every_hash_is_lowercase_hex_and_every_url_https() -> None:
    for entry in CATALOGUE:
        assert entry.urls, entry.name
        assert all(u.startswith("https://") for u in entry.urls), entry.name
        assert entry.licence_url.startswith("https://")
        assert entry.licence and entry.description
        assert entry.role in typing.get_args(Role)
        for f in entry.files:
            assert f.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", f.sha256), f.name


def test_inswapper_has_primary_and_two_mirrors() -> None:
    entry = get_entry("inswapper_128")
    assert entry.urls == (
        "https://huggingface.co/hacksider/deep-live-cam/resolve/main/inswapper_128.onnx",
        "https://huggingface.co/ezioruan/inswapper_128.onnx/resolve/main/inswapper_128.onnx",
        "https://huggingface.co/datasets/Gourieff/ReActor/resolve/main/models/inswapper_128.onnx",
    )
    assert entry.archive is None and entry.role == "swapper"
    assert len(get_entry("inswapper_128_fp16").urls) == 2


def test_buffalo_pack_and_its_logical_entries_share_the_archive() -> None:
    pack = get_entry("buffalo_l")
    assert pack.archive == "buffalo_l.zip"
    assert pack.urls == ("https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip",)
    assert [f.name for f in pack.files] == ["det_10g.onnx", "w600k_r50.onnx", "2d106det.onnx", "1k3d68.onnx"]
    det, rec = get_entry("det_10g"), get_entry("w600k_r50")
    assert (det.role, rec.role) == ("detector", "recognizer")
    for single in (det, rec):
        assert single.archive == pack.archive and single.urls == pack.urls
        assert single.licence == pack.licence
        assert len(single.files) == 1 and single.files[0] in pack.files


def test_exact_asset_urls() -> None:
    assert get_entry("scrfd_2.5g").urls == (f"{FF}/models-3.0.0/scrfd_2.5g.onnx",)
    assert get_entry("gfpgan_1.4").urls == (f"{FF}/models-3.0.0/gfpgan_1.4.onnx",)
    assert get_entry("xseg_1").urls == (f"{FF}/models-3.1.0/xseg_1.onnx",)
    assert get_entry("bisenet_resnet_34").urls == (f"{FF}/models-3.0.0/bisenet_resnet_34.onnx",)
    assert get_entry("GPEN-BFR-512").urls == (
        "https://github.com/harisreedhar/Face-Upscalers-ONNX/releases/download/GPEN-BFR/GPEN-BFR-512.onnx",
    )


def test_licences() -> None:
    assert "non-commercial" in get_entry("inswapper_128").licence
    assert "non-commercial" in get_entry("buffalo_l").licence
    assert "Apache-2.0" in get_entry("gfpgan_1.4").licence


def test_get_entry_unknown_lists_known_names() -> None:
    with pytest.raises(ModelMissingError) as info:
        get_entry("inswapper_256")
    text = info.value.user_message()
    assert "inswapper_256" in text and "inswapper_128" in text and "buffalo_l" in text


def test_entry_for_file_prefers_the_most_specific_entry() -> None:
    assert entry_for_file("det_10g.onnx").name == "det_10g"
    assert entry_for_file("2d106det.onnx").name == "buffalo_l"
    assert entry_for_file("inswapper_128.onnx").name == "inswapper_128"
    with pytest.raises(ModelMissingError):
        entry_for_file("nope.onnx")


def test_custom_catalogue_lookup() -> None:
    fake = (dataclasses.replace(get_entry("inswapper_128"), name="fake"),)
    assert get_entry("fake", fake) is fake[0]
    with pytest.raises(ModelMissingError):
        get_entry("inswapper_128", fake)


def test_default_set_is_swapper_plus_insightface_pack() -> None:
    defaults: tuple[ModelEntry, ...] = default_entries()
    assert {e.name for e in defaults} == {"inswapper_128", "buffalo_l"}
    assert get_entry("buffalo_l").total_size == sum(PINNED[f][0] for f in (
        "det_10g.onnx", "w600k_r50.onnx", "2d106det.onnx", "1k3d68.onnx"))  # fmt: skip
    assert get_entry("scrfd_2.5g").total_size is None


# The swap models, straight from docs/model-contracts.md ("Face swappers"): pinned SHA-256s, the
# publisher's CRC-32 where its page shows it, and where each checksum is read otherwise.
SWAPPER_SHA256 = {
    "hyperswap_1a_256.onnx": (
        402_742_682,
        "c0e98a8a03a238f461ed3d2570e426b49f46745ee400854a60dceeb70c246add",
    ),
    "reswapper_128.onnx": (554_298_280, "744eaa30a6a3bdeb693c3c127b2c9ce6f2ea763f245b92ea71ea98b3a38b0fec"),
    "reswapper_256.onnx": (554_298_280, "a87d3cbe281037133f1be765d14e164fe071e55fe2488887b789c39cc59cecd6"),
}
SWAPPER_CRC32 = {"blendswap_256.onnx": "6a424cf7", "crossface_ghost.onnx": "6cabb296"}
FACEFUSION_RELEASE = {
    "hyperswap_1b_256.onnx": "models-3.3.0",
    "hyperswap_1c_256.onnx": "models-3.3.0",
    "simswap_256.onnx": "models-3.0.0",
    "simswap_unofficial_512.onnx": "models-3.0.0",
    "ghost_1_256.onnx": "models-3.0.0",
    "ghost_2_256.onnx": "models-3.0.0",
    "ghost_3_256.onnx": "models-3.0.0",
    "hififace_unofficial_256.onnx": "models-3.1.0",
    "blendswap_256.onnx": "models-3.0.0",
    "uniface_256.onnx": "models-3.0.0",
    "crossface_ghost.onnx": "models-3.4.0",
    "crossface_simswap.onnx": "models-3.4.0",
    "crossface_hififace.onnx": "models-3.4.0",
}


def test_the_swap_models_carry_their_documented_checks() -> None:
    files = {f.name: f for e in CATALOGUE if e.role in ("swapper", "converter") for f in e.files}
    for name, (size, sha) in SWAPPER_SHA256.items():
        assert (files[name].size, files[name].sha256) == (size, sha)
    for name, release in FACEFUSION_RELEASE.items():
        f = files[name]
        assert f.sha256 is None and f.crc32 == SWAPPER_CRC32.get(name)
        stem = name.removesuffix(".onnx")
        assert f.crc32_urls == (
            f"{FF}/{release}/{stem}.hash",
            f"https://huggingface.co/facefusion/{release}/resolve/main/{stem}.hash",
        )
        entry = next(e for e in CATALOGUE if f in e.files)
        assert entry.urls[0] == f"{FF}/{release}/{name}"


def test_each_swapper_that_needs_a_converter_requires_it_and_every_requirement_exists() -> None:
    needs = {
        "simswap_256": ("crossface_simswap",),
        "simswap_unofficial_512": ("crossface_simswap",),
        "ghost_1_256": ("crossface_ghost",),
        "ghost_2_256": ("crossface_ghost",),
        "ghost_3_256": ("crossface_ghost",),
        "hififace_unofficial_256": ("crossface_hififace",),
    }
    for entry in CATALOGUE:
        assert entry.requires == needs.get(entry.name, ()), entry.name
        for required in entry.requires:
            assert get_entry(required).role == "converter"
