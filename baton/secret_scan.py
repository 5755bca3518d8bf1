"""Refuse credentials inside portable state.

Uses detect-secrets' format and keyword detectors. The high-entropy detectors
are left out on purpose: content refs and random evidence are high-entropy by
nature and would all be flagged. Scanning is the hot path of sealing, so the
detectors' own patterns screen each line first and the detectors themselves
run only on lines a pattern matches. Before a pattern's regex search, a
substring test for literals every match of it contains (`_NEEDLES`) skips
the search on lines that hold none of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, NamedTuple

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


# For each detector pattern, keyed by its exact text: literals of which every match contains at least one
# (lower case for the case-insensitive patterns). Keyed by text, so a pattern that a detect-secrets upgrade
# changes finds no entry and is searched unfiltered (tests/unit/test_secret_scan.py flags it).
_NEEDLES: dict[str, tuple[str, ...]] = {
    '(api_?key|auth_?key|service_?key|account_?key|db_?key|database_?key|priv_?key|private_?key|client_?key|db_?pass|database_?pass|key_?pass|password|passwd|pwd|secret|contraseña|contrasena)\\w*':
        ('key', 'pass', 'pwd', 'secret', 'contrase'),
    '(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}':
        ('A3T', 'ABIA', 'ACCA', 'AKIA', 'ASIA'),
    'aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\\\'\\"]([0-9a-zA-Z/+]{40})[\\\'\\"]':
        ('aws',),
    '(?:\\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\\s|"|$)':
        ('AKC',),
    '(?:\\s|=|:|"|^)AP[\\dABCDEF][a-zA-Z0-9]{8,}(?:\\s|"|$)':
        ('AP',),
    'AccountKey=[a-zA-Z0-9+\\/=]{88}':
        ('AccountKey=',),
    "://[^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+:([^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+)@":
        ('://',),
    '(?:(?<=\\W)|(?<=^))(?:\\[|)(?:"|\\\'|)(?:cloudant|cl|clou)(?:_|-|)(?:api|)(?:key|pwd|pw|password|pass|token)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([0-9a-f]{64})(?:"|\\\'|)':
        (':', '=', ' '),  # its assignment operator
    '(?:(?<=\\W)|(?<=^))(?:\\[|)(?:"|\\\'|)(?:cloudant|cl|clou)(?:_|-|)(?:api|)(?:key|pwd|pw|password|pass|token)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([a-z]{24})(?:"|\\\'|)':
        (':', '=', ' '),  # its assignment operator
    '(?:https?\\:\\/\\/)[\\w\\-]+\\:([0-9a-f]{64})\\@[\\w\\-]+\\.cloudant\\.com':
        ('.cloudant.com',),
    '(?:https?\\:\\/\\/)[\\w\\-]+\\:([a-z]{24})\\@[\\w\\-]+\\.cloudant\\.com':
        ('.cloudant.com',),
    '[MNO][a-zA-Z\\d_-]{23,25}\\.[a-zA-Z\\d_-]{6}\\.[a-zA-Z\\d_-]{27}':
        ('.',),
    '(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}':
        ('ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_'),
    '(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)':
        ('glpat-', 'gldt-', 'glft-', 'glsoat-', 'glrt-'),
    'GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)':
        ('GR1348941',),
    'glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)':
        ('glcbt-',),
    'glimt-[A-Za-z0-9_\\-]{25}(?!\\w)':
        ('glimt-',),
    'glptt-[A-Za-z0-9_\\-]{40}(?!\\w)':
        ('glptt-',),
    'glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)':
        ('glagent-',),
    'gloas-[A-Za-z0-9_\\-]{64}(?!\\w)':
        ('gloas-',),
    '(?:(?<=\\W)|(?<=^))(?:\\[|)(?:"|\\\'|)(?:ibm(?:_|-|)cloud(?:_|-|)iam|cloud(?:_|-|)iam|ibm(?:_|-|)cloud|ibm(?:_|-|)iam|ibm|iam|cloud|)(?:_|-|)(?:api|)(?:_|-|)(?:key|pwd|password|pass|token)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([a-zA-Z0-9_\\-]{44}(?![a-zA-Z0-9_\\-]))(?:"|\\\'|)':
        ('key', 'pwd', 'pass', 'token'),
    '(?:(?<=\\W)|(?<=^))(?:\\[|)(?:"|\\\'|)(?:(?:ibm)?[-_]?cos[-_]?(?:hmac)?|)(?:_|-|)(?:secret[-_]?(?:access)?[-_]?key)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([a-f0-9]{48}(?![a-f0-9]))(?:"|\\\'|)':
        ('secret',),
    'eyJ[A-Za-z0-9-_=]+\\.[A-Za-z0-9-_=]+\\.?[A-Za-z0-9-_.+/=]*?':
        ('eyJ',),
    '[0-9a-z]{32}-us[0-9]{1,2}':
        ('-us',),
    '\\/\\/.+\\/:_authToken=\\s*((npm_.+)|([A-Fa-f0-9-]{36})).*':
        ('/:_authToken=',),
    'sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}':
        ('T3BlbkFJ',),
    'BEGIN DSA PRIVATE KEY':
        ('BEGIN DSA PRIVATE KEY',),
    'BEGIN EC PRIVATE KEY':
        ('BEGIN EC PRIVATE KEY',),
    'BEGIN OPENSSH PRIVATE KEY':
        ('BEGIN OPENSSH PRIVATE KEY',),
    'BEGIN PGP PRIVATE KEY BLOCK':
        ('BEGIN PGP PRIVATE KEY BLOCK',),
    'BEGIN PRIVATE KEY':
        ('BEGIN PRIVATE KEY',),
    'BEGIN RSA PRIVATE KEY':
        ('BEGIN RSA PRIVATE KEY',),
    'BEGIN SSH2 ENCRYPTED PRIVATE KEY':
        ('BEGIN SSH2 ENCRYPTED PRIVATE KEY',),
    'PuTTY-User-Key-File-2':
        ('PuTTY-User-Key-File-2',),
    'pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}':
        ('pypi-AgEIcHlwaS5vcmc',),
    'pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}':
        ('pypi-AgENdGVzdC5weXBpLm9yZw',),
    'SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}':
        ('SG.',),
    'xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+':
        ('xox',),
    'https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+':
        ('hooks.slack.com/services/',),
    '(?:(?<=\\W)|(?<=^))(?:\\[|)(?:"|\\\'|)(?:softlayer|sl)(?:_|-|)(?:api|)(?:_|-|)(?:key|pwd|password|pass|token)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([a-z0-9]{64})(?:"|\\\'|)':
        (':', '=', ' '),  # its assignment operator
    '(?:http|https)://api.softlayer.com/soap/(?:v3|v3.1)/([a-z0-9]{64})':
        ('softlayer',),
    'sq0csp-[0-9A-Za-z\\\\\\-_]{43}':
        ('sq0csp-',),
    '(?:r|s)k_live_[0-9a-zA-Z]{24}':
        ('k_live_',),
    '\\d{8,10}:[0-9A-Za-z_-]{35}':
        (':',),
    'AC[a-z0-9]{32}':
        ('AC',),
    'SK[a-z0-9]{32}':
        ('SK',),
}


class _Screen(NamedTuple):
    """One detector pattern, compiled, with the literals that must precede a search."""

    regex: re.Pattern[str]
    needles: tuple[str, ...] | None
    folded: bool  # case-insensitive: the needles are tested against the lower-cased line


def _screen(pattern: re.Pattern[str] | str) -> _Screen:
    """The pattern compiled as the screen searches it, with its literals when the table has them."""
    text = pattern if isinstance(pattern, str) else pattern.pattern
    return _Screen(re.compile(_inline(pattern)), _NEEDLES.get(text), _inline(pattern).startswith("(?i:"))


KEYWORD_OPERATORS = (":", "=", "!", ";", "(")
"""Besides a keyword, every pattern of detect-secrets' keyword detector holds one of these (an assignment,
a comparison, a call or a statement's end): a line with none of them is never flagged by it.
tests/unit/test_secret_scan.py checks this against the detector's own patterns."""


class _Detector(NamedTuple):
    """One detect-secrets detector and the screens in front of it."""

    plugin: Any
    screens: tuple[_Screen, ...]  # at least one matches wherever the detector could
    requires: tuple[str, ...]  # when not empty, a line the detector flags holds one of these too


@lru_cache(maxsize=1)
def _by_detector() -> tuple[_Detector, ...]:
    with transient_settings(_SETTINGS):
        plugins = [initialize.from_plugin_classname(name) for name in _PLUGINS]
    detectors: list[_Detector] = []
    for plugin in plugins:
        patterns = getattr(plugin, "denylist", None)
        if patterns is None:  # the keyword detector: each of its patterns embeds the keyword list
            detectors.append(_Detector(plugin, (_screen(DENYLIST_REGEX),), KEYWORD_OPERATORS))
        else:
            detectors.append(_Detector(plugin, tuple(_screen(pattern) for pattern in patterns), ()))
    return tuple(detectors)


@lru_cache(maxsize=1)
def _detectors() -> tuple[list[Any], list[_Screen]]:
    """The detector objects, and the patterns of which at least one matches wherever a detector could."""
    detectors = _by_detector()
    return [d.plugin for d in detectors], [screen for d in detectors for screen in d.screens]


@lru_cache(maxsize=2)
def _needles(folded: bool) -> frozenset[str]:
    """Every literal the screens test for, on the line as written (False) or lower-cased (True)."""
    return frozenset(needle for screen in _detectors()[1] if screen.folded is folded
                     for needle in screen.needles or ())


def _present(line: str, folded_line: str | None) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """The needles found in the line as written, and in the lower-cased line (None where no test is sound)."""
    exact = frozenset(needle for needle in _needles(False) if needle in line)
    folded = (None if folded_line is None
              else frozenset(needle for needle in _needles(True) if needle in folded_line))
    return exact, folded


def _passes(screen: _Screen, line: str, present: tuple[frozenset[str] | None, frozenset[str] | None]) -> bool:
    """Whether `screen`'s pattern matches `line`; its regex runs only where one of its literals occurs."""
    if screen.needles is not None:
        found = present[1] if screen.folded else present[0]
        if found is not None and found.isdisjoint(screen.needles):
            return False
    return screen.regex.search(line) is not None


def _folded(line: str) -> str | None:
    # Under IGNORECASE, non-ASCII letters match ASCII ones ('ſ' matches 's', 'K' (Kelvin) matches 'k'), so
    # a lower-cased substring test is a sound filter only on ASCII text; other lines are searched in full.
    return line.lower() if line.isascii() else None


def screened(line: str) -> bool:
    """Whether any detector pattern matches `line`: the regex runs only where its literals occur."""
    present = _present(line, _folded(line))
    return any(_passes(screen, line, present) for screen in _detectors()[1])


def _candidates(line: str) -> list[Any]:
    """The detectors that could flag `line`: their own screens pass (separate searches: one alternation of
    all patterns defeats each pattern's own optimizations)."""
    present = _present(line, _folded(line))
    return [
        d.plugin for d in _by_detector()
        if (not d.requires or any(mark in line for mark in d.requires))
        and any(_passes(screen, line, present) for screen in d.screens)
    ]


def find_secrets(text: str) -> list[str]:
    """Names of the secret types detected in `text` (empty when clean)."""
    found: list[str] = []
    for number, line in enumerate(_REFS.sub("sha256:ref", text).splitlines() or [text], start=1):
        plugins = _candidates(line)
        if not plugins:
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
