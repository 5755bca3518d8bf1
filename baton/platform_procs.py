"""A small process manager: start service processes in their own sessions, wait until they answer, stop them all.

Every process is started with `start_new_session=True`, so it leads a process
group of its own and everything it spawns (Dagster's code servers, Streamlit's
script runners, the fleet's workers and target services) stays in that group.
Stopping sends SIGINT to the whole group, then SIGTERM, then SIGKILL, each after
a grace period, and waits until the group is empty: nothing started here
outlives `ProcessSet.stop_all`.

A process started from a non-interactive shell inherits SIGINT as ignored, and
some (`dagster dev`) then ignore SIGTERM too; a fresh session with SIGINT and
SIGTERM restored to their defaults avoids both traps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Probe = Callable[[], bool]
"""Returns True once the service answers; must not raise for "not yet"."""


@dataclass(frozen=True)
class ServiceSpec:
    """How to start one service and how to tell that it is ready."""

    name: str
    argv: Sequence[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    probe: Probe | None = None
    url: str | None = None
    hint: str = ""


@dataclass
class Managed:
    """A started service: its process (the leader of its own process group) and its log."""

    spec: ServiceSpec
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pgid(self) -> int:
        return self.process.pid  # a session leader's pgid is its pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def group_alive(self) -> bool:
        """True while any process of this service's group is still there."""
        return group_exists(self.pgid)


def group_exists(pgid: int) -> bool:
    """True while process group `pgid` has a member (zombies of ours are reaped first)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _restore_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class ServiceFailed(RuntimeError):
    """A service exited, or did not answer in time; the message names it and its log."""


@dataclass
class ProcessSet:
    """The services of one platform, started in order and stopped in reverse order."""

    log_dir: Path
    services: list[Managed] = field(default_factory=list)

    def start(self, spec: ServiceSpec) -> Managed:
        """Start `spec` in a new session, its output going to `<log_dir>/<name>.log`."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{spec.name}.log"
        env = {**os.environ, **spec.env}
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                list(spec.argv), cwd=spec.cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_restore_signals,
            )
        managed = Managed(spec, process, log_path)
        self.services.append(managed)
        return managed

    def wait_ready(self, timeout_s: float, *, poll_s: float = 0.5) -> dict[str, float]:
        """Poll every probe until each answers; seconds from now to each service's first answer.

        Raises `ServiceFailed` if a service exits first or `timeout_s` passes.
        """
        started = time.monotonic()
        pending = {m.spec.name: m for m in self.services if m.spec.probe is not None}
        ready: dict[str, float] = {}
        while pending:
            for name, managed in list(pending.items()):
                if not managed.alive():
                    raise ServiceFailed(f"{name} exited with code {managed.process.returncode} before it answered; "
                                        f"see {managed.log_path}")
                assert managed.spec.probe is not None
                if managed.spec.probe():
                    ready[name] = round(time.monotonic() - started, 2)
                    del pending[name]
            if pending and time.monotonic() - started > timeout_s:
                names = ", ".join(sorted(pending))
                raise ServiceFailed(f"no answer from {names} within {timeout_s:.0f}s; see the logs in {self.log_dir}")
            if pending:
                time.sleep(poll_s)
        return ready

    def exited(self) -> list[Managed]:
        """Services whose leading process has exited."""
        return [m for m in self.services if not m.alive()]

    def stop(self, managed: Managed, grace_s: float = 10.0) -> None:
        """SIGINT the service's group, then SIGTERM, then SIGKILL, until the group is empty."""
        for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            if not managed.group_alive() and not managed.alive():
                break
            try:
                os.killpg(managed.pgid, sig)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                managed.process.poll()  # reap the leader, so an exited group really is empty
                if not managed.group_alive():
                    break
                time.sleep(0.1)
        managed.process.poll()

    def stop_all(self, grace_s: float = 10.0) -> None:
        """Stop every service, the last started first."""
        for managed in reversed(self.services):
            self.stop(managed, grace_s)

    def state(self) -> dict[str, object]:
        """What was started, for a state file: name, pid, process group, URL, log."""
        return {
            "manager_pid": os.getpid(),
            "services": [
                {"name": m.spec.name, "pid": m.process.pid, "pgid": m.pgid, "url": m.spec.url, "log": str(m.log_path)}
                for m in self.services
            ],
        }

    def write_state(self, path: Path, *, ready: bool = False) -> None:
        """Write `state()` as JSON (atomically), so a test or an operator can find every process.

        `ready` is true once every service answered and where to look was printed.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps({**self.state(), "ready": ready}, indent=2, sort_keys=True))
        tmp.replace(path)
