"""Reporting the checkpoint benchmark: Rich tables, JSON, SVG plots and a Markdown section.

A Markdown section lives between `<!-- bench:NAME:start -->` and
`<!-- bench:NAME:end -->` markers in docs/benchmarks.md, so re-running a
benchmark replaces its generated numbers and leaves the prose around them
alone; each sub-benchmark owns its own markers.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from baton.bench import svgplot
from baton.bench.checkpoint_bench import WINDOW, CheckpointRun, LegResult, System
from baton.bench.checkpoint_profile import StepProfile
from baton.bench.checkpoint_summary import summarize, targets
from baton.bench.trajectory import OBSERVATION_BYTES

BACKEND_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
SHORT = {
    "baton-sdk-sqlite": "Baton SDK boundary, default · SQLite",
    "baton-seal-sqlite": "Baton seal_checkpoint, default blobs · SQLite",
    "baton-sdk-postgres": "Baton SDK boundary, default · PostgreSQL",
    "baton-seal-postgres": "Baton seal_checkpoint, default blobs · PostgreSQL",
    "baton-sqlite": "Baton file blobs · SQLite",
    "baton-sqlblobs-sqlite": "Baton SQL blobs · SQLite",
    "baton-sqlblobs-postgres": "Baton SQL blobs · PostgreSQL",
    "langgraph-sqlite": "LangGraph · SQLite",
    "langgraph-delta-sqlite": "LangGraph delta (beta) · SQLite",
    "dbos-sqlite": "DBOS · SQLite",
    "baton-postgres": "Baton file blobs · PostgreSQL",
    "langgraph-postgres": "LangGraph · PostgreSQL",
    "langgraph-delta-postgres": "LangGraph delta (beta) · PostgreSQL",
    "dbos-postgres": "DBOS · PostgreSQL",
}
COLORS = {"baton": "#1f77b4", "langgraph": "#d62728", "dbos": "#2ca02c"}
DELTA_COLOR = "#ff7f0e"
SQL_BLOBS_COLOR = "#9467bd"
IMG_BYTES = "img/checkpoint-bytes.svg"
IMG_MS = "img/checkpoint-ms-per-step.svg"
JSON_NAME = "benchmarks-checkpoint.json"


def name_of(system: System) -> str:
    return SHORT.get(system.key, f"{system.label} · {BACKEND_NAMES[system.backend]}")


def mb(value: float) -> str:
    return f"{value / 1e6:,.2f} MB" if value < 10e6 else f"{value / 1e6:,.1f} MB"


def ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def times(value: float) -> str:
    return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


# ---------------------------------------------------------------------------- rows


def _cell_bytes(leg: LegResult | None) -> str:
    if leg is None:
        return ""
    if leg.status != "ok":
        return leg.status
    return f"{mb(leg.stored.logical)} ({times(leg.ratio_to_observations)})"


def bytes_rows(run: CheckpointRun) -> tuple[list[str], list[list[str]]]:
    first, last = run.steps[0], run.steps[-1]
    header = ["system", *[f"{n} steps" for n in run.steps], f"growth {first}→{last}"]
    spread = len(run.steps) > 1
    if spread:
        header.append(f"bytes per added step {first}→{last}")
    header.append(f"on disk @{last} (allocated blocks)")
    rows = [["raw observations", *[mb(n * OBSERVATION_BYTES) for n in run.steps], times(last / first)]]
    if spread:
        rows[0].append(f"{OBSERVATION_BYTES:,} (1.00x)")
    rows[0].append("")
    summaries = {s.system.key: s for s in summarize(run)}
    for system in run.systems:
        summary = summaries.get(system.key)
        complete = summary is not None and summary.longest.steps == last and summary.shortest.steps == first
        row = [name_of(system), *[_cell_bytes(run.leg(system.key, n)) for n in run.steps]]
        row.append(times(summary.growth) if complete and summary else "")
        if spread:
            per_step = summary.bytes_per_added_step if complete and summary else math.nan
            row.append("" if math.isnan(per_step) else f"{per_step:,.0f} ({per_step / OBSERVATION_BYTES:.2f}x)")
        longest = run.leg(system.key, last)
        row.append(
            f"{mb(longest.stored.allocated)} ({times(longest.stored.allocated / longest.observation_bytes)})"
            if longest is not None and longest.status == "ok" else ""
        )
        rows.append(row)
    return header, rows


def time_rows(run: CheckpointRun) -> tuple[list[str], list[list[str]]]:
    longest = run.steps[-1]
    window = min(WINDOW, longest)
    header = [
        "system",
        *[f"mean @{n}" for n in run.steps],
        f"first {window} @{longest}",
        f"last {window} @{longest}",
        "last/first",
    ]
    rows: list[list[str]] = []
    for system in run.systems:
        cells = []
        for n in run.steps:
            leg = run.leg(system.key, n)
            cells.append("" if leg is None else (ms(leg.mean_ms) if leg.status == "ok" else leg.status))
        leg = run.leg(system.key, longest)
        if leg is not None and leg.status == "ok":
            tail = [ms(leg.first_window_ms), ms(leg.last_window_ms), times(leg.last_window_ms / leg.first_window_ms)]
        else:
            tail = ["", "", ""]
        rows.append([name_of(system), *cells, *tail])
    return header, rows


def comparison_rows(run: CheckpointRun) -> tuple[list[str], list[list[str]]]:
    """Baton against each other system on the same backend, at the longest trajectory."""
    n = run.steps[-1]
    header = ["backend", "Baton", "compared with", f"bytes, Baton / other @{n}", f"ms per step, Baton / other @{n}"]
    rows: list[list[str]] = []
    for baton in (s for s in run.systems if s.family == "baton"):
        mine = run.leg(baton.key, n)
        if mine is None or mine.status != "ok":
            continue
        for other in run.systems:
            theirs = run.leg(other.key, n)
            if other.family == "baton" or other.backend != baton.backend or theirs is None or theirs.status != "ok":
                continue
            rows.append([
                BACKEND_NAMES[baton.backend],
                baton.label.removeprefix("Baton, "),
                other.label,
                f"{mine.stored.logical / theirs.stored.logical:.3f}",
                f"{mine.mean_ms / theirs.mean_ms:.3f}",
            ])
    return header, rows


def target_rows(run: CheckpointRun) -> tuple[list[str], list[list[str]]]:
    header = ["backend", "Baton", "target", "measured", "limit", "met"]
    rows = [
        [BACKEND_NAMES[t.backend], t.system.label.removeprefix("Baton, "), t.name, f"{t.value:.3f}",
         f"<= {t.limit:g}", "yes" if t.met else "NO"]
        for t in targets(run)
    ]
    return header, rows


def floor_line(run: CheckpointRun) -> str:
    floor = run.floor
    if floor is None:
        return ""
    return (
        f"Durability floor during the run (median over {len(run.floors)} rounds): one SQLite commit "
        f"(WAL, synchronous=FULL) {floor.sqlite_commit_ms:.2f} ms; one new 2 KB file written, fsynced and "
        f"renamed {floor.file_fsync_rename_ms:.2f} ms."
    )


def repetition_line(run: CheckpointRun) -> str:
    if run.repetitions == 1:
        return "Each leg ran once."
    return f"Each leg ran {run.repetitions} times; each cell is the run with the median mean time per step."


def skipped_rows(run: CheckpointRun) -> list[str]:
    seen: dict[str, str] = {}
    for leg in run.legs:
        if leg.status != "ok" and leg.system not in seen:
            seen[leg.system] = leg.reason
    return [f"{key}: {reason}" for key, reason in seen.items()]


# ---------------------------------------------------------------------------- Rich


def rich_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for index, column in enumerate(header):
        table.add_column(column, justify="left" if index == 0 else "right", no_wrap=index == 0)
    for row in rows:
        table.add_row(*row)
    return table


def print_tables(run: CheckpointRun, console: Console) -> None:
    console.print(rich_table("Bytes stored (× raw observation bytes)", *bytes_rows(run)))
    console.print(rich_table("Milliseconds per step", *time_rows(run)))
    comparison = comparison_rows(run)
    if comparison[1]:
        console.print(rich_table("Baton relative to the others, same backend", *comparison))
    target = target_rows(run)
    if target[1]:
        console.print(rich_table("Targets (issue 6)", *target))
    for line in skipped_rows(run):
        console.print(f"[yellow]{line}[/yellow]")
    console.print(f"PostgreSQL: {run.postgres}. {repetition_line(run)}")
    if run.floor is not None:
        console.print(floor_line(run))


# ---------------------------------------------------------------------------- JSON


def _leg_json(leg: LegResult, *, chosen: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "system": leg.system, "steps": leg.steps, "repetition": leg.repetition, "chosen": chosen, "status": leg.status,
    }
    if leg.status != "ok":
        data["reason"] = leg.reason
        return data
    data.update(
        observation_bytes=leg.observation_bytes,
        stored_bytes=leg.stored.logical,
        allocated_bytes=leg.stored.allocated,
        ratio_to_observations=round(leg.ratio_to_observations, 4),
        components={name: {"logical": fp.logical, "allocated": fp.allocated} for name, fp in leg.components.items()},
        mean_ms=round(leg.mean_ms, 4),
        median_ms=round(leg.median_ms, 4),
        first_window_ms=round(leg.first_window_ms, 4),
        last_window_ms=round(leg.last_window_ms, 4),
    )
    if chosen:
        data["step_ms"] = list(leg.step_ms)
    return data


def to_json(run: CheckpointRun, machine: dict[str, object], command: str) -> dict[str, Any]:
    return {
        "benchmark": "checkpoint",
        "command": command,
        "observation_bytes_per_step": OBSERVATION_BYTES,
        "steps": list(run.steps),
        "window": WINDOW,
        "repetitions": run.repetitions,
        "postgres": run.postgres,
        "floor_ms": None if run.floor is None else {
            "sqlite_commit": round(run.floor.sqlite_commit_ms, 4),
            "file_fsync_rename": round(run.floor.file_fsync_rename_ms, 4),
        },
        "machine": machine,
        "systems": [
            {"key": s.key, "label": s.label, "family": s.family, "backend": s.backend, "baseline": s.baseline}
            for s in run.systems
        ],
        "targets": [
            {"system": t.system.key, "backend": t.backend, "name": t.name, "value": round(t.value, 4),
             "limit": t.limit, "met": t.met}
            for t in targets(run)
        ],
        "legs": [_leg_json(leg, chosen=run.leg(leg.system, leg.steps) is leg) for leg in run.legs],
    }


_NUMBER_LIST = re.compile(r"\[\s*(-?[0-9][-0-9.eE+,\s]*?)\s*\]")


def dump_json(data: dict[str, Any]) -> str:
    """Indented JSON with lists of numbers kept on one line each."""
    text = json.dumps(data, indent=1)
    return _NUMBER_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"


# ---------------------------------------------------------------------------- plots


def _color(system: System) -> str:
    if "delta" in system.key:
        return DELTA_COLOR
    if "sqlblobs" in system.key:
        return SQL_BLOBS_COLOR
    return COLORS.get(system.family, "#7f7f7f")


def _rolling(values: Sequence[float], window: int) -> list[float]:
    out: list[float] = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        out.append(total / min(index + 1, window))
    return out


def bytes_chart(run: CheckpointRun) -> svgplot.Chart:
    series = [
        svgplot.Series(
            "raw observations", list(run.steps), [n * OBSERVATION_BYTES / 1e6 for n in run.steps], "#000000",
            dashed=True, markers=False, width=1.5,
        )
    ]
    for system in run.systems:
        legs = run.ok_legs(system.key)
        if legs:
            series.append(
                svgplot.Series(
                    name_of(system), [leg.steps for leg in legs], [leg.stored.logical / 1e6 for leg in legs],
                    _color(system), dashed=system.backend == "postgres",
                )
            )
    return svgplot.Chart(
        title="Bytes stored after N steps (one 2 KB observation per step)",
        x_label="steps (checkpoints)",
        y_label="MB stored (log scale)",
        series=series,
        log_y=True,
        y_format=lambda v: f"{v:g}",
    )


def ms_chart(run: CheckpointRun) -> svgplot.Chart:
    n = run.steps[-1]
    series = []
    for system in run.systems:
        leg = run.leg(system.key, n)
        if leg is not None and leg.status == "ok":
            series.append(
                svgplot.Series(
                    name_of(system), list(range(1, n + 1)), _rolling(leg.step_ms, 10), _color(system),
                    dashed=system.backend == "postgres", markers=False, width=1.6,
                )
            )
    return svgplot.Chart(
        title=f"Milliseconds per step during the {n}-step run (rolling mean of 10)",
        x_label="step",
        y_label="ms per step",
        series=series,
    )


def write_plots(run: CheckpointRun, out_dir: Path) -> list[Path]:
    written = []
    for relative, chart in ((IMG_BYTES, bytes_chart(run)), (IMG_MS, ms_chart(run))):
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svgplot.render(chart))
        written.append(path)
    return written


# ---------------------------------------------------------------------------- Markdown


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    align = ["---", *["---:" for _ in header[1:]]]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_lines(machine: dict[str, object]) -> list[str]:
    disk = machine.get("disk") or {}
    assert isinstance(disk, dict)
    packages = machine.get("packages") or {}
    assert isinstance(packages, dict)
    disk_text = ", ".join(f"{k} {v}" for k, v in disk.items())
    return [
        f"- measured: {machine.get('measured_at')}",
        f"- CPU: {machine.get('nproc')} × {machine.get('cpu_model')}; memory {machine.get('memory_gb')} GiB",
        f"- disk: {disk_text}",
        f"- OS: {machine.get('os')}; Python {machine.get('python')}; SQLite {machine.get('sqlite')}; "
        f"{machine.get('postgres_server') or 'PostgreSQL server version unknown'}",
        "- packages: " + ", ".join(f"{k} {v}" for k, v in packages.items()),
    ]


def markdown_section(run: CheckpointRun, machine: dict[str, object], command: str) -> str:
    parts = [
        f"Generated by `{command}`. MB = 10^6 bytes; in brackets, bytes stored over raw observation "
        f"bytes (N × {OBSERVATION_BYTES}).",
        "",
        *machine_lines(machine),
        f"- PostgreSQL: {run.postgres}",
        "",
        repetition_line(run) + (" " + floor_line(run) if run.floor else ""),
        "",
        "**Bytes stored**",
        "",
        md_table(*bytes_rows(run)),
        "",
        "**Milliseconds per step** (means; the last three columns are from the longest run)",
        "",
        md_table(*time_rows(run)),
        "",
    ]
    comparison = comparison_rows(run)
    if comparison[1]:
        parts += ["**Baton relative to the others on the same backend**", "", md_table(*comparison), ""]
    target = target_rows(run)
    if target[1]:
        parts += ["**Targets**", "", md_table(*target), ""]
    skipped = skipped_rows(run)
    if skipped:
        parts += ["Not measured:", "", *[f"- {line}" for line in skipped], ""]
    parts += [f"![bytes stored]({IMG_BYTES})", "", f"![ms per step]({IMG_MS})", ""]
    return "\n".join(parts)


def update_markdown(doc: Path, name: str, section: str, title: str) -> None:
    """Replace the generated section `name` in `doc`, appending it (or creating the doc) if absent."""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    block = f"{start}\n{section.rstrip()}\n{end}"
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, _, rest = text.partition(start)
        _, _, tail = rest.partition(end)
        text = head + block + tail
    else:
        text = text.rstrip() + f"\n\n## {title}\n\n{block}\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)


def write_outputs(run: CheckpointRun, machine: dict[str, object], command: str, out_dir: Path) -> list[Path]:
    """JSON, plots and the Markdown section under `out_dir` (e.g. docs/)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / JSON_NAME
    json_path.write_text(dump_json(to_json(run, machine, command)))
    written = [json_path, *write_plots(run, out_dir)]
    doc = out_dir / "benchmarks.md"
    update_markdown(doc, "checkpoint", markdown_section(run, machine, command), "Checkpoint growth: measured")
    written.append(doc)
    return written


# ---------------------------------------------------------------------------- profile


def profile_rows(profile: StepProfile) -> tuple[list[str], list[list[str]]]:
    header = ["where the time goes", "ms per step", "calls per step", "share", "store transactions per step",
              "SQL statements per step"]
    rows = [
        [p.name, f"{p.ms_per_step:.2f}", f"{p.calls_per_step:.0f}" if p.calls_per_step else "", f"{p.share:.0%}",
         f"{p.transactions_per_step:g}", f"{p.statements_per_step:g}"]
        for p in profile.phases
    ]
    transactions = sum(p.transactions_per_step for p in profile.phases)
    statements = sum(p.statements_per_step for p in profile.phases)
    rows.append(["total (instrumented run)", f"{profile.ms_per_step:.2f}", "", "100%", f"{transactions:g}",
                 f"{statements:g}"])
    return header, rows


BLOB_NAMES = {"files": "file", "sql": "SQL", "default": "default", "sdk": "SDK boundary, default"}


def print_profile(profile: StepProfile, console: Console) -> None:
    title = f"Baton ({BLOB_NAMES[profile.blobs]} blobs) on {BACKEND_NAMES[profile.backend]}, {profile.steps} steps: wall-clock split"
    console.print(rich_table(title, *profile_rows(profile)))
    console.print(profile.top_functions, markup=False, highlight=False, soft_wrap=True)


def profile_markdown(profile: StepProfile, command: str) -> str:
    lines = profile.top_functions.strip().splitlines()
    table_start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join([
        f"Generated by `{command}` (timers and profiler add overhead: read shares, not absolute times).",
        "",
        f"**Baton ({BLOB_NAMES[profile.blobs]} blobs) on {BACKEND_NAMES[profile.backend]}, {profile.steps} steps: "
        "wall-clock split per step**",
        "",
        md_table(*profile_rows(profile)),
        "",
        "**cProfile, top functions by own time** (whole leg)",
        "",
        "```",
        *lines[table_start:],
        "```",
        "",
    ])
