"""A checkpoint just sealed is recorded from the value its seal hashed; any other object is checked anew."""

from __future__ import annotations

import pytest

from baton.errors import CheckpointIntegrityError
from baton.identity import plain_value
from baton.models import Boundary, ExecutionCheckpoint
from baton.store.base import SqlStore

from builders.rows import checkpoint, new_run


def test_the_sealed_body_is_the_checkpoints_plain_value() -> None:
    sealed = checkpoint("run-sealed-body", 0)
    body = ExecutionCheckpoint.take_sealed_body(sealed)
    assert body == plain_value(sealed) and list(body) == list(plain_value(sealed))
    assert ExecutionCheckpoint.compute_hash(body) == sealed.checkpoint_hash
    assert ExecutionCheckpoint.take_sealed_body(sealed) is None  # taken once


def test_a_copy_of_a_sealed_checkpoint_with_other_content_is_refused(store: SqlStore) -> None:
    run = new_run(store)
    sealed = checkpoint(run.run_id, 0)
    forged = sealed.model_copy(update={"boundary": Boundary.VERIFIED})  # same hash, other content, not validated
    with pytest.raises(CheckpointIntegrityError):
        store.append_checkpoint(forged)
    assert store.latest_checkpoint(run.run_id) is None
    store.append_checkpoint(sealed)  # the sealed object itself is recorded, and reads back verified
    assert store.latest_checkpoint(run.run_id) == sealed


def test_an_equal_but_distinct_object_is_checked_and_recorded(store: SqlStore) -> None:
    run = new_run(store)
    sealed = checkpoint(run.run_id, 0)
    parsed = ExecutionCheckpoint.model_validate_json(sealed.model_dump_json())  # not the object `seal` returned
    store.append_checkpoint(parsed)
    assert store.latest_checkpoint(run.run_id) == sealed
