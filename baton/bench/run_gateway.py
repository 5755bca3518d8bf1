"""Entry point of the gateway sub-benchmark: run it, print its tables, write its JSON and Markdown section."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from baton.bench import report
from baton.bench.gateway_bench import (
    DEFAULT_CONCURRENCY,
    DEFAULT_DURATION_S,
    DEFAULT_REPEAT,
    TARGET_RATIO,
    GatewayRun,
    run_gateway_bench,
)
from baton.bench.gateway_profile import GatewayProfile
from baton.bench.machine import describe

JSON_NAME = "benchmarks-gateway.json"
SECTION = "gateway"


def command_line(concurrency: Sequence[int], duration_s: float, repeat: int, out: Path | None) -> str:
    words = ["baton", "bench", "gateway", "--concurrency", ",".join(str(c) for c in concurrency),
             "--duration", f"{duration_s:g}", "--repeat", str(repeat)]
    if out is not None:
        words += ["--out", str(out)]
    return " ".join(words)


def _num(value: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.{digits}f}"


def throughput_rows(run: GatewayRun) -> tuple[list[str], list[list[str]]]:
    header = [
        "worker processes", "gateway mutations/s", "floor ops/s", "gateway / floor", f"≥ {TARGET_RATIO:.0%} of floor",
        "gateway p50 ms", "gateway p99 ms", "floor p50 ms", "floor p99 ms", "mutations measured",
        "stale attempts", "stale accepted",
    ]
    baseline = any(level.per_key for level in run.levels)
    if baseline:
        header += ["per-key mutations/s (before)", "per-key / floor", "gateway / per-key"]
    rows = []
    for level in run.levels:
        rows.append([
            str(level.concurrency),
            _num(level.gateway_throughput, 0),
            _num(level.floor_throughput, 0),
            f"{level.ratio:.2f}",
            "yes" if level.target_met else "NO",
            _num(level.latency("gateway", 50)),
            _num(level.latency("gateway", 99)),
            _num(level.latency("floor", 50)),
            _num(level.latency("floor", 99)),
            f"{level.ops('gateway'):,}",
            str(level.stale_attempts),
            str(level.stale_accepted),
        ])
        if baseline:
            rows[-1] += [_num(level.per_key_throughput, 0), f"{level.per_key_ratio:.2f}",
                         f"{level.gateway_throughput / level.per_key_throughput:.1f}×"]
    return header, rows


def round_rows(run: GatewayRun) -> tuple[list[str], list[list[str]]]:
    header = ["round", "kind", "processes", "ops/s", "ops", "p50 ms", "p99 ms"]
    rounds = sorted(
        (r for level in run.levels for r in (*level.floor, *level.gateway, *level.per_key)),
        key=lambda r: (r.repetition, r.concurrency, r.kind),
    )
    rows = [[str(r.repetition + 1), r.kind, str(r.concurrency), _num(r.throughput, 0), f"{r.ops:,}", _num(r.p50_ms),
             _num(r.p99_ms)] for r in rounds]
    return header, rows


def cpu_rows(run: GatewayRun) -> tuple[list[str], list[list[str]]]:
    cores = os.cpu_count() or 1
    header = ["worker processes", "gateway CPU ms/mutation: worker + backend", "floor CPU ms/op: worker + backend",
              f"CPU-bound ceiling on {cores} cores: gateway / floor (ops/s)"]
    rows = []
    for level in run.levels:
        cells = [str(level.concurrency)]
        ceilings = []
        for kind in ("gateway", "floor"):  # per-key: in the JSON
            client, server = level.cpu_ms_per_op(kind)  # type: ignore[arg-type]
            total = client + server
            cells.append(f"{_num(client)} + {_num(server)} = {_num(total)}")
            ceilings.append(_num(cores * 1000 / total, 0) if total > 0 else "n/a")
        cells.append(" / ".join(ceilings))
        rows.append(cells)
    return header, rows


def profile_rows(profile: GatewayProfile) -> tuple[list[str], list[list[str]]]:
    header = ["step of one mutation", "ms", "store transactions", "SQL statements"]
    rows = [[s.name, f"{s.ms_per_op:.2f}", f"{s.transactions_per_op:g}" if s.calls_per_op else "",
             f"{s.statements_per_op:g}" if s.calls_per_op else ""] for s in profile.steps]
    rows.append(["total gateway mutation (one process, instrumented)", f"{profile.ms_per_op:.2f}",
                 f"{profile.transactions_per_op:g} ({profile.write_transactions_per_op:g} durable)",
                 f"{profile.statements_per_op:g}"])
    rows.append(["floor operation (one process)", f"{profile.floor_ms_per_op:.2f}",
                 f"{profile.floor_transactions_per_op:g} (1 durable)", f"{profile.floor_statements_per_op:g}"])
    return header, rows


def profile_line(profile: GatewayProfile) -> str:
    return (
        f"Round trips to PostgreSQL per operation (statements, plus each BEGIN and COMMIT psycopg sends on its own; "
        f"the store runs a one-statement transaction in autocommit mode, without either): gateway "
        f"{profile.round_trips_per_op:g}, floor {profile.floor_round_trips_per_op:g}; durable commits: gateway "
        f"{profile.write_transactions_per_op:g}, floor {profile.floor_transactions_per_op:g}."
    )


def check_lines(run: GatewayRun) -> list[str]:
    lines = []
    for level in run.levels:
        for r in (*level.gateway, *level.per_key):
            lines += [f"x{level.concurrency}, run {r.repetition + 1}: {check}" for check in r.checks]
    return lines


def print_tables(run: GatewayRun, console: Console) -> None:
    if run.status != "ok":
        console.print(f"[yellow]gateway: {run.reason}[/yellow]")
        return
    console.print(report.rich_table(
        f"Fenced mutations on PostgreSQL, {run.duration_s:g} s windows × {run.repeat} "
        "(throughput: median of rounds; latency: pooled)", *throughput_rows(run),
    ))
    console.print(report.rich_table("CPU per operation (process CPU of the workers and of their backends)",
                                     *cpu_rows(run)))
    console.print(report.rich_table("Every round", *round_rows(run)))
    if run.profile is not None:
        console.print(report.rich_table(f"One mutation, step by step ({run.profile.ops} mutations, one process)",
                                         *profile_rows(run.profile)))
        console.print(profile_line(run.profile))
    console.print(f"PostgreSQL: {run.postgres}; " + ", ".join(f"{k} {v}" for k, v in run.server_settings.items()))


def to_json(run: GatewayRun, machine: dict[str, object], command: str) -> dict[str, Any]:
    document: dict[str, Any] = {
        "benchmark": "gateway",
        "command": command,
        "status": run.status,
        "concurrency": list(run.concurrency),
        "duration_s": run.duration_s,
        "repeat": run.repeat,
        "target_ratio": TARGET_RATIO,
        "postgres": run.postgres,
        "server_settings": run.server_settings,
        "machine": machine,
    }
    if run.status != "ok":
        document["reason"] = run.reason
        return document
    document["levels"] = [
        {
            "concurrency": level.concurrency,
            "gateway_per_s": round(level.gateway_throughput, 2),
            "floor_per_s": round(level.floor_throughput, 2),
            "ratio": round(level.ratio, 4),
            "target_met": level.target_met,
            "gateway_ms": {"p50": round(level.latency("gateway", 50), 4), "p99": round(level.latency("gateway", 99), 4)},
            "floor_ms": {"p50": round(level.latency("floor", 50), 4), "p99": round(level.latency("floor", 99), 4)},
            "gateway_mutations": level.ops("gateway"),
            "floor_ops": level.ops("floor"),
            "cpu_ms_per_op": {kind: dict(zip(("worker", "backend"), (round(v, 4) for v in level.cpu_ms_per_op(kind))))
                              for kind in ("gateway", "floor", "per-key")},
            "per_key_per_s": round(level.per_key_throughput, 2) if level.per_key else None,
            "per_key_ratio": round(level.per_key_ratio, 4) if level.per_key else None,
            "per_key_ms": {"p50": round(level.latency("per-key", 50), 4),
                           "p99": round(level.latency("per-key", 99), 4)} if level.per_key else None,
            "stale_attempts": level.stale_attempts,
            "stale_accepted": level.stale_accepted,
            "rounds": [
                {"kind": r.kind, "repetition": r.repetition, "ops": r.ops, "per_s": round(r.throughput, 2),
                 "p50_ms": round(r.p50_ms, 4), "p99_ms": round(r.p99_ms, 4), "checks": list(r.checks)}
                for r in (*level.floor, *level.gateway, *level.per_key)
            ],
        }
        for level in run.levels
    ]
    if run.profile is not None:
        p = run.profile
        document["profile"] = {
            "ops": p.ops, "ms_per_op": round(p.ms_per_op, 4), "floor_ms_per_op": round(p.floor_ms_per_op, 4),
            "transactions_per_op": p.transactions_per_op, "write_transactions_per_op": p.write_transactions_per_op,
            "statements_per_op": p.statements_per_op, "commands_per_op": p.commands_per_op,
            "round_trips_per_op": p.round_trips_per_op,
            "floor_round_trips_per_op": p.floor_round_trips_per_op,
            "steps": [{"name": s.name, "ms": round(s.ms_per_op, 4), "transactions": s.transactions_per_op,
                       "statements": s.statements_per_op} for s in p.steps],
        }
    return document


def markdown_section(run: GatewayRun, machine: dict[str, object], command: str) -> str:
    parts = [f"Generated by `{command}`.", ""]
    if run.status != "ok":
        return "\n".join([*parts, f"Not measured: {run.reason}", ""])
    parts += [
        *report.machine_lines(machine),
        f"- PostgreSQL: {run.postgres}; " + ", ".join(f"{k} {v}" for k, v in run.server_settings.items()),
        "",
        f"**Fenced mutations per second** ({run.duration_s:g} s windows, {run.repeat} rounds of each kind per level; "
        "throughput is the median of the rounds, latency percentiles pool every mutation of every round)",
        "",
        report.md_table(*throughput_rows(run)),
        "",
        "**CPU per operation**: the worker processes' own CPU time and their PostgreSQL backends' (from "
        "`/proc/<pid>/stat`), over the measured windows; the last column is what the machine's cores could "
        "sustain at that cost if nothing else ran (other server processes, the WAL writer and the machine's other "
        "load are not counted).",
        "",
        report.md_table(*cpu_rows(run)),
        "",
        "<details><summary>Every round, and what was checked after it</summary>",
        "",
        report.md_table(*round_rows(run)),
        "",
        *[f"- {line}" for line in check_lines(run)],
        "",
        "</details>",
        "",
    ]
    if run.profile is not None:
        parts += [
            f"**One mutation, step by step** ({run.profile.ops} mutations from one process, timers around each "
            "step; they add overhead, so read the shares)",
            "",
            report.md_table(*profile_rows(run.profile)),
            "",
            profile_line(run.profile),
            "",
            "<details><summary>cProfile of the same process, top functions by own time</summary>",
            "",
            "```",
            *_pstats_table(run.profile.top_functions),
            "```",
            "",
            "</details>",
            "",
        ]
    return "\n".join(parts)


def _pstats_table(text: str) -> list[str]:
    lines = text.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return lines[start:]


def write_outputs(run: GatewayRun, machine: dict[str, object], command: str, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / JSON_NAME
    json_path.write_text(report.dump_json(to_json(run, machine, command)))
    doc = out_dir / "benchmarks.md"
    report.update_markdown(doc, SECTION, markdown_section(run, machine, command), "Gateway throughput: measured")
    return [json_path, doc]


def main(
    *,
    concurrency: Sequence[int] = DEFAULT_CONCURRENCY,
    duration_s: float = DEFAULT_DURATION_S,
    repeat: int = DEFAULT_REPEAT,
    profile_ops: int = 300,
    out: Path | None = None,
    as_json: bool = False,
    workdir: Path | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """Run the gateway benchmark; print its tables (unless `as_json`) and write files under `out`."""
    levels = tuple(sorted(set(concurrency)))
    err = Console(stderr=True)
    console = console or Console()
    with err.status("gateway: starting") as status:
        run = run_gateway_bench(levels, duration_s=duration_s, repeat=repeat, profile_ops=profile_ops,
                                workdir=workdir, progress=lambda text: status.update(f"gateway: {text}"))
    machine = describe(workdir)
    command = command_line(levels, duration_s, repeat, out)
    document = to_json(run, machine, command)
    if not as_json:
        print_tables(run, console)
    if out is not None:
        for path in write_outputs(run, machine, command, out):
            err.print(f"wrote {path}")
    return document
