"""Portable bundles: a run's checkpoints and every blob they reach, in one file.

A bundle is an uncompressed POSIX tar archive whose first member is
`manifest.json` (the run id, each checkpoint in seq order, and the ref and
size of every blob) followed by one regular-file member per blob, named by its
64-hex sha256 digest. Export is deterministic: the same run gives the same
bytes.

Import trusts nothing in the file. It reads the whole archive into memory
under size limits, and refuses path-like or unknown member names, links,
devices, duplicates, truncation, hash mismatches, unlisted or unreachable
blobs, broken checkpoint chains, unreadable schema versions, constraints that
forbid the receiving placement (checked by `baton.bundle_admission`, which
holds the portability and signed-approval rules), and collisions with different checkpoints
already stored. Only when every check passed does it write: file blobs first
(they are content addressed, so a crash leaves nothing meaningful behind),
then the run, its checkpoints and any blobs kept in the store in ONE
transaction, so a failure part way leaves no partial run. Importing the same
bundle twice writes nothing new.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, JsonValue, ValidationError

from baton.checkpoints import restore
from baton.errors import (
    BlobNotFoundError,
    BundleConflictError,
    BundleDuplicateMemberError,
    BundleError,
    BundleManifestError,
    BundleMemberNameError,
    BundleMemberTypeError,
    BundleTamperedError,
    BundleTooLargeError,
    BundleTruncatedError,
    CheckpointIntegrityError,
    IntegrityError,
    NonExportableStateError,
    RecordNotFoundError,
    SchemaVersionError,
)
from baton.identity import REF_PREFIX, canonical_json, hex_of, is_ref, plain_value, sha256_ref
from baton.models import ExecutionCheckpoint, Placement, Record, Ref
from baton.schema_versions import CURRENT_SCHEMA_VERSION, read_checkpoint
from baton import fault_points
from baton.fault_points import KillPoint
from baton.store.base import SqlStore
from baton.store.blobs import Blobs, BlobStore
from baton.store.records import IMPORTED_BUNDLE_KEY
from baton.store.sql_blobs import SqlBlobStore

MANIFEST_NAME = "manifest.json"
BUNDLE_FORMAT = "baton-bundle"
BUNDLE_FORMAT_VERSION = 1
_DIGEST_NAME = re.compile(r"[0-9a-f]{64}")
_NOT_BLOB_FIELDS = frozenset({"checkpoint_hash", "parent_checkpoint_hash", "migrated_from_hash"})
_TAR_BLOCK = 512


class BundleSchemaVersionError(BundleError, SchemaVersionError):
    """A bundle holds checkpoints of a schema version this store cannot take."""


@dataclass(frozen=True)
class BundleLimits:
    """Ceilings an import enforces before it trusts a bundle."""

    max_bundle_bytes: int = 1 << 30
    max_member_bytes: int = 256 << 20
    max_total_member_bytes: int = 1 << 30
    max_members: int = 200_000


class BlobEntry(Record):
    """One blob listed by a bundle manifest."""

    ref: Ref
    size: int = Field(ge=0)


class BundleManifest(Record):
    """What a bundle claims to hold; every claim is checked on import."""

    format: Literal["baton-bundle"] = BUNDLE_FORMAT
    format_version: Literal[1] = BUNDLE_FORMAT_VERSION
    run_id: str = Field(min_length=1)
    checkpoints: tuple[dict[str, JsonValue], ...] = Field(min_length=1)
    blobs: tuple[BlobEntry, ...] = ()


@dataclass(frozen=True)
class ExportReport:
    """What `export_run` wrote."""

    run_id: str
    path: Path
    checkpoint_ids: tuple[str, ...]
    blob_count: int
    bundle_bytes: int


@dataclass(frozen=True)
class ImportReport:
    """What `import_bundle` wrote (nothing new when the run was already there)."""

    run_id: str
    created_run: bool
    imported: tuple[str, ...]
    already_present: tuple[str, ...]
    blobs_written: int


class _MemoryBlobs(BlobStore):
    """A read-only blob view over bytes already held in memory (the bundle's members)."""

    def __init__(self, blobs: Mapping[str, bytes]) -> None:  # no disk root on purpose
        self._blobs = dict(blobs)

    def get(self, ref: str) -> bytes:
        digest = hex_of(ref)
        data = self._blobs.get(REF_PREFIX + digest)
        if data is None:
            raise BlobNotFoundError(f"blob {ref} is not in the bundle")
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(f"blob {ref} in the bundle does not match its hash")
        return data

    def has(self, ref: str) -> bool:
        return REF_PREFIX + hex_of(ref) in self._blobs

    def put(self, data: bytes) -> str:
        raise BundleError("a bundle's blob view is read-only")

    def size(self, ref: str) -> int:
        return len(self.get(ref))


# -- reachability ---------------------------------------------------------------------


def _refs_in(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        if is_ref(value):
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _refs_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs_in(item)


def _checkpoint_roots(checkpoint: ExecutionCheckpoint) -> set[str]:
    body = plain_value(checkpoint)
    return {ref for key, value in body.items() if key not in _NOT_BLOB_FIELDS for ref in _refs_in(value)}


def reachable_refs(checkpoints: Sequence[ExecutionCheckpoint], blobs: BlobStore) -> set[str]:
    """Every blob ref reachable from `checkpoints` through JSON records held by `blobs`.

    A checkpoint's own refs must be present (CheckpointIntegrityError
    otherwise); refs nested inside records are followed when the store holds
    them (an observation's content may live outside the blob store).
    """
    roots: set[str] = set()
    for checkpoint in checkpoints:
        for ref in _checkpoint_roots(checkpoint):
            if not blobs.has(ref):
                raise CheckpointIntegrityError(f"checkpoint {checkpoint.checkpoint_id}: {ref} is missing from the blob store")
            roots.add(ref)
    seen: set[str] = set()
    pending = sorted(roots)
    while pending:
        ref = pending.pop()
        if ref in seen or not blobs.has(ref):
            continue
        seen.add(ref)
        data = blobs.get(ref)
        if data[:1] not in (b"{", b"["):
            continue
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        pending.extend(sorted(set(_refs_in(document)) - seen))
    return seen


# -- export ---------------------------------------------------------------------------


def _tar_member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.type = size, 0, 0o644, tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_atomically(out_path: Path, write: Callable[[io.BufferedWriter], None]) -> None:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=out_path.parent, prefix=".bundle-")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, out_path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def export_run(
    store: SqlStore,
    blobs: BlobStore,
    run_id: str,
    out_path: Path | str,
    *,
    include_non_exportable: bool = False,
) -> ExportReport:
    """Write run `run_id` (all its checkpoints and reachable blobs) to one bundle file.

    Every checkpoint is restored and verified first, so a broken run is never
    exported. State declared non-exportable is refused unless
    `include_non_exportable` is set (for moves inside its trust domain; import
    still enforces the constraint).
    """
    out_path = Path(out_path)
    store.get_run(run_id)
    checkpoints = store.list_checkpoints(run_id)
    if not checkpoints:
        raise BundleError(f"run {run_id!r} has no checkpoints to export")
    if not include_non_exportable:
        sealed = [c.checkpoint_id for c in checkpoints if c.constraints.contains_non_exportable_state]
        if sealed:
            raise NonExportableStateError(
                f"run {run_id!r} holds non-exportable state (checkpoints {', '.join(sealed)}); it may not leave its placement"
            )
    for checkpoint in checkpoints:
        restore(blobs, checkpoint)
    refs = sorted(reachable_refs(checkpoints, blobs))
    contents = {ref: blobs.get(ref) for ref in refs}
    manifest = BundleManifest(
        run_id=run_id,
        checkpoints=tuple(plain_value(c) for c in checkpoints),
        blobs=tuple(BlobEntry(ref=ref, size=len(contents[ref])) for ref in refs),
    )
    manifest_bytes = manifest.canonical()

    def write(handle: io.BufferedWriter) -> None:
        with tarfile.open(fileobj=handle, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            tar.addfile(_tar_member(MANIFEST_NAME, len(manifest_bytes)), io.BytesIO(manifest_bytes))
            for ref in refs:
                data = contents[ref]
                tar.addfile(_tar_member(hex_of(ref), len(data)), io.BytesIO(data))

    _write_atomically(out_path, write)
    return ExportReport(
        run_id=run_id,
        path=out_path,
        checkpoint_ids=tuple(c.checkpoint_id for c in checkpoints),
        blob_count=len(refs),
        bundle_bytes=out_path.stat().st_size,
    )


# -- import: reading ----------------------------------------------------------------


_KIND_NAMES: dict[bytes, str] = {
    tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "fifo",
    tarfile.DIRTYPE: "directory",
}


def _check_member(info: tarfile.TarInfo, seen: Collection[str], limits: BundleLimits) -> None:
    name = info.name
    if name != MANIFEST_NAME and _DIGEST_NAME.fullmatch(name) is None:
        raise BundleMemberNameError(
            f"bundle member {name!r} is not allowed: members are named by a 64-hex digest or {MANIFEST_NAME!r}"
        )
    if not info.isreg() or info.issparse():
        kind = _KIND_NAMES.get(info.type, "non-regular file")
        raise BundleMemberTypeError(f"bundle member {name!r} is a {kind}; only regular files are allowed")
    if name in seen:
        raise BundleDuplicateMemberError(f"bundle member {name!r} appears more than once")
    if info.size > limits.max_member_bytes:
        raise BundleTooLargeError(f"bundle member {name!r} is {info.size} bytes; the limit is {limits.max_member_bytes}")


def _read_members(raw: bytes, limits: BundleLimits) -> tuple[dict[str, bytes], bytes]:
    """The members by name, and whatever follows the point where the archive stopped."""
    members: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            while (info := tar.next()) is not None:
                if len(members) >= limits.max_members:
                    raise BundleTooLargeError(f"bundle has more than {limits.max_members} members")
                _check_member(info, members.keys(), limits)
                total += info.size
                if total > limits.max_total_member_bytes:
                    raise BundleTooLargeError(
                        f"bundle members add up to more than {limits.max_total_member_bytes} bytes"
                    )
                handle = tar.extractfile(info)
                data = b"" if handle is None else handle.read(info.size)
                if len(data) != info.size:
                    raise BundleTruncatedError(f"bundle member {info.name!r} is cut short ({len(data)} of {info.size} bytes)")
                members[info.name] = data
            end = tar.offset
    except tarfile.ReadError as exc:
        text = str(exc)
        if "truncated" in text or "unexpected end" in text or "empty file" in text:
            raise BundleTruncatedError(f"bundle ends early: {text}") from None
        raise BundleManifestError(f"not a readable bundle archive: {text}") from None
    return members, raw[end:]


def _parse_manifest(members: Mapping[str, bytes]) -> BundleManifest:
    data = members.get(MANIFEST_NAME)
    if data is None:
        raise BundleManifestError(f"bundle has no {MANIFEST_NAME}")
    try:
        return BundleManifest.model_validate_json(data)
    except ValidationError as exc:
        raise BundleManifestError(f"bundle manifest is invalid: {exc.error_count()} problem(s): {exc.errors()[0]['msg']}") from None


def _verify_blobs(manifest: BundleManifest, members: Mapping[str, bytes]) -> dict[str, bytes]:
    listed: dict[str, int] = {}
    for entry in manifest.blobs:
        if entry.ref in listed:
            raise BundleManifestError(f"bundle manifest lists blob {entry.ref} twice")
        listed[entry.ref] = entry.size
    present = {REF_PREFIX + name: data for name, data in members.items() if name != MANIFEST_NAME}
    missing = sorted(set(listed) - set(present))
    if missing:
        raise BundleTruncatedError(
            f"bundle lacks {len(missing)} listed blob(s) (cut short or damaged), first {missing[0]}"
        )
    unlisted = sorted(set(present) - set(listed))
    if unlisted:
        raise BundleTamperedError(f"bundle holds {len(unlisted)} blob(s) its manifest does not list, first {unlisted[0]}")
    for ref, data in sorted(present.items()):
        actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
        if actual != ref:
            raise BundleTamperedError(f"bundle blob {ref} hashes to {actual}")
        if len(data) != listed[ref]:
            raise BundleTamperedError(f"bundle blob {ref} is {len(data)} bytes; the manifest says {listed[ref]}")
    return present


def _read_checkpoints(manifest: BundleManifest) -> tuple[ExecutionCheckpoint, ...]:
    checkpoints: list[ExecutionCheckpoint] = []
    for index, document in enumerate(manifest.checkpoints):
        try:
            checkpoint = read_checkpoint(canonical_json(document), CURRENT_SCHEMA_VERSION)
        except SchemaVersionError as exc:
            raise BundleSchemaVersionError(f"bundle checkpoint #{index}: {exc}") from None
        except CheckpointIntegrityError as exc:
            raise BundleTamperedError(f"bundle checkpoint #{index}: {exc}") from None
        except ValidationError as exc:
            raise BundleManifestError(f"bundle checkpoint #{index} is invalid: {exc.errors()[0]['msg']}") from None
        if not isinstance(checkpoint, ExecutionCheckpoint):
            raise BundleSchemaVersionError(
                f"bundle checkpoint #{index} has schema version {checkpoint.schema_version}; "
                f"the store holds version {CURRENT_SCHEMA_VERSION}: migrate it before export"
            )
        checkpoints.append(checkpoint)
    for seq, checkpoint in enumerate(checkpoints):
        previous = checkpoints[seq - 1] if seq else None
        if checkpoint.run_id != manifest.run_id or checkpoint.seq != seq:
            raise BundleManifestError(
                f"bundle checkpoint #{seq} is {checkpoint.checkpoint_id}; expected seq {seq} of run {manifest.run_id!r}"
            )
        expected_parent = None if previous is None else previous.checkpoint_hash
        if checkpoint.parent_checkpoint_hash != expected_parent:
            raise BundleTamperedError(f"bundle checkpoint {checkpoint.checkpoint_id} does not link to its parent")
    return tuple(checkpoints)


def _verify_restorable(
    checkpoints: Sequence[ExecutionCheckpoint], view: _MemoryBlobs
) -> dict[str, Placement]:
    sources: dict[str, Placement] = {}
    for checkpoint in checkpoints:
        try:
            sources[checkpoint.checkpoint_id] = restore(view, checkpoint).parts.placement
        except CheckpointIntegrityError as exc:
            raise BundleManifestError(f"bundle is incomplete: {exc}") from None
    unreachable = sorted(set(view._blobs) - reachable_refs(checkpoints, view))
    if unreachable:
        raise BundleTamperedError(
            f"bundle holds {len(unreachable)} blob(s) no checkpoint reaches, first {unreachable[0]}"
        )
    return sources


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle whose file, blobs and checkpoints passed every integrity check.

    Whether its constraints admit a placement is not decided here
    (`baton.bundle_admission` applies the portability rules before writing).
    """

    manifest: BundleManifest
    manifest_ref: str
    checkpoints: tuple[ExecutionCheckpoint, ...]
    blobs: Mapping[str, bytes]
    sources: Mapping[str, Placement]
    """Checkpoint id -> the placement its state was sealed on."""

    def blob_view(self) -> BlobStore:
        """A read-only blob store over the bundle's own blobs (for checks before anything is written)."""
        return _MemoryBlobs(self.blobs)


def read_bundle(path: Path | str, *, limits: BundleLimits = BundleLimits()) -> VerifiedBundle:
    """Run every integrity check of an import without touching any store; raise a BundleError subclass on failure."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        raise BundleMemberTypeError(f"bundle {path} is not a regular file")
    size = path.stat().st_size
    if size > limits.max_bundle_bytes:
        raise BundleTooLargeError(f"bundle {path} is {size} bytes; the limit is {limits.max_bundle_bytes}")
    members, trailing = _read_members(path.read_bytes(), limits)
    manifest = _parse_manifest(members)
    blobs = _verify_blobs(manifest, members)  # a cut archive shows up here as missing members
    if trailing.strip(b"\0"):
        raise BundleTamperedError(f"bundle has {len(trailing)} bytes after its last member holding trailing data")
    checkpoints = _read_checkpoints(manifest)
    view = _MemoryBlobs(blobs)
    sources = _verify_restorable(checkpoints, view)
    return VerifiedBundle(
        manifest=manifest, manifest_ref=sha256_ref(members[MANIFEST_NAME]), checkpoints=checkpoints, blobs=blobs,
        sources=sources,
    )


# -- import: writing ------------------------------------------------------------------


def _plan_store_writes(store: SqlStore, bundle: VerifiedBundle) -> tuple[bool, list[ExecutionCheckpoint], list[str]]:
    """Which checkpoints are new; refuses any collision before anything is written."""
    run_id = bundle.manifest.run_id
    first = bundle.checkpoints[0]
    try:
        run = store.get_run(run_id)
    except RecordNotFoundError:
        run = None
    if run is not None and run.kind != first.run_kind:
        raise BundleConflictError(f"run {run_id!r} exists in the store as a {run.kind} run; the bundle holds a {first.run_kind} run")
    stored = {c.seq: c for c in store.list_checkpoints(run_id)} if run is not None else {}
    new: list[ExecutionCheckpoint] = []
    present: list[str] = []
    for checkpoint in bundle.checkpoints:
        existing = stored.get(checkpoint.seq)
        if existing is None:
            new.append(checkpoint)
        elif existing.checkpoint_hash == checkpoint.checkpoint_hash:
            present.append(checkpoint.checkpoint_id)
        else:
            raise BundleConflictError(
                f"checkpoint {checkpoint.checkpoint_id} is already stored with hash {existing.checkpoint_hash}; "
                f"the bundle's has {checkpoint.checkpoint_hash}"
            )
    return run is None, new, present


def write_bundle(store: SqlStore, blobs: Blobs, bundle: VerifiedBundle, *, placement_name: str | None) -> ImportReport:
    """Write a verified bundle: blobs, then the run (on `placement_name`) and its new checkpoints, all or nothing.

    Refuses a collision with different stored checkpoints before anything is
    written. The run and every checkpoint commit in ONE store transaction
    (`SqlStore.atomic`): a failure or a crash part way leaves the store as it
    was. Blobs kept in the store's own table go in that same transaction;
    file blobs are written first (content addressed: an interrupted import
    leaves only unreferenced files). Idempotent: checkpoints already stored
    with the same hash are skipped.
    """
    create, new, present = _plan_store_writes(store, bundle)
    in_store = isinstance(blobs, SqlBlobStore) and blobs.store is store
    missing = {ref: data for ref, data in sorted(bundle.blobs.items()) if not blobs.has(ref)}
    if not in_store:
        for data in missing.values():
            blobs.put(data)
    run_id = bundle.manifest.run_id
    with store.atomic():
        create, new, present = _plan_store_writes(store, bundle)  # again, inside the transaction that writes
        if create:
            store.create_run(
                run_id,
                bundle.checkpoints[0].run_kind,
                bundle.checkpoints[-1].release_id,
                placement_name,
                detail={IMPORTED_BUNDLE_KEY: bundle.manifest_ref},
            )
        if in_store and missing and not new:
            store.put_blobs(missing)
        for index, checkpoint in enumerate(new):
            store.append_checkpoint(checkpoint, missing if in_store and index == 0 else None)
            if index == 0:
                fault_points.reached(KillPoint.BUNDLE_ROWS)  # test-only: some rows written, the rest not, nothing committed
    if in_store:
        blobs.mark_stored(missing)
    written = len(missing)
    return ImportReport(
        run_id=run_id,
        created_run=create,
        imported=tuple(c.checkpoint_id for c in new),
        already_present=tuple(present),
        blobs_written=written,
    )
