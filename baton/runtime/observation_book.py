"""What a run has observed, and how each observation may be used right now.

Observations are kept in log order. For each (source, query) the newest one
is current; older ones are superseded. Each current observation carries a use
mode: recorded observations are used as they are, unless a resume asked for
revalidation (the environment changed) or the freshness budget has run out,
in which case they must be revalidated or refreshed before any use
(invariant 9). An observation can also be dropped explicitly (the source no
longer answers), so nothing derived from it can be relied on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from baton.checkpoints import encoded_record
from baton.identity import canonical_json
from baton.models import Observation, UseMode


def observation_key(source: str, query: Mapping[str, object] | None) -> tuple[str, str]:
    """The identity of "the same question asked again": source plus canonical query."""
    return source, canonical_json(dict(query or {})).decode("utf-8")


@dataclass
class BookEntry:
    """One recorded observation, its ref and the mode it was restored with."""

    observation: Observation
    ref: str
    restored_mode: UseMode = UseMode.USE_RECORDED_OBSERVATION
    dropped: str | None = None
    key: tuple[str, str] = field(init=False)
    """The question this observation answers (computed once: it is asked at every seal)."""

    def __post_init__(self) -> None:
        self.key = observation_key(self.observation.source, self.observation.query)

    def mode_at(self, now: dt.datetime) -> UseMode:
        """The mode this observation must be used in at `now`."""
        if not self.observation.is_fresh(now):
            return UseMode.REFRESH_STALE_OBSERVATION
        return self.restored_mode


class ObservationBook:
    """The run's observation log with current-per-question lookups."""

    def __init__(
        self,
        restored: Iterable[tuple[Observation, UseMode]] = (),
        *,
        dropped: Mapping[str, str] | None = None,
    ) -> None:
        self._entries: list[BookEntry] = []
        self._by_ref: dict[str, BookEntry] = {}
        self._newest: dict[tuple[str, str], BookEntry] = {}  # per question, in the order first asked
        # What every seal persists (dropped refs, modes still pending), kept as it changes so a seal
        # costs O(those few entries), not a walk of the whole log: entries ever dropped, by log
        # position, and entries restored with a mode other than "use as recorded".
        self._dropped: dict[int, BookEntry] = {}
        self._restored_pending: list[BookEntry] = []
        self._position: dict[int, int] = {}  # id(entry) -> its index in the log
        for observation, mode in restored:
            self._append(observation, mode)
        for ref, reason in (dropped or {}).items():
            if ref in self._by_ref:
                self._mark_dropped(self._by_ref[ref], reason)

    def _append(self, observation: Observation, mode: UseMode) -> BookEntry:
        entry = BookEntry(observation=observation, ref=encoded_record(observation)[1], restored_mode=mode)
        self._position[id(entry)] = len(self._entries)
        self._entries.append(entry)
        if mode is not UseMode.USE_RECORDED_OBSERVATION:
            self._restored_pending.append(entry)
        self._by_ref.setdefault(entry.ref, entry)
        self._newest[entry.key] = entry
        return entry

    def add(self, observation: Observation) -> BookEntry:
        """Record a new observation; it becomes current for its question."""
        return self._append(observation, UseMode.USE_RECORDED_OBSERVATION)

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, ref: str) -> BookEntry | None:
        return self._by_ref.get(ref)

    def current(self, source: str, query: Mapping[str, object] | None = None) -> BookEntry | None:
        """The newest observation of this question, unless it was dropped."""
        entry = self._newest.get(observation_key(source, query))
        return None if entry is None or entry.dropped else entry

    def current_entries(self) -> list[BookEntry]:
        """The current observation of every question, in the order first asked."""
        return [entry for entry in self._newest.values() if not entry.dropped]

    def usable(self, ref: str, now: dt.datetime) -> bool:
        """True when `ref` is the current, undropped answer to its question and may be used as recorded."""
        entry = self._by_ref.get(ref)
        if entry is None or entry.dropped:
            return False
        current = self.current(entry.observation.source, entry.observation.query)
        return current is not None and current.ref == ref and current.mode_at(now) is UseMode.USE_RECORDED_OBSERVATION

    def valid(self, ref: str, now: dt.datetime) -> bool:
        """True when `ref` may be relied on now: its question's current answer is usable and has its content.

        An older observation whose content a revalidation confirmed unchanged
        stays valid (citing it is still true); one whose content changed does not.
        """
        entry = self._by_ref.get(ref)
        if entry is None or entry.dropped:
            return False
        current = self.current(entry.observation.source, entry.observation.query)
        return (
            current is not None
            and current.mode_at(now) is UseMode.USE_RECORDED_OBSERVATION
            and current.observation.content_ref == entry.observation.content_ref
        )

    def valid_refs(self, now: dt.datetime) -> list[str]:
        """Every observation ref that `valid` accepts now, in log order."""
        return [entry.ref for entry in self._entries if self.valid(entry.ref, now)]

    def needing_revalidation(self, now: dt.datetime) -> list[tuple[BookEntry, UseMode]]:
        """Current observations that must be revalidated or refreshed before use, with the mode."""
        return [
            (entry, mode)
            for entry in self.current_entries()
            if (mode := entry.mode_at(now)) is not UseMode.USE_RECORDED_OBSERVATION
        ]

    def drop(self, ref: str, reason: str) -> None:
        """Mark an observation as unusable (e.g. its source no longer serves it)."""
        entry = self._by_ref.get(ref)
        if entry is not None:
            self._mark_dropped(entry, reason)

    def _mark_dropped(self, entry: BookEntry, reason: str) -> None:
        entry.dropped = reason
        if reason:
            self._dropped[self._position[id(entry)]] = entry
        else:
            self._dropped.pop(self._position[id(entry)], None)

    def dropped(self) -> dict[str, str]:
        """Dropped refs and why, in log order."""
        return {entry.ref: entry.dropped for _, entry in sorted(self._dropped.items())}

    def pending_modes(self) -> dict[str, str]:
        """Refs still awaiting revalidation because a resume asked for it (persisted in the run state).

        In the order their questions were first asked, as `current_entries` lists them."""
        current = [entry for entry in self._restored_pending
                   if not entry.dropped and self._newest.get(entry.key) is entry]
        if len(current) > 1:
            order = {key: index for index, key in enumerate(self._newest)}
            current.sort(key=lambda entry: order[entry.key])
        return {entry.ref: entry.restored_mode.value for entry in current}
