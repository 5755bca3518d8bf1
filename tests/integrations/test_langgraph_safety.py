"""Deserialization safety: stored payloads shaped like the LangGraph advisories are refused and run nothing.

Each test writes an attacker's payload straight into the database (a blob row,
and the checkpoint's or write's row pointed at it) as someone with write
access to the store could. The oracle is a canary module on sys.path that,
if imported, writes one file and, if its class is called, another: after the
refused read neither file exists and the module was never imported. The
ablation decodes the very same bytes with LangGraph's own serializer in the
configuration the advisory describes, and the canary fires.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from baton.identity import hex_of, sha256_ref
from baton.integrations.langgraph import BatonSaver, UnsafePayloadError, tables
from baton.integrations.langgraph.platform import manifest_state
from baton.integrations.langgraph.values import value_blob
from baton.store.factory import open_store

CANARY = '''
from pathlib import Path
Path({imported!r}).write_text("imported")

class Boom:
    def __init__(self, *args, **kwargs):
        Path({executed!r}).write_text("executed")
'''


class Canary:
    def __init__(self, root: Path) -> None:
        self.module = f"baton_canary_{uuid.uuid4().hex[:12]}"
        self.imported = root / f"{self.module}.imported"
        self.executed = root / f"{self.module}.executed"
        (root / f"{self.module}.py").write_text(CANARY.format(imported=str(self.imported), executed=str(self.executed)))

    def fired(self) -> bool:
        return self.imported.exists() or self.executed.exists() or self.module in sys.modules


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Canary:
    monkeypatch.syspath_prepend(str(tmp_path))
    made = Canary(tmp_path)
    yield made
    sys.modules.pop(made.module, None)


def json_constructor(canary: Canary) -> tuple[str, bytes]:
    """CVE-2025-64439: a "json" payload holding a LangChain constructor envelope for an arbitrary class."""
    envelope = {"lc": 2, "type": "constructor", "id": [canary.module, "Boom"], "kwargs": {"x": 1}}
    return "json", json.dumps(envelope).encode()


def msgpack_constructor(canary: Canary) -> tuple[str, bytes]:
    """CVE-2026-28277: a msgpack extension naming an arbitrary (module, class) to import and call."""
    inner = ormsgpack.packb((canary.module, "Boom", "payload"))
    return "msgpack", ormsgpack.packb(ormsgpack.Ext(jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG, inner))


def msgpack_nested(canary: Canary) -> tuple[str, bytes]:
    """The same extension hidden inside an allowed type's arguments (a set of one element)."""
    evil = ormsgpack.Ext(jsonplus.EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb((canary.module, "Boom", {"a": 1})))
    outer = ormsgpack.packb(("builtins", "set", (evil,)))
    return "msgpack", ormsgpack.packb({"ok": [1, ormsgpack.Ext(jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG, outer)]})


SHAPES = {"cve-2025-64439-json": json_constructor, "cve-2026-28277-msgpack": msgpack_constructor,
          "cve-2026-28277-nested": msgpack_nested}


def _saved_thread(saver: BatonSaver, thread: str) -> dict[str, Any]:
    from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata

    checkpoint = generate_checkpoint(channel_values={"x": "harmless"}, channel_versions={"x": 1})
    stored = saver.put(generate_config(thread), checkpoint, generate_metadata(), {"x": 1})
    saver.put_writes(stored, [("ch", "harmless")], "task-1")
    return stored


def _insert_blob(store: Any, blob: bytes) -> str:
    ref = sha256_ref(blob)
    store.execute_raw("INSERT INTO blobs (digest, data) VALUES (?, ?) ON CONFLICT DO NOTHING",
                      (bytes.fromhex(hex_of(ref)), blob))
    return ref


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_crafted_channel_value_is_refused_on_read(store_url: str, canary: Canary, shape: str) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store)
    stored = _saved_thread(saver, "victim")
    crafted = _insert_blob(store, value_blob(*SHAPES[shape](canary)))
    # The attacker points the checkpoint's manifest at the crafted value.
    with tables.reading(store) as tx:
        row = tables.select_checkpoints(tx, thread_id="victim", checkpoint_ns="")[0]
    manifest = dict(saver._manifest(row))
    manifest.pop("state_ref")
    manifest["channels"] = {"x": crafted}
    state_ref = _insert_blob(store, manifest_state(manifest, 0).canonical())
    store.execute_raw("UPDATE lg_checkpoints SET state_digest = ? WHERE thread_id = ?",
                      (bytes.fromhex(hex_of(state_ref)), "victim"))

    fresh = BatonSaver(store)  # a new process: nothing cached
    with pytest.raises(UnsafePayloadError, match="channel 'x'"):
        fresh.get_tuple(stored)
    with pytest.raises(UnsafePayloadError):
        list(fresh.list({"configurable": {"thread_id": "victim"}}))
    assert not canary.fired()
    store.close()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_crafted_pending_write_is_refused_on_read(store_url: str, canary: Canary, shape: str) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store)
    stored = _saved_thread(saver, "victim")
    crafted = _insert_blob(store, value_blob(*SHAPES[shape](canary)))
    packed = ormsgpack.packb([[0, "ch", bytes.fromhex(hex_of(crafted))]])
    store.execute_raw("UPDATE lg_writes SET writes = ? WHERE thread_id = ?", (packed, "victim"))

    with pytest.raises(UnsafePayloadError, match="write to channel 'ch'"):
        BatonSaver(store).get_tuple(stored)
    assert not canary.fired()
    store.close()


def test_pickle_encoding_is_refused_without_unpickling(store_url: str, canary: Canary) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store)
    stored = _saved_thread(saver, "victim")
    # What a pickle of the canary's class would be; it is never unpickled, so its bytes need not be valid.
    crafted = _insert_blob(store, value_blob("pickle", f"c{canary.module}\nBoom\n(tR.".encode()))
    packed = ormsgpack.packb([[0, "ch", bytes.fromhex(hex_of(crafted))]])
    store.execute_raw("UPDATE lg_writes SET writes = ? WHERE thread_id = ?", (packed, "victim"))
    with pytest.raises(UnsafePayloadError, match="'pickle' is refused"):
        BatonSaver(store).get_tuple(stored)
    assert not canary.fired()
    store.close()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_ablation_langgraph_serializer_runs_the_payload(canary: Canary, shape: str) -> None:
    encoding, data = SHAPES[shape](canary)
    # The advisories' configurations: json constructors revived for any module (before 3.0), msgpack
    # extensions revived for any module (the default unless LANGGRAPH_STRICT_MSGPACK is set).
    serde = JsonPlusSerializer(allowed_json_modules=True) if encoding == "json" else JsonPlusSerializer()
    serde.loads_typed((encoding, data))
    assert canary.imported.exists() and canary.executed.exists()
