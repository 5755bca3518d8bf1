"""Errors raised by Baton. Each names what was wrong, so callers can act on it."""

from __future__ import annotations


class BatonError(Exception):
    """Base class of every error Baton raises on purpose."""


class InvalidRefError(BatonError, ValueError):
    """A string that should be a content ref (`sha256:<64 lowercase hex>`) is not one."""


class IntegrityError(BatonError):
    """Stored bytes do not hash to the ref they were stored under (corruption or tampering)."""


class BlobNotFoundError(BatonError, KeyError):
    """A ref names content the blob store does not hold."""


class CanonicalEncodingError(BatonError, ValueError):
    """A value cannot be encoded canonically (NaN, infinity, an unsupported type)."""


class SchemaVersionError(BatonError):
    """A checkpoint's schema version is unknown to, or unreadable by, this reader."""


class CheckpointIntegrityError(BatonError):
    """A checkpoint's recorded hash does not match its content, or a referenced part is missing."""


class SecretInStateError(BatonError):
    """Something that looks like a credential was about to be written into portable state."""


class StoreError(BatonError):
    """The SQL store refused an operation (append-only violation, unknown run, conflict)."""


class AppendOnlyViolation(StoreError):
    """An attempt to change or remove a sealed checkpoint or an event."""


class StaleEpochError(BatonError):
    """A caller acted with an epoch lower than the run's current epoch (it has been fenced)."""


class LeaseConflictError(BatonError):
    """A lease could not be acquired or renewed because another owner holds it."""


class RecordNotFoundError(StoreError):
    """The SQL store holds no run, checkpoint, lease or operation under the given id."""


# --- Ownership, authority and side effects -------------------------------------------------


class LeaseLostError(LeaseConflictError):
    """A heartbeat could not renew the lease: the holder no longer owns the run."""


class FencedTokenError(StaleEpochError):
    """A target refused a fencing token lower than one it has already seen for the run."""

    def __init__(self, message: str, *, run_id: str = "", epoch: int = -1, highest_seen: int = -1) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.epoch = epoch
        self.highest_seen = highest_seen


class SigningKeyError(BatonError):
    """The capability signing key is missing, too short, or stored with unsafe permissions."""


class AuthorityDeniedError(BatonError):
    """Policy refuses to issue a capability (level above ceiling or context, no valid approval)."""


class CallerUnauthenticatedError(AuthorityDeniedError):
    """The authority could not authenticate its caller as the lease owner it claims to be."""


class CapabilityError(BatonError):
    """A capability was refused; `reason` names why (expired, forged, wrong_run, wrong_epoch, ...)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ApprovalError(BatonError):
    """An approval was refused; `reason` names why (unsigned, untrusted_approver, forged, retargeted, expired)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class IdempotencyConflictError(BatonError):
    """An idempotency key cannot be used for this request right now."""

    def __init__(self, message: str, *, run_id: str = "", idempotency_key: str = "", operation_id: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.idempotency_key = idempotency_key
        self.operation_id = operation_id


class PayloadMismatchError(IdempotencyConflictError):
    """The idempotency key was already used with a different payload."""


class OperationInFlightError(IdempotencyConflictError):
    """The idempotency key belongs to an operation whose outcome is not yet recorded."""


class OperationUnknownError(IdempotencyConflictError):
    """The key's last attempt has an UNKNOWN outcome: reconcile against the target before any retry."""


class OperationNotCommittedError(BatonError):
    """The target definitively did not apply the operation (refused or rejected)."""

    def __init__(self, message: str, *, operation_id: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.operation_id = operation_id
        self.reason = reason


class OutcomeUnknownError(BatonError):
    """The request may or may not have taken effect; the operation is recorded as UNKNOWN."""

    def __init__(self, message: str, *, operation_id: str = "") -> None:
        super().__init__(message)
        self.operation_id = operation_id


class TargetRejectedError(BatonError):
    """A target answered definitively that it did not (and will not) apply a request."""

    def __init__(self, message: str, *, reason: str, fenced: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.fenced = fenced


class TargetUnavailableError(BatonError):
    """A target could not be reached or did not answer in time: the outcome is ambiguous."""


class RetryRefusedError(BatonError):
    """A retry was refused: policy forbids it, the operation is not idempotent, or it is not NOT_COMMITTED."""


class InvalidTransitionError(BatonError, ValueError):
    """A lifecycle transition that the semantic lifecycle does not allow."""


class SchemaMigrationError(BatonError):
    """A checkpoint could not be migrated between schema versions."""


class NonExportableStateError(BatonError):
    """A run holds state declared non-exportable; it may not leave its trust domain."""


class BundleError(BatonError):
    """A portable bundle was refused; nothing from it was imported."""


class BundleTooLargeError(BundleError):
    """A bundle, one of its members, or its member count exceeds the import limits."""


class BundleTruncatedError(BundleError):
    """A bundle ends early: a member is cut short or a listed member is absent."""


class BundleTamperedError(BundleError):
    """A bundle's content does not match its names or its manifest (hash mismatch)."""


class BundleMemberNameError(BundleError):
    """A bundle member is named like a path, or anything but a 64-hex digest or the manifest."""


class BundleMemberTypeError(BundleError):
    """A bundle member is a symlink, hard link, device, directory or other non-regular file."""


class BundleDuplicateMemberError(BundleError):
    """A bundle holds the same member name twice."""


class BundleManifestError(BundleError):
    """A bundle's manifest is missing, unreadable or inconsistent with its checkpoints."""


class BundleApprovalError(BundleError):
    """A bundle carries an approval that does not verify; `reason` as for ApprovalError."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class BundlePlacementError(BundleError):
    """A bundle's checkpoint constraints forbid importing it into this placement."""


class BundleConflictError(BundleError):
    """A bundle's checkpoint collides with a different checkpoint already in the store."""


# --- The release and placement catalog -------------------------------------------------------


class CatalogError(StoreError):
    """A catalog change was refused; nothing was written."""


class UnknownPlacementError(CatalogError):
    """The catalog has no placement of that name."""


class UnknownReleaseError(CatalogError):
    """The catalog has no release with that id."""


class CatalogConflictError(CatalogError):
    """The change contradicts the catalog (a name taken by another release) or changes nothing."""
