"""The coding agent's world in the simulation: the git remote's own app, the patch model provider, the task.

A world with coding runs hosts `baton.targets.git_remote_service`'s app behind
the simulated network (its records under `root/git/`: `pushes.jsonl`, the bare
repositories), and lends each worker what the live worker lends a coding run
(`baton.runtime.worker.Worker`): the remote as a gateway target, a fence target
and the `git` tool, and the patch model provider (`patch_model`, billing under
`root/providers/patch-model/`). The agent clones the bare repository from disk
and runs pytest in real subprocesses, as it does live; neither takes virtual
time. The run's task is the fleet's (`baton.runtime.fleet_plan.coding_task`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from baton.agents.coding_model import CALLS_FILE, PatchModelProvider, patch_model_dir
from baton.catalog.releases import RELEASES
from baton.models import AuthorityLevel, Placement, PortabilityConstraints, RunKind
from baton.runtime.fleet_plan import coding_task
from baton.runtime.launch import RunSpec
from baton.sim.network import Network
from baton.sim.scheduler import Process
from baton.targets.git_remote_repo import create_seed_repository
from baton.targets.git_remote_service import SERVICE_NAME, GitRemoteClient, repository_path

GIT_URL = f"http://{SERVICE_NAME}.sim"
GIT_TIMEOUT_FLOOR_S = 5.0
"""The live worker gives the git remote at least this long (`connect_git_remote(..., max(timeout, 5.0))`)."""


class CodingTwin:
    """What one world needs for its coding runs (only worlds that launch one build it)."""

    def __init__(self, root: Path, network: Network, target_timeout_s: float) -> None:
        self.root = root
        self.network = network
        self.timeout_s = max(target_timeout_s, GIT_TIMEOUT_FLOOR_S)
        self.model_dir = patch_model_dir(root)
        (self.model_dir / CALLS_FILE).unlink(missing_ok=True)  # the process's directory is reused world after world

    def spec(self, run_id: str, placement: Placement, constraints: PortabilityConstraints) -> RunSpec:
        """The fleet's coding run, on its own freshly seeded repository of the world's remote."""
        task = coding_task(run_id)
        create_seed_repository(repository_path(self.root / SERVICE_NAME, str(task["repository"])),
                               branch=str(task["branch"]))
        return RunSpec(run_id, RunKind.CODING, RELEASES["model-v7"], placement, "fix the failing tests", task,
                       AuthorityLevel.EXTERNAL_MUTATE, constraints=constraints)

    def client(self, process: Process) -> GitRemoteClient:
        """The git remote as `process` reaches it over the simulated network."""
        return GitRemoteClient(GIT_URL, timeout_s=self.timeout_s, transport=self.network.transport(SERVICE_NAME, process))

    def tools(self, remote: GitRemoteClient) -> dict[str, Any]:
        """The coding agent's tools, as the live worker lends them: the remote's reads and the patch model."""
        return {"git": remote, "patch_model": PatchModelProvider(self.model_dir)}
