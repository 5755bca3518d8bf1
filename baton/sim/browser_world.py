"""The browser agent's part of a simulated world: the web application as a target, and the `browser` tool.

A world with browser runs (`SimConfig.kinds` holds `RunKind.BROWSER`) gets what
the live fleet gives them, over the simulated network:

- the web application's own app (`baton.targets.webapp_service.create_app`)
  over its record files under the world's root, trusting the world's
  authority keys (published beside it, `TRUST_FILE`);
- the browser pool placement of the catalog (only a placement with a browser
  pool may host a browser run), with a worker and supervisor like the others;
- runs launched with the fleet's browser task (`fleet_plan.browser_spec`);
- in each worker, as `Worker` does: the app as a gateway target and fence
  target, its reads as the `webapp` tool, and a `TwinPool` (one cookie jar per
  run, never shared between worker processes) as the `browser` tool.

The app draws its draft ids, session ids and CSRF tokens from `secrets`; in a
world they come from the seed instead (`seeded_tokens`), or no trail would
replay: draft ids appear in every page path.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from baton.authority import AuthorityService
from baton.durable_files import read_json, write_json
from baton.models import AuthorityLevel, Placement, RunKind
from baton.placements import DEFAULT_PLACEMENTS, hosts_kind
from baton.runtime.fleet_plan import browser_spec
from baton.sim.browser_twin import TwinPool
from baton.sim.scheduler import Process
from baton.targets import webapp_service, webapp_state
from baton.targets.webapp_service import WebappClient

if TYPE_CHECKING:
    from baton.sim.world import World

WEBAPP = webapp_service.SERVICE_NAME
WEBAPP_URL = "http://webapp.sim"
TRUST_FILE = "webapp-jwks.json"
"""The world's authority keys as the web application reads them (beside its data directory, which is reset)."""
INTENT_FILE = "browser-intent.json"
"""run id -> the task its owner launched it with (`{account, answers}`), written before the run starts."""
BROWSER_PLACEMENTS: tuple[Placement, ...] = tuple(p for p in DEFAULT_PLACEMENTS if hosts_kind(p, RunKind.BROWSER))


def hosts_browser(kinds: tuple[RunKind, ...]) -> bool:
    """True when a world with these runs needs the web application and a browser pool."""
    return RunKind.BROWSER in kinds


def webapp_app(data_dir: Path) -> Any:
    """The web application's own app over `data_dir`, trusting the key set in `TRUST_FILE` beside it."""
    trust = data_dir.parent / TRUST_FILE
    if not trust.exists():  # the app reads the key set when built; each world publishes its own (`publish_trust`)
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        write_json(trust, {"keys": []})
    return webapp_service.create_app(data_dir, trust=trust)


def prepare(root: Path, authority: AuthorityService) -> None:
    """A new world in `root`: publish its authority keys where the app reads them (the app re-reads a replaced
    file) and forget the owners' intents of the world before (the directory is reused world after world)."""
    write_json(root / TRUST_FILE, authority.trusted_keys().to_jwks())
    (root / INTENT_FILE).unlink(missing_ok=True)


def world_placements(kinds: tuple[RunKind, ...], base: tuple[Placement, ...]) -> tuple[Placement, ...]:
    """The world's placements: `base`, and the browser pool when browser runs need it."""
    return base + BROWSER_PLACEMENTS if hosts_browser(kinds) else base


def browser_launch(root: Path, run_id: str, index: int) -> tuple[Placement, dict[str, JsonValue], AuthorityLevel]:
    """Placement, task input and authority of the fleet's browser run number `index`; the owner's intent (the
    task) is recorded in `INTENT_FILE` first, for the oracles."""
    spec = browser_spec(run_id, BROWSER_PLACEMENTS[index % len(BROWSER_PLACEMENTS)], index)
    intents = read_json(root / INTENT_FILE) or {}
    write_json(root / INTENT_FILE, {**intents, run_id: spec.task_input})
    return spec.placement, dict(spec.task_input), spec.authority


def webapp_client(world: World, process: Process) -> WebappClient:
    """The app's machine side as `process` reaches it over the world's network."""
    return WebappClient(WEBAPP_URL, timeout_s=world.config.target_timeout_s,
                        transport=world.network.transport(WEBAPP, process))


def fence_clients(world: World, process: Process) -> tuple[WebappClient, ...]:
    """The web application as a fence target of `process` (a coordinator), in worlds with browser runs."""
    return (webapp_client(world, process),) if hosts_browser(world.config.kinds) else ()


def lend(world: World, process: Process, targets: dict[str, Any], tools: dict[str, object]) -> tuple[WebappClient, ...]:
    """What the live worker adds for browser runs (see `baton.runtime.worker.Worker`): the app as a target and
    the `webapp` and `browser` tools, for a worker `process`; its fence targets (none without browser runs)."""
    if not hosts_browser(world.config.kinds):
        return ()
    webapp = webapp_client(world, process)
    targets[webapp.name] = webapp
    tools.update(webapp=webapp, browser=TwinPool(WEBAPP_URL, world.network.transport(WEBAPP, process),
                                                 timeout_s=world.config.target_timeout_s))
    return (webapp,)


@dataclasses.dataclass
class _SeededSecrets:
    """The part of `secrets` the web application uses, drawn from a seeded generator."""

    rng: random.Random

    def token_hex(self, nbytes: int = 32) -> str:
        return self.rng.randbytes(nbytes).hex()

    def token_urlsafe(self, nbytes: int = 32) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(nbytes)).rstrip(b"=").decode("ascii")


@contextlib.contextmanager
def seeded_tokens(seed: int) -> Iterator[None]:
    """The web application's ids and tokens drawn from `seed` while a world runs (its own module only)."""
    original = webapp_state.secrets
    webapp_state.secrets = _SeededSecrets(random.Random(f"webapp-tokens:{seed}"))  # type: ignore[assignment]
    try:
        yield
    finally:
        webapp_state.secrets = original
