"""HandoffWatch: the incremental pending-handoff lookup agrees with the full scan at every step."""

from __future__ import annotations

from baton.handoff.quiesce import HandoffWatch, pending_handoff_request
from baton.models import Event, EventType
from baton.store.base import SqlStore
from builders.records import parts


def _append(store: SqlStore, run_id: str, event_type: EventType, **detail: object) -> int:
    return store.append_event(Event(event_type=event_type, run_id=run_id, at=store.db_now(), reason="test",
                                    detail=dict(detail)))


def test_watch_matches_the_scan_from_seq_zero(store: SqlStore) -> None:
    run = store.create_run("run-w", parts().run_kind, parts().release.release_id, "eu-1")
    other = store.create_run("run-other", parts().run_kind, parts().release.release_id, "eu-1")
    watch = HandoffWatch(run.run_id)

    def agree() -> None:
        with store.read_tx() as tx:
            incremental = watch.check_in(store, tx)
        assert incremental == pending_handoff_request(store, run.run_id)

    agree()
    _append(store, run.run_id, EventType.CHECKPOINT_SEALED)
    agree()
    first = _append(store, run.run_id, EventType.HANDOFF_REQUESTED)
    _append(store, other.run_id, EventType.HANDOFF_REQUESTED)  # another run's request is not ours
    agree()
    assert watch.pending is not None and watch.pending.request_seq == first
    _append(store, run.run_id, EventType.SOURCE_QUIESCED, request_seq=first - 1)  # answers nothing pending
    agree()
    assert watch.pending is not None
    _append(store, run.run_id, EventType.SOURCE_QUIESCED, request_seq=first)
    agree()
    assert watch.pending is None
    second = _append(store, run.run_id, EventType.HANDOFF_REQUESTED)
    agree()
    _append(store, run.run_id, EventType.HANDOFF_ABORTED, request_seq=second)
    _append(store, run.run_id, EventType.CHECKPOINT_SEALED)
    agree()
    assert watch.pending is None and watch.mark >= second
    third = _append(store, run.run_id, EventType.HANDOFF_REQUESTED)
    assert watch.check(store) == pending_handoff_request(store, run.run_id)
    assert watch.pending is not None and watch.pending.request_seq == third
