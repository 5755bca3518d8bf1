"""Plotly figures for the ops dashboard."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


def verified_success_figure(cells: list[dict[str, Any]]) -> go.Figure:
    """Verified success by agent kind, with and without handoff (per migration class), with 95% intervals."""
    figure = go.Figure()
    series: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        label = cell["handoff"] if cell["handoff"] == "without handoff" else f"with handoff ({cell['migration_class']})"
        series.setdefault(label, []).append(cell)
    for label, rows in sorted(series.items()):
        figure.add_bar(
            name=label, x=[row["kind"] for row in rows], y=[row["rate"] for row in rows],
            error_y={"type": "data", "symmetric": False,
                     "array": [row["high"] - row["rate"] for row in rows],
                     "arrayminus": [row["rate"] - row["low"] for row in rows]},
            customdata=[[row["verified"], row["finished"]] for row in rows],
            hovertemplate="%{x}: %{y:.1%} (%{customdata[0]}/%{customdata[1]})<extra>" + label + "</extra>",
        )
    figure.update_layout(barmode="group", yaxis={"title": "verified success", "tickformat": ".0%", "range": [0, 1.05]},
                         xaxis={"title": "agent kind"}, legend={"orientation": "h"}, margin={"t": 30})
    return figure


def metric_trend_figure(history: list[dict[str, Any]], names: list[str]) -> go.Figure:
    """The chosen headline metrics over the export snapshots (rates as %, distributions as their p50)."""
    figure = go.Figure()
    for name in names:
        rows = [row for row in history if row["name"] == name and row["value"] is not None]
        figure.add_scatter(name=name, mode="lines+markers", x=[row["measured_at"] for row in rows],
                           y=[row["value"] for row in rows])
    figure.update_layout(xaxis={"title": "measured at"}, yaxis={"title": "value (rate, p50 or count)"},
                         legend={"orientation": "h"}, margin={"t": 30})
    return figure


def success_cost_figure(summary: list[dict[str, Any]]) -> go.Figure:
    """Each strategy's verified success (95% interval) against its cost per verified run."""
    figure = go.Figure()
    for row in summary:
        rate = row["success_rate"] or 0.0
        figure.add_scatter(
            name=row["strategy"], mode="markers",
            x=[row["cost_per_verified_usd"]], y=[rate], marker={"size": 12},
            error_y={"type": "data", "symmetric": False,
                     "array": [(row["success_high"] or rate) - rate], "arrayminus": [rate - (row["success_low"] or rate)]},
            hovertemplate=f"{row['label']}: %{{y:.1%}} verified, $%{{x:.4f}} per verified run<extra></extra>")
    figure.update_layout(xaxis={"title": "cost per verified run (USD)"},
                         yaxis={"title": "verified success", "tickformat": ".0%"}, legend={"orientation": "h"},
                         margin={"t": 30})
    return figure


def safety_figure(summary: list[dict[str, Any]]) -> go.Figure:
    """Duplicate side effects and stale evidence accepted, per strategy (the oracle's counts)."""
    figure = go.Figure()
    strategies = [row["strategy"] for row in summary]
    figure.add_bar(name="duplicate effects", x=strategies, y=[row["duplicate_effects"] for row in summary])
    figure.add_bar(name="stale evidence accepted", x=strategies, y=[row["stale_evidence_accepted"] for row in summary])
    figure.update_layout(barmode="group", xaxis={"title": "strategy"}, yaxis={"title": "incidents"},
                         legend={"orientation": "h"}, margin={"t": 30})
    return figure


def crossover_figure(sweep: list[dict[str, Any]], strategies: list[str], run_length: int | None = None) -> go.Figure:
    """Cost per verified run against fault rate, one line per strategy, for one run length (default: all)."""
    figure = go.Figure()
    for strategy in strategies:
        cells = sorted((c for c in sweep if c["strategy"] == strategy
                        and (run_length is None or c["run_length"] == run_length)),
                       key=lambda c: (c["run_length"], c["fault_rate"]))
        figure.add_scatter(
            name=strategy, mode="lines+markers", x=[c["fault_rate"] for c in cells],
            y=[c["cost_per_verified_usd"] for c in cells],
            customdata=[[c["run_length"], c["success_rate"], "yes" if c["winner"] else "no"] for c in cells],
            hovertemplate=(strategy + ": length %{customdata[0]}, fault rate %{x}, $%{y:.4f} per verified run, "
                           "success %{customdata[1]:.1%}, wins %{customdata[2]}<extra></extra>"))
    figure.update_layout(xaxis={"title": "fault rate"}, yaxis={"title": "cost per verified run (USD)"},
                         legend={"orientation": "h"}, margin={"t": 30})
    return figure


def winner_map_figure(sweep: list[dict[str, Any]]) -> go.Figure:
    """Which strategy wins each (run length, fault rate) cell of the sweep."""
    winners = [c for c in sweep if c["winner"]]
    lengths = sorted({c["run_length"] for c in sweep})
    rates = sorted({c["fault_rate"] for c in sweep})
    names = sorted({c["strategy"] for c in winners})
    index = {name: i for i, name in enumerate(names)}
    grid: list[list[float | None]] = [[None] * len(rates) for _ in lengths]
    text: list[list[str]] = [[""] * len(rates) for _ in lengths]
    for cell in winners:
        row, column = lengths.index(cell["run_length"]), rates.index(cell["fault_rate"])
        grid[row][column] = index[cell["strategy"]]
        text[row][column] = cell["strategy"]
    figure = go.Figure(go.Heatmap(z=grid, x=[str(r) for r in rates], y=[str(n) for n in lengths], text=text,
                                  texttemplate="%{text}", showscale=False, colorscale="Viridis",
                                  hovertemplate="length %{y}, fault rate %{x}: %{text}<extra></extra>"))
    figure.update_layout(xaxis={"title": "fault rate", "type": "category"},
                         yaxis={"title": "run length (steps)", "type": "category"}, margin={"t": 30})
    return figure


def timeline_figure(entries: list[dict[str, Any]]) -> go.Figure:
    """One run's events on a time axis, one row per event type, epochs in the hover."""
    figure = go.Figure()
    figure.add_scatter(
        mode="markers", x=[e["at"] for e in entries], y=[e["event"] for e in entries], marker={"size": 10},
        customdata=[[e["seq"], e["epoch"], e["placement"], e["reason"]] for e in entries],
        hovertemplate="#%{customdata[0]} %{y}<br>epoch %{customdata[1]} %{customdata[2]}<br>%{customdata[3]}"
                      "<extra></extra>")
    figure.update_layout(xaxis={"title": "time"}, yaxis={"title": "", "categoryorder": "trace"},
                         margin={"t": 30}, height=max(300, 24 * len({e["event"] for e in entries}) + 120))
    return figure


def fault_matrix_figure(rows: list[dict[str, Any]]) -> go.Figure:
    """Violations per case (rows) and strategy (columns), the violated questions in each cell."""
    cases = list(dict.fromkeys(row["case"] for row in rows))
    strategies = list(dict.fromkeys(row["strategy"] for row in rows))
    grid: list[list[int | None]] = [[None] * len(strategies) for _ in cases]
    text: list[list[str]] = [[""] * len(strategies) for _ in cases]
    for row in rows:
        i, j = cases.index(row["case"]), strategies.index(row["strategy"])
        grid[i][j] = row["violations"]
        text[i][j] = row["violated"] if row["violations"] else row["status"] or "none"
    figure = go.Figure(go.Heatmap(z=grid, x=strategies, y=cases, text=text, texttemplate="%{text}",
                                  colorscale="Reds", zmin=0, colorbar={"title": "violations"},
                                  hovertemplate="%{y} / %{x}: %{text}<extra></extra>"))
    figure.update_layout(yaxis={"autorange": "reversed"}, margin={"t": 30}, height=120 + 40 * len(cases))
    return figure


def fleet_status_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Runs by agent kind, stacked by status."""
    figure = go.Figure()
    kinds = sorted({run["kind"] for run in runs})
    for status in sorted({run["status"] for run in runs}):
        figure.add_bar(name=status, x=kinds,
                       y=[sum(1 for run in runs if run["kind"] == kind and run["status"] == status) for kind in kinds])
    figure.update_layout(barmode="stack", xaxis={"title": "agent kind"}, yaxis={"title": "runs"},
                         legend={"orientation": "h"}, margin={"t": 30})
    return figure
