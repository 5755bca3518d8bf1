"""`baton bench sdk-bound` at tiny size: the replay does the boundaries' whole SQL work, and the command runs.

No time is asserted. What must hold for the bound to mean anything is that the
replayed statements leave the copy exactly as the SDK left its own store: the
same rows in every table and the same latest checkpoint.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from baton.bench.sdk_bound import _replay, _traced_steps, measure_sdk_bound, part_rows, target_rows
from baton.bench.trajectory import observation

BATON = str(Path(sys.executable).parent / "baton")
TABLES = ("blobs", "checkpoints", "events", "budget_charges", "leases", "runs")


def _contents(database: Path) -> dict[str, object]:
    with sqlite3.connect(database) as conn:
        found: dict[str, object] = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}
        found["head"] = conn.execute("SELECT checkpoint_hash FROM checkpoints ORDER BY seq DESC LIMIT 1").fetchone()
        found["digests"] = sorted(row[0] for row in conn.execute("SELECT digest FROM blobs"))
        found["event_types"] = [row[0] for row in conn.execute("SELECT event_type FROM events ORDER BY seq")]
    return found


def test_the_replay_leaves_the_copy_as_the_sdk_left_its_store(tmp_path: Path) -> None:
    copy = tmp_path / "replay.db"
    trace, marks = _traced_steps(tmp_path / "traced", [observation(i) for i in range(4)], copy)
    before = _contents(copy)
    seconds, counts = _replay(copy, trace, marks)
    after, sdk = _contents(copy), _contents(tmp_path / "traced" / "baton.db")
    assert len(seconds) == len(counts) == 4 and all(n >= 8 for n in counts)
    assert before != sdk, "the copy is taken before the first boundary"
    assert after == sdk
    assert after["checkpoints"] == before["checkpoints"] + 4  # type: ignore[operator]


def test_a_trace_that_leaves_a_transaction_open_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "replay.db"
    trace, marks = _traced_steps(tmp_path / "traced", [observation(0)], copy)
    assert trace[-1].strip() == "COMMIT"
    with pytest.raises(RuntimeError, match="transaction open"):
        _replay(copy, trace[:-1], marks)


def test_tiny_bound_reports_every_part_and_target(tmp_path: Path) -> None:
    try:
        bound = measure_sdk_bound(3, tmp_path, repeat=1)
    except RuntimeError as exc:
        if "not installed" in str(exc):
            pytest.skip(str(exc))
        raise
    assert bound.replay_ms > 0 and bound.scan_ms > 0 and bound.floor_ms > 0
    assert bound.statements_per_step >= 8  # the clock read and the seal's transaction, as the trace shows them
    assert [row[0] for row in target_rows(bound)[1]][0].startswith("<= 3x")
    assert len(part_rows(bound)[1]) == 7


def test_the_command_writes_its_section_and_json(tmp_path: Path) -> None:
    # Its own process: DBOS binds its log handler to the stdout it started with, which CliRunner would close.
    done = subprocess.run([BATON, "bench", "sdk-bound", "--steps", "2", "--repeat", "1", "--json", "--out",
                           str(tmp_path), "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and "not installed" in done.stderr:
        pytest.skip(done.stderr[-300:])
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)
    assert document["replay_ms"] > 0 and document["statements_per_step"] >= 8
    assert set(document["legs_ms"]) == {"baton-sdk-sqlite", "langgraph-sqlite", "dbos-sqlite"}
    text = (tmp_path / "benchmarks.md").read_text()
    assert "<!-- bench:sdk-bound:start -->" in text and "bound: SQL alone + scan" in text
