"""ProcessSet with real processes: groups that ignore SIGINT and SIGTERM still end empty; a dead service is named."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from baton.platform_procs import ProcessSet, ServiceFailed, ServiceSpec, group_exists

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX process groups")

# A leader and a grandchild that both ignore SIGINT and SIGTERM: only SIGKILL to the group ends them.
STUBBORN = [sys.executable, "-c",
            "import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "time.sleep(600)'])\n"
            "print('ready', flush=True); time.sleep(600)\n"]


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def test_a_group_that_ignores_sigint_and_sigterm_is_killed_whole(tmp_path: Path) -> None:
    procs = ProcessSet(log_dir=tmp_path)
    log = tmp_path / "stubborn.log"
    managed = procs.start(ServiceSpec("stubborn", STUBBORN, probe=lambda: log.exists() and "ready" in log.read_text()))
    procs.wait_ready(60, poll_s=0.05)
    deadline = time.monotonic() + 60
    while len(_group_members(managed.pgid)) < 2:  # the grandchild is up, in the same group
        assert time.monotonic() < deadline, "the grandchild never started"
        time.sleep(0.05)
    assert os.getpgid(managed.process.pid) == managed.pgid
    procs.stop_all(grace_s=0.5)
    assert _group_members(managed.pgid) == []
    assert not group_exists(managed.pgid)


def test_a_service_that_exits_before_answering_is_named_with_its_log(tmp_path: Path) -> None:
    procs = ProcessSet(log_dir=tmp_path)
    procs.start(ServiceSpec("broken", [sys.executable, "-c", "raise SystemExit(3)"], probe=lambda: False))
    with pytest.raises(ServiceFailed, match=r"broken exited with code 3 .*broken\.log"):
        procs.wait_ready(60, poll_s=0.05)
    procs.stop_all(grace_s=0.5)
