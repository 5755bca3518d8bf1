"""Test-only switches that each remove one protection (ablations).

An ablation proves a check can fail: with one protection switched off, some
fault case must notice through an oracle outside the code under test. The
switches are read from the environment so that worker and target processes
started by a harness inherit them. Only the fault harness and the tests set
them (`baton.faults` through `ablation_env`); `baton platform`, `baton fleet`
and `make demo` refuse to start while any is set (`refuse_if_ablated`).

Production code asks `is_ablated(Ablation.X)` (or `gate_reason_ablated`) at
the one place where the protection lives, and skips only that check.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum

ENV_VAR = "BATON_ABLATE"
GATE_PREFIX = "gate:"
_GATE_REASON = re.compile(r"^gate:[a-z][a-z0-9_]*$")


class Ablation(StrEnum):
    """The protections that can be switched off, one name each."""

    GATEWAY_EPOCH = "gateway-epoch"
    LEASE_CAS = "lease-cas"
    STORE_CLAIM_EPOCH = "store-claim-epoch"
    TARGET_FENCE = "target-fence"
    CAPABILITY_CHECK = "capability-check"
    APPROVAL_CHECK = "approval-check"
    IDEMPOTENCY = "idempotency"
    RECONCILE_BEFORE_RETRY = "reconcile-before-retry"
    EVIDENCE_BINDING = "evidence-binding"
    BUDGET_CARRY_OVER = "budget-carry-over"
    AUTHORITY_DOWNGRADE = "authority-downgrade"
    FRESHNESS = "freshness"
    SECRET_SCAN = "secret-scan"
    SCHEMA_GATE = "schema-gate"
    VERIFIER_GATE = "verifier-gate"
    STORE_CLAIM_EXPIRY = "store-claim-expiry"
    GATEWAY_CEILING = "gateway-ceiling"
    AUTHORITY_CEILING = "authority-ceiling"
    """The authority's refusal to issue above the placement's ceiling as the catalog has it at issue time."""
    # the resume's own checks behind the gate's reasons (each holds where no handoff decision exists)
    RESUME_ENVIRONMENT_CHECK = "resume-environment-check"
    RESUME_OPEN_OPERATIONS = "resume-open-operations"
    RESUME_TERMINAL_GUARD = "resume-terminal-guard"


class UnknownAblation(ValueError):
    """A name in BATON_ABLATE that is neither an `Ablation` nor `gate:<reason>`."""


def parse_ablations(value: str) -> frozenset[str]:
    """Split a comma-separated list of ablation names, refusing unknown ones."""
    names = frozenset(part.strip() for part in value.split(",") if part.strip())
    known = {member.value for member in Ablation}
    unknown = sorted(name for name in names if name not in known and not _GATE_REASON.match(name))
    if unknown:
        raise UnknownAblation(
            f"unknown ablation(s) {', '.join(unknown)} in {ENV_VAR}; "
            f"known: {', '.join(sorted(known))}, or gate:<reason code>"
        )
    return names


def active_ablations(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The ablations switched on in this process (empty in production)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return parse_ablations(value) if value else frozenset()


@functools.lru_cache(maxsize=64)
def _parsed(value: str) -> frozenset[str]:
    """`parse_ablations`, remembered per value string (an unknown name raises every time: errors are not cached)."""
    return parse_ablations(value)


def is_ablated(name: Ablation) -> bool:
    """True when the protection `name` is switched off for this process (one environment lookup when none is)."""
    value = os.environ.get(ENV_VAR)
    return bool(value) and name.value in _parsed(value)


def gate_reason_ablated(reason: str) -> bool:
    """True when the compatibility gate must ignore `reason` (a GateReason value)."""
    value = os.environ.get(ENV_VAR)
    return bool(value) and f"{GATE_PREFIX}{reason}" in _parsed(value)


@contextmanager
def ablation_env(*names: str) -> Iterator[None]:
    """Switch the named protections off for this process and its children (harness and tests only)."""
    joined = ",".join(names)
    parse_ablations(joined)
    previous = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = joined
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = previous


class AblationActive(RuntimeError):
    """A production entry point was started with a protection switched off."""


def refuse_if_ablated(entry_point: str) -> None:
    """Raise when any ablation is set: production entry points never run without their protections."""
    names = active_ablations()
    if names:
        raise AblationActive(
            f"{entry_point} refuses to start with {ENV_VAR}={','.join(sorted(names))}: "
            "ablations are for the fault harness and tests only"
        )


def exit_if_ablated(entry_point: str) -> None:
    """`refuse_if_ablated` for a command line: print the refusal to stderr and exit with status 2."""
    try:
        refuse_if_ablated(entry_point)
    except AblationActive as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(2) from None


def warn_if_ablated(process: str) -> frozenset[str]:
    """Print a loud warning to stderr when a harness-started process runs with protections switched off."""
    names = active_ablations()
    if names:
        bar = "!" * 78
        sys.stderr.write(
            f"{bar}\n!! {process}: PROTECTIONS SWITCHED OFF ({ENV_VAR}={','.join(sorted(names))})\n"
            f"!! test-only ablation run; never use this process for real work\n{bar}\n"
        )
        sys.stderr.flush()
    return names
