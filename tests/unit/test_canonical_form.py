"""Baton's canonical form: RFC 8785's own vectors, the rules for what JSON lacks, and independence from pydantic."""

from __future__ import annotations

import base64
import datetime as dt
import json
import struct
from decimal import Decimal
from enum import Enum

import pytest
import rfc8785
from pydantic import field_serializer

from baton.errors import CanonicalEncodingError
from baton.identity import CANONICAL_FORM_RULES, canonical_json, plain_value, ref_of
from baton.models import BudgetLimits, Record
from baton.schema_export import canonical_form_document

# RFC 8785 Appendix B: IEEE 754 bit patterns and the text each must serialize to.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(bits))[0]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    value = _double(bits)
    assert canonical_json(value) == expected.encode()
    if value.is_integer() and "e" not in expected:  # the same text read back as a Python int encodes the same
        assert canonical_json(json.loads(expected)) == expected.encode()


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_rfc8785_appendix_b_non_finite_numbers_are_refused(bits: str) -> None:
    with pytest.raises(CanonicalEncodingError):
        canonical_json(_double(bits))


def test_rfc8785_section_3_2_2_sample() -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}'
    )
    expected = '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' \
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    assert canonical_json(json.loads(source)) == expected.encode("utf-8")


def test_rfc8785_section_3_2_3_sorting_by_utf16_code_units() -> None:
    source = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = list(json.loads(canonical_json(source)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_decimals_are_normalized() -> None:
    assert ref_of(Decimal("2.0")) == ref_of(Decimal("2.00")) == ref_of(Decimal("2")) == ref_of(Decimal("0.2E1"))
    assert canonical_json(Decimal("2.00")) == b'"2"'
    assert canonical_json(Decimal("1E+3")) == b'"1000"'
    assert canonical_json(Decimal("-0.00")) == b'"0"'
    assert canonical_json(Decimal("0.050")) == b'"0.05"'
    assert ref_of(Decimal("2.01")) != ref_of(Decimal("2.1"))


def test_equal_budgets_written_differently_hash_equal() -> None:
    deadline = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def limits(spend: str) -> BudgetLimits:
        return BudgetLimits(model_spend_usd=Decimal(spend), model_calls=1, search_expansions=1, tool_calls=1,
                            browser_seconds=0, sandbox_seconds=0, verification_reserve_usd=Decimal("0.50"),
                            retries=0, deadline=deadline)

    assert limits("2.0").record_ref() == limits("2.00").record_ref()
    assert limits("2.0").canonical() == limits("2.00").canonical()
    assert BudgetLimits.from_canonical(limits("2.00").canonical()) == limits("2")


def test_datetimes_have_one_utc_form() -> None:
    tokyo = dt.timezone(dt.timedelta(hours=9))
    assert canonical_json(dt.datetime(2026, 1, 1, 9, 0, 0, 5, tzinfo=tokyo)) == b'"2026-01-01T00:00:00.000005Z"'
    assert canonical_json(dt.date(2026, 2, 3)) == b'"2026-02-03"'
    with pytest.raises(CanonicalEncodingError, match="naive"):
        canonical_json(dt.datetime(2026, 1, 1))


def test_bytes_enums_and_sets() -> None:
    class Colour(Enum):
        RED = "red"
        ONE = 1

    assert canonical_json(b"\x00\xffab") == b'"' + base64.b64encode(b"\x00\xffab") + b'"'
    assert canonical_json([Colour.RED, Colour.ONE]) == b'["red",1]'
    assert canonical_json({"b", "a", "c"}) == canonical_json(frozenset({"c", "a", "b"})) == b'["a","b","c"]'


@pytest.mark.parametrize(
    ("bad", "match"),
    [(2**53 + 1, "not how"), (-(2**60) - 3, "not how"), (10**400, "not how"), ({1: "x"}, "not a string"), ("\ud800", "canonical"), (object(), "type")],
)
def test_what_has_no_canonical_form_is_refused(bad: object, match: str) -> None:
    with pytest.raises(CanonicalEncodingError, match=match):
        canonical_json(bad)


class Serialized(Record):
    """A record whose pydantic serializer says something else: the hash must not follow it."""

    amount: Decimal
    at: dt.datetime

    @field_serializer("amount")
    def _amount(self, value: Decimal) -> str:
        return f"USD {value:.4f}"


def test_hashing_never_goes_through_pydantics_serializer() -> None:
    record = Serialized(amount=Decimal("2.50"), at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    assert record.model_dump(mode="json")["amount"] == "USD 2.5000"  # pydantic's view
    assert plain_value(record) == {"amount": "2.5", "at": "2026-01-01T00:00:00.000000Z"}
    assert record.canonical() == rfc8785.dumps({"amount": "2.5", "at": "2026-01-01T00:00:00.000000Z"})


def test_schema_export_documents_the_form() -> None:
    document = canonical_form_document()
    assert document["rules"] == CANONICAL_FORM_RULES
    assert {"decimal", "datetime", "bytes", "enum", "float", "integer"} <= set(CANONICAL_FORM_RULES)
    assert document["checkpoint_schema_version"] == "3"
