"""Channel values as content-addressed blobs; an append-only list as segments shared with its parent.

Two blob kinds, each with a short magic prefix:

* a value: ``LGV1`` + encoding + newline + the encoded bytes;
* a segment of a list that only grew: ``LGS1`` + the previous segment's or
  value's 32-byte digest + the list's length (8 bytes) + the digest of the
  value blob holding the items added since. A list that gained one item at
  this step costs one small segment plus the added item, and the added items'
  value blob is the very blob the step's write of that item produced (the
  same bytes, so the same ref).

Reading walks a segment chain back to its first full value, checking each
blob's hash (the blob store does) and each payload against the allow-list.
"""

from __future__ import annotations

import base64
import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from baton.errors import CheckpointIntegrityError
from baton.identity import REF_PREFIX, hex_of, sha256_ref
from baton.integrations.langgraph.serde import SafeSerde, UnsafePayloadError

INLINE_PREFIX = "inline:"
INLINE_MAX = 48  # value blobs this small are kept in the row that names them, not in the blob table
VALUE_MAGIC = b"LGV1"
SEGMENT_MAGIC = b"LGS1"
_DIGEST = 32
_SEGMENT_LEN = len(SEGMENT_MAGIC) + _DIGEST + 8 + _DIGEST


def value_ref(blob: bytes) -> str:
    """How a row names a value blob: inline when tiny (a ref would cost more than the bytes), else its ref."""
    if len(blob) <= INLINE_MAX:
        return INLINE_PREFIX + base64.b64encode(blob).decode("ascii")
    return sha256_ref(blob)


def inline_bytes(ref: str) -> bytes | None:
    """The blob bytes an inline ref carries (None for a content ref)."""
    if not ref.startswith(INLINE_PREFIX):
        return None
    try:
        return base64.b64decode(ref[len(INLINE_PREFIX):], validate=True)
    except ValueError:
        raise CheckpointIntegrityError(f"malformed inline value {ref[:40]!r}") from None


def value_blob(encoding: str, data: bytes) -> bytes:
    """The blob bytes of one encoded value."""
    return VALUE_MAGIC + encoding.encode("ascii") + b"\n" + data


def parse_value_blob(blob: bytes, *, what: str) -> tuple[str, bytes]:
    """(encoding, data) of a value blob."""
    if not blob.startswith(VALUE_MAGIC) or b"\n" not in blob:
        raise UnsafePayloadError(f"{what}: stored bytes are not a Baton value blob")
    head, _, data = blob[len(VALUE_MAGIC):].partition(b"\n")
    try:
        encoding = head.decode("ascii")
    except UnicodeDecodeError:
        raise UnsafePayloadError(f"{what}: stored encoding name is not ASCII") from None
    return encoding, data


def segment_blob(previous: str, length: int, added: str) -> bytes:
    """The blob bytes of a segment: `previous` (a value or segment ref) extended by the items in `added`."""
    return SEGMENT_MAGIC + bytes.fromhex(hex_of(previous)) + length.to_bytes(8, "big") + bytes.fromhex(hex_of(added))


def parse_segment_blob(blob: bytes, *, what: str) -> tuple[str, int, str]:
    """(previous ref, length, added ref) of a segment blob."""
    if len(blob) != _SEGMENT_LEN or not blob.startswith(SEGMENT_MAGIC):
        raise CheckpointIntegrityError(f"{what}: malformed list segment")
    at = len(SEGMENT_MAGIC)
    previous = REF_PREFIX + blob[at:at + _DIGEST].hex()
    length = int.from_bytes(blob[at + _DIGEST:at + _DIGEST + 8], "big")
    added = REF_PREFIX + blob[at + _DIGEST + 8:].hex()
    return previous, length, added


@dataclass(frozen=True)
class Encoded:
    """A channel value ready to store: its ref and the new blobs it needs."""

    ref: str
    blobs: dict[str, bytes]
    new_content: Any  # what was newly encoded (scanned for secrets): the value, or the added items


class ListMemo:
    """Decoded list values by ref, as independent copies (so a later in-place change is still seen)."""

    def __init__(self, limit: int = 256) -> None:
        self._items: dict[str, tuple[Any, ...]] = {}
        self._limit = limit
        self._lock = threading.Lock()  # async callers reach the saver from several threads

    def get(self, ref: str) -> tuple[Any, ...] | None:
        with self._lock:
            return self._items.get(ref)

    def put(self, ref: str, items: tuple[Any, ...]) -> None:
        with self._lock:
            if len(self._items) >= self._limit:
                self._items.pop(next(iter(self._items)))
            self._items[ref] = items


def encode_value(
    serde: SafeSerde,
    value: Any,
    *,
    what: str,
    previous_ref: str | None,
    memo: ListMemo,
) -> Encoded:
    """Encode `value`; a list that extends the list stored at `previous_ref` becomes a segment."""
    if isinstance(value, list) and previous_ref is not None:
        before = memo.get(previous_ref)
        if before is not None and len(value) >= len(before) and value[:len(before)] == list(before):
            added = value[len(before):]
            added_blob = value_blob(*serde.dumps(added, what=what))
            added_ref = sha256_ref(added_blob)
            segment = segment_blob(previous_ref, len(value), added_ref)
            ref = sha256_ref(segment)
            memo.put(ref, before + _copy(serde, added_blob, what))
            return Encoded(ref, {added_ref: added_blob, ref: segment}, added)
    blob = value_blob(*serde.dumps(value, what=what))
    if isinstance(value, list):  # a list may be extended later: a segment needs a content ref to point at
        ref = sha256_ref(blob)
        memo.put(ref, _copy(serde, blob, what))
        return Encoded(ref, {ref: blob}, value)
    ref = value_ref(blob)
    return Encoded(ref, {} if ref.startswith(INLINE_PREFIX) else {ref: blob}, value)


def _copy(serde: SafeSerde, blob: bytes, what: str) -> tuple[Any, ...]:
    """Items decoded afresh from their stored bytes: a copy no caller holds."""
    decoded = serde.loads(*parse_value_blob(blob, what=what), what=what)
    return tuple(decoded)


def decode_value(
    serde: SafeSerde,
    ref: str,
    fetch: Callable[[list[str]], Mapping[str, bytes]],
    *,
    what: str,
    memo: ListMemo,
) -> Any:
    """The value stored at `ref`, walking a segment chain back to its first full list."""
    inline = inline_bytes(ref)
    if inline is not None:
        return serde.loads(*parse_value_blob(inline, what=what), what=what)
    cached = memo.get(ref)
    if cached is not None:
        return copy.deepcopy(list(cached))  # the caller may change items in place; the memo must not see it
    chain: list[tuple[str, int, str]] = []  # newest first: (segment ref, length, added ref)
    current = ref
    base: tuple[Any, ...] | None = None
    while True:
        cached = memo.get(current)
        if cached is not None:
            base = cached
            break
        blob = _one(fetch, current, what)
        if blob.startswith(SEGMENT_MAGIC):
            previous, length, added = parse_segment_blob(blob, what=what)
            chain.append((current, length, added))
            current = previous
            continue
        value = serde.loads(*parse_value_blob(blob, what=what), what=what)
        if not chain:
            if isinstance(value, list):
                memo.put(current, tuple(copy.deepcopy(value)))
            return value
        if not isinstance(value, list):
            raise CheckpointIntegrityError(f"{what}: a list segment extends a value that is not a list")
        base = tuple(value)
        memo.put(current, base)
        break
    added_blobs = fetch([added for _, _, added in chain])
    items = base
    for segment_ref, length, added in reversed(chain):
        blob = added_blobs.get(added)
        if blob is None:
            raise CheckpointIntegrityError(f"{what}: list segment {segment_ref} names missing items {added}")
        extra = serde.loads(*parse_value_blob(blob, what=what), what=what)
        if not isinstance(extra, list):
            raise CheckpointIntegrityError(f"{what}: list segment {segment_ref} adds something that is not a list")
        items = items + tuple(extra)
        if len(items) != length:
            raise CheckpointIntegrityError(f"{what}: list segment {segment_ref} claims {length} items, holds {len(items)}")
        memo.put(segment_ref, items)
    return copy.deepcopy(list(items))


def _one(fetch: Callable[[list[str]], Mapping[str, bytes]], ref: str, what: str) -> bytes:
    blob = fetch([ref]).get(ref)
    if blob is None:
        raise CheckpointIntegrityError(f"{what}: blob {ref} is missing from the blob store")
    return blob
