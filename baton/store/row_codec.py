"""Small JSON rows packed at rest: raw DEFLATE primed with a fixed dictionary of Baton's own vocabulary.

Most rows a boundary writes (event bodies, checkpoint deltas, the budget ledger,
task state and observation records) are a few hundred bytes of JSON whose keys
and enum values repeat from row to row. Plain DEFLATE cannot exploit that in so
small an input; primed with `DICTIONARY_V1` (field names and enum values only,
no run's data) it stores those words as back-references.

`DICTIONARY_V1` (the file `row_codec_v1.dict`) is part of the stored format: never edit it. A new dictionary
is a new codec with a new name. Whatever is packed here is still verified where
it is read (a blob against its digest, a checkpoint against its seal); bytes
that do not unpack raise `ValueError`, which each reader turns into its own
integrity error.
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path

DICTIONARY_V1_FILE = Path(__file__).with_name("row_codec_v1.dict")
"""The preset dictionary of codec V1: field names and enum values of Baton's records, no run's data. It is a
data file, not code, so a reader outside Baton (the fault matrix's oracles) can inflate stored rows with the
standard library alone."""

DICTIONARY_V1: bytes = DICTIONARY_V1_FILE.read_bytes()
DICTIONARY_V1_SHA256 = "7a6ae66214230cc08149f902444338ce1dce67a2c060168f916f6438de80fb2d"
"""The dictionary's digest: part of the stored format, checked when this module loads."""

if hashlib.sha256(DICTIONARY_V1).hexdigest() != DICTIONARY_V1_SHA256:
    raise ImportError(f"{DICTIONARY_V1_FILE} is not codec V1's dictionary: rows packed with it would not unpack")

_LEVEL = 6
_WBITS = -15  # raw DEFLATE (RFC 1951): no zlib header or checksum; the readers verify content themselves
_SMALL = 4096
"""Up to this many bytes, the packer's window and hash table are small: setting them up is most of the cost of
packing a row of a few hundred bytes (about 7 us instead of 45), and an 8 KiB window still reaches the whole
dictionary. Any window up to 32 KiB inflates with `_WBITS`, so this is no part of the format."""


def pack(data: bytes) -> bytes:
    """`data` as raw DEFLATE primed with `DICTIONARY_V1`."""
    wbits, mem_level = (-13, 6) if len(data) <= _SMALL else (_WBITS, 8)
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, wbits, mem_level, zlib.Z_DEFAULT_STRATEGY, DICTIONARY_V1)
    return packer.compress(data) + packer.flush()


def unpack(stored: bytes) -> bytes:
    """The bytes `pack` was given; ValueError if `stored` is not one whole stream `pack` could have written."""
    unpacker = zlib.decompressobj(_WBITS, zdict=DICTIONARY_V1)
    try:
        data = unpacker.decompress(stored) + unpacker.flush()
    except zlib.error as exc:
        raise ValueError(f"packed bytes do not inflate ({exc})") from None
    if not unpacker.eof or unpacker.unused_data:
        raise ValueError("packed bytes are truncated or followed by others")
    return data


def pack_text(text: str) -> bytes:
    """A JSON text packed (UTF-8, then `pack`)."""
    return pack(text.encode("utf-8"))


def unpack_text(stored: bytes) -> str:
    """The text `pack_text` was given; ValueError if the bytes are damaged or not UTF-8."""
    try:
        return unpack(stored).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"packed bytes are not UTF-8 text ({exc})") from None
