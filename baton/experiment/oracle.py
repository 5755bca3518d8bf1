"""The world the strategies act on, and its own records: judged from here, never from a strategy's code.

`TargetLedger` is the consequential target's record of effects: it honours idempotency keys (as
the deploy service does) and keeps every effect it applied. `EvidenceSource` is the evidence's
source of truth with its current version per run. A strategy only sends requests and reads
versions; duplicates and stale evidence are counted here.
"""

from __future__ import annotations

from collections import defaultdict


class TargetLedger:
    """Effects per (run, logical operation), deduplicated by idempotency key only."""

    def __init__(self) -> None:
        self._keys: dict[int, set[str]] = defaultdict(set)
        self._effects: dict[int, list[tuple[str, str]]] = defaultdict(list)

    def request(self, run: int, operation: str, key: str) -> bool:
        """Apply one mutation request; True if it made a new effect, False if the key replayed."""
        if key in self._keys[run]:
            return False
        self._keys[run].add(key)
        self._effects[run].append((operation, key))
        return True

    def committed(self, run: int, key: str) -> bool:
        """What a reconciliation query to the target answers for that key."""
        return key in self._keys[run]

    def effects(self, run: int) -> list[tuple[str, str]]:
        return list(self._effects.get(run, ()))

    def duplicates(self, run: int) -> int:
        """Effects beyond the first for each logical operation of the run."""
        seen: dict[str, int] = defaultdict(int)
        for operation, _ in self._effects.get(run, ()):
            seen[operation] += 1
        return sum(count - 1 for count in seen.values())

    def all_effects(self) -> list[tuple[int, str, str]]:
        return [(run, op, key) for run, items in self._effects.items() for op, key in items]


class EvidenceSource:
    """The current version of each run's evidence; it changes only when the fault schedule says so."""

    def __init__(self) -> None:
        self._version: dict[int, int] = defaultdict(int)

    def current(self, run: int) -> int:
        return self._version[run]

    def change(self, run: int) -> None:
        self._version[run] += 1

    def stale(self, run: int, quoted: int | None) -> bool:
        """The run's final candidate quotes evidence older than the source's current version."""
        return quoted is not None and quoted < self._version[run]
