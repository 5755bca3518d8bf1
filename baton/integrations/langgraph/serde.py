"""Allow-listed encoding of LangGraph values: nothing outside the list is written or revived.

Values are encoded with LangGraph's own msgpack form (its `JsonPlusSerializer`,
never with a pickle fallback). Every encoded payload is then walked without
reviving anything: each extension names a (module, name) to construct, and a
payload naming anything outside LangGraph's safe types and the types the user
registered is refused, on write (naming the channel) and on read (before any
import). Only the "null", "bytes", "bytearray" and "msgpack" encodings exist
here: LangGraph's "json" (the constructor envelopes of CVE-2025-64439) and
"pickle" are refused outright.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde import jsonplus

from baton.errors import BatonError, CheckpointIntegrityError

ENCODINGS = frozenset({"null", "bytes", "bytearray", "msgpack"})
_CONSTRUCTORS = frozenset({
    jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG,
    jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
    jsonplus.EXT_CONSTRUCTOR_KW_ARGS,
    jsonplus.EXT_PYDANTIC_V1,
    jsonplus.EXT_PYDANTIC_V2,
})
_NUMPY = ("numpy", "ndarray")


class UnsafeValueError(BatonError, TypeError):
    """A value of a type outside the allow-list was offered for storage (nothing was written)."""


class UnsafePayloadError(CheckpointIntegrityError):
    """A stored payload would construct something outside the allow-list (nothing was revived)."""


def type_key(entry: type | tuple[str, str]) -> tuple[str, str]:
    """(module, qualified name) of a registered type."""
    if isinstance(entry, type):
        return (entry.__module__, entry.__name__)
    module, name = entry
    return (str(module), str(name))


class SafeSerde:
    """Encode and decode channel values, writes and metadata through one allow-list."""

    def __init__(self, allowed_types: Iterable[type | tuple[str, str]] = ()) -> None:
        registered = frozenset(type_key(entry) for entry in allowed_types)
        self.allowed: frozenset[tuple[str, ...]] = frozenset(lg_msgpack.SAFE_MSGPACK_TYPES) | registered
        self._inner = jsonplus.JsonPlusSerializer(
            pickle_fallback=False,
            allowed_json_modules=None,
            allowed_msgpack_modules=tuple(registered) or None,
        )

    def dumps(self, value: Any, *, what: str) -> tuple[str, bytes]:
        """(encoding, bytes) of `value`; UnsafeValueError naming `what` for anything not allowed."""
        try:
            encoding, data = self._inner.dumps_typed(value)
        except (TypeError, ValueError, ormsgpack.MsgpackEncodeError) as exc:
            raise UnsafeValueError(
                f"refusing to store {what}: a value of type {type(value).__name__} has no allow-listed encoding "
                f"({exc}); register its type with BatonSaver(allowed_types=[...]) if it is plain data"
            ) from None
        if encoding not in ENCODINGS:
            raise UnsafeValueError(f"refusing to store {what}: encoding {encoding!r} is not allowed")
        if encoding == "msgpack":
            refused = self.refused_types(data)
            if refused:
                raise UnsafeValueError(
                    f"refusing to store {what}: it holds {refused[0]}, which is not an allow-listed type; "
                    "register it with BatonSaver(allowed_types=[...]) if it is plain data"
                )
        return encoding, data

    def loads(self, encoding: str, data: bytes, *, what: str) -> Any:
        """The value of a stored payload, after the payload was checked against the allow-list."""
        if encoding not in ENCODINGS:
            raise UnsafePayloadError(
                f"{what}: stored encoding {encoding!r} is refused (only {', '.join(sorted(ENCODINGS))}); "
                "nothing was decoded"
            )
        if encoding == "msgpack":
            refused = self.refused_types(data)
            if refused:
                raise UnsafePayloadError(
                    f"{what}: the stored payload would construct {refused[0]}, which is not allow-listed; "
                    "nothing was imported or called"
                )
        return self._inner.loads_typed((encoding, data))

    def refused_types(self, data: bytes) -> list[str]:
        """What a msgpack payload would construct outside the allow-list (walked without reviving)."""
        refused: list[str] = []

        def hook(code: int, payload: bytes) -> None:
            try:
                inner = ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            except Exception as exc:  # noqa: BLE001 - any malformed payload is refused, never revived
                refused.append(f"a malformed extension {code} ({type(exc).__name__})")
                return None
            if code == jsonplus.EXT_DELTA_SNAPSHOT:
                return None
            if code == jsonplus.EXT_NUMPY_ARRAY:
                if _NUMPY not in self.allowed:
                    refused.append("numpy.ndarray")
                return None
            if not isinstance(inner, (list, tuple)) or len(inner) < 3 or not all(
                isinstance(part, str) for part in inner[:2]
            ):
                refused.append(f"a malformed extension {code}")
                return None
            module, name = inner[0], inner[1]
            if code in _CONSTRUCTORS:
                if (module, name) not in self.allowed:
                    refused.append(f"{module}.{name}")
            elif code == jsonplus.EXT_METHOD_SINGLE_ARG:
                method = inner[3] if len(inner) > 3 else None
                if (module, name, method) not in lg_msgpack.SAFE_MSGPACK_METHODS:
                    refused.append(f"{module}.{name}.{method}")
            else:
                refused.append(f"an unknown extension {code} ({module}.{name})")
            return None

        try:
            ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        except Exception as exc:  # noqa: BLE001
            refused.append(f"malformed msgpack ({type(exc).__name__})")
        return refused
