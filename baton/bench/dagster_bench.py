"""`baton bench dagster`: sensor tick time, GraphQL latency and the archive step at N Baton runs.

Baton imports no Dagster. This module seeds a fresh Baton home with N real
runs (`baton.bench.dagster_seed`, Baton's own calls), prepares a fresh
DAGSTER_HOME with the project's `dagster.yaml`, and runs the Dagster half,
`python -m pipelines.bench_dagster`, as a subprocess over them; its JSON
progress lines drive a Rich progress bar and its JSON result is collected.
Results go to `docs/benchmarks-dagster.json` and a generated section of
`docs/benchmarks.md`.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from baton.bench import machine, report
from baton.bench.pg import PgServer, fresh_database, postgres_server
from baton.bench.dagster_seed import SeedPlan, seed_run
from baton.store.factory import open_blobs, open_store

PROJECT_ROOT = Path(__file__).resolve().parents[2]
JSON_NAME = "benchmarks-dagster.json"
SECTION = "dagster"
TITLE = "5. The Dagster platform at 1,000 and 10,000 runs"
CHUNK = 50
SHM = Path("/dev/shm")
STORAGES = ("sqlite", "postgres")
PG_BLOCK = re.compile(r"# BEGIN postgres storage\n(.*?)# END postgres storage", re.S)
SENSOR_ORDER = ("run_discovery", "release_change", "environment_change", "artifact_change", "lease_expiry",
                "freshness_reverification")


class DagsterBenchError(RuntimeError):
    """The Dagster half failed; the message carries its exit code and the tail of its output."""


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...] = (1000, 10000)
    samples: int = 10
    keep_finished: int = 200
    reverify: int = 3
    active_share: float = 0.1
    lapsed_share: float = 0.01
    seed_jobs: int = 2
    seed_on_tmpfs: bool = True
    """Seed on /dev/shm (fsync costs nothing there), then copy the home to the work directory."""
    storages: tuple[str, ...] = ("sqlite",)
    """Dagster's storage for each leg over the same seeded store: 'sqlite' (the default dagster.yaml) or
    'postgres' (dagster.yaml's documented dagster-postgres block, on a throwaway server)."""
    ticks_only: bool = False
    """Pass --ticks-only to the Dagster half: no catch-up (partitions in one call), GraphQL or daemon."""
    daemon_ticks: int = 2
    slow_queries: bool = False
    """Pass --slow-queries to the Dagster half: also time the stale status of every partition."""
    catch_up_budget_s: float | None = None
    """Seconds of ticks the catch-up may take before the rest is fast-forwarded (None: no limit)."""
    seeded_home: Path | None = None
    """A Baton home seeded earlier by the same plan, copied instead of seeding again (seeding then not timed)."""
    parallel_legs: bool = False
    """Run the storages' legs at once (each a subprocess) instead of one after the other."""

    def __post_init__(self) -> None:
        if self.catch_up_budget_s is not None and self.catch_up_budget_s <= 0:
            raise ValueError("--catch-up-budget must be positive")
        if self.seeded_home is not None and not (self.seeded_home / "baton.db").is_file():
            raise ValueError(f"--seeded-home {self.seeded_home} holds no baton.db")
        if self.seeded_home is not None and len(self.sizes) != 1:
            raise ValueError("--seeded-home goes with exactly one --runs size")
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError("--runs needs at least one positive size")
        if self.samples < 1:
            raise ValueError("--samples must be at least 1")
        unknown = [s for s in self.storages if s not in STORAGES]
        if not self.storages or unknown or len(set(self.storages)) != len(self.storages):
            raise ValueError(f"--storage takes a comma-separated subset of {', '.join(STORAGES)}, "
                             f"each once; got {','.join(self.storages) or 'nothing'}")
        if self.daemon_ticks < 0:
            raise ValueError("--daemon-ticks must be >= 0")
        if self.keep_finished < 0 or self.reverify < 0:
            raise ValueError("--keep-finished and --reverify must be >= 0")
        SeedPlan(1, active_share=self.active_share, lapsed_share=self.lapsed_share)  # validates the shares


def _seed_chunk(home: str, plan: SeedPlan, indices: list[int]) -> int:
    """Seed the runs `indices` of `plan` into `home` (one worker process's share)."""
    store = open_store(None, Path(home))
    try:
        blobs = open_blobs(Path(home), store)
        for index in indices:
            seed_run(store, blobs, plan, index)
    finally:
        store.close()
    return len(indices)


def _seed(home: Path, plan: SeedPlan, jobs: int, progress: Progress, task: TaskID) -> float:
    """Seed every run of `plan` into `home` with `jobs` processes (SQLite WAL serialises their commits)."""
    started = time.perf_counter()
    _seed_chunk(str(home), plan, [0])  # one first, alone: the schema and the catalog are created once
    indices = list(range(1, plan.runs))
    chunks = [indices[i:i + CHUNK] for i in range(0, len(indices), CHUNK)]
    done = 1
    progress.update(task, completed=done)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for finished in as_completed([pool.submit(_seed_chunk, str(home), plan, chunk) for chunk in chunks]):
            done += finished.result()
            progress.update(task, completed=done)
    return time.perf_counter() - started


def _drive(argv: list[str], progress: Progress, task: TaskID, log: Path, env: dict[str, str]) -> None:
    """Run the Dagster half; each JSON progress line moves the bar; its other output goes to `log`."""
    with open(log, "w") as sink:
        process = subprocess.Popen(argv, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=sink, text=True, env=env)
        assert process.stdout is not None
        for line in process.stdout:
            try:
                step = json.loads(line)
            except ValueError:
                sink.write(line)
                continue
            total = step.get("total") or None
            progress.update(task, description=f"  {step.get('phase', '')}", total=total, completed=step.get("done", 0))
        code = process.wait()
    if code != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise DagsterBenchError(f"python -m pipelines.bench_dagster exited with {code}:\n{tail}")


def postgres_dagster_yaml(text: str) -> str:
    """`dagster.yaml` with its storage block replaced by the dagster-postgres block it documents."""
    block = PG_BLOCK.search(text)
    if block is None:
        raise DagsterBenchError("dagster.yaml has no '# BEGIN postgres storage' ... '# END postgres storage' block")
    storage = "\n".join(line.removeprefix("# ") for line in block.group(1).splitlines())
    config = yaml.safe_load(text)
    config["storage"] = yaml.safe_load(storage)["storage"]
    return yaml.safe_dump(config, sort_keys=False)


def psycopg2_url(url: str) -> str:
    """The same server URL with the psycopg2 scheme dagster-postgres needs (dagster.yaml says why)."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg2://", url)


def _leg(runs: int, storage: str, seed_home: Path, root: Path, options: Options, progress: Progress, task: TaskID,
         pg: PgServer | None) -> dict[str, Any]:
    """The Dagster half over a fresh copy of the seeded store, with a fresh Dagster instance on `storage`."""
    leg = root / storage
    home, dagster_home = leg / "baton-home", leg / "dagster-home"
    dagster_home.mkdir(parents=True)
    progress.update(task, description=f"{runs:,} runs, {storage}: copying the store", completed=0, total=None)
    started = time.perf_counter()
    shutil.copytree(seed_home, home)  # the store is closed: its SQLite file and WAL copy whole
    copied_s = time.perf_counter() - started
    documented = (PROJECT_ROOT / "dagster.yaml").read_text()
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_PG_URL", "DAGSTER_HOME", "BATON_DATABASE_URL")}
    out = leg / "result.json"
    argv = [sys.executable, "-m", "pipelines.bench_dagster", "--baton-home", str(home),
            "--dagster-home", str(dagster_home), "--runs", str(runs), "--samples", str(options.samples),
            "--keep-finished", str(options.keep_finished), "--reverify", str(options.reverify),
            "--active-share", str(options.active_share), "--lapsed-share", str(options.lapsed_share),
            "--daemon-ticks", str(options.daemon_ticks), "--out", str(out)]
    argv += ["--ticks-only"] if options.ticks_only else []
    argv += ["--slow-queries"] if options.slow_queries else []
    argv += ["--catch-up-budget", str(options.catch_up_budget_s)] if options.catch_up_budget_s else []
    progress.update(task, description=f"{runs:,} runs, {storage}: Dagster")
    if storage == "postgres":
        if pg is None:
            raise DagsterBenchError("the postgres leg needs a PostgreSQL server")
        (dagster_home / "dagster.yaml").write_text(postgres_dagster_yaml(documented))
        with fresh_database(pg.url, prefix="bench_dagster") as database:
            env["DAGSTER_PG_URL"] = psycopg2_url(database.url)
            _drive(argv, progress, task, leg / "driver.log", env)
            stored = database.stored_bytes()
    else:
        (dagster_home / "dagster.yaml").write_text(documented)
        _drive(argv, progress, task, leg / "driver.log", env)
        stored = None
    result: dict[str, Any] = json.loads(out.read_text())
    if result.get("dagster_storage") != storage:
        raise DagsterBenchError(f"the {storage} leg ran on {result.get('dagster_storage')} storage")
    result["storage"] = storage
    result["postgres_database_bytes"] = stored
    result["postgres_origin"] = pg.origin if storage == "postgres" and pg is not None else None
    result["copy_s"] = round(copied_s, 2)
    return result


def run_size(runs: int, options: Options, workdir: Path | None, progress: Progress,
             pg: PgServer | None = None) -> Iterator[dict[str, Any]]:
    """Seed `runs` runs once, then measure them under a fresh Dagster instance per storage in `options.storages`.

    Yields each storage's result as soon as it is measured.
    """
    root = Path(tempfile.mkdtemp(prefix=f"baton-bench-dagster-{runs}-", dir=workdir))
    on_tmpfs = options.seed_on_tmpfs and SHM.is_dir()
    seed_root = Path(tempfile.mkdtemp(prefix=f"baton-bench-seed-{runs}-", dir=SHM)) if on_tmpfs else root
    try:
        seed_home = seed_root / "seed-home"
        plan = SeedPlan(runs, active_share=options.active_share, lapsed_share=options.lapsed_share)
        task = progress.add_task(f"{runs:,} runs: seeding the Baton store", total=runs)
        load_before = os.getloadavg()
        if options.seeded_home is None:
            seed_home.mkdir()
            seeded_s: float | None = _seed(seed_home, plan, options.seed_jobs, progress, task)
        else:
            seed_home, seeded_s = options.seeded_home, None
        legs = [(storage, progress.add_task(f"{runs:,} runs, {storage}", total=None)) for storage in options.storages]
        with ThreadPoolExecutor(max_workers=len(legs) if options.parallel_legs else 1) as pool:
            futures = [pool.submit(_leg, runs, storage, seed_home, root, options, progress, leg_task, pg)
                       for storage, leg_task in legs]
            for future in futures:
                result = future.result()
                result["measured_at"] = machine.describe(workdir)["measured_at"]
                result["seed_s"] = None if seeded_s is None else round(seeded_s, 2)
                result["seed_ms_per_run"] = None if seeded_s is None else round(seeded_s * 1000.0 / runs, 2)
                if seeded_s is None:
                    result["seed_note"] = f"not timed: a copy of {options.seeded_home}, seeded earlier by the same plan"
                result["seed_load_average"] = [round(x, 2) for x in load_before]
                result["seeded_on"] = "tmpfs (/dev/shm), copied to the work directory" if on_tmpfs else "the work directory"
                result["seed_jobs"] = options.seed_jobs
                result["samples"] = options.samples
                result["legs_in_parallel"] = options.parallel_legs and len(legs) > 1
                yield result
        progress.update(task, description=f"{runs:,} runs: done", completed=1, total=1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if seed_root != root:
            shutil.rmtree(seed_root, ignore_errors=True)


# ---------------------------------------------------------------------------- report

def label(r: dict[str, Any]) -> str:
    """A result's column label: its size, and Dagster's storage (results before storages were SQLite)."""
    return f"@{r['runs']:,} {r.get('storage', 'sqlite')}"


def result_key(r: dict[str, Any]) -> tuple[int, int]:
    return int(r["runs"]), STORAGES.index(r.get("storage", "sqlite"))


def tick_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["sensor / schedule"]
    for r in results:
        header += [f"idle p50 {label(r)}", f"change p50 (p95) {label(r)}"]
    rows = []
    for name in SENSOR_ORDER:
        row = [f"`{name}`"]
        for r in results:
            t = r["ticks"][name]
            row += [f"{t['idle']['p50_ms']:.1f}", f"{t['change']['p50_ms']:.1f} ({t['change']['p95_ms']:.1f})"]
        rows.append(row)
    return header, rows


def _latency(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "not measured"
    if entry.get("error"):
        return f"error: {entry['error'][:80]}"
    if entry.get("timed_out_after_s") is not None:
        return f"timed out (> {entry['timed_out_after_s']:.0f} s)"
    return f"{entry['p50_ms']:.1f} / {entry['p95_ms']:.1f}"


def graphql_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["GraphQL query"] + [f"p50 / p95 ms {label(r)}" for r in results]
    names = list(dict.fromkeys(n for r in results for n in r.get("graphql", {})))
    rows = [[f"`{n}`"] + [_latency(r.get("graphql", {}).get(n)) for r in results] for n in names]
    after = list(dict.fromkeys(n for r in results for n in r.get("graphql_after_archive", {})))
    rows += [[f"`{n}` after archiving"] + [_latency(r.get("graphql_after_archive", {}).get(n)) for r in results]
             for n in after]
    return header, rows


def _seed_cell(r: dict[str, Any]) -> str:
    if r.get("seed_s") is None:
        return r.get("seed_note", "not recorded")
    return (f"{r['seed_s']:.1f} s ({r['seed_ms_per_run']:.1f} ms/run, {r.get('seed_jobs', 1)} processes, "
            f"{r.get('seeded_on', 'the work directory')})")


def _catch_up_cell(r: dict[str, Any]) -> str:
    c = r["catch_up"]
    if "skipped" in c:
        return f"not measured ({c['skipped']}; {c['add_partitions_s']:.2f} s)" + (
            f"; {r['catch_up_note']}" if r.get("catch_up_note") else "")
    text = f"{c['total_s']:.1f} s in {c['ticks']} ticks, {c['materializations_written']:,} materializations"
    if "observations_written" in c:
        text += (f" + {c['observations_written']:,} observations; of which {c['daemon_share_write_s']:.1f} s "
                 f"writing the materializations in batches")
    if c.get("stopped_at_budget"):
        text = (f"STOPPED at its {c['budget_s']:.0f} s budget: events up to seq {c['reached_seq']:,} of "
                f"{c['baton_events_read']:,} read, {c['partitions_reported']:,} runs reported; " + text
                + f"; {c['asset_events_per_s']:.1f} asset events/s; the rest fast-forwarded (partitions in one call)")
    return text


def setup_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["step"] + [label(r) for r in results]
    rows = [
        ["seeding the Baton store (Baton's calls; setup, not a measured figure)"] + [_seed_cell(r) for r in results],
        ["Baton events read by discovery"] + [f"{r['catch_up']['baton_events_read']:,}" for r in results],
        ["discovery catch-up from cursor 0 (every run's versions reported)"] + [_catch_up_cell(r) for r in results],
        ["partitions after catch-up"] + [f"{r['catch_up']['partitions']:,}" for r in results],
        ["`reverification_job` in process (p50)"] + [
            f"{r['reverification_job']['p50_ms'] / 1000:.2f} s" if r.get("reverification_job", {}).get("n")
            else "not measured" for r in results],
        ["dagster-webserver first GraphQL answer"] + [
            f"{r['webserver_ready_s']:.1f} s" if "webserver_ready_s" in r else "not measured" for r in results],
    ]
    return header, rows


def _daemon_cell(r: dict[str, Any], name: str) -> str:
    ticks = r.get("daemon_ticks")
    if not ticks:
        return "not measured"
    if "failed" in ticks:
        return f"failed: {ticks['failed'][:120]}"
    entry = ticks.get(name) or {"n": 0}
    if not entry.get("n"):
        return f"no finished tick in {ticks['budget_s']:.0f} s"
    runs = f", {entry['runs_requested']} runs requested" if entry.get("runs_requested") else ""
    failed = entry["statuses"].count("FAILURE")
    return (f"{entry['p50_ms'] / 1000:.2f} s (max {entry['max_ms'] / 1000:.2f}, n={entry['n']}{runs}"
            + (f", {failed} FAILED" if failed else "") + ")")


def daemon_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["sensor (dagster-daemon's own tick records)"] + [label(r) for r in results]
    return header, [[f"`{n}`"] + [_daemon_cell(r, n) for r in results] for n in SENSOR_ORDER[:-1]]


def _load(values: Sequence[float] | None) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "not recorded"


def load_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["load average (1 / 5 / 15 min)"] + [label(r) for r in results]
    return header, [
        ["before seeding"] + [_load(r.get("seed_load_average")) for r in results],
        ["before the catch-up"] + [_load(r.get("catch_up", {}).get("load_average_before")) for r in results],
        ["after the catch-up"] + [_load(r.get("catch_up", {}).get("load_average_after")) for r in results],
        ["at the end of the leg"] + [_load(r.get("load_average_last")) for r in results],
    ]


def archive_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["archive step"] + [label(r) for r in results]
    a = [r["archive"] for r in results]
    rows = [
        ["finished runs kept as partitions"] + [str(x["keep_finished"]) for x in a],
        ["partitions before"] + [f"{x['partitions_before']:,}" for x in a],
        ["partitions after"] + [f"{x['partitions_after']:,}" for x in a],
        ["archived (partitions deleted)"] + [f"{x['archived']:,}" for x in a],
        ["discovery tick that archived"] + [f"{x['tick_ms'] / 1000:.2f} s" for x in a],
        ["runs still in Baton's store, with history"] + [
            f"{x['baton_runs']:,} ({'yes' if x['history_kept_in_baton_store'] else 'NO'})" for x in a],
    ]
    return header, rows


NOTES = (
    "- catch-up: the real `run_discovery` ticked from cursor 0 until its cursor stops at the newest event. "
    "Since stop 23 the sensor writes every asset event itself, batched (`assets/writes.py`): one batch per asset "
    "and event type per tick, one INSERT on dagster-postgres (`store_event_batch`), one transaction per shard on "
    "SQLite; it returns none for the daemon to write one by one. Figures in this section measured before that "
    "change describe the old path (observations one `report_runless_asset_event` each, materializations returned "
    "to the daemon); the write path alone, old against new: `python -m pipelines.bench_asset_writes`",
    "- GraphQL: each query once to warm up, then `samples` timed round trips to the real `dagster-webserver` on "
    "loopback; `asset_catalog`, `lineage_of_one_run` and `run_partition_page` are the queries behind the UI's "
    "asset catalog, a run's lineage and a run's partition page (one active run's partition)",
    "- daemon ticks: after GraphQL, the real `dagster-daemon run` on the same instance, each sensor's cursor set with "
    "the `setSensorCursor` mutation to where the bench's own ticks left it; the durations are Dagster's tick "
    "records (end minus start). `lease_expiry`'s first tick requests a `handoff_job` per lapsed run, and the "
    "daemon's run queue starts them while the other ticks are read",
)


def run_notes(results: Sequence[dict[str, Any]]) -> list[str]:
    """Notes that hold only for some results: legs run at once, catch-ups stopped at their budget."""
    notes = []
    together = sorted({r["runs"] for r in results if r.get("legs_in_parallel")})
    if together:
        notes.append("- the storages' columns at " + ", ".join(f"{n:,}" for n in together) + " runs ran at the same "
                     "time (one subprocess each, over copies of one seeded store), so they shared the 2 cores")
    stopped = [label(r) for r in results if r.get("catch_up", {}).get("stopped_at_budget")]
    if stopped:
        notes.append("- a catch-up marked STOPPED (" + ", ".join(stopped) + ") ran out of its `--catch-up-budget`: "
                     "its rate is measured; the runs it had not reached were then added as partitions in one call "
                     "(no asset events), so Dagster holds versions only for the runs it reached, and every later "
                     "figure is over all the partitions")
    return notes


Rows = Callable[[Sequence[dict[str, Any]]], tuple[list[str], list[list[str]]]]


def tables() -> list[tuple[str, str, Rows]]:
    """Each table of the report: its Markdown heading, its console title, and its rows."""
    return [
        ("**Setup**", "setup", setup_rows),
        ("**Sensor and schedule ticks, ms** (the real sensor functions, their results applied as the daemon "
         "applies them; idle: nothing new; change: one new candidate, one new run, one placement's environment "
         "changed since the last tick)", "sensor ticks (ms)", tick_rows),
        ("**GraphQL on dagster-webserver (loopback), ms**", "GraphQL (ms)", graphql_rows),
        ("**The real dagster-daemon at the same state** (each sensor's cursor first set over GraphQL to where the "
         "ticks above left it; p50 of end minus start of its finished ticks)", "dagster-daemon ticks", daemon_rows),
        ("**Load average while measuring** (2 cores shared with other work)", "load average", load_rows),
        ("**Partition hygiene**", "archive", archive_rows),
    ]


def markdown_section(document: dict[str, Any]) -> str:
    results = document["results"]
    commands = sorted({r.get("command", document["command"]) for r in results})
    parts = [
        "Generated by " + " and ".join(f"`{c}`" for c in commands) + " (measured "
        + ", ".join(f"{label(r)} at {r.get('measured_at', '?')}" for r in results) + ").",
        "",
        *report.machine_lines(document["machine"]),
        f"- Dagster {document['dagster']}, a fresh instance per column: `sqlite` is the project's dagster.yaml "
        "(SQLite under DAGSTER_HOME), `postgres` its documented dagster-postgres block (`DAGSTER_PG_URL`, "
        "postgresql+psycopg2) on a throwaway PostgreSQL server; Baton's store on SQLite, the same seeded copy "
        "for every column of one size",
        "- samples (rounds of ticks, and timed requests per query): "
        + ", ".join(f"{r.get('samples', document['options']['samples'])} at {r['runs']:,} runs" for r in results) + "; "
        f"{document['options']['active_share']:.0%} of runs active, {document['options']['lapsed_share']:.0%} "
        "with a lapsed lease, the rest finished",
        *NOTES,
        *run_notes(results),
        "",
    ]
    for heading, _, rows in tables():
        parts += [heading, "", report.md_table(*rows(results)), ""]
    return "\n".join(parts)


def print_tables(document: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    for _, title, rows in tables():
        header, body = rows(document["results"])
        table = Table(title=title)
        for column in header:
            table.add_column(column)
        for row in body:
            table.add_row(*[cell.replace("`", "") for cell in row])
        console.print(table)


def command_line(options: Options, out: Path | None) -> str:
    sizes = ",".join(str(s) for s in options.sizes)
    text = f"baton bench dagster --runs {sizes} --samples {options.samples} --keep-finished {options.keep_finished}"
    if options.storages != ("sqlite",):
        text += f" --storage {','.join(options.storages)}"
    if options.daemon_ticks != Options.daemon_ticks:
        text += f" --daemon-ticks {options.daemon_ticks}"
    text += " --ticks-only" if options.ticks_only else ""
    text += " --slow-queries" if options.slow_queries else ""
    text += f" --catch-up-budget {options.catch_up_budget_s:g}" if options.catch_up_budget_s else ""
    text += f" --seeded-home {options.seeded_home}" if options.seeded_home else ""
    text += " --parallel-legs" if options.parallel_legs else ""
    return text + (f" --out {out}" if out is not None else "")


def _previous(out: Path | None) -> dict[tuple[int, str], dict[str, Any]]:
    """Earlier results in `out`'s JSON by (size, storage) (kept when other ones are re-measured alone)."""
    if out is None or not (out / JSON_NAME).is_file():
        return {}
    try:
        document = json.loads((out / JSON_NAME).read_text())
        return {(int(r["runs"]), r.get("storage", "sqlite")): r for r in document.get("results", []) if "command" in r}
    except (ValueError, KeyError, TypeError):
        return {}


def _document(options: Options, out: Path | None, workdir: Path | None, results: list[dict[str, Any]]) -> dict[str, Any]:
    from importlib import metadata

    return {
        "command": command_line(options, out),
        "machine": machine.describe(workdir),
        "dagster": metadata.version("dagster"),
        "options": {"sizes": list(options.sizes), "samples": options.samples, "keep_finished": options.keep_finished,
                    "reverify": options.reverify, "active_share": options.active_share,
                    "lapsed_share": options.lapsed_share, "seed_jobs": options.seed_jobs,
                    "seed_on_tmpfs": options.seed_on_tmpfs, "storages": list(options.storages),
                    "ticks_only": options.ticks_only, "daemon_ticks": options.daemon_ticks,
                    "slow_queries": options.slow_queries},
        "results": sorted(results, key=result_key),
    }


def write(out: Path, document: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / JSON_NAME).write_text(report.dump_json(document))
    report.update_markdown(out / "benchmarks.md", SECTION, markdown_section(document), TITLE)


def main(*, options: Options | None = None, out: Path | None = None, as_json: bool = False,
         workdir: Path | None = None, console: Console | None = None) -> dict[str, Any]:
    """Measure every size in `options.sizes`; after each, write the JSON and the Markdown section under `out`.

    Results at sizes (and storages) not measured this time are kept from `out`'s JSON, each with its own
    command and time. A PostgreSQL leg gets a throwaway server (`baton.bench.pg.postgres_server`).
    """
    options = options or Options()
    console = console or Console(stderr=True)
    results: list[dict[str, Any]] = []
    kept: dict[tuple[int, str], dict[str, Any]] = {}
    command = command_line(options, out)
    measured = {(n, s) for n in options.sizes for s in options.storages}
    with contextlib.ExitStack() as stack, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, disable=as_json) as progress:
        pg = stack.enter_context(postgres_server()) if "postgres" in options.storages else None
        for runs in options.sizes:
            for result in run_size(runs, options, workdir, progress, pg):
                result["command"] = command
                results.append(result)
                if out is not None:  # other results as they are in the file now (another run may have written)
                    kept = {k: r for k, r in _previous(out).items() if k not in measured}
                    write(out, _document(options, out, workdir, [*kept.values(), *results]))
    document = _document(options, out, workdir, [*kept.values(), *results])
    if not as_json:
        print_tables(document, console)
    if out is not None:
        console.print(f"wrote {out / JSON_NAME} and {out / 'benchmarks.md'}")
    return document
