"""The book's dropped and pending-revalidation lists, kept as they change, equal a walk of the whole log."""

from __future__ import annotations

import datetime as dt
import random

from baton.models import Observation, SourceAuthority, UseMode
from baton.runtime.observation_book import ObservationBook

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
MODES = [UseMode.USE_RECORDED_OBSERVATION, UseMode.REVALIDATE_LIVE_STATE, UseMode.REFRESH_STALE_OBSERVATION]


def _observation(rng: random.Random, index: int) -> Observation:
    return Observation(source=f"src-{rng.randrange(3)}", query={"q": rng.randrange(4)}, observed_at=T0,
                       content_ref="sha256:" + f"{rng.randrange(3):064x}", freshness_budget_s=3600,
                       authority=SourceAuthority.AUTHORITATIVE)


def _walked(book: ObservationBook) -> tuple[dict[str, str], dict[str, str]]:
    """What the book held before: a walk of every entry."""
    dropped = {entry.ref: entry.dropped for entry in book._entries if entry.dropped}
    pending = {entry.ref: entry.restored_mode.value for entry in book.current_entries()
               if entry.restored_mode is not UseMode.USE_RECORDED_OBSERVATION}
    return dropped, pending


def test_incremental_lists_match_a_walk_of_the_log() -> None:
    for seed in range(60):
        rng = random.Random(seed)
        restored = [(_observation(rng, i), rng.choice(MODES)) for i in range(rng.randrange(12))]
        refs = [o.record_ref() for o, _ in restored]
        initially_dropped = {ref: "gone" for ref in refs if rng.random() < 0.2}
        book = ObservationBook(restored, dropped=initially_dropped)
        for step in range(40):
            if rng.random() < 0.6:
                observation = _observation(rng, step)
                book.add(observation)
                refs.append(observation.record_ref())
            elif refs:
                book.drop(rng.choice(refs), rng.choice(["stale", "", "source gone"]))
            dropped, pending = _walked(book)
            assert book.dropped() == dropped and list(book.dropped()) == list(dropped)
            assert book.pending_modes() == pending and list(book.pending_modes()) == list(pending)
