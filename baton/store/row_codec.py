"""Small JSON rows packed at rest: raw DEFLATE primed with a fixed dictionary of Baton's own vocabulary.

Most rows a boundary writes (event bodies, checkpoint deltas, the budget ledger,
task state and observation records) are a few hundred bytes of JSON whose keys
and enum values repeat from row to row. Plain DEFLATE cannot exploit that in so
small an input; primed with `DICTIONARY_V1` (field names and enum values only,
no run's data) it stores those words as back-references.

`DICTIONARY_V1` is part of the stored format: never edit it. A new dictionary
is a new codec with a new name. Whatever is packed here is still verified where
it is read (a blob against its digest, a checkpoint against its seal); bytes
that do not unpack raise `ValueError`, which each reader turns into its own
integrity error.
"""

from __future__ import annotations

import zlib

_WORDS: tuple[str, ...] = (
    # enum values
    '"NONE","OBSERVE","PLAN","VERIFY","SANDBOX_MUTATE","EXTERNAL_MUTATE"',
    '"CANDIDATE_READY","VERIFYING","VERIFIED","AWAITING_AUTHORITY","AUTHORIZED","COMMITTING","COMMITTED",'
    '"POSTCONDITION_VERIFIED","FAILED","ESCALATED","PREPARED","NOT_COMMITTED","UNKNOWN","PASS","FAIL","ERROR"',
    '"USE_RECORDED_OBSERVATION","REVALIDATE_LIVE_STATE","REFRESH_STALE_OBSERVATION","SECONDARY","UNVERIFIED"',
    '"planning","research","coding","browser","deploy","R0","R1","R2","R4","R5","MIGRATION_UNSAFE"',
    # checkpoint bodies (full rows)
    '{"schema_version":"3","run_id":"","checkpoint_id":"","seq":0,"parent_checkpoint_id":null,'
    '"parent_checkpoint_hash":null,"migrated_from_hash":null,"migration_ref":null,"run_kind":"research",'
    '"release_id":"sha256:","environment_id":"sha256:","placement_ref":"sha256:","candidate_manifest_ref":"sha256:",'
    '"verifier_evidence_ref":"sha256:","workspace_snapshot_ref":null,"memory_snapshot_ref":null,'
    '"search_state_ref":null,"operation_ledger_ref":"sha256:","authority_context_ref":"sha256:",'
    '"constraints":{"portable_to_regions":[],"portable_to_providers":[],"requires_hardware_attestation":false,'
    '"contains_non_exportable_state":false,"data_scope":null},"owner_epoch":0,"boundary":"GENERATING",'
    '"resumability":"R2","resumability_reasons":["deterministic_state"],',
    # event bodies
    '{"target_placement":"","target_epoch":,"reason":"","compatibility_decision":{},"authority_before":"OBSERVE",'
    '"authority_after":"OBSERVE","detail":{"request_seq":,"previous_owner":null,"coordinator":"","forced":false,'
    '"fenced_targets":0,"observations":0,"unresolved_operations":[],"resume_release_id":"sha256:",'
    '"budget_exhausted":[]}}',
    '{"checkpoint_id":"","source_placement":"","source_epoch":,"release_id":"sha256:","state_schema":"3",'
    '"resume_boundary":"GENERATING","detail":{"checkpoint_hash":"sha256:","resumability":"R3","owner":"worker:',
    # the records of an observation boundary
    '{"authority":"AUTHORITATIVE","content_ref":"sha256:","freshness_budget_s":3600,"interpretation_refs":[],'
    '"observed_at":"2026-","query":{},"source":"',
    '{"observation_refs":["sha256:"],"previous":"sha256:","total":',
    '{"active_plan":[],"candidate_refs":[],"derived_facts":[],"hypotheses":[],"memory":{},"step":,"task":"",'
    '"unresolved_uncertainty":[]}',
    '{"limits":{"browser_seconds":0,"deadline":"20","model_calls":,"model_spend_usd":"","retries":3,'
    '"sandbox_seconds":0,"search_expansions":,"tool_calls":,"verification_reserve_usd":"1"},'
    '"used":{"browser_seconds":0,"model_calls":0,"model_spend_usd":"0","retries":0,"sandbox_seconds":0,'
    '"search_expansions":0,"tool_calls":,"verification_spend_usd":"0"}}',
    # checkpoint deltas, the commonest row of all
    '{"set":{"task_state_ref":"sha256:","observation_manifest_ref":"sha256:","budget_ledger_ref":"sha256:",'
    '"sealed_at":"2026-12-0T00:00:00.000000Z"},"unset":[]}',
)

DICTIONARY_V1: bytes = "".join(_WORDS).encode("utf-8")
"""The preset dictionary of codec V1 (frozen: part of the stored format)."""

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
