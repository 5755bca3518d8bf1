"""Refuse credentials inside portable state.

Uses detect-secrets with its format and keyword detectors. The high-entropy
detectors are left out on purpose: content refs and random evidence are
high-entropy by nature and would all be flagged.
"""

from __future__ import annotations

from collections.abc import Iterable

from detect_secrets.core.scan import scan_line
from detect_secrets.settings import transient_settings

from baton.errors import SecretInStateError

_PLUGINS = [
    "AWSKeyDetector",
    "ArtifactoryDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "CloudantDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "JwtTokenDetector",
    "KeywordDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SoftlayerDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
]
_SETTINGS = {"plugins_used": [{"name": name} for name in _PLUGINS]}


def find_secrets(text: str) -> list[str]:
    """Names of the secret types detected in `text` (empty when clean)."""
    found: list[str] = []
    with transient_settings(_SETTINGS):
        for line in text.splitlines() or [text]:
            found.extend(secret.type for secret in scan_line(line))
    return found


def ensure_no_secrets(items: Iterable[tuple[str, str]]) -> None:
    """Raise SecretInStateError if any (label, text) pair holds something credential-like."""
    for label, text in items:
        kinds = find_secrets(text)
        if kinds:
            raise SecretInStateError(
                f"refusing to write {label} into portable state: it contains {', '.join(sorted(set(kinds)))}; "
                "credentials are re-issued from policy, never stored in a checkpoint"
            )
