"""The whole platform on one machine: Dagster's webserver and daemon, the dashboard, and a live fleet.

`run_platform` prepares `DAGSTER_HOME` (a `dagster.yaml` on SQLite, or on
PostgreSQL when a Dagster database URL is given), starts each service in its
own session through `ProcessSet`, waits until the webserver answers GraphQL,
the daemon's sensor, schedule and run-queue loops report healthy and the
dashboard answers its health check, prints where to look, and then waits. On
Ctrl-C or SIGTERM it stops every process group it started. When the fleet
finishes, the UI stays up until then.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from baton.ablation import refuse_if_ablated
from baton.platform_gql import answers, daemons_healthy, http_ok
from baton.platform_procs import ProcessSet, ServiceFailed, ServiceSpec

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ENV_DAGSTER_PG_URL = "DAGSTER_PG_URL"

_POSTGRES_DAGSTER_YAML = """\
# Written by the Baton platform: Dagster's own state on PostgreSQL (dagster-postgres).
# The URL comes from the environment and must use the psycopg2 driver
# (postgresql+psycopg2://...): with SQLAlchemy 2.1 a bare postgresql:// selects psycopg 3,
# whose first event write fails.
storage:
  postgres:
    postgres_url:
      env: DAGSTER_PG_URL
local_artifact_storage:
  module: dagster._core.storage.root
  class: LocalArtifactStorage
  config:
    base_dir:
      env: DAGSTER_HOME
concurrency:
  runs:
    max_concurrent_runs: 4
run_queue:
  dequeue_interval_seconds: 1
telemetry:
  enabled: false
"""


@dataclass(frozen=True)
class FleetArgs:
    """The fleet the platform runs (`baton fleet ...`); None in `PlatformConfig.fleet` runs none."""

    runs: int = 40
    workers: int = 3
    seed: int = 1
    coordinator: str = "dagster"
    launch_interval_s: float = 6.0
    chaos_window_s: float = 240.0
    extra_chaos_events: int = 8
    timeout_s: float = 900.0
    browser: bool = False
    """Every third run a browser run (needs the system's Chromium, `baton.chromium.CHROMIUM_PATH`)."""

    def argv(self, baton: str, home: Path) -> list[str]:
        return [baton, "fleet", "--chaos", "--runs", str(self.runs), "--workers", str(self.workers),
                "--seed", str(self.seed), "--home", str(home), "--timeout", str(self.timeout_s),
                "--coordinator", self.coordinator, "--launch-interval", str(self.launch_interval_s),
                "--chaos-window", str(self.chaos_window_s), "--extra-chaos", str(self.extra_chaos_events),
                *(["--browser"] if self.browser else [])]

    def kinds(self) -> str:
        """The agent kinds the fleet launches, for the banner."""
        return "deploy, research, coding" + (", browser" if self.browser else "")


@dataclass(frozen=True)
class PlatformConfig:
    """Where the platform keeps its state, its ports, and what it starts."""

    baton_home: Path
    dagster_home: Path
    database_url: str | None = None
    dagster_pg_url: str | None = None
    web_port: int = 3000
    dashboard_port: int = 8501
    dashboard: bool = True
    fleet: FleetArgs | None = field(default_factory=FleetArgs)
    project_root: Path = PROJECT_ROOT
    ready_timeout_s: float = 180.0
    stop_grace_s: float = 10.0

    @property
    def state_file(self) -> Path:
        return self.dagster_home / "platform.json"


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _tool(name: str) -> str:
    """A console script of this Python's environment (the venv), else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise ServiceFailed(f"{name} is not installed in {Path(sys.executable).parent} or on PATH (run `make install`)")
    return found


def prepare_dagster_home(config: PlatformConfig) -> Path:
    """Create DAGSTER_HOME with a dagster.yaml: the project's (SQLite) or one on PostgreSQL."""
    config.dagster_home.mkdir(parents=True, exist_ok=True)
    target = config.dagster_home / "dagster.yaml"
    if config.dagster_pg_url:
        if not config.dagster_pg_url.startswith("postgresql+psycopg2://"):
            raise ValueError("the Dagster database URL must start with postgresql+psycopg2:// "
                             f"(dagster-postgres with SQLAlchemy 2.1), not {config.dagster_pg_url.split(':', 1)[0]}://")
        target.write_text(_POSTGRES_DAGSTER_YAML)
    else:
        source = config.project_root / "dagster.yaml"
        if not source.exists():
            raise ServiceFailed(f"no dagster.yaml in {config.project_root}")
        shutil.copyfile(source, target)
    _initialise_dagster_storage(config)
    return target


def _initialise_dagster_storage(config: PlatformConfig) -> None:
    """Create Dagster's storage once, before the webserver and the daemon start.

    Started together on a fresh SQLite home, both stamp the schedule database's
    alembic version at once and can leave two heads; the daemon then fails every
    sensor tick ("more than one head present").
    """
    done = subprocess.run([_tool("dagster"), "instance", "migrate"], env={**os.environ, **service_env(config)},
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise ServiceFailed(f"dagster instance migrate failed in {config.dagster_home}: {done.stderr[-2000:]}")


def service_env(config: PlatformConfig) -> dict[str, str]:
    """The environment every service shares: both homes and both databases."""
    env = {"BATON_HOME": str(config.baton_home.resolve()), "DAGSTER_HOME": str(config.dagster_home.resolve()),
           "PYTHONUNBUFFERED": "1",
           # So the dashboard links to Dagster's run partitions and Dagster's asset metadata links back.
           "BATON_DAGSTER_URL": f"http://127.0.0.1:{config.web_port}",
           "BATON_DASHBOARD_URL": f"http://127.0.0.1:{config.dashboard_port}"}
    if config.database_url:
        env["BATON_DATABASE_URL"] = config.database_url
    if config.dagster_pg_url:
        env[ENV_DAGSTER_PG_URL] = config.dagster_pg_url
    return env


def dashboard_command(root: Path, port: int) -> list[str]:
    """The Streamlit process that serves dashboard/app.py on loopback."""
    return [sys.executable, "-m", "streamlit", "run", str(root / "dashboard" / "app.py"),
            "--server.port", str(port), "--server.address", "127.0.0.1",
            "--server.headless", "true", "--browser.gatherUsageStats", "false"]


def service_specs(config: PlatformConfig) -> list[ServiceSpec]:
    """The services in start order: webserver, daemon, dashboard, fleet."""
    root = config.project_root
    workspace = root / "workspace.yaml"
    if not workspace.exists():
        raise ServiceFailed(f"no workspace.yaml in {root}")
    env = service_env(config)
    web = f"http://127.0.0.1:{config.web_port}"
    specs = [
        ServiceSpec("dagster-webserver", [_tool("dagster-webserver"), "-w", str(workspace), "-h", "127.0.0.1",
                                          "-p", str(config.web_port)],
                    env=env, cwd=root, probe=lambda: answers(web), url=web,
                    hint="Assets -> observations, candidates, verifier_evidence, checkpoints (partition = run)"),
        ServiceSpec("dagster-daemon", [_tool("dagster-daemon"), "run", "-w", str(workspace)],
                    env=env, cwd=root, probe=lambda: answers(web) and daemons_healthy(web),
                    url=f"{web}/automation", hint="sensors and schedules tick here"),
    ]
    if config.dashboard:
        dash = f"http://127.0.0.1:{config.dashboard_port}"
        specs.append(ServiceSpec(
            "dashboard", dashboard_command(root, config.dashboard_port),
            env=env, cwd=root, probe=lambda: http_ok(f"{dash}/_stcore/health"), url=dash,
            hint="the ops dashboard: handoff metrics (refreshed by Dagster every minute) and runs"))
    if config.fleet is not None:
        specs.append(ServiceSpec("fleet", config.fleet.argv(_tool("baton"), config.baton_home), env=env, cwd=root,
                                 hint=f"worker logs under {config.baton_home}/fleets/"))
    return specs


class _Stop(Exception):
    """SIGTERM (or SIGINT) arrived: stop the platform."""


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def where_to_look(config: PlatformConfig, ready: dict[str, float]) -> list[str]:
    """The lines printed once everything answers."""
    web = f"http://127.0.0.1:{config.web_port}"
    lines = [f"Baton platform is up ({', '.join(f'{name} {s}s' for name, s in ready.items())})",
             f"  Dagster UI      {web}",
             f"    asset lineage of a run:  {web}/asset-groups  (pick a run partition on any asset)",
             f"    verifier evidence:       {web}/assets/verifier_evidence  (STALE partitions, checks)",
             f"    handoff / reverification runs:  {web}/runs",
             f"    sensors and schedules:   {web}/automation"]
    if config.dashboard:
        lines.append(f"  Dashboard       http://127.0.0.1:{config.dashboard_port}")
    if config.fleet is not None:
        lines.append(f"  Fleet           {config.fleet.runs} runs ({config.fleet.kinds()}) over "
                     f"~{config.fleet.runs * config.fleet.launch_interval_s:.0f}s, chaos on, coordinator "
                     f"{config.fleet.coordinator}; logs in {config.dagster_home / 'logs'}")
    lines += [f"  Baton store     {config.database_url or config.baton_home / 'baton.db'}",
              f"  Inspect a run   BATON_HOME={config.baton_home} baton inspect RUN_ID",
              "Ctrl-C stops every process started here."]
    return lines


def run_platform(config: PlatformConfig, say: Callable[[str], None] = print) -> int:
    """Start the platform, print where to look, wait for Ctrl-C/SIGTERM, stop everything. Exit code."""
    refuse_if_ablated("baton platform")
    prepare_dagster_home(config)
    config.baton_home.mkdir(parents=True, exist_ok=True)
    procs = ProcessSet(log_dir=config.dagster_home / "logs")
    # Explicit handlers: started in the background, this process may have inherited SIGINT as ignored.
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        for spec in service_specs(config):
            say(f"starting {spec.name}")
            procs.start(spec)
            procs.write_state(config.state_file)
        ready = procs.wait_ready(config.ready_timeout_s)
        for line in where_to_look(config, ready):
            say(line)
        procs.write_state(config.state_file, ready=True)
        fleet_done = False
        while True:
            for managed in procs.exited():
                if managed.spec.name == "fleet" and not fleet_done:
                    fleet_done = True
                    code = 1 if managed.process.returncode else code  # an oracle failed: the demo fails
                    say(f"fleet finished (exit code {managed.process.returncode}); the UI stays up. Ctrl-C to stop.")
                elif managed.spec.name != "fleet":
                    raise ServiceFailed(f"{managed.spec.name} exited with code {managed.process.returncode}; "
                                        f"see {managed.log_path}")
            time.sleep(0.5)
    except (KeyboardInterrupt, _Stop):
        say("stopping ...")
    except ServiceFailed as exc:
        say(f"error: {exc}")
        code = 1
    finally:
        # A second Ctrl-C must not cut the clean-up short and leave processes behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        procs.stop_all(config.stop_grace_s)
        left = [m.spec.name for m in procs.services if m.group_alive()]
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        say("stopped every process" if not left else f"still running: {', '.join(left)}")
        if left:
            code = 1
    return code


def default_config(root: Path | None = None) -> PlatformConfig:
    """The embedded defaults of `make demo`: ./.baton and ./.dagster_home (or the environment's)."""
    base = root or Path.cwd()
    home = Path(os.environ.get("BATON_HOME") or base / ".baton")
    dagster_home = Path(os.environ.get("DAGSTER_HOME") or base / ".dagster_home")
    return PlatformConfig(baton_home=home, dagster_home=dagster_home, database_url=os.environ.get("BATON_DATABASE_URL"),
                          dagster_pg_url=os.environ.get(ENV_DAGSTER_PG_URL))
