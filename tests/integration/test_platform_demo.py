"""`baton platform` (what `make demo` runs) as a real process: every service answers, Ctrl-C leaves nothing behind.

The oracle for "nothing left" is outside the code under test: every process
the platform starts, and everything those spawn, inherits a marker variable in
its environment; after the platform exits, no process on the machine may still
carry it (read from /proc), and no process group the platform recorded may
still have a member.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from baton.platform_gql import answers, daemons_healthy, http_ok
from builders.live import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")]

MARKER = "BATON_PLATFORM_TEST_MARKER"


def marked_processes(token: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries `MARKER=token`."""
    needle = f"{MARKER}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in environ.split(b"\0"):
            found.append((int(entry.name), cmdline))
    return found


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_platform_answers_and_ctrl_c_stops_every_process_it_started(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    dagster_home = tmp_path / "dagster_home"
    env = {**os.environ, MARKER: token}
    env.pop("BATON_DATABASE_URL", None)
    env.pop("DAGSTER_PG_URL", None)
    baton = str(Path(sys.executable).parent / "baton")
    platform = subprocess.Popen(
        [baton, "platform", "--web-port", "0", "--dashboard-port", "0", "--baton-home", str(tmp_path / "baton"),
         "--dagster-home", str(dagster_home), "--runs", "3", "--workers", "2", "--launch-interval", "1",
         "--chaos-window", "20", "--coordinator", "local", "--ready-timeout", "240"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    try:
        state_file = dagster_home / "platform.json"

        def state() -> dict | None:
            if not state_file.exists():
                return None
            data = json.loads(state_file.read_text())
            return data if {s["name"] for s in data["services"]} >= {"dagster-webserver", "dagster-daemon",
                                                                     "dashboard", "fleet"} else None

        services = {s["name"]: s for s in wait_for(state, timeout_s=120, what="the platform's state file",
                                                   poll_s=0.5)["services"]}
        web, dash = services["dagster-webserver"]["url"], services["dashboard"]["url"]
        wait_for(lambda: answers(web), timeout_s=240, what="Dagster GraphQL", poll_s=1.0)
        wait_for(lambda: daemons_healthy(web), timeout_s=240, what="the Dagster daemon's heartbeats", poll_s=1.0)
        wait_for(lambda: http_ok(f"{dash}/_stcore/health"), timeout_s=120, what="the dashboard", poll_s=1.0)
        # The fleet's grandchildren (worker processes) exist, so the check below covers descendants too.
        wait_for(lambda: any("baton.runtime.worker" in cmd for _, cmd in marked_processes(token)), timeout_s=120,
                 what="fleet worker processes", poll_s=0.5)
        # The platform's own readiness (it printed where to look) may lag the checks above.
        wait_for(lambda: json.loads(state_file.read_text()).get("ready"), timeout_s=240,
                 what="the platform to say it is up", poll_s=0.5)
        assert platform.poll() is None, "the platform exited on its own"
        started = marked_processes(token)
        assert len(started) >= 6  # webserver, daemon, their code servers, dashboard, fleet, workers, targets

        platform.send_signal(signal.SIGINT)
        output = platform.communicate(timeout=180)[0].decode(errors="replace")
        left = marked_processes(token)
        groups_left = [s["name"] for s in services.values() if group_exists(s["pgid"])]
    finally:
        if platform.poll() is None:
            platform.kill()
            platform.wait(timeout=30)
        for pid, _ in marked_processes(token):  # clean up after a failure (the assertions use `left`)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    assert platform.returncode == 0, output
    assert "Dagster UI" in output and "Ctrl-C stops every process" in output, output
    assert "stopped every process" in output, output
    assert left == [], left
    assert groups_left == []
