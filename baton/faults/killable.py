"""A source worker in its own process, to be SIGKILLed by its scenario.

`python -m baton.faults.killable --root DIR --case ID --seed S --strategy NAME --until BOUNDARY --kill POINT`
opens the scenario's world (without its targets), starts the run, drives it
to BOUNDARY, then on to the kill point; there it prints `READY {...}` and
blocks until the parent kills it. Nothing it did is lost or tidied up: the
parent sees exactly what a vanished process leaves behind.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from baton.faults.cases import CASES
from baton.faults.strategies import STRATEGIES
from baton.faults.tasks import TASKS
from baton.faults.world import World
from baton.models import Boundary


def _block(point: str) -> None:
    print("READY " + json.dumps({"point": point}), flush=True)
    while True:
        time.sleep(60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--case", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--strategy", required=True, choices=sorted(STRATEGIES))
    parser.add_argument("--until", required=True)
    parser.add_argument("--kill", required=True)
    args = parser.parse_args(argv)
    config = CASES[args.case].config(args.seed)
    world = World(args.root, config, open_targets=False)
    worker = STRATEGIES[args.strategy].start(world, TASKS[config.task], config.source)
    worker.on_kill = _block
    worker.arm(args.kill)
    worker.run_to(Boundary(args.until))
    worker.step()
    print("NOT-KILLED", flush=True)
    sys.exit(3)


if __name__ == "__main__":
    main()
