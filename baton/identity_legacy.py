"""The hashing of checkpoint schema versions 1 and 2, frozen so their seals still verify.

Those versions hashed pydantic's JSON output (`model_dump(mode="json")`) with
`json.dumps(sort_keys=True)`: decimals kept their written exponent (2.0 and
2.00 differed) and floats followed Python's `repr`. Nothing new is hashed this
way; only reading, verifying and migrating records sealed under it. See
docs/canonical-form.md for the form everything else uses.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from enum import Enum
from typing import Any

from baton.errors import CanonicalEncodingError
from baton.identity import sha256_ref


def _normalize(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
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
        return {key: _normalize(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_normalize(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    if hasattr(value, "model_dump"):
        return _normalize(value.model_dump(mode="json"))
    raise CanonicalEncodingError(f"type {type(value).__name__} has no legacy JSON form")


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def legacy_canonical_json(value: Any) -> bytes:
    """The bytes schema versions 1 and 2 hashed for `value` (a record is taken through pydantic's JSON)."""
    try:
        return _dumps(value).encode("utf-8")
    except ValueError as exc:
        raise CanonicalEncodingError(f"value has no legacy JSON form: {exc}") from exc
    except TypeError:
        pass
    return _dumps(_normalize(value)).encode("utf-8")


def legacy_ref_of(value: Any) -> str:
    """The ref schema versions 1 and 2 gave `value`."""
    return sha256_ref(legacy_canonical_json(value))
