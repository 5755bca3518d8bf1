"""Event and budget-charge rows stored without what they repeat, on every SQL backend.

An event's body leaves out its None fields and the fields kept in columns of
their own (event_type, run_id, at); a budget charge leaves out its zero fields.
Both read back as written, and rows in the older, complete form still read.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from baton.models import BudgetUsage, Event, EventType
from baton.store import row_codec
from baton.store.base import SqlStore
from builders.records import parts

AT = dt.datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.timezone(dt.timedelta(hours=2)))


def _stored(store: SqlStore, sql: str, params: tuple[object, ...] = ()) -> dict[str, object]:
    """The JSON a row holds: the first column selected, or the second (`packed`, migration 8) where it is set."""
    row = store.execute_raw(sql, params)[0]
    if len(row) > 1 and row[1] is not None:
        return dict(json.loads(row_codec.unpack_text(bytes(row[1]))))
    value = row[0]
    return json.loads(value) if isinstance(value, (str, bytes)) else dict(value)


def test_an_event_body_holds_only_what_its_columns_do_not(store: SqlStore) -> None:
    sparse = Event(event_type=EventType.CHECKPOINT_STARTED, run_id="run-1", at=AT, source_epoch=2)
    full = Event(event_type=EventType.CHECKPOINT_SEALED, run_id="run-1", at=AT, checkpoint_id="run-1/000001",
                 source_placement="eu-1", target_placement="us-1", source_epoch=2, target_epoch=3,
                 release_id="sha256:" + "a" * 64, state_schema="3", reason="why", compatibility_decision={"ok": True},
                 authority_before="OBSERVE", authority_after="VERIFY", resume_boundary="GENERATING",
                 detail={"owner": "worker:w1", "nested": {"n": [1, None]}})
    seqs = store.append_events([sparse, full])
    body = _stored(store, "SELECT body, packed FROM events WHERE seq = ?", (seqs[0],))
    assert body == {"source_epoch": 2, "detail": {}}
    assert [event for _, event in store.list_events(run_id="run-1")] == [sparse, full]
    assert [seq for seq, _ in store.list_events(event_types=[EventType.CHECKPOINT_SEALED])] == [seqs[1]]


def test_an_event_row_in_the_complete_form_still_reads(store: SqlStore) -> None:
    old = Event(event_type=EventType.RUN_CREATED, run_id="run-old", at=AT, reason="written by an older baton")
    store.execute_raw(
        "INSERT INTO events (run_id, event_type, at, body) VALUES (?, ?, ?, " + store.dialect.json_param_sql + ")",
        (old.run_id, old.event_type.value, store.dialect.ts_in(old.at), old.model_dump_json()),
    )
    assert [event for _, event in store.list_events(run_id="run-old")] == [old]


def test_a_budget_charge_is_stored_without_its_zeros(store: SqlStore) -> None:
    store.create_run("run-1", parts().run_kind, parts().release.release_id, "eu-1")
    store.append_budget_charge("run-1", 0, BudgetUsage(tool_calls=1), "one tool call")
    store.append_budget_charge("run-1", 0, BudgetUsage(model_spend_usd=Decimal("0.25"), model_calls=2), "a model call")
    assert _stored(store, "SELECT charge FROM budget_charges WHERE reason = ?", ("one tool call",)) == {"tool_calls": 1}
    assert store.budget_used("run-1") == BudgetUsage(tool_calls=1, model_calls=2, model_spend_usd=Decimal("0.25"))
