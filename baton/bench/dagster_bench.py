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

import json
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from baton.bench import machine, report
from baton.bench.dagster_seed import SeedPlan, seed_run
from baton.store.factory import open_blobs, open_store

PROJECT_ROOT = Path(__file__).resolve().parents[2]
JSON_NAME = "benchmarks-dagster.json"
SECTION = "dagster"
TITLE = "5. The Dagster platform at 1,000 and 10,000 runs"
CHUNK = 50
SHM = Path("/dev/shm")
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

    def __post_init__(self) -> None:
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError("--runs needs at least one positive size")
        if self.samples < 1:
            raise ValueError("--samples must be at least 1")
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


def _drive(argv: list[str], progress: Progress, task: TaskID, log: Path) -> None:
    """Run the Dagster half; each JSON progress line moves the bar; its other output goes to `log`."""
    with open(log, "w") as sink:
        process = subprocess.Popen(argv, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=sink, text=True)
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


def run_size(runs: int, options: Options, workdir: Path | None, progress: Progress) -> dict[str, Any]:
    """Seed `runs` runs into a fresh home, then measure them under a fresh Dagster instance on disk."""
    root = Path(tempfile.mkdtemp(prefix=f"baton-bench-dagster-{runs}-", dir=workdir))
    on_tmpfs = options.seed_on_tmpfs and SHM.is_dir()
    seed_root = Path(tempfile.mkdtemp(prefix=f"baton-bench-seed-{runs}-", dir=SHM)) if on_tmpfs else root
    try:
        home, dagster_home = root / "baton-home", root / "dagster-home"
        seed_home = seed_root / "baton-home"
        seed_home.mkdir()
        dagster_home.mkdir()
        shutil.copy(PROJECT_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
        plan = SeedPlan(runs, active_share=options.active_share, lapsed_share=options.lapsed_share)
        task = progress.add_task(f"{runs:,} runs: seeding the Baton store", total=runs)
        seeded_s = _seed(seed_home, plan, options.seed_jobs, progress, task)
        copied_s = 0.0
        if on_tmpfs:
            progress.update(task, description=f"{runs:,} runs: copying the store to disk")
            started = time.perf_counter()
            shutil.copytree(seed_home, home)  # the store is closed: its SQLite file and WAL copy whole
            copied_s = time.perf_counter() - started
        out = root / "result.json"
        argv = [sys.executable, "-m", "pipelines.bench_dagster", "--baton-home", str(home),
                "--dagster-home", str(dagster_home), "--runs", str(runs), "--samples", str(options.samples),
                "--keep-finished", str(options.keep_finished), "--reverify", str(options.reverify),
                "--active-share", str(options.active_share), "--lapsed-share", str(options.lapsed_share),
                "--out", str(out)]
        progress.update(task, description=f"{runs:,} runs: Dagster", completed=0, total=None)
        _drive(argv, progress, task, root / "driver.log")
        progress.update(task, description=f"{runs:,} runs: done", completed=1, total=1)
        result: dict[str, Any] = json.loads(out.read_text())
        result["measured_at"] = machine.describe(workdir)["measured_at"]
        result["seed_s"] = round(seeded_s, 2)
        result["seed_ms_per_run"] = round(seeded_s * 1000.0 / runs, 2)
        result["seeded_on"] = "tmpfs (/dev/shm), copied to the work directory" if on_tmpfs else "the work directory"
        result["seed_jobs"] = options.seed_jobs
        result["samples"] = options.samples
        result["copy_to_disk_s"] = round(copied_s, 2)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if seed_root != root:
            shutil.rmtree(seed_root, ignore_errors=True)


# ---------------------------------------------------------------------------- report

def tick_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["sensor / schedule"]
    for r in results:
        header += [f"idle p50 @{r['runs']:,}", f"change p50 (p95) @{r['runs']:,}"]
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
    if entry.get("timed_out_after_s") is not None:
        return f"timed out (> {entry['timed_out_after_s']:.0f} s)"
    return f"{entry['p50_ms']:.1f} / {entry['p95_ms']:.1f}"


def graphql_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["GraphQL query"] + [f"p50 / p95 ms @{r['runs']:,}" for r in results]
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
    return f"{c['total_s']:.1f} s in {c['ticks']} ticks, {c['materializations_written']:,} materializations"


def setup_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["step"] + [f"@{r['runs']:,} runs" for r in results]
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


def archive_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["archive step"] + [f"@{r['runs']:,} runs" for r in results]
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


def markdown_section(document: dict[str, Any]) -> str:
    results = document["results"]
    commands = sorted({r.get("command", document["command"]) for r in results})
    parts = [
        "Generated by " + " and ".join(f"`{c}`" for c in commands) + " (measured "
        + ", ".join(f"{r['runs']:,} runs at {r.get('measured_at', '?')}" for r in results) + ").",
        "",
        *report.machine_lines(document["machine"]),
        f"- Dagster {document['dagster']} (instance on SQLite under a fresh DAGSTER_HOME; Baton's store on SQLite)",
        "- samples (rounds of ticks, and timed requests per query): "
        + ", ".join(f"{r.get('samples', document['options']['samples'])} at {r['runs']:,} runs" for r in results) + "; "
        f"{document['options']['active_share']:.0%} of runs active, {document['options']['lapsed_share']:.0%} "
        "with a lapsed lease, the rest finished",
        "",
        "**Setup**",
        "",
        report.md_table(*setup_rows(results)),
        "",
        "**Sensor and schedule ticks, ms** (the real sensor functions, their results applied as the daemon "
        "applies them; idle: nothing new; change: one new candidate, one new run, one placement's environment "
        "changed since the last tick)",
        "",
        report.md_table(*tick_rows(results)),
        "",
        "**GraphQL on dagster-webserver (loopback), ms**",
        "",
        report.md_table(*graphql_rows(results)),
        "",
        "**Partition hygiene**",
        "",
        report.md_table(*archive_rows(results)),
        "",
    ]
    return "\n".join(parts)


def print_tables(document: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    for title, (header, rows) in (("setup", setup_rows(document["results"])),
                                  ("sensor ticks (ms)", tick_rows(document["results"])),
                                  ("GraphQL (ms)", graphql_rows(document["results"])),
                                  ("archive", archive_rows(document["results"]))):
        table = Table(title=title)
        for column in header:
            table.add_column(column)
        for row in rows:
            table.add_row(*[cell.replace("`", "") for cell in row])
        console.print(table)


def command_line(options: Options, out: Path | None) -> str:
    sizes = ",".join(str(s) for s in options.sizes)
    text = f"baton bench dagster --runs {sizes} --samples {options.samples} --keep-finished {options.keep_finished}"
    return text + (f" --out {out}" if out is not None else "")


def _previous(out: Path | None) -> dict[int, dict[str, Any]]:
    """Results of earlier runs at other sizes in `out`'s JSON (kept when a size is re-measured alone)."""
    if out is None or not (out / JSON_NAME).is_file():
        return {}
    try:
        document = json.loads((out / JSON_NAME).read_text())
        return {int(r["runs"]): r for r in document.get("results", []) if "command" in r}
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
                    "seed_on_tmpfs": options.seed_on_tmpfs},
        "results": sorted(results, key=lambda r: int(r["runs"])),
    }


def write(out: Path, document: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / JSON_NAME).write_text(report.dump_json(document))
    report.update_markdown(out / "benchmarks.md", SECTION, markdown_section(document), TITLE)


def main(*, options: Options | None = None, out: Path | None = None, as_json: bool = False,
         workdir: Path | None = None, console: Console | None = None) -> dict[str, Any]:
    """Measure every size in `options.sizes`; after each, write the JSON and the Markdown section under `out`.

    Results at sizes not measured this time are kept from `out`'s JSON, each with its own command and time.
    """
    options = options or Options()
    console = console or Console(stderr=True)
    results: list[dict[str, Any]] = []
    kept: dict[int, dict[str, Any]] = {}
    command = command_line(options, out)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=as_json) as progress:
        for runs in options.sizes:
            result = run_size(runs, options, workdir, progress)
            result["command"] = command
            results.append(result)
            if out is not None:  # other sizes' results as they are in the file now (another run may have written)
                kept = {n: r for n, r in _previous(out).items() if n not in options.sizes}
                write(out, _document(options, out, workdir, [*kept.values(), *results]))
    document = _document(options, out, workdir, [*kept.values(), *results])
    if not as_json:
        print_tables(document, console)
    if out is not None:
        console.print(f"wrote {out / JSON_NAME} and {out / 'benchmarks.md'}")
    return document
