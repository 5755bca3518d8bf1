"""What BatonSaver refuses to write, and what a save costs in the store.

Refusals: a value of a type outside the allow-list (named by its channel), a
credential in state (named by its channel, never echoed). The oracle for
"nothing written" is the database itself, read with plain SQL; the ablation
turns the scan off and finds the credential there.

Growth: an append-only list channel costs the store what each step added, a
fork shares every channel blob with its source, and a pruned thread's kept
checkpoint still reads in full.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata

from baton.errors import SecretInStateError
from baton.integrations.langgraph import BatonSaver, UnsafeValueError
from baton.store.blobs_sql import decode_body
from baton.store.checkpoints_sql import body_text
from baton.store.factory import open_store

from tests.integrations.lg_graphs import run_growing_graph as _run_graph

SECRET = "ghp_" + "Zq8T2vLm9XwR4kPd7NbY3cHs6JfA1eGu5oWi"  # the shape of a GitHub token, not a real one


class Opaque:
    """An arbitrary class: no allow-listed encoding."""


@dataclasses.dataclass
class Note:
    text: str


def _put(saver: BatonSaver, thread: str, values: dict[str, Any]) -> dict[str, Any]:
    checkpoint = generate_checkpoint(channel_values=values, channel_versions={k: 1 for k in values})
    return saver.put(generate_config(thread), checkpoint, generate_metadata(), {k: 1 for k in values})


def _all_bytes(store: Any) -> bytes:
    """Every blob and every adapter row, as the database holds them."""
    found = _blob_bodies(store)
    found += [bytes(row[0]) for row in store.execute_raw("SELECT metadata FROM lg_checkpoints")]
    found += [bytes(row[0]) for row in store.execute_raw("SELECT writes FROM lg_writes")]
    found += [body_text(str(row[0]), row[1], row[2]).encode()  # packed rows (migration 8) unpacked
              for row in store.execute_raw("SELECT checkpoint_id, body, packed FROM checkpoints")]
    return b"\n".join(found)


def test_unknown_type_is_refused_naming_the_channel(store_url: str) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store)
    with pytest.raises(UnsafeValueError, match="channel 'tool_state'"):
        _put(saver, "t-opaque", {"tool_state": Opaque()})
    with pytest.raises(UnsafeValueError, match="Note"):
        _put(saver, "t-note", {"notes": [Note("unregistered dataclass")]})
    assert saver.get_tuple(generate_config("t-opaque")) is None
    assert saver.get_tuple(generate_config("t-note")) is None
    registered = BatonSaver(store, allowed_types=[Note])
    stored = _put(registered, "t-note", {"notes": [Note("registered")]})
    tup = registered.get_tuple(stored)
    assert tup is not None and tup.checkpoint["channel_values"]["notes"] == [Note("registered")]
    store.close()


def test_credential_is_refused_naming_the_channel_never_the_secret(store_url: str) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store)
    with pytest.raises(SecretInStateError) as caught:
        _put(saver, "t-secret", {"config": {"github_token": SECRET}})
    assert "channel 'config'" in str(caught.value) and SECRET not in str(caught.value)
    stored = _put(saver, "t-clean", {"config": {"region": "eu"}})
    with pytest.raises(SecretInStateError, match="write to channel 'messages'"):
        saver.put_writes(stored, [("messages", f"use token {SECRET}")], "task-1")
    assert SECRET.encode() not in _all_bytes(store)
    assert saver.get_tuple(generate_config("t-secret")) is None
    store.close()


def test_ablation_without_the_scan_the_credential_is_stored(store_url: str) -> None:
    store = open_store(store_url)
    _put(BatonSaver(store, scan_secrets=False), "t-secret", {"config": {"github_token": SECRET}})
    assert SECRET.encode() in _all_bytes(store)
    store.close()


def _channel_blob_bytes(store: Any) -> int:
    """Bytes of the adapter's value and segment blobs (run-state manifests excluded)."""
    return sum(len(body) for body in _blob_bodies(store) if body[:4] in (b"LGV1", b"LGS1"))


def _blob_bodies(store: Any) -> list[bytes]:
    """Every blob's bytes, decoded from its row (a row may keep its body compressed)."""
    rows = store.execute_raw("SELECT digest, data, codec FROM blobs")
    return [decode_body("sha256:" + bytes(digest).hex(), int(codec), bytes(data)) for digest, data, codec in rows]


def test_a_growing_list_costs_what_each_step_added(store_url: str) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store, evidence_channels=["observations"])
    _run_graph(saver, "short", 10)
    short = _channel_blob_bytes(store)
    _run_graph(saver, "long", 60)
    # The long thread's first 10 items equal the short thread's, so they are stored already: what
    # it adds is 50 new items. Each costs one 2 KB blob (the step's write and the list's segment share
    # it) plus a few bytes; rewriting the list would add about 60 KB a step by the end.
    per_step = (_channel_blob_bytes(store) - short) / 50
    assert 2048 <= per_step <= 2048 + 512, per_step
    tup = BatonSaver(store).get_tuple({"configurable": {"thread_id": "long"}})
    assert tup is not None and [o[:4] for o in tup.checkpoint["channel_values"]["observations"]] == [
        f"{i:04d}" for i in range(60)]
    store.close()


def test_fork_shares_blobs_and_prune_keeps_what_the_kept_checkpoint_needs(store_url: str) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store, evidence_channels=["observations"])
    _run_graph(saver, "source", 20)
    before = _channel_blob_bytes(store)
    saver.copy_thread("source", "fork")
    assert _channel_blob_bytes(store) == before  # no channel value stored twice
    fork_run = store.list_checkpoints(saver.run_id_for("fork"))
    assert len(fork_run) == len(list(saver.list({"configurable": {"thread_id": "fork"}})))
    saver.prune(["source"], strategy="keep_latest")
    kept = list(BatonSaver(store).list({"configurable": {"thread_id": "source"}}))
    assert len(kept) == 1
    assert len(kept[0].checkpoint["channel_values"]["observations"]) == 20  # its segments were first stored by pruned ancestors
    forked = BatonSaver(store).get_tuple({"configurable": {"thread_id": "fork"}})
    assert forked is not None and forked.checkpoint["channel_values"] == kept[0].checkpoint["channel_values"]
    store.close()
