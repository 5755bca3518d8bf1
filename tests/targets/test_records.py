"""The targets' file records without a server: durability rules, torn tails, the audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.errors import FencedTokenError, PayloadMismatchError
from baton.fencing import FencingToken
from baton.models import OperationState
from baton.targets.audit import count_by_key
from baton.durable_files import append_line, read_lines, write_json
from baton.targets.http_server import Ambiguity
from baton.targets.mutation_log import DirectoryInUseError, MutationLog, SealedOperationError


def test_a_torn_last_line_is_ignored_by_the_audit_and_cut_on_open(tmp_path: Path) -> None:
    path = tmp_path / "effects.jsonl"
    append_line(path, {"seq": 1, "operation_id": "a", "idempotency_key": "k", "run_id": "r", "epoch": 0, "at": "t"})
    with open(path, "ab") as handle:
        handle.write(b'{"seq": 2, "idempotency_key": "k"')  # crash mid-write: never acknowledged
    assert count_by_key(path)["per_key"] == {"k": 1}
    log = MutationLog(tmp_path, "effects.jsonl")
    assert path.read_bytes().endswith(b"\n") and len(read_lines(path)) == 1
    log.apply("b", "k2", FencingToken("r", 0), {"x": 1})
    assert count_by_key(path) == {"file": "effects.jsonl", "total": 2, "per_key": {"k": 1, "k2": 1}, "duplicates": {}}


def test_the_audit_reports_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "deployments.jsonl"
    for key in ("a", "b", "a"):
        append_line(path, {"idempotency_key": key})
    assert count_by_key(path)["duplicates"] == {"a": 2}
    assert count_by_key(tmp_path / "absent.jsonl")["total"] == 0


def test_mutation_log_rules_in_order(tmp_path: Path) -> None:
    log = MutationLog(tmp_path, "effects.jsonl")
    first = log.apply("op-1", "key-1", FencingToken("r", 2), {"v": "1"})
    assert not first.replayed and first.record["seq"] == 1
    assert log.apply("op-2", "key-1", FencingToken("r", 2), {"v": "1"}).replayed
    with pytest.raises(PayloadMismatchError):
        log.apply("op-3", "key-1", FencingToken("r", 2), {"v": "2"})
    with pytest.raises(PayloadMismatchError):
        log.apply("op-4", "key-1", FencingToken("other-run", 0), {"v": "1"})
    with pytest.raises(FencedTokenError):
        log.apply("op-5", "key-5", FencingToken("r", 1), {"v": "1"})
    assert log.lookup("op-9") is OperationState.NOT_COMMITTED
    with pytest.raises(SealedOperationError):
        log.apply("op-9", "key-9", FencingToken("r", 2), {"v": "1"})
    with pytest.raises(DirectoryInUseError):
        MutationLog(tmp_path, "effects.jsonl")
    log.close()
    reopened = MutationLog(tmp_path, "effects.jsonl")
    assert reopened.lookup("op-2") is OperationState.COMMITTED  # a replay alias survives a restart
    with pytest.raises(SealedOperationError):
        reopened.apply("op-9", "key-9", FencingToken("r", 2), {"v": "1"})
    results = [line["result"] for line in read_lines(tmp_path / "requests.jsonl")]
    assert results == ["applied", "replayed", "payload_mismatch", "payload_mismatch", "fenced", "sealed", "sealed"]


def test_write_json_replaces_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    write_json(path, {"a": 1})
    write_json(path, {"b": 2})
    assert json.loads(path.read_text()) == {"b": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_ambiguity_is_seeded() -> None:
    first = Ambiguity(0.5, 7, 0.0)
    second = Ambiguity(0.5, 7, 0.0)
    assert [first.draw() for _ in range(32)] == [second.draw() for _ in range(32)]
    assert not any(Ambiguity(0.0, 1, 0.0).draw() for _ in range(16))
    assert all(Ambiguity(1.0, 1, 0.0).draw() for _ in range(16))
    with pytest.raises(ValueError):
        Ambiguity(1.5, 1, 0.0)
