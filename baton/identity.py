"""Canonical JSON and content refs: the identity of every hashed thing in Baton.

Canonical form: keys sorted, no insignificant whitespace, UTF-8, no NaN or
infinity. Datetimes become UTC ISO-8601 strings with microseconds and a `Z`
suffix; decimals become their exact string. Two equal values always encode to
the same bytes, so their refs are equal.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from decimal import Decimal
from enum import Enum
from typing import Any

from baton.errors import CanonicalEncodingError, InvalidRefError

REF_PREFIX = "sha256:"
_REF_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")


def _normalize(value: Any) -> Any:
    """Turn a value into plain JSON types in their canonical representation."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise CanonicalEncodingError(f"non-finite float {value!r} has no canonical JSON form")
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise CanonicalEncodingError(f"non-finite decimal {value!r} has no canonical JSON form")
        return format(value.normalize(), "f")
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise CanonicalEncodingError(f"naive datetime {value!r}: every time in Baton carries a zone")
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Enum):
        return _normalize(value.value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalEncodingError(f"object key {key!r} is not a string")
            out[key] = _normalize(item)
        return out
    if isinstance(value, (list, tuple)):
        return [_normalize(item) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [_normalize(item) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if hasattr(value, "model_dump"):
        return _normalize(value.model_dump(mode="json"))
    raise CanonicalEncodingError(f"type {type(value).__name__} has no canonical JSON form")


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> bytes:
    """Encode `value` as canonical JSON bytes."""
    try:
        # Fast path for values that are plain JSON already (the records' JSON dumps).
        return _dumps(value).encode("utf-8")
    except ValueError as exc:
        raise CanonicalEncodingError(f"value has no canonical JSON form: {exc}") from exc
    except TypeError:
        pass
    return _dumps(_normalize(value)).encode("utf-8")


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
