"""ModelStore: locating, verifying (with a hash cache) and reporting model files."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import platformdirs
import pytest

import models.files.store as store_mod
from models.errors import ModelHashError, ModelMissingError
from models.files.catalogue import ModelEntry, ModelFile
from models.files.commands import list_models, print_models_path, verify_models
from models.files.store import ModelStore, default_models_dir

GOOD = b"onnx-model-bytes " * 1000
SHA = hashlib.sha256(GOOD).hexdigest()


def _tiny_onnx() -> bytes:
    """A real (if trivial) ONNX model: what an unpinned download must at least be."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "loose", [x], [y])
    return onnx.helper.make_model(graph).SerializeToString()


LOOSE = _tiny_onnx()


def _entry(name: str, files: tuple[ModelFile, ...], archive: str | None = None) -> ModelEntry:
    return ModelEntry(
        name=name, role="swapper", files=files, urls=("https://example.invalid/" + name,), archive=archive,
        licence="test licence", licence_url="https://example.invalid/l", description=name, default=False,
    )  # fmt: skip


CAT = (
    _entry("swap", (ModelFile("swap.onnx", SHA, len(GOOD)),)),
    _entry("loose", (ModelFile("loose.onnx", None, None),)),
    _entry(
        "pack",
        (ModelFile("p1.onnx", SHA, len(GOOD)), ModelFile("p2.onnx", SHA, len(GOOD))),
        archive="pack.zip",
    ),
)


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    s = ModelStore(tmp_path / "models", catalogue=CAT)
    s.models_dir.mkdir()
    return s


def put(store: ModelStore, name: str, data: bytes) -> Path:
    path = store.path_for(name)
    path.write_bytes(data)
    return path


class CountingHash:
    def __init__(self) -> None:
        self.calls: list[Path] = []
        self.real = store_mod.sha256_file

    def __call__(self, path: Path) -> str:
        self.calls.append(path)
        return self.real(path)


# ---- folder ----------------------------------------------------------------------------------------


def test_default_models_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FACECAST_MODELS_DIR", str(tmp_path / "elsewhere"))
    assert default_models_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("FACECAST_MODELS_DIR")
    assert default_models_dir() == Path(platformdirs.user_cache_dir("FaceCast")) / "models"


# ---- resolve ---------------------------------------------------------------------------------------


def test_resolve_ok_by_entry_and_file_name(store: ModelStore) -> None:
    path = put(store, "swap.onnx", GOOD)
    assert store.resolve("swap") == path
    assert store.resolve("swap.onnx") == path


def test_resolve_missing_is_actionable(store: ModelStore) -> None:
    with pytest.raises(ModelMissingError) as info:
        store.resolve("swap")
    text = info.value.user_message()
    assert "swap.onnx" in text and SHA in text and str(store.models_dir) in text
    assert "python main.py models download swap" in text
    assert "\n" not in text


def test_resolve_truncated(store: ModelStore) -> None:
    put(store, "swap.onnx", GOOD[:100])
    with pytest.raises(ModelHashError) as info:
        store.resolve("swap")
    text = info.value.user_message()
    assert "truncated" in text and f"{len(GOOD):,}" in text and "100 bytes" in text


def test_short_file_is_used_when_unverified_allowed(tmp_path: Path) -> None:
    # A user-vouched file of another size (e.g. a test double) is used; the session factory
    # still rejects one that is really cut short.
    s = ModelStore(tmp_path, allow_unverified=True, catalogue=CAT)
    (tmp_path / "swap.onnx").write_bytes(GOOD[:100])
    assert s.resolve("swap") == tmp_path / "swap.onnx"


def test_resolve_wrong_hash_with_and_without_allow_unverified(store: ModelStore) -> None:
    bad = bytes(reversed(GOOD))  # same size, different content
    path = put(store, "swap.onnx", bad)
    with pytest.raises(ModelHashError) as info:
        store.resolve("swap")
    text = info.value.user_message()
    assert SHA in text and hashlib.sha256(bad).hexdigest() in text

    lenient = ModelStore(store.models_dir, allow_unverified=True, catalogue=CAT)
    assert lenient.resolve("swap") == path


def test_resolve_unpinned_file_is_accepted(store: ModelStore) -> None:
    path = put(store, "loose.onnx", LOOSE)
    assert store.resolve("loose") == path


@pytest.mark.parametrize(
    "content",
    [b"<!DOCTYPE html><html>Sign in to continue</html>", LOOSE[: len(LOOSE) // 2]],
    ids=["web page", "cut short"],
)
def test_an_unpinned_file_that_is_not_a_model_is_damaged_and_says_how_to_fix_it(
    store: ModelStore, content: bytes
) -> None:
    """A file without a published hash that is no ONNX model (a login page, a body cut off by a
    dropped connection) is reported damaged, with the `models download` that replaces it."""
    put(store, "loose.onnx", content)
    assert store.check(CAT[1].files[0]).status == "corrupt"
    lenient = ModelStore(store.models_dir, allow_unverified=True, catalogue=CAT)
    for s in (store, lenient):  # unusable even when the user vouches for odd files
        with pytest.raises(ModelHashError) as info:
            s.resolve("loose")
        text = info.value.user_message()
        assert "loose.onnx" in text and "damaged" in text and "models download loose" in text


def test_verify_reads_every_byte_again(store: ModelStore) -> None:
    """`models verify` hashes every file again: a byte changed with the file's time kept fails."""
    path = put(store, "swap.onnx", GOOD)
    assert store.check(CAT[0].files[0]).status == "ok"  # caches the hash
    st = path.stat()
    path.write_bytes(b"X" + GOOD[1:])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert store.check(CAT[0].files[0]).status == "ok"  # the quick check trusts the cache ...
    results = {r.name: r.status for r in store.verify_all()}
    assert results["swap.onnx"] == "mismatch"  # ... verify does not


def test_hints_name_the_models_folder_when_it_is_not_the_default(store: ModelStore) -> None:
    """The hint names --models-dir when the folder is not the default, so following it downloads
    into the folder the run reads."""
    with pytest.raises(ModelMissingError) as info:
        store.resolve("swap")
    assert f"models download swap --models-dir {store.models_dir}" in info.value.user_message()
    default = ModelStore(default_models_dir(), catalogue=CAT)
    with pytest.raises(ModelMissingError) as info:
        default.resolve("swap")
    assert "--models-dir" not in info.value.user_message()


def test_a_models_dir_with_a_tilde_is_the_home_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ModelStore(Path("~/FaceCast models")).models_dir == tmp_path / "FaceCast models"


def test_resolve_unknown_and_multi_file_names(store: ModelStore) -> None:
    with pytest.raises(ModelMissingError) as info:
        store.resolve("nothing.onnx")
    assert "swap.onnx" in info.value.user_message()
    with pytest.raises(ValueError, match=r"p1\.onnx"):
        store.resolve("pack")
    put(store, "p1.onnx", GOOD)
    with pytest.raises(ModelMissingError, match=r"p2\.onnx"):
        store.resolve_entry("pack")
    put(store, "p2.onnx", GOOD)
    assert store.resolve_entry("pack") == (store.path_for("p1.onnx"), store.path_for("p2.onnx"))


# ---- hash cache ------------------------------------------------------------------------------------


def test_hash_cache_avoids_rehashing(store: ModelStore, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = CountingHash()
    monkeypatch.setattr(store_mod, "sha256_file", counter)
    path = put(store, "swap.onnx", GOOD)

    store.resolve("swap")
    store.resolve("swap")
    ModelStore(store.models_dir, catalogue=CAT).resolve("swap")  # a new start reads the sidecar
    assert len(counter.calls) == 1

    sidecar = json.loads((store.models_dir / ".verified.json").read_text())
    st = path.stat()
    assert sidecar["swap.onnx"] == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": SHA}

    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # file touched: hash again
    store.resolve("swap")
    assert len(counter.calls) == 2


def test_hash_cache_cannot_hide_a_replaced_file(store: ModelStore) -> None:
    path = put(store, "swap.onnx", GOOD)
    store.resolve("swap")
    st = path.stat()
    path.write_bytes(bytes(reversed(GOOD)))  # same size; mtime changes with the write
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    with pytest.raises(ModelHashError):
        store.resolve("swap")


def test_corrupt_sidecar_is_ignored(store: ModelStore, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = CountingHash()
    monkeypatch.setattr(store_mod, "sha256_file", counter)
    put(store, "swap.onnx", GOOD)
    (store.models_dir / ".verified.json").write_text("{not json")
    assert store.resolve("swap") == store.path_for("swap.onnx")
    assert len(counter.calls) == 1
    assert "swap.onnx" in json.loads((store.models_dir / ".verified.json").read_text())


# ---- user-supplied file ----------------------------------------------------------------------------


def test_resolve_user_file_accepts_any_file_and_reports_its_hash(store: ModelStore, tmp_path: Path) -> None:
    mine = tmp_path / "downloads" / "my_swapper.onnx"
    mine.parent.mkdir()
    mine.write_bytes(b"something else entirely")
    path, sha = store.resolve_user_file(mine)
    assert path == mine
    assert sha == hashlib.sha256(b"something else entirely").hexdigest()
    with pytest.raises(ModelMissingError, match="does not exist"):
        store.resolve_user_file(tmp_path / "nope.onnx")


# ---- verify_all and commands -----------------------------------------------------------------------


def test_verify_all_reports_every_status(store: ModelStore) -> None:
    put(store, "swap.onnx", GOOD)
    put(store, "loose.onnx", LOOSE)
    put(store, "p1.onnx", GOOD[:-1])
    put(store, "p2.onnx", bytes(reversed(GOOD)))
    results = {r.name: r for r in store.verify_all()}
    assert {n: r.status for n, r in results.items()} == {
        "swap.onnx": "ok",
        "loose.onnx": "unpinned",
        "p1.onnx": "truncated",
        "p2.onnx": "mismatch",
    }
    assert hashlib.sha256(LOOSE).hexdigest() in results["loose.onnx"].detail
    assert results["p2.onnx"].path == store.path_for("p2.onnx")

    store.path_for("swap.onnx").unlink()
    assert {r.name: r.status for r in store.verify_all()}["swap.onnx"] == "missing"


def test_verify_models_exit_code(store: ModelStore) -> None:
    put(store, "swap.onnx", GOOD)
    out = io.StringIO()
    assert verify_models(store, out) == 0  # missing files are listed, not failures
    assert "ok" in out.getvalue() and "missing" in out.getvalue()

    put(store, "p1.onnx", GOOD[:10])
    out = io.StringIO()
    assert verify_models(store, out) == 1
    assert "p1.onnx" in out.getvalue().splitlines()[-1]


def test_list_models_table(store: ModelStore) -> None:
    put(store, "swap.onnx", GOOD)
    put(store, "loose.onnx", LOOSE)
    put(store, "p1.onnx", GOOD)
    out = io.StringIO()
    assert list_models(store, out) == 0
    rows = {line.split()[0]: line for line in out.getvalue().splitlines() if line.strip()}
    assert "installed" in rows["swap"] and "test licence" in rows["swap"]
    assert f"{len(GOOD) / 1e6:.1f}" in rows["swap"]
    assert "unverified" in rows["loose"] and "?" in rows["loose"]
    assert "missing" in rows["pack"]


def test_print_models_path(store: ModelStore) -> None:
    out = io.StringIO()
    assert print_models_path(store, out) == 0
    assert out.getvalue().strip() == str(store.models_dir)


def test_a_read_only_models_folder_is_hashed_once_not_at_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a shared, read-only models folder the hash cache goes to the user's cache, so a model
    is hashed once, not at every check (the control panel checks at start-up and at each Start)."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "swap.onnx").write_bytes(GOOD)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    real_write = store_mod.write_json_atomic

    def write(path: Path, data: object) -> None:
        if Path(path).parent == folder:
            raise PermissionError(13, "Read-only file system")  # root ignores chmod: refuse here
        real_write(path, data)

    hashed: list[Path] = []
    real_hash = store_mod.sha256_file

    def counting_hash(path: Path) -> str:
        hashed.append(path)
        return real_hash(path)

    monkeypatch.setattr(store_mod, "write_json_atomic", write)
    monkeypatch.setattr(store_mod, "sha256_file", counting_hash)
    for _ in range(3):  # a fresh store each time, as each check makes one
        assert ModelStore(folder, catalogue=CAT).check(CAT[0].files[0]).status == "ok"
    assert len(hashed) == 1
    (folder / "swap.onnx").write_bytes(GOOD[::-1])  # changed on disk: hashed again, and found wrong
    assert ModelStore(folder, catalogue=CAT).check(CAT[0].files[0]).status == "mismatch"
    assert len(hashed) == 2
