"""`BatonSaver`: LangGraph's checkpointer interface over Baton's store.

Compile a graph with `checkpointer=BatonSaver(store)` (or
`BatonSaver.from_conn_string(path_or_url)`) instead of LangGraph's own saver.
Each save becomes a sealed Baton checkpoint of the thread's run; channel
values are content-addressed blobs, and a list that only grew is stored as
the items added since its parent. Writes are refused from a fenced epoch,
values outside the allow-list are refused on write and on read, and a
credential in state is refused on save.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from baton.checkpoints import RunParts
from baton.errors import CanonicalEncodingError, StoreError
from baton.identity import canonical_json
from baton.integrations.langgraph import tables
from baton.integrations.langgraph.platform import (
    MANIFEST_KEY,
    default_parts,
    ensure_run,
    manifest_state,
    run_id_for,
    seal,
)
from baton.integrations.langgraph.serde import SafeSerde, UnsafePayloadError
from baton.integrations.langgraph.values import (
    ListMemo,
    decode_value,
    encode_value,
    inline_bytes,
    parse_value_blob,
    value_blob,
    value_ref,
)
from baton.models import ExecutionCheckpoint, PortableRunState
from baton.ownership import LeaseHolder
from baton.secret_scan import ensure_no_secrets
from baton.store.base import SqlStore
from baton.store.core import Tx
from baton.store.factory import open_store
from baton.store.records import Lease
from baton.store.sql_blobs import SqlBlobStore

_CHAIN_RETRIES = 5


def _plain(value: Any) -> Any:
    """A JSON-shaped view of a value for the secret scan (strings kept, structure flattened)."""
    if isinstance(value, str) or value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump())
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is not None:
        return {name: _plain(getattr(value, name)) for name in fields}
    return str(value)


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    return dict(config.get("configurable") or {})


class BatonSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer whose checkpoints are Baton checkpoints (sync and async).

    `store` is an open Baton SQL store (SQLite or PostgreSQL); values go to its
    blob table. `lease` (a `Lease` or `LeaseHolder`) runs that thread under
    Baton ownership: saves carry the lease's epoch and are refused with
    `StaleEpochError` once a newer epoch exists. Without a lease a thread's
    saves carry the epoch this saver first saw for it. `allowed_types` extends
    LangGraph's safe types with the user's own plain-data classes.

    Every channel value, write and metadata is scanned for credentials before
    it is stored, except the channels named in `evidence_channels`: recorded
    evidence (raw observations, fetched documents) that Baton stores as
    content but does not scan, as it does for a run's observation contents.
    """

    def __init__(
        self,
        store: SqlStore,
        *,
        lease: Lease | LeaseHolder | None = None,
        allowed_types: Iterable[type | tuple[str, str]] = (),
        parts: RunParts | None = None,
        scan_secrets: bool = True,
        evidence_channels: Iterable[str] = (),
    ) -> None:
        super().__init__()
        self.store = store
        self.blobs = SqlBlobStore(store)
        self.safe = SafeSerde(allowed_types)
        self.parts = parts or default_parts()
        self.scan_secrets = scan_secrets
        self.evidence_channels = frozenset(evidence_channels)
        self._lock = threading.RLock()
        self._memo = ListMemo()
        self._leases: dict[str, Lease | LeaseHolder] = {}
        self._observed: dict[str, int] = {}
        self._heads: dict[str, ExecutionCheckpoint] = {}
        self._manifests: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._runs: set[str] = set()
        self._announced: set[str] = set()
        tables.setup(store)
        if lease is not None:
            self._leases[self._lease_record(lease).run_id] = lease

    # -- construction -----------------------------------------------------------------------

    @classmethod
    @contextmanager
    def from_conn_string(cls, path_or_url: str | Path, **kwargs: Any) -> Iterator[BatonSaver]:
        """A saver on the SQLite file at a path (or `sqlite:///path`) or a `postgresql://` URL; closed on exit."""
        text = str(path_or_url)
        if text.startswith(("postgresql://", "postgres://", "sqlite:///")):
            store = open_store(text)
        else:
            Path(text).expanduser().parent.mkdir(parents=True, exist_ok=True)
            store = open_store("sqlite:///" + str(Path(text).expanduser()))
        try:
            yield cls(store, **kwargs)
        finally:
            store.close()

    # -- ownership ------------------------------------------------------------------------------

    @staticmethod
    def run_id_for(thread_id: str) -> str:
        """The Baton run id of a LangGraph thread."""
        return run_id_for(thread_id)

    def ensure_run(self, thread_id: str) -> str:
        """Create the thread's Baton run (so a coordinator can grant it) and return its id."""
        return self._ensure_run(thread_id)

    def _ensure_run(self, thread_id: str) -> str:
        run_id = run_id_for(thread_id)
        if run_id not in self._runs:
            ensure_run(self.store, thread_id, self.parts)
            self._runs.add(run_id)
        return run_id

    @staticmethod
    def _lease_record(lease: Lease | LeaseHolder) -> Lease:
        return lease.lease if isinstance(lease, LeaseHolder) else lease

    @contextmanager
    def under_lease(self, lease: Lease | LeaseHolder) -> Iterator[BatonSaver]:
        """Within the block, saves to the lease's thread carry the lease's epoch."""
        run_id = self._lease_record(lease).run_id
        with self._lock:
            previous = self._leases.get(run_id)
            self._leases[run_id] = lease
        try:
            yield self
        finally:
            with self._lock:
                if previous is None:
                    self._leases.pop(run_id, None)
                else:
                    self._leases[run_id] = previous

    def _epoch(self, run_id: str) -> int:
        lease = self._leases.get(run_id)
        if lease is not None:
            return self._lease_record(lease).epoch
        epoch = self._observed.get(run_id)
        if epoch is None:
            epoch = self._observed[run_id] = self.store.current_epoch(run_id)
        return epoch

    # -- reading ------------------------------------------------------------------------------

    def _manifest(self, row: tables.CheckpointRow, fetched: Mapping[str, bytes] | None = None) -> dict[str, Any]:
        key = (row.thread_id, row.checkpoint_ns, row.checkpoint_id)
        cached = self._manifests.get(key)
        if cached is not None and cached.get("state_ref") == row.state_ref:
            return cached
        data = (fetched or {}).get(row.state_ref)
        if data is None:
            data = self.blobs.get(row.state_ref)
        state = PortableRunState.from_canonical(data)
        manifest = state.memory.get(MANIFEST_KEY)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("channels"), dict):
            raise UnsafePayloadError(f"checkpoint {row.checkpoint_id}: its run state holds no LangGraph manifest")
        manifest = {**manifest, "state_ref": row.state_ref}
        if len(self._manifests) >= 1024:
            self._manifests.clear()
        self._manifests[key] = manifest
        return manifest

    def _fetch(self, refs: list[str]) -> Mapping[str, bytes]:
        return self.blobs.get_many(refs, missing_ok=True)

    def _tuple(self, row: tables.CheckpointRow, writes: Sequence[tables.WriteRow]) -> CheckpointTuple:
        manifest = self._manifest(row)
        where = f"checkpoint {row.checkpoint_id} of thread {row.thread_id!r}"
        values = {
            channel: decode_value(self.safe, ref, self._fetch, what=f"{where}, channel {channel!r}", memo=self._memo)
            for channel, ref in manifest["channels"].items()
        }
        checkpoint: dict[str, Any] = dict(manifest["checkpoint"])
        checkpoint["channel_values"] = values
        metadata = self.safe.loads(*parse_value_blob(row.metadata, what=f"{where}, metadata"),
                                   what=f"{where}, metadata")
        stored = [w.value_ref for w in writes if inline_bytes(w.value_ref) is None]
        write_blobs = self._fetch(stored) if stored else {}
        pending = []
        for write in writes:
            what = f"{where}, write to channel {write.channel!r}"
            blob = inline_bytes(write.value_ref) or write_blobs.get(write.value_ref)
            if blob is None:
                raise UnsafePayloadError(f"{what}: value blob {write.value_ref} is missing")
            pending.append((write.task_id, write.channel, self.safe.loads(*parse_value_blob(blob, what=what), what=what)))
        config: RunnableConfig = {"configurable": {
            "thread_id": row.thread_id, "checkpoint_ns": row.checkpoint_ns, "checkpoint_id": row.checkpoint_id}}
        parent: RunnableConfig | None = None
        if row.parent_checkpoint_id:
            parent = {"configurable": {"thread_id": row.thread_id, "checkpoint_ns": row.checkpoint_ns,
                                       "checkpoint_id": row.parent_checkpoint_id}}
        return CheckpointTuple(config, checkpoint, metadata, parent, pending)  # type: ignore[arg-type]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by `config` (its latest when no checkpoint_id), with its pending writes."""
        conf = _configurable(config)
        with tables.reading(self.store) as tx:
            rows = tables.select_checkpoints(
                tx, thread_id=str(conf["thread_id"]), checkpoint_ns=str(conf.get("checkpoint_ns", "")),
                checkpoint_id=get_checkpoint_id(config), limit=1,
            )
            if not rows:
                return None
            writes = tables.select_writes(tx, rows[0].thread_id, rows[0].checkpoint_ns, rows[0].checkpoint_id)
        return self._tuple(rows[0], writes)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, by thread / namespace / id, metadata `filter`, `before` and `limit`."""
        conf = _configurable(config) if config else {}
        ns = conf.get("checkpoint_ns")
        with tables.reading(self.store) as tx:
            rows = tables.select_checkpoints(
                tx,
                thread_id=None if conf.get("thread_id") is None else str(conf["thread_id"]),
                checkpoint_ns=None if ns is None else str(ns),
                checkpoint_id=conf.get("checkpoint_id"),
                before_id=get_checkpoint_id(before) if before else None,
                limit=None if filter else limit,
            )
        count = 0
        for row in rows:
            if limit is not None and count >= limit:
                return
            if filter:
                where = f"checkpoint {row.checkpoint_id}, metadata"
                metadata = self.safe.loads(*parse_value_blob(row.metadata, what=where), what=where)
                if not all(metadata.get(key) == value for key, value in filter.items()):
                    continue
            with tables.reading(self.store) as tx:
                writes = tables.select_writes(tx, row.thread_id, row.checkpoint_ns, row.checkpoint_id)
            count += 1
            yield self._tuple(row, writes)

    # -- writing ------------------------------------------------------------------------------

    def _parent_manifest(self, thread_id: str, ns: str, checkpoint_id: str | None) -> dict[str, Any] | None:
        if checkpoint_id is None:
            return None
        cached = self._manifests.get((thread_id, ns, checkpoint_id))
        if cached is not None:
            return cached
        with tables.reading(self.store) as tx:
            rows = tables.select_checkpoints(tx, thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id)
        return self._manifest(rows[0]) if rows else None

    def _head(self, run_id: str) -> ExecutionCheckpoint | None:
        head = self._heads.get(run_id)
        if head is None:
            head = self.store.latest_checkpoint(run_id)
            if head is not None:
                self._heads[run_id] = head
        return head

    def _scan(self, items: Sequence[tuple[str, Any]]) -> None:
        if self.scan_secrets and items:
            ensure_no_secrets((label, _plain(value)) for label, value in items)

    def _encode_channels(
        self, checkpoint: Checkpoint, new_versions: ChannelVersions, parent: Mapping[str, Any] | None
    ) -> tuple[dict[str, str], dict[str, bytes], list[tuple[str, Any]]]:
        """(channel -> ref, new blobs, what to scan): unchanged channels keep the parent's ref."""
        parent_channels: dict[str, str] = parent["channels"] if parent else {}
        parent_versions: dict[str, Any] = parent["checkpoint"].get("channel_versions", {}) if parent else {}
        values = checkpoint.get("channel_values", {})
        channels: dict[str, str] = {}
        blobs: dict[str, bytes] = {}
        scanned: list[tuple[str, Any]] = []
        for channel, version in checkpoint.get("channel_versions", {}).items():
            previous = parent_channels.get(channel)
            if channel not in new_versions and previous is not None and parent_versions.get(channel) == version:
                channels[channel] = previous
                continue
            if channel not in values:
                continue  # an empty channel: nothing to store, absent on read
            what = f"channel {channel!r}"
            if previous is not None and isinstance(values[channel], list) and self._memo.get(previous) is None:
                decode_value(self.safe, previous, self._fetch, what=what, memo=self._memo)  # warm the memo
            encoded = encode_value(self.safe, values[channel], what=what, previous_ref=previous, memo=self._memo)
            channels[channel] = encoded.ref
            blobs.update(encoded.blobs)
            if channel not in self.evidence_channels:
                scanned.append((what, encoded.new_content))
        return channels, blobs, scanned

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint as the next sealed Baton checkpoint of the thread's run."""
        conf = _configurable(config)
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", ""))
        parent_id = conf.get("checkpoint_id")
        with self._lock:
            parent = self._parent_manifest(thread_id, ns, parent_id)
            channels, blobs, scanned = self._encode_channels(checkpoint, new_versions, parent)
            rest = {key: value for key, value in checkpoint.items() if key != "channel_values"}
            manifest = {"checkpoint": rest, "channels": channels, "checkpoint_ns": ns}
            try:
                canonical_json(manifest)
            except CanonicalEncodingError as exc:
                raise StoreError(f"checkpoint {checkpoint['id']}: its versions are not plain JSON: {exc}") from exc
            full_metadata = get_checkpoint_metadata(config, metadata)
            metadata_blob = value_blob(*self.safe.dumps(full_metadata, what="checkpoint metadata"))
            scanned.append(("checkpoint metadata", full_metadata))
            self._scan(scanned)
            run_id = self._ensure_run(thread_id)
            lg_run_id = full_metadata.get("run_id")

            def rows(sealed: ExecutionCheckpoint, state_ref: str, tx: Tx) -> None:
                tables.insert_checkpoint(tx, tables.CheckpointRow(
                    thread_id, ns, str(checkpoint["id"]), None if parent_id is None else str(parent_id),
                    None if lg_run_id is None else str(lg_run_id), sealed.seq, state_ref, metadata_blob,
                ))

            sealed = self._seal(run_id, manifest, blobs, rows, thread_id, ns, str(checkpoint["id"]))
            self._manifests[(thread_id, ns, str(checkpoint["id"]))] = {**manifest, "state_ref": sealed.task_state_ref}
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def _seal(
        self,
        run_id: str,
        manifest: Mapping[str, Any],
        blobs: Mapping[str, bytes],
        rows: Callable[[ExecutionCheckpoint, str, Tx], None],
        thread_id: str,
        ns: str,
        checkpoint_id: str,
    ) -> ExecutionCheckpoint:
        """Seal with the run's current head as parent, re-reading it if another writer extended the chain."""
        epoch = self._epoch(run_id)
        for attempt in range(_CHAIN_RETRIES):
            head = self._head(run_id)
            try:
                sealed = seal(
                    self.store, self.blobs, run_id=run_id, parts=self.parts, parent=head,
                    state=manifest_state(manifest, 0 if head is None else head.seq + 1), epoch=epoch,
                    extra_blobs=blobs, within=rows,
                    detail={"langgraph_thread_id": thread_id, "langgraph_checkpoint_ns": ns,
                            "langgraph_checkpoint_id": checkpoint_id},
                    announce=None if run_id in self._announced else "LangGraph checkpoints saved by BatonSaver",
                    # The run's parts are scanned at this saver's first seal; after that the only new part
                    # is the manifest (ids, versions, refs), whose user content was scanned channel by channel.
                    scan_parts=self.scan_secrets and run_id not in self._announced,
                )
            except StoreError:
                # Another writer at the same epoch may have sealed first: then take its checkpoint as the
                # parent and seal again; if the head did not move, the refusal was about something else.
                latest = self.store.latest_checkpoint(run_id)
                moved = (None if latest is None else latest.checkpoint_hash) != (
                    None if head is None else head.checkpoint_hash)
                if not moved or attempt == _CHAIN_RETRIES - 1:
                    raise
                self._heads[run_id] = latest  # type: ignore[assignment]
                continue
            self._heads[run_id] = sealed
            self._announced.add(run_id)
            return sealed
        raise AssertionError("unreachable")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for a checkpoint (refused from a fenced epoch)."""
        conf = _configurable(config)
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", ""))
        checkpoint_id = str(conf["checkpoint_id"])
        blobs: dict[str, bytes] = {}
        rows: list[tables.WriteRow] = []
        scanned: list[tuple[str, Any]] = []
        for index, (channel, value) in enumerate(writes):
            what = f"write to channel {channel!r}"
            blob = value_blob(*self.safe.dumps(value, what=what))
            ref = value_ref(blob)
            if inline_bytes(ref) is None:
                blobs[ref] = blob
            if channel not in self.evidence_channels:
                scanned.append((what, value))
            rows.append(tables.WriteRow(thread_id, ns, checkpoint_id, str(task_id), WRITES_IDX_MAP.get(channel, index),
                                        str(channel), str(task_path), ref))
        self._scan(scanned)
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        run_id = run_id_for(thread_id)
        with self._lock:
            epoch = self._epoch(run_id) if self._run_exists(run_id) else None
            new = {ref: data for ref, data in blobs.items() if ref not in self.blobs.stored_hint([ref])}
            with tables.writing(self.store) as tx:
                if epoch is not None:
                    tables.check_epoch(tx, run_id, epoch)
                tables.insert_blobs(self.store, tx, new)
                tables.insert_writes(tx, rows, replace=replace)
            self.blobs.mark_stored(new)

    def _run_exists(self, run_id: str) -> bool:
        if run_id in self._runs or run_id in self._observed or run_id in self._leases:
            return True
        try:
            self.store.get_run(run_id)
        except StoreError:
            return False
        return True

    # -- deleting and copying -------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's LangGraph checkpoints and writes (its sealed Baton history is append-only and stays)."""
        with self._lock, tables.writing(self.store) as tx:
            tables.delete_thread(tx, str(thread_id))
        self._forget(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) LangGraph recorded under these run ids."""
        ids = [str(run_id) for run_id in run_ids]
        if not ids:
            return
        with self._lock, tables.writing(self.store) as tx:
            tables.delete_checkpoints(tx, tables.keys_for_runs(tx, ids))
        self._manifests.clear()

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """"keep_latest": keep each namespace's newest checkpoint; "delete": remove the threads' checkpoints.

        Blobs are never removed (the blob table is append-only), so what a kept
        checkpoint references, including list segments first stored by a pruned
        ancestor, stays readable.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            with self._lock, tables.writing(self.store) as tx:
                rows = tables.select_checkpoints(tx, thread_id=str(thread_id), checkpoint_ns=None)
                newest: dict[str, str] = {}
                for row in rows:  # newest first
                    newest.setdefault(row.checkpoint_ns, row.checkpoint_id)
                doomed = [(row.thread_id, row.checkpoint_ns, row.checkpoint_id) for row in rows
                          if newest[row.checkpoint_ns] != row.checkpoint_id]
                tables.delete_checkpoints(tx, doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Fork a thread: every checkpoint and write, sharing every blob, each sealed on the target's run."""
        source, target = str(source_thread_id), str(target_thread_id)
        with self._lock:
            with tables.reading(self.store) as tx:
                rows = tables.select_checkpoints(tx, thread_id=source, checkpoint_ns=None)
                writes = tables.select_thread_writes(tx, source)
            if not rows:
                return
            run_id = self._ensure_run(target)
            by_checkpoint: dict[tuple[str, str], list[tables.WriteRow]] = {}
            for write in writes:
                by_checkpoint.setdefault((write.checkpoint_ns, write.checkpoint_id), []).append(write)
            for row in sorted(rows, key=lambda r: (r.checkpoint_ns, r.checkpoint_id)):
                manifest = {key: value for key, value in self._manifest(row).items() if key != "state_ref"}
                copied = [tables.WriteRow(target, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel,
                                          w.task_path, w.value_ref)
                          for w in by_checkpoint.get((row.checkpoint_ns, row.checkpoint_id), [])]

                def insert(sealed: ExecutionCheckpoint, state_ref: str, tx: Tx, row: tables.CheckpointRow = row,
                           copied: list[tables.WriteRow] = copied) -> None:
                    tables.insert_checkpoint(tx, tables.CheckpointRow(
                        target, row.checkpoint_ns, row.checkpoint_id, row.parent_checkpoint_id, row.lg_run_id,
                        sealed.seq, state_ref, row.metadata,
                    ))
                    tables.insert_writes(tx, copied, replace=False)

                self._seal(run_id, manifest, {}, insert, target, row.checkpoint_ns, row.checkpoint_id)

    def _forget(self, thread_id: str) -> None:
        for key in [key for key in self._manifests if key[0] == thread_id]:
            self._manifests.pop(key, None)

    # -- async ----------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
