"""Canonical JSON and content refs: the identity of every hashed thing in Baton.

Two steps, both ours: `plain_value` turns a value (records included) into
plain JSON values by the rules below, and RFC 8785 (the JSON Canonicalization
Scheme, through the `rfc8785` package) turns those into bytes. Pydantic's
serializer is never on this path, so a pydantic upgrade cannot move a hash.
The rules, also printed by `baton schema` (see `CANONICAL_FORM_RULES`) and
written out in docs/canonical-form.md:

- a record (pydantic model) is an object of its declared fields, by field
  name, every field present (None is null); nothing computed is added;
- a decimal is a string in plain notation with no exponent and no trailing
  zeros (`Decimal("2.0")` and `Decimal("2.00")` are both `"2"`; -0 is `"0"`);
- a datetime must carry a zone and becomes UTC `YYYY-MM-DDTHH:MM:SS.ffffffZ`
  (always six fractional digits); a date is `YYYY-MM-DD`;
- bytes become a string of standard base64 with padding (RFC 4648 sec. 4);
- an enum member is its value; tuples and lists are arrays; a set is an
  array sorted by the canonical bytes of its members;
- numbers follow RFC 8785 (ECMAScript form of an IEEE double); NaN and
  infinities are refused; an integer beyond +-(2**53 - 1) is accepted only
  when it is exactly the digits RFC 8785 writes for some double (so a whole
  double read back as an integer encodes as before); object keys that are not strings and strings that are not valid
  Unicode are refused.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import math
import re
from decimal import Decimal
from enum import Enum
from typing import Any

import rfc8785
from pydantic import BaseModel

from baton.errors import CanonicalEncodingError, InvalidRefError

REF_PREFIX = "sha256:"
_REF_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
CANONICAL_FORM = "RFC 8785 (JCS) over baton.identity.plain_value, sha256"
DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
MAX_SAFE_INTEGER = 2**53 - 1

CANONICAL_FORM_RULES: dict[str, str] = {
    "encoding": "RFC 8785 JSON Canonicalization Scheme: keys sorted by UTF-16 code units, no whitespace, UTF-8",
    "hash": "a ref is 'sha256:' + the lowercase hex sha256 of the canonical bytes",
    "record": "an object of the record's declared fields by field name, every field present (None is null)",
    "decimal": "a string, plain notation, no exponent, no trailing zeros: Decimal('2.00') -> \"2\", -0 -> \"0\"",
    "datetime": "must carry a zone; UTC as YYYY-MM-DDTHH:MM:SS.ffffffZ (six fractional digits)",
    "date": "YYYY-MM-DD",
    "bytes": "a string of standard base64 with padding (RFC 4648 section 4)",
    "enum": "the member's value",
    "sequence": "tuples and lists are arrays in order; sets are arrays sorted by their members' canonical bytes",
    "float": "RFC 8785 number form (ECMAScript); NaN and infinities are refused",
    "integer": f"as is within +-{MAX_SAFE_INTEGER}; beyond, only the digits RFC 8785 writes for some double "
    "(it stands for that double), else refused",
    "refused": "object keys that are not strings, strings that are not valid Unicode, any other type",
}


def _decimal(value: Decimal) -> str:
    if not value.is_finite():
        raise CanonicalEncodingError(f"non-finite decimal {value!r} has no canonical JSON form")
    if value == 0:
        return "0"
    text = format(value.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _datetime(value: dt.datetime) -> str:
    if value.tzinfo is None or value.utcoffset() is None:
        raise CanonicalEncodingError(f"naive datetime {value!r}: every time in Baton carries a zone")
    return value.astimezone(dt.timezone.utc).strftime(DATETIME_FORMAT)


def plain_value(value: Any) -> Any:
    """`value` as plain JSON values (dict, list, str, int, float, bool, None) by the canonical rules."""
    if isinstance(value, Enum):
        return plain_value(value.value)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            # RFC 8785 numbers are IEEE doubles. A large whole double is written as digits, which
            # read back as a Python int; that int (and only such) stands for the double again.
            as_double = float(value) if abs(value) < 2**1024 else math.inf
            if math.isinf(as_double) or rfc8785.dumps(as_double) != str(value).encode("ascii"):
                raise CanonicalEncodingError(
                    f"integer {value} is outside the I-JSON range +-{MAX_SAFE_INTEGER} and is not how RFC 8785 "
                    "writes any double"
                )
            return as_double
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise CanonicalEncodingError(f"non-finite float {value!r} has no canonical JSON form")
        return value
    if isinstance(value, Decimal):
        return _decimal(value)
    if isinstance(value, dt.datetime):
        return _datetime(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, BaseModel):
        return {name: plain_value(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalEncodingError(f"object key {key!r} is not a string")
            out[key] = plain_value(item)
        return out
    if isinstance(value, (list, tuple)):
        return [plain_value(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return [item for _, item in sorted((_encode(plain_value(member)), plain_value(member)) for member in value)]
    raise CanonicalEncodingError(f"type {type(value).__name__} has no canonical JSON form")


def _encode(plain: Any) -> bytes:
    try:
        return rfc8785.dumps(plain)
    except rfc8785.IntegerDomainError as exc:
        raise CanonicalEncodingError(f"integer outside the I-JSON range: {exc}") from exc
    except rfc8785.FloatDomainError as exc:
        raise CanonicalEncodingError(f"float has no canonical JSON form: {exc}") from exc
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as exc:
        raise CanonicalEncodingError(f"value has no canonical JSON form: {exc}") from exc


def canonical_json(value: Any) -> bytes:
    """Encode `value` as canonical JSON bytes (RFC 8785 over `plain_value`)."""
    return _encode(plain_value(value))


def sha256_ref(data: bytes) -> str:
    """The content ref of raw bytes."""
    return REF_PREFIX + hashlib.sha256(data).hexdigest()


def ref_of(value: Any) -> str:
    """The content ref of a value's canonical JSON."""
    return sha256_ref(canonical_json(value))


def is_ref(value: object) -> bool:
    """True when `value` is exactly `sha256:` plus 64 lowercase hex digits."""
    return isinstance(value, str) and _REF_PATTERN.fullmatch(value) is not None


def parse_ref(value: object) -> str:
    """Return `value` if it is a well-formed ref; raise InvalidRefError otherwise."""
    if not is_ref(value):
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise InvalidRefError(f"not a content ref (want 'sha256:' + 64 lowercase hex): {shown}")
    return value  # type: ignore[return-value]


def hex_of(ref: str) -> str:
    """The 64-hex digest inside a ref (validated)."""
    return parse_ref(ref)[len(REF_PREFIX):]
