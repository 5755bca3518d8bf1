"""Run a target service as a real subprocess on a free loopback port.

The service binds port 0 itself and publishes the bound port in `DIR/port`, so
there is no race for a port between choosing it and binding it. `start` waits
until `/health` answers; `stop` sends SIGTERM and escalates to SIGKILL; `kill`
is SIGKILL straight away (a crash, as chaos wants it). The child's output goes
to `DIR/service.log`.

    with ServiceProcess.deploy(tmp / "deploy", ambiguous_rate=0.2, seed=3) as deploy:
        client = DeployClient(deploy.url)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import httpx

from baton.parent_watch import detached_child
from baton.targets.http_server import PORT_FILE

DEPLOY_MODULE = "baton.targets.deploy_service"
CORPUS_MODULE = "baton.targets.corpus_service"


def target_data_dir(service: str, baton_home: Path | str | None = None) -> Path:
    """Where a target keeps its records: `BATON_HOME/targets/<service>/` (BATON_HOME defaults to ./.baton)."""
    home = Path(baton_home) if baton_home is not None else Path(os.environ.get("BATON_HOME", ".baton"))
    return home / "targets" / service


class ServiceStartError(RuntimeError):
    """The service exited or did not answer /health in time."""


class ServiceProcess:
    """One target service subprocess bound to a data directory."""

    def __init__(self, module: str, data_dir: Path | str, args: Sequence[str] = ()) -> None:
        self.module = module
        self.data_dir = Path(data_dir)
        self.args = tuple(args)
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def deploy(
        cls, data_dir: Path | str, *, ambiguous_rate: float = 0.0, seed: int = 0, ambiguous_delay_s: float = 5.0,
        guard: Sequence[str] = (),
    ) -> ServiceProcess:
        """A (not yet started) deploy service; `guard` from `TargetPolicy.arguments` makes it check capabilities."""
        args = ["--ambiguous-rate", str(ambiguous_rate), "--seed", str(seed), "--ambiguous-delay-s", str(ambiguous_delay_s)]
        return cls(DEPLOY_MODULE, data_dir, [*args, *guard])

    @classmethod
    def corpus(
        cls, data_dir: Path | str, *, seed: int = 0, drift_every_s: float = 0.0, guard: Sequence[str] = ()
    ) -> ServiceProcess:
        """A (not yet started) corpus service; `guard` as for `deploy`."""
        return cls(CORPUS_MODULE, data_dir, ["--seed", str(seed), "--drift-every-s", str(drift_every_s), *guard])

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 30.0, *, detached: bool = False) -> ServiceProcess:
        """Start the service and return once it answers /health.

        `detached`: in its own process group, stopped only by this process (`baton.parent_watch`)."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port_file = self.data_dir / PORT_FILE
        port_file.unlink(missing_ok=True)
        command = [sys.executable, "-m", self.module, "--data", str(self.data_dir), "--port", "0", *self.args]
        with open(self.data_dir / "service.log", "ab") as log:
            self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          **(detached_child() if detached else {}))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServiceStartError(
                    f"{self.module} exited with {self._proc.returncode}; see {self.data_dir / 'service.log'}"
                )
            if port_file.exists():
                self.url = f"http://127.0.0.1:{int(port_file.read_text())}"
                try:
                    if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise ServiceStartError(f"{self.module} did not answer /health within {timeout_s}s")

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if the service is still there after `grace_s`."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL: the service dies without finishing anything."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def restart(self, timeout_s: float = 30.0) -> ServiceProcess:
        """Stop and start again on the same data directory (a new port)."""
        self.stop()
        return self.start(timeout_s)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
