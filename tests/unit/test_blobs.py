from pathlib import Path

import pytest

from baton.errors import BlobNotFoundError, IntegrityError, InvalidRefError
from baton.identity import sha256_ref
from baton.store.blobs import BlobStore


def test_put_get_roundtrip_and_dedup(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    ref = blobs.put(b"hello")
    assert ref == sha256_ref(b"hello")
    assert blobs.put(b"hello") == ref
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1
    assert blobs.get(ref) == b"hello"
    assert blobs.total_bytes() == 5


def test_no_temp_files_left(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    for i in range(20):
        blobs.put(str(i).encode())
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_corrupt_blob_is_detected_on_read(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    ref = blobs.put(b"original")
    path = next(p for p in tmp_path.rglob("*") if p.is_file())
    path.write_bytes(b"tampered")
    with pytest.raises(IntegrityError, match="corrupt"):
        blobs.get(ref)


def test_missing_blob(tmp_path: Path) -> None:
    with pytest.raises(BlobNotFoundError):
        BlobStore(tmp_path).get(sha256_ref(b"never stored"))


@pytest.mark.parametrize("bad", ["../../etc/passwd", "sha256:../../" + "a" * 58, "/etc/passwd", "sha256:" + "G" * 64])
def test_path_like_refs_never_touch_the_file_system(tmp_path: Path, bad: str) -> None:
    blobs = BlobStore(tmp_path / "root")
    with pytest.raises(InvalidRefError):
        blobs.get(bad)
    with pytest.raises(InvalidRefError):
        blobs.has(bad)
