"""Leases and fencing epochs: one owner per run per epoch, and epochs only increase.

Expiry is always judged by the database clock (the store computes and
compares `expires_at` in SQL). Two roles:

* `Coordinator` grants a run to an owner. Granting is a compare-and-set on
  the epoch the coordinator observed: the epoch becomes observed+1 for exactly
  one caller, however many race. A held, unexpired lease is taken only when
  the coordinator revokes it on purpose (`force=True`, a planned handoff).
  After a takeover it fences the given targets at the new epoch, so the old
  owner is shut out at the targets too, before the new owner starts.
* `LeaseHolder` is the owner's side: renew (heartbeat) and release. A
  `Heartbeat` thread renews periodically and flags the loss of the lease.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from baton import clock
from baton.errors import LeaseConflictError, LeaseLostError
from baton.fencing import FenceAware, FencingToken
from baton.history import HistorySink, Recorder
from baton.models.events import Event, EventType
from baton.store.base import SqlStore
from baton.store.records import Lease


class Coordinator:
    """Grants runs to owners by compare-and-set on the fencing epoch."""

    def __init__(self, store: SqlStore, *, name: str = "coordinator", history: HistorySink | None = None) -> None:
        self.store = store
        self.name = name
        self._history = history

    def is_expired(self, lease: Lease) -> bool:
        """True when nobody holds `lease` at the database's current time."""
        return not lease.held_at(self.store.db_now())

    def wait_until_expired(self, run_id: str, *, timeout_s: float, poll_s: float = 0.02) -> Lease:
        """Poll until the run's lease has lapsed by database clock; return it (TimeoutError otherwise)."""
        deadline = clock.monotonic() + timeout_s
        while True:
            lease = self.store.get_lease(run_id)
            if self.is_expired(lease):
                return lease
            if clock.monotonic() >= deadline:
                raise TimeoutError(f"lease of run {run_id!r} still held by {lease.owner!r} after {timeout_s}s")
            clock.sleep(poll_s)

    def grant(
        self,
        run_id: str,
        owner: str,
        *,
        ttl_s: float,
        observed_epoch: int | None = None,
        force: bool = False,
        fence_targets: Sequence[FenceAware] = (),
        reason: str = "",
    ) -> Lease | None:
        """Give the run to `owner` at epoch observed+1, or return None if someone else won.

        `observed_epoch` is the epoch the decision was based on (read now when
        omitted). Without `force` the current lease must have lapsed by the
        database clock. The targets in `fence_targets` are fenced at the new
        epoch before this returns, so the new owner starts only after the old
        epoch is shut out everywhere.
        """
        history = Recorder(self._history, owner)
        before = self.store.get_lease(run_id)
        expected = before.epoch if observed_epoch is None else observed_epoch
        history.invoke("acquire", run_id, epoch=expected, value={"owner": owner, "observed_epoch": expected})
        try:
            # The compare-and-set and its LEASE_ACQUIRED event commit together, so the log's
            # order of acquisitions is the order the epochs were won (a racing grant cannot
            # record its newer epoch before this one's older epoch is written).
            with self.store.atomic():
                lease = self.store.acquire_lease(run_id, owner, ttl_s, expected, require_expired=not force)
                if lease is not None and lease.epoch > expected:
                    self.store.append_event(self._acquired_event(run_id, owner, before, expected, lease,
                                                                 force=force, reason=reason,
                                                                 fenced=len(fence_targets)))
        except BaseException as exc:
            history.info("acquire", run_id, epoch=expected, value={"owner": owner, "error": repr(exc)})
            raise
        if lease is None:
            history.fail("acquire", run_id, epoch=expected, value={"owner": owner, "observed_epoch": expected})
            return None
        if lease.epoch <= expected:  # the store broke its contract; never hand out a non-increasing epoch
            raise LeaseConflictError(f"run {run_id!r}: store returned epoch {lease.epoch} after {expected}")
        takeover = expected > 0  # an earlier epoch existed: its holder may still be running
        self.fence(run_id, lease.epoch, fence_targets)
        history.ok("acquire", run_id, epoch=lease.epoch, value={"owner": owner, "takeover": takeover})
        return lease

    def _acquired_event(self, run_id: str, owner: str, before: Lease, expected: int, lease: Lease, *,
                        force: bool, reason: str, fenced: int) -> Event:
        takeover = expected > 0
        return Event(
            event_type=EventType.LEASE_ACQUIRED,
            run_id=run_id,
            at=self.store.db_now(),
            source_epoch=expected,
            target_epoch=lease.epoch,
            reason=reason or ("revocation and transfer" if force else
                              "takeover of a lapsed lease" if takeover else "lease granted"),
            detail={"owner": owner, "previous_owner": before.owner if before.epoch == expected else None,
                    "coordinator": self.name, "forced": force, "fenced_targets": fenced},
        )

    def fence(self, run_id: str, epoch: int, targets: Sequence[FenceAware]) -> None:
        """Tell each target that `epoch` now rules the run (raises if a target cannot be told)."""
        history = Recorder(self._history, self.name)
        for target in targets:
            history.invoke("fence", run_id, epoch=epoch, value={"target": getattr(target, "name", "")})
            try:
                mark = target.advance_fence(FencingToken(run_id, epoch))
            except BaseException as exc:
                history.info("fence", run_id, epoch=epoch, value={"error": repr(exc)})
                raise
            history.ok("fence", run_id, epoch=epoch, value={"mark": mark})
        if targets:
            self.store.append_event(
                Event(
                    event_type=EventType.SOURCE_FENCED,
                    run_id=run_id,
                    at=self.store.db_now(),
                    target_epoch=epoch,
                    reason="targets fenced at the new epoch",
                    detail={"targets": [str(getattr(target, "name", "")) for target in targets]},
                )
            )


class LeaseHolder:
    """The owner's side of a lease: renew and release, at the epoch it was granted."""

    def __init__(self, store: SqlStore, lease: Lease, *, ttl_s: float) -> None:
        if lease.owner is None:
            raise LeaseConflictError(f"run {lease.run_id!r}: a lease without an owner cannot be held")
        self.store = store
        self.ttl_s = ttl_s
        self._lease = lease
        self._lock = threading.Lock()

    @property
    def lease(self) -> Lease:
        with self._lock:
            return self._lease

    @property
    def epoch(self) -> int:
        return self.lease.epoch

    def renew(self) -> Lease:
        """Extend the lease by ttl (database clock); LeaseLostError if it was lost or taken."""
        lease = self.lease
        assert lease.owner is not None
        renewed = self.store.renew_lease(lease.run_id, lease.owner, lease.epoch, self.ttl_s)
        if renewed is None:
            current = self.store.get_lease(lease.run_id)
            raise LeaseLostError(
                f"run {lease.run_id!r}: {lease.owner} can no longer renew epoch {lease.epoch} "
                f"(now epoch {current.epoch}, owner {current.owner!r})"
            )
        with self._lock:
            self._lease = renewed
        return renewed

    def release(self) -> bool:
        """Give the lease up (the epoch stays; the next owner gets a higher one)."""
        lease = self.lease
        assert lease.owner is not None
        return self.store.release_lease(lease.run_id, lease.owner, lease.epoch)

    def heartbeat(self, *, interval_s: float | None = None, on_lost: Callable[[LeaseLostError], Any] | None = None) -> Heartbeat:
        """A started heartbeat thread renewing every `interval_s` (ttl/3 by default)."""
        return Heartbeat(self, interval_s=interval_s or self.ttl_s / 3.0, on_lost=on_lost).start()


class Heartbeat:
    """Renews a lease in a daemon thread until stopped or until the lease is lost."""

    def __init__(
        self, holder: LeaseHolder, *, interval_s: float, on_lost: Callable[[LeaseLostError], Any] | None = None
    ) -> None:
        self.holder = holder
        self.interval_s = interval_s
        self.lost = threading.Event()
        self.error: LeaseLostError | None = None
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._name = f"heartbeat-{holder.lease.run_id}"
        self._done = threading.Event()

    def start(self) -> Heartbeat:
        clock.start_thread(self._run, self._name)
        return self

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self._done.set()

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread().name != self._name:
            clock.wait(self._done, 5)

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _loop(self) -> None:
        last_ok = clock.monotonic()
        while not clock.wait(self._stop, self.interval_s):
            try:
                self.holder.renew()
                last_ok = clock.monotonic()
            except LeaseLostError as exc:
                self._lose(exc)
                return
            except Exception as exc:  # noqa: BLE001 - a store hiccup; give up once the lease must have lapsed
                if clock.monotonic() - last_ok >= self.holder.ttl_s:
                    self._lose(LeaseLostError(f"heartbeat could not reach the store for a whole ttl: {exc}"))
                    return

    def _lose(self, exc: LeaseLostError) -> None:
        self.error = exc
        self.lost.set()
        if self._on_lost is not None:
            self._on_lost(exc)
