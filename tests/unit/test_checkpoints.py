import dataclasses
from pathlib import Path

import pytest

from baton.checkpoints import build_checkpoint, restore
from baton.errors import CheckpointIntegrityError, SecretInStateError
from baton.models import Boundary, ResumabilityClass
from baton.store.blobs import BlobStore

from builders.records import T0, observation, parts


def seal_chain(blobs: BlobStore, steps: int):  # type: ignore[no-untyped-def]
    parent = None
    chain = []
    current = parts()
    for step in range(steps):
        current = dataclasses.replace(current, state=current.state.model_copy(update={"step": step}))
        content = blobs.put(f"observation {step}".encode())
        parent = build_checkpoint(
            blobs,
            run_id="run-1",
            parts=current,
            new_observations=[observation(content, source=f"corpus://{step}")],
            parent=parent,
            boundary=Boundary.GENERATING,
            resumability=ResumabilityClass.R3,
            resumability_reasons=("recorded",),
            owner_epoch=1,
            sealed_at=T0,
        )
        chain.append((parent, current))
    return chain


def test_restore_rebuilds_state_and_observations(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    chain = seal_chain(blobs, 5)
    for index, (ckpt, expected_parts) in enumerate(chain):
        restored = restore(blobs, ckpt)
        assert restored.parts == expected_parts
        assert [o.source for o in restored.observations] == [f"corpus://{i}" for i in range(index + 1)]
    assert chain[-1][0].parent_checkpoint_hash == chain[-2][0].checkpoint_hash


def test_storage_grows_with_the_change_not_the_state(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    seal_chain(blobs, 10)
    after_10 = blobs.total_bytes()
    seal_chain(BlobStore(tmp_path / "b"), 40)
    after_40 = BlobStore(tmp_path / "b").total_bytes()
    # Four times the steps costs about four times the bytes (linear), not sixteen (quadratic).
    assert after_40 < 5 * after_10


def test_missing_part_is_a_specific_error(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    ckpt, _ = seal_chain(blobs, 1)[0]
    digest = ckpt.task_state_ref.removeprefix("sha256:")
    (tmp_path / digest[:2] / digest[2:]).unlink()
    with pytest.raises(CheckpointIntegrityError, match="run state .* missing"):
        restore(blobs, ckpt)


def test_corrupt_part_is_a_specific_error(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    ckpt, _ = seal_chain(blobs, 1)[0]
    digest = ckpt.budget_ledger_ref.removeprefix("sha256:")
    (tmp_path / digest[:2] / digest[2:]).write_bytes(b"{}")
    with pytest.raises(CheckpointIntegrityError, match="budget ledger .* corrupt"):
        restore(blobs, ckpt)


@pytest.mark.parametrize(
    "memory",
    [
        {"aws_key": "AKIAIOSFODNN7EXAMPLE"},
        {"password": "hunter2hunter2"},
        {"note": "-----BEGIN RSA PRIVATE KEY-----"},
        {"cap": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl"},
    ],
)
def test_secret_inside_state_is_refused_and_nothing_is_written(tmp_path: Path, memory: dict[str, str]) -> None:
    blobs = BlobStore(tmp_path)
    base = parts()
    leaky = dataclasses.replace(base, state=base.state.model_copy(update={"memory": memory}))
    with pytest.raises(SecretInStateError, match="run state"):
        build_checkpoint(
            blobs,
            run_id="run-1",
            parts=leaky,
            new_observations=[],
            parent=None,
            boundary=Boundary.GENERATING,
            resumability=ResumabilityClass.R2,
            resumability_reasons=(),
            owner_epoch=1,
            sealed_at=T0,
        )
    assert blobs.total_bytes() == 0
