"""No protocol module reads the host's time directly: they go through `baton.clock`.

Exceptions are listed with their reason; a new direct read anywhere else fails this test.
"""

from __future__ import annotations

import re
from pathlib import Path

BATON = Path(__file__).resolve().parents[2] / "baton"
PATTERN = re.compile(r"\btime\.time\(\)|\btime\.monotonic\(\)|\btime\.sleep\(|datetime\.now\(|datetime\.utcnow\(|\bdt\.datetime\.now\(")

ALLOWED_DIRS = {
    "bench": "benchmarks measure real elapsed time",
    "faults": "the live fault matrix (another engineer's area) drives real processes in real time",
    "cli": "command-line front ends time their own progress output",
    "platform": "Dagster-facing read models and jobs run in real time outside the protocol",
}
ALLOWED_FILES = {
    "clock.py": "the one place that reads the host's clocks",
    "store/sqlite.py": "retrying the WAL switch while the file is busy (opening a file, not protocol time)",
    "runtime/supervisor.py": "process supervision: real child processes die and restart in real time",
    "targets/service_process.py": "waiting for a real service process to publish its port",
    "targets/ledger_target.py": "a real HTTP server process: waiting for it and its injected delays",
    "authority_http.py": "waiting for the real authority service process to start",
    "platform_up.py": "starting and stopping real platform processes",
    "platform_procs.py": "supervising real platform processes",
    "fleet.py": "the live fleet's driver loop paces real worker processes",
    "agents/coding_workspace.py": "times a real pytest subprocess in a sandbox worktree (its duration is reported, not used)",
    "sim_agreement.py": "reports how long each live and simulated side took in real seconds (never used)",
    "scripted_run.py": "the `make demo` sample run, stamped with the host time (not driven by the protocol)",
}


def _offenders() -> list[str]:
    found = []
    for path in sorted(BATON.rglob("*.py")):
        relative = path.relative_to(BATON).as_posix()
        if relative.split("/", 1)[0] in ALLOWED_DIRS or relative in ALLOWED_FILES:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PATTERN.search(line.split("#", 1)[0]):
                found.append(f"{relative}:{number}: {line.strip()}")
    return found


def test_protocol_reads_time_only_through_the_clock() -> None:
    offenders = _offenders()
    assert not offenders, "read time through baton.clock instead:\n" + "\n".join(offenders)


def test_the_scan_sees_a_direct_read() -> None:
    assert PATTERN.search("x = time.time()") and PATTERN.search("dt.datetime.now(dt.timezone.utc)")
    assert PATTERN.search("datetime.utcnow()") and PATTERN.search("time.monotonic()")
    assert not PATTERN.search("clock.now()")


def test_every_listed_exception_exists() -> None:
    for relative in ALLOWED_FILES:
        assert (BATON / relative).exists(), f"stale exception {relative}"
    for directory in ALLOWED_DIRS:
        assert (BATON / directory).is_dir(), f"stale exception {directory}/"
