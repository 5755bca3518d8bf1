"""Where a checkpoint's state may go: its portability constraints against one placement.

Shared by the compatibility gate, resumability classification and bundle
import, so the three never disagree about whether a move is allowed.

Non-exportable state (sec. 20 of the spec) stays inside the trust domain it
was created in: a target is acceptable only when it has the same region and
provider as the source placement. Without a known source nothing proves that,
so such state is refused everywhere.
"""

from __future__ import annotations

from enum import StrEnum

from baton.models import Placement, PortabilityConstraints


class PortabilityReason(StrEnum):
    """Why a placement may not receive a checkpoint's state."""

    REGION_NOT_ALLOWED = "region_not_allowed"
    PROVIDER_NOT_ALLOWED = "provider_not_allowed"
    HARDWARE_ATTESTATION_MISSING = "hardware_attestation_missing"
    NON_EXPORTABLE_STATE = "non_exportable_state"
    DATA_SCOPE_UNAVAILABLE = "data_scope_unavailable"
    PLACEMENT_UNSPECIFIED = "placement_unspecified"


def is_unconstrained(constraints: PortabilityConstraints) -> bool:
    """True when the state may go anywhere (no restriction of any kind)."""
    return constraints == PortabilityConstraints()


def stays_in_trust_domain(source: Placement | None, target: Placement) -> bool:
    """True when `target` shares region and provider with `source`."""
    return source is not None and (source.region, source.provider) == (target.region, target.provider)


def constraint_violations(
    constraints: PortabilityConstraints,
    target: Placement | None,
    *,
    source: Placement | None,
) -> tuple[PortabilityReason, ...]:
    """Reasons (in a fixed order) why `target` may not receive this state; empty when it may.

    With no target at all, any constraint is a violation: an unknown placement
    cannot be shown to satisfy it.
    """
    if target is None:
        return () if is_unconstrained(constraints) else (PortabilityReason.PLACEMENT_UNSPECIFIED,)
    reasons: list[PortabilityReason] = []
    if not constraints.allows_region(target.region):
        reasons.append(PortabilityReason.REGION_NOT_ALLOWED)
    if not constraints.allows_provider(target.provider):
        reasons.append(PortabilityReason.PROVIDER_NOT_ALLOWED)
    if constraints.requires_hardware_attestation and not target.hardware_attested:
        reasons.append(PortabilityReason.HARDWARE_ATTESTATION_MISSING)
    if constraints.contains_non_exportable_state and not stays_in_trust_domain(source, target):
        reasons.append(PortabilityReason.NON_EXPORTABLE_STATE)
    if constraints.data_scope is not None and constraints.data_scope not in target.data_scopes:
        reasons.append(PortabilityReason.DATA_SCOPE_UNAVAILABLE)
    return tuple(reasons)
