"""Properties of the canonical form on generated records, and a cross-check against a second implementation.

The second implementation is the `jcs` package (WebPKI's reference JCS code for
Python, written apart from `rfc8785`): both must give the same bytes for the
plain value of every generated state.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from enum import Enum

import jcs
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.identity import DATETIME_FORMAT, canonical_json, plain_value, sha256_ref
from baton.models import BudgetLedger, BudgetLimits, BudgetUsage, DerivedFact, Observation, PortableRunState

SAFE_INT = st.integers(-(2**53 - 1), 2**53 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | SAFE_INT | FLOATS | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)
REFS = st.binary(min_size=1, max_size=8).map(sha256_ref)
ZONES = st.integers(-14 * 60, 14 * 60).map(lambda minutes: dt.timezone(dt.timedelta(minutes=minutes)))
INSTANTS = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2090, 1, 1),
                        timezones=st.just(dt.timezone.utc))
MONEY = st.decimals(min_value=0, max_value=10**6, places=4, allow_nan=False, allow_infinity=False)
COUNTS = st.integers(0, 10**6)
SECONDS = st.floats(0, 1e6, allow_nan=False)

observations = st.builds(
    Observation, source=TEXT.filter(bool), query=st.dictionaries(TEXT, JSON, max_size=3), observed_at=INSTANTS,
    content_ref=REFS, freshness_budget_s=SECONDS, interpretation_refs=st.tuples(REFS) | st.just(()),
)
states = st.builds(
    PortableRunState, task=TEXT, step=COUNTS,
    derived_facts=st.lists(st.builds(DerivedFact, fact_id=TEXT.filter(bool), statement=TEXT,
                                     derived_from=st.lists(REFS, max_size=2).map(tuple)), max_size=2).map(tuple),
    hypotheses=st.lists(TEXT, max_size=2).map(tuple), candidate_refs=st.lists(REFS, max_size=2).map(tuple),
    memory=st.dictionaries(TEXT, JSON, max_size=4),
)
usages = st.builds(BudgetUsage, model_spend_usd=MONEY, model_calls=COUNTS, tool_calls=COUNTS,
                   browser_seconds=SECONDS, verification_spend_usd=MONEY, retries=COUNTS)
ledgers = st.builds(
    BudgetLedger,
    limits=st.builds(BudgetLimits, model_spend_usd=MONEY, model_calls=COUNTS, search_expansions=COUNTS,
                     tool_calls=COUNTS, browser_seconds=SECONDS, sandbox_seconds=SECONDS,
                     verification_reserve_usd=MONEY, retries=COUNTS, deadline=INSTANTS),
    used=usages,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(observations, states, ledgers, JSON))
def test_rfc8785_and_an_independent_implementation_agree(value: object) -> None:
    plain = plain_value(value)
    assert canonical_json(value) == jcs.canonicalize(plain)


@settings(deadline=None)
@given(observations, ZONES, st.integers(0, 6))
def test_equal_observations_hash_equal(observation: Observation, zone: dt.tzinfo, extra_zeros: int) -> None:
    same_instant = observation.observed_at.astimezone(zone)
    query = dict(reversed(list(observation.query.items())))
    twin = Observation(source=observation.source, query=query, observed_at=same_instant,
                       content_ref=observation.content_ref, freshness_budget_s=observation.freshness_budget_s,
                       interpretation_refs=observation.interpretation_refs)
    assert twin == observation and twin.record_ref() == observation.record_ref()
    assert Observation.from_canonical(observation.canonical()).record_ref() == observation.record_ref()


@settings(deadline=None)
@given(usages, st.integers(1, 6))
def test_decimal_scale_never_moves_a_hash(usage: BudgetUsage, extra_zeros: int) -> None:
    exponent = Decimal(1).scaleb(-(4 + extra_zeros))
    rescaled = usage.model_copy(update={"model_spend_usd": usage.model_spend_usd.quantize(exponent)})
    assert rescaled.record_ref() == usage.record_ref()


def _changed(value: object) -> object:
    if isinstance(value, Enum):
        members = list(type(value))
        return members[(members.index(value) + 1) % len(members)]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0 if abs(value) < 1e15 else value * 2
    if isinstance(value, Decimal):
        return value + Decimal("0.0001")
    if isinstance(value, dt.datetime):
        return value + dt.timedelta(microseconds=1)
    if isinstance(value, str):
        return sha256_ref(value.encode()) if value.startswith("sha256:") else value + "x"
    if isinstance(value, tuple):
        return (*value, value[0]) if value else None
    if isinstance(value, dict):
        return {**value, "added": 1} if "added" not in value else {}
    return None


@settings(max_examples=300, deadline=None)
@given(st.one_of(observations, states, usages), st.data())
def test_any_change_of_a_field_changes_the_hash(record: object, data: st.DataObject) -> None:
    fields = [name for name in type(record).model_fields]
    name = data.draw(st.sampled_from(fields))
    new = _changed(getattr(record, name))
    if new is None:  # an empty tuple: give it one member of the right kind instead
        new = (getattr(record, "content_ref", None) or sha256_ref(b"m"),) if name.endswith("refs") else ("m",)
        if name == "derived_facts":
            new = (DerivedFact(fact_id="f", statement="s"),)
    changed = type(record).model_validate({**{f: getattr(record, f) for f in fields}, name: new})
    assert getattr(changed, name) != getattr(record, name)
    assert changed.record_ref() != record.record_ref()


EDGE_FLOATS = st.one_of(
    st.sampled_from([1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, 2.0**53, 2.0**53 - 1, -(2.0**53),
                     0.0, -0.0, 5e-324, 1.7976931348623157e308, 1e21, 1e-7, 123456789012345.6]),
    st.floats(min_value=-1e17, max_value=1e17, allow_nan=False),
    st.floats(min_value=-1e-3, max_value=1e-3, allow_nan=False),
)
# Keys around where UTF-16 order and code point order part: U+E000..U+FFFF against supplementary characters.
ORDER_KEYS = st.text(st.sampled_from(["a", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0001f600", "\x7f", "\x00"]),
                     max_size=3)
EDGE_JSON = st.recursive(
    st.none() | st.booleans() | SAFE_INT | EDGE_FLOATS | ORDER_KEYS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ORDER_KEYS, inner, max_size=5),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None)
@given(EDGE_JSON)
def test_the_fast_encoder_writes_what_rfc8785_and_jcs_write(value: object) -> None:
    """`canonical_json` writes most values with the standard library's encoder; both JCS implementations
    are the oracle, on the floats and keys where that encoder would differ."""
    plain = plain_value(value)
    assert canonical_json(value) == rfc8785.dumps(plain) == jcs.canonicalize(plain)


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=dt.datetime(2, 1, 1), max_value=dt.datetime(9998, 12, 31), timezones=ZONES))
def test_datetimes_keep_their_canonical_form(instant: dt.datetime) -> None:
    """Written as strftime writes it (the fast path is isoformat from the year 1000 on)."""
    assert plain_value(instant) == instant.astimezone(dt.timezone.utc).strftime(DATETIME_FORMAT)
