"""Property: whatever the interleaving of acquire/renew/release, one epoch has at most one owner
and epochs never decrease. A small model predicts every call's result exactly."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.store.base import SqlStore

from builders.rows import new_run

OWNERS = ("a", "b", "c")
LONG_TTL = 60.0  # never expires during an example
ZERO_TTL = 0.0  # expired as soon as it is granted

owner_st = st.sampled_from(OWNERS)
offset_st = st.integers(min_value=-1, max_value=1)  # epoch used = current + offset
ttl_st = st.sampled_from((ZERO_TTL, LONG_TTL))
action_st = st.one_of(
    st.tuples(st.just("acquire"), owner_st, offset_st, ttl_st, st.booleans()),
    st.tuples(st.just("renew"), owner_st, offset_st, ttl_st, st.just(True)),
    st.tuples(st.just("release"), owner_st, offset_st, ttl_st, st.just(True)),
)


@dataclass
class Model:
    epoch: int = 0
    owner: str | None = None
    live: bool = False  # held and not expired by the database clock


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(actions=st.lists(action_st, min_size=1, max_size=25))
def test_interleavings_keep_one_owner_per_epoch(
    store: SqlStore, actions: list[tuple[str, str, int, float, bool]]
) -> None:
    run_id = new_run(store).run_id
    model = Model()
    owner_of_epoch: dict[int, str] = {}
    seen_epoch = 0
    for action, owner, offset, ttl, require_expired in actions:
        epoch = max(0, model.epoch + offset)
        if action == "acquire":
            lease = store.acquire_lease(run_id, owner, ttl, expected_epoch=epoch, require_expired=require_expired)
            should_win = epoch == model.epoch and (not require_expired or not model.live)
            assert (lease is not None) == should_win, (action, owner, epoch, model)
            if lease is not None:
                assert lease.epoch == epoch + 1 and lease.owner == owner
                assert lease.epoch not in owner_of_epoch, "an epoch was granted twice"
                owner_of_epoch[lease.epoch] = owner
                model = Model(lease.epoch, owner, ttl == LONG_TTL)
        elif action == "renew":
            lease = store.renew_lease(run_id, owner, epoch, ttl)
            should_win = model.live and owner == model.owner and epoch == model.epoch
            assert (lease is not None) == should_win, (action, owner, epoch, model)
            if lease is not None:
                assert owner_of_epoch[lease.epoch] == owner
                model = Model(model.epoch, owner, ttl == LONG_TTL)
        else:
            released = store.release_lease(run_id, owner, epoch)
            assert released == (model.owner == owner and epoch == model.epoch)
            if released:
                model = Model(model.epoch, None, False)
        stored = store.get_lease(run_id)
        assert stored.epoch >= seen_epoch, "epoch went backwards"
        seen_epoch = stored.epoch
        assert (stored.epoch, stored.owner) == (model.epoch, model.owner)
        if stored.owner is not None:
            assert owner_of_epoch[stored.epoch] == stored.owner
