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
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from baton.bench import machine, report
from baton.bench.dagster_seed import SeedPlan, seed
from baton.store.factory import open_blobs, open_store

PROJECT_ROOT = Path(__file__).resolve().parents[2]
JSON_NAME = "benchmarks-dagster.json"
SECTION = "dagster"
TITLE = "5. The Dagster platform at 1,000 and 10,000 runs"
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

    def __post_init__(self) -> None:
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError("--runs needs at least one positive size")
        if self.samples < 1:
            raise ValueError("--samples must be at least 1")
        if self.keep_finished < 0 or self.reverify < 0:
            raise ValueError("--keep-finished and --reverify must be >= 0")
        SeedPlan(1, active_share=self.active_share, lapsed_share=self.lapsed_share)  # validates the shares


def _seed(home: Path, plan: SeedPlan, progress: Progress, task: TaskID) -> float:
    store = open_store(None, home)
    try:
        blobs = open_blobs(home, store)
        started = time.perf_counter()
        seed(store, blobs, plan, progress=lambda i: progress.update(task, completed=i + 1))
        return time.perf_counter() - started
    finally:
        store.close()


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
    """Seed `runs` runs into a fresh home, then measure them under a fresh Dagster instance."""
    root = Path(tempfile.mkdtemp(prefix=f"baton-bench-dagster-{runs}-", dir=workdir))
    try:
        home, dagster_home = root / "baton-home", root / "dagster-home"
        home.mkdir()
        dagster_home.mkdir()
        shutil.copy(PROJECT_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
        plan = SeedPlan(runs, active_share=options.active_share, lapsed_share=options.lapsed_share)
        task = progress.add_task(f"{runs:,} runs: seeding the Baton store", total=runs)
        seeded_s = _seed(home, plan, progress, task)
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
        result["seed_s"] = round(seeded_s, 2)
        result["seed_ms_per_run"] = round(seeded_s * 1000.0 / runs, 2)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


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


def graphql_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["GraphQL query"] + [f"p50 / p95 ms @{r['runs']:,}" for r in results]
    names = list(results[0]["graphql"])
    rows = [[f"`{n}`"] + [f"{r['graphql'][n]['p50_ms']:.1f} / {r['graphql'][n]['p95_ms']:.1f}" for r in results]
            for n in names]
    for n in results[0]["graphql_after_archive"]:
        rows.append([f"`{n}` after archiving"] + [
            f"{r['graphql_after_archive'][n]['p50_ms']:.1f} / {r['graphql_after_archive'][n]['p95_ms']:.1f}"
            for r in results])
    return header, rows


def setup_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["step"] + [f"@{r['runs']:,} runs" for r in results]
    rows = [
        ["seeding the Baton store (Baton's calls)"] + [f"{r['seed_s']:.1f} s ({r['seed_ms_per_run']:.1f} ms/run)"
                                                         for r in results],
        ["Baton events read by discovery"] + [f"{r['catch_up']['baton_events_read']:,}" for r in results],
        ["discovery catch-up from cursor 0"] + [
            f"{r['catch_up']['total_s']:.1f} s in {r['catch_up']['ticks']} ticks" for r in results],
        ["partitions after catch-up"] + [f"{r['catch_up']['partitions']:,}" for r in results],
        ["`reverification_job` in process (p50)"] + [f"{r['reverification_job'].get('p50_ms', 0) / 1000:.2f} s"
                                                     for r in results],
        ["dagster-webserver first GraphQL answer"] + [f"{r['webserver_ready_s']:.1f} s" for r in results],
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
    parts = [
        f"Generated by `{document['command']}`.",
        "",
        *report.machine_lines(document["machine"]),
        f"- Dagster {document['dagster']} (instance on SQLite under a fresh DAGSTER_HOME; Baton's store on SQLite)",
        f"- samples: {document['options']['samples']} rounds of ticks and timed requests per query; "
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


def main(*, options: Options | None = None, out: Path | None = None, as_json: bool = False,
         workdir: Path | None = None, console: Console | None = None) -> dict[str, Any]:
    """Measure every size in `options.sizes`; write the JSON and the Markdown section under `out`."""
    from importlib import metadata

    options = options or Options()
    console = console or Console(stderr=True)
    results = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=as_json) as progress:
        for runs in options.sizes:
            results.append(run_size(runs, options, workdir, progress))
    document = {
        "command": command_line(options, out),
        "machine": machine.describe(workdir),
        "dagster": metadata.version("dagster"),
        "options": {"sizes": list(options.sizes), "samples": options.samples, "keep_finished": options.keep_finished,
                    "reverify": options.reverify, "active_share": options.active_share,
                    "lapsed_share": options.lapsed_share},
        "results": results,
    }
    if not as_json:
        print_tables(document, console)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / JSON_NAME).write_text(report.dump_json(document))
        report.update_markdown(out / "benchmarks.md", SECTION, markdown_section(document), TITLE)
        console.print(f"wrote {out / JSON_NAME} and {out / 'benchmarks.md'}")
    return document
