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
