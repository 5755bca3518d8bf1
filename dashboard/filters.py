"""The sidebar filters every page shares: agent kind, reason, migration class and time window."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import streamlit as st

WINDOWS: dict[str, dt.timedelta | None] = {
    "all time": None, "last hour": dt.timedelta(hours=1), "last 24 hours": dt.timedelta(days=1),
    "last 7 days": dt.timedelta(days=7),
}


@dataclass(frozen=True)
class Filters:
    """What the operator picked; an empty selection means no restriction."""

    kinds: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    window: str = "all time"

    @property
    def active(self) -> bool:
        """Whether any filter restricts anything."""
        return bool(self.kinds or self.reasons or self.classes) or WINDOWS[self.window] is not None

    def describe(self) -> str:
        """The choice in words, for a caption."""
        parts = [f"{label} {', '.join(values)}" for label, values in
                 (("agent kind", self.kinds), ("reason", self.reasons), ("migration class", self.classes)) if values]
        return "; ".join(parts + ([self.window] if WINDOWS[self.window] is not None else [])) or "no filter"

    def since(self, now: dt.datetime) -> dt.datetime | None:
        span = WINDOWS[self.window]
        return None if span is None else now - span

    def keep(self, row: dict[str, Any], *, kind: str | None = "kind", reason: str | None = None,
             migration_class: str | None = None, at: str | None = None, now: dt.datetime | None = None) -> bool:
        """Whether `row` passes, reading the named fields (None: the page's rows have no such field)."""
        if kind and self.kinds and row.get(kind) not in self.kinds:
            return False
        if reason and self.reasons and row.get(reason) not in self.reasons:
            return False
        if migration_class and self.classes and row.get(migration_class) not in self.classes:
            return False
        if at and (since := self.since(now or dt.datetime.now(dt.UTC))) is not None:
            value = row.get(at)
            if isinstance(value, str):
                value = dt.datetime.fromisoformat(value)
            if value is None or _aware(value) < since:
                return False
        return True


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def sidebar(kinds: Iterable[str], reasons: Iterable[str], classes: Iterable[str]) -> Filters:
    """Draw the filters in the sidebar (options from the data on screen) and return the choice."""
    bar = st.sidebar
    bar.header("Filters")
    picked_kinds = bar.multiselect("agent kind", sorted(set(kinds)), key="filter_kind")
    picked_reasons = bar.multiselect("reason", sorted(set(reasons)), key="filter_reason")
    picked_classes = bar.multiselect("migration class", sorted(set(classes)), key="filter_class")
    window = bar.selectbox("time window", list(WINDOWS), key="filter_window")
    return Filters(tuple(picked_kinds), tuple(picked_reasons), tuple(picked_classes), str(window))


def store_sidebar(view: dict[str, list[dict[str, Any]]]) -> Filters:
    """The filters, with options from the store's runs and handoff requests."""
    requests = view["requests"]
    return sidebar([r["kind"] for r in view["runs"]] + [r["kind"] for r in requests],
                   [r["reason"] for r in requests], [r["migration_class"] for r in requests])


def store_runs(view: dict[str, list[dict[str, Any]]], filters: Filters,
               now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """The store's runs that pass: their agent kind, their last update inside the time window and, when a
    reason or migration class is picked, at least one handoff request with that reason and class."""
    runs = [r for r in view["runs"] if filters.keep(r, at="updated", now=now)]
    if filters.reasons or filters.classes:
        moved = {r["run_id"] for r in view["requests"] if filters.keep(r, reason="reason",
                                                                      migration_class="migration_class")}
        runs = [r for r in runs if r["run"] in moved]
    return runs
