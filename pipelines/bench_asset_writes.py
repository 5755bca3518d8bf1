"""Runless asset events written one by one (Dagster's public call) against `assets.writes`, side by side.

`python -m pipelines.bench_asset_writes [--storage sqlite|postgres] [--runs N]` writes, for N runs, one
observation of `observations` and of `candidates` and one materialization of `verifier_evidence` per run
partition, each way on a fresh instance, alternating twice, and prints the seconds and the ratio.
`--storage postgres` needs BATON_TEST_DATABASE_URL (a server it may create databases on) and uses the
dagster.yaml's documented PostgreSQL block. Results: docs/benchmarks.md, section 5.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg
import yaml
from dagster import AssetKey, AssetMaterialization, AssetObservation, DagsterInstance, instance_for_test

from assets.events import DATA_VERSION_TAG
from assets.writes import write_asset_events

Event = AssetMaterialization | AssetObservation
REPO = Path(__file__).resolve().parents[1]


def events(runs: int) -> list[Event]:
    """Three assets' newest versions for `runs` partitions, upstream first (what a catch-up tick reports)."""
    out: list[Event] = []
    for asset in ("observations", "candidates"):
        out += [AssetObservation(asset_key=AssetKey(asset), partition=f"run-{i}",
                                 tags={DATA_VERSION_TAG: f"{asset}-{i}"}, metadata={"n": i}) for i in range(runs)]
    out += [AssetMaterialization(asset_key=AssetKey("verifier_evidence"), partition=f"run-{i}",
                                 tags={DATA_VERSION_TAG: f"evidence-{i}"}, metadata={"n": i}) for i in range(runs)]
    return out


def one_by_one(instance: DagsterInstance, batch: Sequence[Event]) -> None:
    for event in batch:
        instance.report_runless_asset_event(event)


def batched(instance: DagsterInstance, batch: Sequence[Event]) -> None:
    write_asset_events(instance, batch)


def postgres_config() -> str:
    """dagster.yaml with its storage block swapped for the commented PostgreSQL one."""
    text = (REPO / "dagster.yaml").read_text()
    block = re.search(r"# BEGIN postgres storage\n(.*?)# END postgres storage", text, re.S)
    if block is None:
        raise SystemExit("dagster.yaml lost its documented PostgreSQL block")
    config = yaml.safe_load(text)
    config["storage"] = yaml.safe_load("\n".join(line.removeprefix("# ") for line in block.group(1).splitlines()))["storage"]
    return yaml.safe_dump(config)


@contextmanager
def fresh_instance(storage: str, name: str) -> Iterator[DagsterInstance]:
    with tempfile.TemporaryDirectory() as home:
        if storage == "sqlite":
            with instance_for_test(temp_dir=home) as instance:
                yield instance
            return
        server = os.environ["BATON_TEST_DATABASE_URL"]
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
        Path(home, "dagster.yaml").write_text(postgres_config())
        os.environ["DAGSTER_HOME"] = home
        os.environ["DAGSTER_PG_URL"] = re.sub(r"^postgres(ql)?://", "postgresql+psycopg2://",
                                              server.rsplit("/", 1)[0] + "/" + name)
        with DagsterInstance.get() as instance:
            yield instance
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args(argv)
    ways: dict[str, Callable[[DagsterInstance, Sequence[Event]], None]] = {"one_by_one": one_by_one, "batched": batched}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for round_number in range(2):
        for name, write in ways.items():
            with fresh_instance(args.storage, f"bench_writes_{round_number}_{name}") as instance:
                batch = events(args.runs)
                started = time.perf_counter()
                write(instance, batch)
                took = time.perf_counter() - started
            seconds[name].append(took)
            print(f"round {round_number} {name}: {took:.2f} s for {len(batch)} events "
                  f"({len(batch) / took:.0f}/s), load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"one_by_one / batched, best of 2: {min(seconds['one_by_one']) / min(seconds['batched']):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
