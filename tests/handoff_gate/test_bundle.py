"""Portable bundles: exact round trips, and every malformed bundle refused with nothing imported."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from baton.bundle import (
    MANIFEST_NAME,
    BundleLimits,
    BundleSchemaVersionError,
    export_run,
    reachable_refs,
)
from baton.bundle_admission import import_bundle, verify_bundle
from baton.checkpoints import restore
from baton.errors import (
    BundleConflictError,
    BundleDuplicateMemberError,
    BundleError,
    BundleManifestError,
    BundleMemberNameError,
    BundleMemberTypeError,
    BundlePlacementError,
    BundleTamperedError,
    BundleTooLargeError,
    BundleTruncatedError,
    NonExportableStateError,
)
from baton.identity import canonical_json, sha256_ref
from baton.models import Placement, PortabilityConstraints
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_blobs, open_store

from builders.checkpoints import chain, seed_run
from builders.records import parts, placement

HEX = "ab" * 32


@dataclass
class Home:
    """One BATON_HOME: an SQLite store and its blob store."""

    root: Path
    store: SqlStore
    blobs: BlobStore

    def is_empty(self) -> bool:
        return self.store.list_runs() == [] and not any(p for p in self.blobs.root.rglob("*") if p.is_file())


def open_home(root: Path) -> Home:
    root.mkdir(parents=True, exist_ok=True)
    return Home(root, open_store("sqlite:///" + str(root / "baton.db")), open_blobs(root))


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Home]:
    home = open_home(tmp_path / "source")
    yield home
    home.store.close()


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Home]:
    home = open_home(tmp_path / "target")
    yield home
    home.store.close()


@pytest.fixture
def bundle(source: Home, tmp_path: Path) -> Path:
    seed_run(source.store, source.blobs, 3)
    return export_run(source.store, source.blobs, "run-1", tmp_path / "run-1.bundle").path


HERE = placement("eu-2")


# -- building bundles by hand -----------------------------------------------------------


def members_of(path: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(path, "r:") as tar:
        return [(info.name, tar.extractfile(info).read()) for info in tar.getmembers()]  # type: ignore[union-attr]


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, b""


def write_tar(path: Path, entries: Sequence[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def rebuilt(path: Path, out: Path, *, extra: Sequence[tuple[tarfile.TarInfo, bytes]] = (), edit=None) -> Path:  # type: ignore[no-untyped-def]
    members = members_of(path)
    if edit is not None:
        members = edit(members)
    return write_tar(out, [regular(name, data) for name, data in members] + list(extra))


def edit_manifest(path: Path, out: Path, change) -> Path:  # type: ignore[no-untyped-def]
    def edit(members: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        manifest = json.loads(members[0][1])
        change(manifest)
        return [(MANIFEST_NAME, canonical_json(manifest))] + members[1:]

    return rebuilt(path, out, edit=edit)


def refused(target: Home, path: Path, error: type[BundleError], match: str, *, where: Placement | None = HERE, limits: BundleLimits = BundleLimits()) -> None:
    with pytest.raises(error, match=match):
        import_bundle(target.store, target.blobs, path, placement=where, limits=limits)
    assert target.is_empty(), "a refused bundle must import nothing"


# -- round trip ----------------------------------------------------------------------------


def test_round_trip_into_a_fresh_home_reproduces_every_hash(source: Home, target: Home, bundle: Path, tmp_path: Path) -> None:
    report = import_bundle(target.store, target.blobs, bundle, placement=HERE)
    original = source.store.list_checkpoints("run-1")
    copied = target.store.list_checkpoints("run-1")
    assert [c.checkpoint_hash for c in copied] == [c.checkpoint_hash for c in original]
    assert report.created_run and report.imported == tuple(c.checkpoint_id for c in original)
    assert report.blobs_written == len(reachable_refs(original, source.blobs))
    for checkpoint in copied:
        assert restore(target.blobs, checkpoint) == restore(source.blobs, checkpoint)
    assert target.store.get_run("run-1").placement == "eu-2"
    again = export_run(target.store, target.blobs, "run-1", tmp_path / "again.bundle")
    assert again.path.read_bytes() == bundle.read_bytes()  # export is deterministic


def test_import_is_idempotent(target: Home, bundle: Path) -> None:
    import_bundle(target.store, target.blobs, bundle, placement=HERE)
    second = import_bundle(target.store, target.blobs, bundle, placement=HERE)
    assert second.imported == () and not second.created_run and second.blobs_written == 0
    assert len(second.already_present) == 3
    assert len(target.store.list_checkpoints("run-1")) == 3


def test_import_extends_a_run_that_holds_a_prefix(source: Home, target: Home, bundle: Path) -> None:
    first = source.store.list_checkpoints("run-1")[0]
    target.store.create_run("run-1", first.run_kind, first.release_id, "eu-2")
    for ref in reachable_refs([first], source.blobs):
        target.blobs.put(source.blobs.get(ref))
    target.store.append_checkpoint(first)
    report = import_bundle(target.store, target.blobs, bundle, placement=HERE)
    assert report.already_present == ("run-1/000000",) and report.imported == ("run-1/000001", "run-1/000002")


def test_unconstrained_run_imports_without_a_placement(target: Home, bundle: Path) -> None:
    assert import_bundle(target.store, target.blobs, bundle, placement=None).run_id == "run-1"


def test_round_trip_into_postgres(bundle: Path, tmp_path: Path, postgres_url: str) -> None:
    store = open_store(postgres_url)
    try:
        blobs = open_blobs(tmp_path / "pg-home")
        import_bundle(store, blobs, bundle, placement=HERE)
        assert [c.checkpoint_hash for c in store.list_checkpoints("run-1")] == [
            c.checkpoint_hash for c in verify_bundle(bundle, placement=HERE).checkpoints
        ]
    finally:
        store.close()


# -- export refusals -----------------------------------------------------------------------


def test_non_exportable_state_is_not_exported_by_default(source: Home, tmp_path: Path) -> None:
    seed_run(source.store, source.blobs, 2, base=parts(constraints=PortabilityConstraints(contains_non_exportable_state=True)))
    with pytest.raises(NonExportableStateError, match="non-exportable"):
        export_run(source.store, source.blobs, "run-1", tmp_path / "x.bundle")
    assert not (tmp_path / "x.bundle").exists()


def test_export_refuses_a_run_with_a_missing_blob(source: Home, tmp_path: Path) -> None:
    checkpoints = seed_run(source.store, source.blobs, 2)
    digest = checkpoints[-1].task_state_ref.removeprefix("sha256:")
    (source.blobs.root / digest[:2] / digest[2:]).unlink()
    with pytest.raises(Exception, match="missing"):
        export_run(source.store, source.blobs, "run-1", tmp_path / "x.bundle")
    assert not (tmp_path / "x.bundle").exists()


# -- attacks: each refused with a specific error, nothing imported ----------------------------


def test_truncated_inside_a_member(target: Home, bundle: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.bundle"
    cut.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2 + 100])
    refused(target, cut, BundleTruncatedError, "ends early|cut short|lacks")


def test_truncated_at_a_member_boundary(target: Home, bundle: Path, tmp_path: Path) -> None:
    out = rebuilt(bundle, tmp_path / "short.bundle", edit=lambda members: members[:-2])
    refused(target, out, BundleTruncatedError, "lacks 2 listed blob")


def test_truncated_to_almost_nothing(target: Home, bundle: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.bundle"
    cut.write_bytes(bundle.read_bytes()[:100])
    refused(target, cut, BundleTruncatedError, "ends early")


def test_flipped_byte_in_a_blob(target: Home, bundle: Path, tmp_path: Path) -> None:
    def flip(members: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        name, data = members[1]
        return [members[0], (name, bytes([data[0] ^ 1]) + data[1:])] + members[2:]

    refused(target, rebuilt(bundle, tmp_path / "flip.bundle", edit=flip), BundleTamperedError, "hashes to")


def test_flipped_byte_in_the_raw_file(target: Home, bundle: Path, tmp_path: Path) -> None:
    raw = bytearray(bundle.read_bytes())
    with tarfile.open(bundle, "r:") as tar:
        last = tar.getmembers()[-1]
    raw[last.offset_data] ^= 0xFF  # first data byte of the last blob; the tar headers stay intact
    tampered = tmp_path / "raw.bundle"
    tampered.write_bytes(bytes(raw))
    refused(target, tampered, BundleTamperedError, "hashes to")


def test_flipped_byte_in_a_member_header(target: Home, bundle: Path, tmp_path: Path) -> None:
    raw = bytearray(bundle.read_bytes())
    with tarfile.open(bundle, "r:") as tar:
        second = tar.getmembers()[1]
    raw[second.offset + 3] ^= 0x01  # inside the member's name: its header checksum no longer matches
    tampered = tmp_path / "header.bundle"
    tampered.write_bytes(bytes(raw))
    with pytest.raises(BundleError) as caught:
        import_bundle(target.store, target.blobs, tampered, placement=HERE)
    assert isinstance(caught.value, (BundleTruncatedError, BundleTamperedError))
    assert target.is_empty()


def test_edited_checkpoint_in_the_manifest(target: Home, bundle: Path, tmp_path: Path) -> None:
    def change(manifest: dict) -> None:  # type: ignore[type-arg]
        manifest["checkpoints"][1]["owner_epoch"] = 99

    refused(target, edit_manifest(bundle, tmp_path / "m.bundle", change), BundleTamperedError, "does not match")


def test_resealed_checkpoint_that_breaks_the_chain(target: Home, bundle: Path, tmp_path: Path) -> None:
    from baton.models import ExecutionCheckpoint

    def change(manifest: dict) -> None:  # type: ignore[type-arg]
        body = dict(manifest["checkpoints"][1], owner_epoch=99)
        body["checkpoint_hash"] = ExecutionCheckpoint.compute_hash(body)
        manifest["checkpoints"][1] = body

    refused(target, edit_manifest(bundle, tmp_path / "m.bundle", change), BundleTamperedError, "does not link to its parent")


def test_blob_size_in_the_manifest_lies(target: Home, bundle: Path, tmp_path: Path) -> None:
    def change(manifest: dict) -> None:  # type: ignore[type-arg]
        manifest["blobs"][0]["size"] += 1

    refused(target, edit_manifest(bundle, tmp_path / "m.bundle", change), BundleTamperedError, "the manifest says")


def test_unlisted_blob(target: Home, bundle: Path, tmp_path: Path) -> None:
    data = b"smuggled"
    extra = regular(sha256_ref(data).removeprefix("sha256:"), data)
    refused(target, rebuilt(bundle, tmp_path / "x.bundle", extra=[extra]), BundleTamperedError, "does not list")


def test_listed_but_unreachable_blob(target: Home, bundle: Path, tmp_path: Path) -> None:
    data = b"smuggled"
    ref = sha256_ref(data)

    def edit(members: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        manifest = json.loads(members[0][1])
        manifest["blobs"].append({"ref": ref, "size": len(data)})
        return [(MANIFEST_NAME, canonical_json(manifest))] + members[1:] + [(ref.removeprefix("sha256:"), data)]

    refused(target, rebuilt(bundle, tmp_path / "x.bundle", edit=edit), BundleTamperedError, "no checkpoint reaches")


def test_trailing_data_after_the_archive(target: Home, bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "trail.bundle"
    out.write_bytes(bundle.read_bytes() + b"\0" * 512 + b"more")
    refused(target, out, BundleTamperedError, "trailing data")


def test_not_a_tar_archive(target: Home, tmp_path: Path) -> None:
    out = tmp_path / "junk.bundle"
    out.write_bytes(b"x" * 2048)
    refused(target, out, BundleManifestError, "not a readable bundle")


def test_missing_manifest(target: Home, tmp_path: Path) -> None:
    out = write_tar(tmp_path / "nomanifest.bundle", [regular(sha256_ref(b"a").removeprefix("sha256:"), b"a")])
    refused(target, out, BundleManifestError, "no manifest.json")


def test_manifest_that_is_not_json(target: Home, tmp_path: Path) -> None:
    out = write_tar(tmp_path / "badmanifest.bundle", [regular(MANIFEST_NAME, b"{nope")])
    refused(target, out, BundleManifestError, "manifest is invalid")


@pytest.mark.parametrize(
    "name",
    ["../" + HEX, "/" + HEX, "/etc/passwd", "blobs/" + HEX, HEX.upper(), HEX[:-1], HEX + ".json", "./" + MANIFEST_NAME, "sha256:" + HEX],
)
def test_path_like_or_unknown_member_names(target: Home, bundle: Path, tmp_path: Path, name: str) -> None:
    out = rebuilt(bundle, tmp_path / "name.bundle", extra=[regular(name, b"x")])
    refused(target, out, BundleMemberNameError, "is not allowed")


@pytest.mark.parametrize(
    ("kind", "label"),
    [
        (tarfile.SYMTYPE, "symlink"),
        (tarfile.LNKTYPE, "hard link"),
        (tarfile.CHRTYPE, "character device"),
        (tarfile.BLKTYPE, "block device"),
        (tarfile.FIFOTYPE, "fifo"),
        (tarfile.DIRTYPE, "directory"),
    ],
)
def test_links_devices_and_directories(target: Home, bundle: Path, tmp_path: Path, kind: bytes, label: str) -> None:
    out = rebuilt(bundle, tmp_path / "link.bundle", extra=[special(HEX, kind, linkname="/etc/passwd")])
    refused(target, out, BundleMemberTypeError, label)


def test_symlinked_manifest(target: Home, tmp_path: Path) -> None:
    out = write_tar(tmp_path / "l.bundle", [special(MANIFEST_NAME, tarfile.SYMTYPE, "/etc/passwd")])
    refused(target, out, BundleMemberTypeError, "symlink")


def test_bundle_path_that_is_a_symlink(target: Home, bundle: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.bundle"
    link.symlink_to(bundle)
    refused(target, link, BundleMemberTypeError, "not a regular file")


def test_duplicate_blob_member(target: Home, bundle: Path, tmp_path: Path) -> None:
    out = rebuilt(bundle, tmp_path / "dup.bundle", edit=lambda members: members + [members[1]])
    refused(target, out, BundleDuplicateMemberError, "more than once")


def test_duplicate_manifest(target: Home, bundle: Path, tmp_path: Path) -> None:
    out = rebuilt(bundle, tmp_path / "dup.bundle", edit=lambda members: members + [members[0]])
    refused(target, out, BundleDuplicateMemberError, "manifest.json")


def test_oversized_bundle_file(target: Home, bundle: Path) -> None:
    refused(target, bundle, BundleTooLargeError, "the limit is", limits=BundleLimits(max_bundle_bytes=1024))


def test_oversized_member(target: Home, bundle: Path) -> None:
    refused(target, bundle, BundleTooLargeError, "member .* bytes; the limit", limits=BundleLimits(max_member_bytes=200))


def test_oversized_total(target: Home, bundle: Path) -> None:
    refused(target, bundle, BundleTooLargeError, "add up to more than", limits=BundleLimits(max_total_member_bytes=4000))


def test_too_many_members(target: Home, bundle: Path) -> None:
    refused(target, bundle, BundleTooLargeError, "more than 3 members", limits=BundleLimits(max_members=3))


def test_newer_schema_version_is_refused(target: Home, bundle: Path, tmp_path: Path) -> None:
    def change(manifest: dict) -> None:  # type: ignore[type-arg]
        manifest["checkpoints"][0]["schema_version"] = "4"

    refused(target, edit_manifest(bundle, tmp_path / "v4.bundle", change), BundleSchemaVersionError, "'4' is unknown")


def test_collision_with_a_different_stored_checkpoint(source: Home, target: Home, bundle: Path, tmp_path: Path) -> None:
    other = chain(target.blobs, 1, base=parts(task="another task"))
    target.store.create_run("run-1", other[0].run_kind, other[0].release_id, "eu-2")
    target.store.append_checkpoint(other[0])
    runs_before = target.store.list_runs()
    with pytest.raises(BundleConflictError, match="already stored"):
        import_bundle(target.store, target.blobs, bundle, placement=HERE)
    assert target.store.list_runs() == runs_before
    assert target.store.list_checkpoints("run-1") == other


# -- constraints that forbid this placement --------------------------------------------------


def constrained_bundle(source: Home, tmp_path: Path, constraints: PortabilityConstraints) -> Path:
    seed_run(source.store, source.blobs, 2, base=parts(constraints=constraints))
    return export_run(source.store, source.blobs, "run-1", tmp_path / "c.bundle", include_non_exportable=True).path


@pytest.mark.parametrize(
    ("constraints", "where", "reason"),
    [
        (PortabilityConstraints(portable_to_regions=("eu-west",)), placement("us-1", region="us-east"), "region_not_allowed"),
        (PortabilityConstraints(portable_to_providers=("local",)), placement("c-1", provider="cloudco"), "provider_not_allowed"),
        (PortabilityConstraints(contains_non_exportable_state=True), placement("c-1", region="eu-central"), "non_exportable_state"),
        (PortabilityConstraints(requires_hardware_attestation=True), placement("eu-2"), "hardware_attestation_missing"),
        (PortabilityConstraints(portable_to_regions=("eu-west",)), None, "placement_unspecified"),
    ],
)
def test_constraints_forbid_this_placement(
    source: Home, target: Home, tmp_path: Path, constraints: PortabilityConstraints, where: Placement | None, reason: str
) -> None:
    path = constrained_bundle(source, tmp_path, constraints)
    refused(target, path, BundlePlacementError, reason, where=where)


def test_non_exportable_state_may_move_inside_its_trust_domain(source: Home, target: Home, tmp_path: Path) -> None:
    path = constrained_bundle(source, tmp_path, PortabilityConstraints(contains_non_exportable_state=True))
    assert import_bundle(target.store, target.blobs, path, placement=placement("eu-2")).imported
