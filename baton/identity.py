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
import json
import math
import re
from decimal import Decimal
from enum import Enum
from functools import lru_cache
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
    utc = value.astimezone(dt.timezone.utc)
    if utc.year >= 1000:  # isoformat pads the year to four digits, as strftime's %Y does from 1000 on
        return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    return utc.strftime(DATETIME_FORMAT)


class _Plain:
    """One walk of `plain_value`. With `for_json`, it also prepares the value for the standard library's
    JSON encoder, which writes RFC 8785's bytes for everything except some floats and the key order of
    some non-BMP keys: a whole float below 2**53 becomes the int RFC 8785 writes for it, and `unsafe` is
    set when a float outside Python's and ECMAScript's shared plain-notation range or a key with a
    character at or above U+E000 (where UTF-16 and code point order differ) is met."""

    __slots__ = ("for_json", "unsafe")

    def __init__(self, *, for_json: bool) -> None:
        self.for_json = for_json
        self.unsafe = False

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str or value is None or kind is bool:
            return value
        if kind is dict:
            return self._object(value)
        if kind is int:
            return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else self._large_int(value)
        if kind is float:
            return self._float(value)
        if kind is list or kind is tuple:
            return [self.value(item) for item in value]
        return self._other(value)

    def _large_int(self, value: int) -> float:
        # RFC 8785 numbers are IEEE doubles. A large whole double is written as digits, which
        # read back as a Python int; that int (and only such) stands for the double again.
        as_double = float(value) if abs(value) < 2**1024 else math.inf
        if math.isinf(as_double) or rfc8785.dumps(as_double) != str(value).encode("ascii"):
            raise CanonicalEncodingError(
                f"integer {value} is outside the I-JSON range +-{MAX_SAFE_INTEGER} and is not how RFC 8785 "
                "writes any double"
            )
        return self._float(as_double)

    def _float(self, value: float) -> float | int:
        if math.isnan(value) or math.isinf(value):
            raise CanonicalEncodingError(f"non-finite float {value!r} has no canonical JSON form")
        if self.for_json:
            if value.is_integer():
                if abs(value) <= MAX_SAFE_INTEGER:
                    return int(value)
                self.unsafe = True
            elif not 1e-4 <= abs(value) < 1e16:
                self.unsafe = True
        return value

    def _key(self, key: Any) -> str:
        if not isinstance(key, str):
            raise CanonicalEncodingError(f"object key {key!r} is not a string")
        if self.for_json and not key.isascii() and max(key) >= "\ue000":
            self.unsafe = True
        return key

    def _object(self, value: dict[Any, Any]) -> dict[str, Any]:
        return {self._key(key): self.value(item) for key, item in value.items()}

    def _other(self, value: Any) -> Any:
        if isinstance(value, Enum):
            return self.value(value.value)
        if isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return self.value(int(value))
        if isinstance(value, float):
            return self._float(float(value))
        if isinstance(value, Decimal):
            return _decimal(value)
        if isinstance(value, dt.datetime):
            return _datetime(value)
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(value)).decode("ascii")
        if isinstance(value, BaseModel):
            names, odd = _field_names(type(value))
            if odd and self.for_json:
                names = tuple(self._key(name) for name in names)
            return {name: self.value(getattr(value, name)) for name in names}
        if isinstance(value, dict):
            return self._object(value)
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        if isinstance(value, (set, frozenset)):
            members = [plain_value(member) for member in value]
            ordered = [item for _, item in sorted(((_encode(member), member) for member in members),
                                                  key=lambda pair: pair[0])]
            return [self.value(member) for member in ordered] if self.for_json else ordered
        raise CanonicalEncodingError(f"type {type(value).__name__} has no canonical JSON form")


@lru_cache(maxsize=None)
def _field_names(model: type[BaseModel]) -> tuple[tuple[str, ...], bool]:
    """A record type's declared field names, and whether any of them is not ASCII."""
    names = tuple(model.model_fields)
    return names, not all(name.isascii() for name in names)


def plain_value(value: Any) -> Any:
    """`value` as plain JSON values (dict, list, str, int, float, bool, None) by the canonical rules."""
    return _Plain(for_json=False).value(value)


def _encode(plain: Any) -> bytes:
    try:
        return rfc8785.dumps(plain)
    except rfc8785.IntegerDomainError as exc:
        raise CanonicalEncodingError(f"integer outside the I-JSON range: {exc}") from exc
    except rfc8785.FloatDomainError as exc:
        raise CanonicalEncodingError(f"float has no canonical JSON form: {exc}") from exc
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as exc:
        raise CanonicalEncodingError(f"value has no canonical JSON form: {exc}") from exc


# Escapes exactly what RFC 8785 escapes (quote, backslash, controls; \b \f \n \r \t short, others \u00xx).
_STDLIB_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def canonical_json(value: Any) -> bytes:
    """Encode `value` as canonical JSON bytes (RFC 8785 over `plain_value`).

    The standard library's C encoder writes the bytes when the value holds nothing it would write
    differently (see `_Plain`); otherwise the `rfc8785` package does. tests/unit/test_canonical_properties.py
    holds both to an independent JCS implementation."""
    walk = _Plain(for_json=True)
    plain = walk.value(value)
    if walk.unsafe:
        return _encode(plain)
    try:
        return _STDLIB_JSON.encode(plain).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalEncodingError(f"value has no canonical JSON form: {exc}") from exc


def ref_of(value: Any) -> str:
    """The content ref of a value's canonical JSON."""
    return sha256_ref(canonical_json(value))


def sha256_ref(data: bytes) -> str:
    """The content ref of raw bytes."""
    return REF_PREFIX + hashlib.sha256(data).hexdigest()


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
