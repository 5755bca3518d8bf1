"""`make demo` end to end, the way a user runs it: one command, then Ctrl-C.

The test runs the real Makefile target (only its two option variables point it at
temporary homes, free ports and a small fleet) in a session of its own, as a
terminal runs a foreground job, and checks from outside the code under test:

- the fresh experiment's file is in BATON_HOME (read back with DuckDB);
- the URLs it printed answer: Dagster's GraphQL (version and daemon heartbeats), the
  dashboard's page and health check over HTTP;
- the live fleet, under the Dagster coordinator, puts runs into Baton's store (read
  with the store's own interface) and at least one of them finishes;
- SIGINT to the whole process group (what Ctrl-C does) stops everything: no process
  carrying the test's marker variable is left (read from /proc), no process group the
  platform recorded has a member, and make itself exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import duckdb
import httpx
import pytest

from baton.platform_gql import answers, daemons_healthy, http_ok
from baton.store.factory import open_store
from builders.live import wait_for

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"),
              pytest.mark.skipif(shutil.which("make") is None, reason="needs make")]

ROOT = Path(__file__).resolve().parents[2]
MARKER = "BATON_MAKE_DEMO_TEST_MARKER"
FINISHED = {"verified", "failed", "escalated"}


def marked_processes(token: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live, non-zombie process whose environment carries `MARKER=token`."""
    needle = f"{MARKER}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found.append((int(entry.name), cmdline))
    return found


def settled(token: str, *, timeout_s: float) -> list[tuple[int, str]]:
    """The marked processes still there once none is left, or after `timeout_s` (a process that is
    going may need a moment to leave the table)."""
    deadline = time.monotonic() + timeout_s
    while (left := marked_processes(token)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _default_signals() -> None:
    # A terminal's foreground job gets SIGINT with its default action; a test runner started in the
    # background may have inherited it as ignored, and make keeps an ignored SIGINT ignored.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def printed_url(log: Path, label: str) -> str | None:
    match = re.search(rf"^\s*{label}\s+(http://127\.0\.0\.1:\d+)\s*$", log.read_text(errors="replace"), re.M)
    return match.group(1) if match else None


def store_runs(home: Path) -> list[tuple[str, str]] | None:
    if not (home / "baton.db").exists():
        return None
    store = open_store(None, home)
    try:
        return [(run.run_id, run.status) for run in store.list_runs()]
    finally:
        store.close()


def test_make_demo_serves_every_url_fills_the_store_and_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    baton_home, dagster_home, log = tmp_path / "baton", tmp_path / "dagster_home", tmp_path / "make-demo.log"
    env = {key: value for key, value in os.environ.items()
           if key not in ("BATON_DATABASE_URL", "DAGSTER_PG_URL", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env |= {MARKER: token, "BATON_HOME": str(baton_home), "DAGSTER_HOME": str(dagster_home)}
    make_args = ["make", "--no-print-directory", "demo",
                 "DEMO_EXPERIMENT=--runs 200 --seed 7",
                 "DEMO_PLATFORM=--web-port 0 --dashboard-port 0 --runs 4 --workers 2 --launch-interval 2 "
                 "--chaos-window 30 --coordinator dagster --ready-timeout 300"]
    # What make would run before the demo: nothing to install when the venv is current.
    dry = subprocess.run(["make", "-n", "install"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert "pip install" not in dry.stdout, f"make demo would reinstall the venv:\n{dry.stdout}"

    with open(log, "wb") as out:
        make = subprocess.Popen(make_args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_default_signals)
    try:
        state_file = dagster_home / "platform.json"

        def ready_state() -> dict | None:
            if make.poll() is not None:
                raise AssertionError(f"make demo exited with {make.returncode}:\n{log.read_text(errors='replace')}")
            if not state_file.exists():
                return None
            data = json.loads(state_file.read_text())
            return data if data.get("ready") else None

        state = wait_for(ready_state, timeout_s=600, what="make demo to say the platform is up", poll_s=1.0)
        services = {s["name"]: s for s in state["services"]}
        assert set(services) == {"dagster-webserver", "dagster-daemon", "dashboard", "fleet"}

        # The fresh experiment, in this BATON_HOME.
        with duckdb.connect(str(baton_home / "analytics" / "experiment.duckdb"), read_only=True) as con:
            command, seed, runs = con.execute("SELECT command, seed, runs FROM experiment_meta").fetchone()
            strategies = con.execute("SELECT count(DISTINCT strategy) FROM strategy_summary").fetchone()[0]
        assert (seed, runs) == (7, 200) and "baton experiment" in command and strategies >= 9

        # The URLs it printed are the ones it started, and they answer.
        web = wait_for(lambda: printed_url(log, "Dagster UI"), timeout_s=60, what="the Dagster URL", poll_s=0.5)
        dash = wait_for(lambda: printed_url(log, "Dashboard"), timeout_s=60, what="the dashboard URL", poll_s=0.5)
        assert web == services["dagster-webserver"]["url"] and dash == services["dashboard"]["url"]
        assert answers(web) and daemons_healthy(web)
        assert http_ok(f"{dash}/_stcore/health")
        page = httpx.get(dash, timeout=30.0)
        assert page.status_code == 200 and "<title>Streamlit</title>" in page.text

        # The live fleet under Dagster fills Baton's store; one run finishes.
        wait_for(lambda: (rows := store_runs(baton_home)) and any(status in FINISHED for _, status in rows),
                 timeout_s=600, what="a fleet run to finish in Baton's store", poll_s=2.0)
        assert make.poll() is None, "make demo exited on its own"
        started = marked_processes(token)
        assert any("dagster-daemon" in cmd for _, cmd in started) and any("streamlit" in cmd for _, cmd in started)

        # Ctrl-C: SIGINT to the foreground job's whole process group.
        os.killpg(make.pid, signal.SIGINT)
        make.wait(timeout=300)
        left = settled(token, timeout_s=60)
        groups_left = [name for name, s in services.items() if group_exists(s["pgid"])]
    finally:
        if make.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(make.pid, signal.SIGKILL)
            make.wait(timeout=30)
        for pid, _ in marked_processes(token):  # clean up after a failure (the assertions use `left`)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    output = log.read_text(errors="replace")
    assert "stopped every process" in output, output
    assert "Ctrl-C stops every process" in output, output
    assert left == [] and groups_left == [], (left, groups_left)
    # make waits for its child, then re-raises SIGINT on itself.
    assert make.returncode in (0, -signal.SIGINT), (make.returncode, output)
