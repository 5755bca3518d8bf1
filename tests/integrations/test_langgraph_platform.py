"""A LangGraph thread is a Baton run: its saves are sealed checkpoints the rest of Baton can read."""

from __future__ import annotations

from baton.checkpoints import restore
from baton.integrations.langgraph import BatonSaver
from baton.integrations.langgraph.platform import MANIFEST_KEY
from baton.models import EventType
from baton.store.factory import open_store
from baton.store.sql_blobs import SqlBlobStore

from tests.integrations.lg_graphs import run_growing_graph as _run_graph


def test_each_save_is_a_sealed_checkpoint_of_the_threads_run(store_url: str) -> None:
    store = open_store(store_url)
    saver = BatonSaver(store, evidence_channels=["observations"])
    _run_graph(saver, "visible-thread", 5)
    run_id = BatonSaver.run_id_for("visible-thread")
    run = store.get_run(run_id)
    assert run.detail["langgraph_thread_id"] == "visible-thread"
    kinds = [event.event_type for _, event in store.list_events(run_id=run_id)]
    assert kinds[0] is EventType.RUN_CREATED and EventType.CHECKPOINT_SEALED in kinds

    saved = list(saver.list({"configurable": {"thread_id": "visible-thread"}}))
    sealed = store.list_checkpoints(run_id)
    assert len(sealed) == len(saved)
    # Baton's own restore verifies every part of the latest seal; its run state names the latest save.
    restored = restore(SqlBlobStore(store), sealed[-1])
    manifest = restored.parts.state.memory[MANIFEST_KEY]
    assert manifest["checkpoint"]["id"] == saved[0].checkpoint["id"]
    assert set(manifest["channels"]) == set(saved[0].checkpoint["channel_values"])
    store.close()


def test_two_savers_at_one_epoch_extend_one_chain(store_url: str) -> None:
    from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata

    store = open_store(store_url)
    first, second = BatonSaver(store), BatonSaver(store)
    parent = None
    for step in range(6):
        saver = first if step % 2 == 0 else second  # each saver's cached head is stale every other save
        config = generate_config("shared")
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        parent = saver.put(config, generate_checkpoint(), generate_metadata(step=step), {})
    sealed = store.list_checkpoints(BatonSaver.run_id_for("shared"))
    assert [c.seq for c in sealed] == list(range(6))
    assert len(list(first.list({"configurable": {"thread_id": "shared"}}))) == 6
    store.close()
