"""Refuse credentials inside portable state.

Uses detect-secrets' format and keyword detectors. The high-entropy detectors
are left out on purpose: content refs and random evidence are high-entropy by
nature and would all be flagged. Scanning is the hot path of sealing, so one
combined regex of every detector's patterns screens each line first and the
detectors themselves run only on lines it flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from detect_secrets.core.plugins import initialize
from detect_secrets.plugins.keyword import DENYLIST_REGEX
from detect_secrets.settings import transient_settings

from baton.ablation import Ablation, is_ablated
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


def _inline(pattern: re.Pattern[str] | str) -> str:
    if isinstance(pattern, str):  # the keyword list is a bare pattern, matched case-insensitively
        return f"(?i:{pattern})"
    return f"(?i:{pattern.pattern})" if pattern.flags & re.IGNORECASE else f"(?:{pattern.pattern})"


# Content refs are validated hashes, never credentials; blanking them keeps lines short.
_REFS = re.compile(r"sha256:[0-9a-f]{64}")


@lru_cache(maxsize=1)
def _detectors() -> tuple[list[Any], list[re.Pattern[str]]]:
    """The detector objects, and the patterns of which at least one matches wherever a detector could."""
    with transient_settings(_SETTINGS):
        plugins = [initialize.from_plugin_classname(name) for name in _PLUGINS]
    patterns = [DENYLIST_REGEX] + [regex for plugin in plugins for regex in getattr(plugin, "denylist", ())]
    # Separate searches: one alternation of all of them defeats each pattern's own optimizations.
    return plugins, [re.compile(_inline(pattern)) for pattern in patterns]


def find_secrets(text: str) -> list[str]:
    """Names of the secret types detected in `text` (empty when clean)."""
    plugins, screens = _detectors()
    found: list[str] = []
    for number, line in enumerate(_REFS.sub("sha256:ref", text).splitlines() or [text], start=1):
        if not any(screen.search(line) for screen in screens):
            continue
        with transient_settings(_SETTINGS):
            for plugin in plugins:
                found.extend(secret.type for secret in plugin.analyze_line(filename="state", line=line, line_number=number))
    return found


def _lines(value: Any, key: str = "") -> Iterable[str]:
    """`"key": "value"` lines for every string leaf (the shape the keyword detector reads)."""
    if isinstance(value, dict):
        for child_key, child in value.items():
            if not isinstance(child, (dict, list, str)):
                yield f'"{child_key}": ""'
            yield from _lines(child, str(child_key))
    elif isinstance(value, list):
        for item in value:
            yield from _lines(item, key)
    elif isinstance(value, str) and not _REFS.fullmatch(value):
        yield f'"{key}": "{value}"'


_CLEAN: set[str] = set()
_CLEAN_LIMIT = 100_000


def secrets_in_json(value: Any) -> list[str]:
    """Secret types found in the string leaves of a JSON value; lines seen clean before are skipped."""
    found: list[str] = []
    for line in _lines(value):
        if line in _CLEAN:
            continue
        kinds = find_secrets(line)
        if kinds:
            found.extend(kinds)
            continue
        if len(_CLEAN) >= _CLEAN_LIMIT:
            _CLEAN.clear()
        _CLEAN.add(line)
    return found


def ensure_no_secrets(items: Iterable[tuple[str, Any]]) -> None:
    """Raise SecretInStateError if any (label, JSON value or text) pair holds something credential-like."""
    if is_ablated(Ablation.SECRET_SCAN):
        return
    for label, value in items:
        kinds = find_secrets(value) if isinstance(value, str) else secrets_in_json(value)
        if kinds:
            raise SecretInStateError(
                f"refusing to write {label} into portable state: it contains {', '.join(sorted(set(kinds)))}; "
                "credentials are re-issued from policy, never stored in a checkpoint"
            )
