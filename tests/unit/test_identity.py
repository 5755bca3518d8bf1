import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.errors import CanonicalEncodingError, InvalidRefError
from baton.identity import canonical_json, is_ref, parse_ref, ref_of, sha256_ref

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1) | st.text() | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


def test_keys_are_sorted_and_compact() -> None:
    assert canonical_json({"b": 1, "a": [1, 2]}) == b'{"a":[1,2],"b":1}'


def test_utf8_not_escaped() -> None:
    assert canonical_json({"k": "é"}) == '{"k":"é"}'.encode()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), Decimal("NaN"), Decimal("Infinity")])
def test_non_finite_numbers_are_refused(bad: object) -> None:
    with pytest.raises(CanonicalEncodingError):
        canonical_json({"x": bad})


def test_datetimes_are_utc_with_micros_and_zone_is_required() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    a = dt.datetime(2026, 1, 1, 14, 0, tzinfo=plus_two)
    b = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
    assert canonical_json(a) == canonical_json(b) == b'"2026-01-01T12:00:00.000000Z"'
    with pytest.raises(CanonicalEncodingError):
        canonical_json(dt.datetime(2026, 1, 1))


def test_decimals_encode_exactly() -> None:
    assert canonical_json(Decimal("1.50")) == canonical_json(Decimal("1.5")) == b'"1.5"'


def test_unsupported_type_is_refused() -> None:
    with pytest.raises(CanonicalEncodingError):
        canonical_json({"x": object()})


@given(json_values)
def test_equal_values_hash_equal_regardless_of_key_order(value: object) -> None:
    if isinstance(value, dict):
        reordered = dict(reversed(list(value.items())))
        assert ref_of(reordered) == ref_of(value)
    assert ref_of(value) == ref_of(value)


@given(st.dictionaries(st.text(min_size=1), st.integers(-(2**50), 2**50), min_size=1), st.integers(-(2**50), 2**50))
def test_changing_a_field_changes_the_hash(value: dict[str, int], delta: int) -> None:
    key = sorted(value)[0]
    changed = {**value, key: value[key] + (delta or 1)}
    assert ref_of(changed) != ref_of(value)


@pytest.mark.parametrize(
    "bad",
    [
        "sha256:" + "A" * 64,
        "sha256:" + "a" * 63,
        "sha256:" + "a" * 65,
        "md5:" + "a" * 64,
        "../../etc/passwd",
        "sha256:" + "a" * 62 + "/x",
        "",
        None,
        42,
    ],
)
def test_parse_ref_rejects_anything_but_sha256_hex(bad: object) -> None:
    assert not is_ref(bad)
    with pytest.raises(InvalidRefError):
        parse_ref(bad)


def test_sha256_ref_is_parseable() -> None:
    assert parse_ref(sha256_ref(b"x")) == sha256_ref(b"x")
