"""The literal prefilter in front of the secret scan's regexes never skips a line a regex matches.

The oracle is detect-secrets' own patterns searched in full (`regex.search`), not the prefilter.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detect_secrets.plugins import keyword
from detect_secrets.settings import transient_settings

from baton.secret_scan import _REFS, _SETTINGS, KEYWORD_OPERATORS, _detectors, find_secrets, screened

_SCREENS = _detectors()[1]
_KNOWN = [
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3",
    'password = "hunter2hunter2"',
    "-----BEGIN RSA PRIVATE KEY-----",
    "xoxb-123456789012-abcdefghij",
    "sk_live_" + "a1B2c3D4e5F6" * 2,
    "https://user:s3cr3tpw@example.com",
    'cloudant_password = "' + "a" * 24 + '"',
    "cl_key:" + "0123456789abcdef" * 4,
    'softlayer_api_key: "' + "0123456789abcdef" * 4 + '"',
    "AccountKey=" + "A" * 88,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
    "SG." + "a" * 22 + "." + "b" * 43,
    # Case-folding outside ASCII: 'ſ' matches 's' and the Kelvin sign matches 'k' under IGNORECASE.
    'paſſword = "hunter2hunter2"',
    "api_\u212aey = x",
    'cloudant_paſſword = "' + "a" * 24 + '"',
]
_FILLER = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_ASCII = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40)


def _full(line: str) -> bool:
    return any(screen.regex.search(line) for screen in _SCREENS)


def test_every_detector_pattern_has_literals() -> None:
    """A detect-secrets upgrade that changes a pattern shows here (the pattern would run unfiltered)."""
    assert [screen.regex.pattern for screen in _SCREENS if screen.needles is None] == []


@pytest.mark.parametrize("secret", _KNOWN)
def test_known_secrets_pass_the_prefilter(secret: str) -> None:
    assert _full(secret)
    assert screened(secret)
    assert screened("1AOA5cnchgS+lKdsv/Qhx9oH " + secret + " Q9FgZwA6BJOGVPAIpWe")


@pytest.mark.parametrize("index", range(len(_SCREENS)))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.one_of(_ASCII, _FILLER),
    after=st.one_of(_ASCII, _FILLER),
    secret=st.one_of(st.sampled_from(_KNOWN), st.data()),
)
def test_prefilter_agrees_with_the_full_scan(index: int, before: str, after: str, secret: object) -> None:
    """Lines with an embedded secret (a known one, or a string generated from the pattern) in random text."""
    if not isinstance(secret, str):
        pattern = _SCREENS[index].regex
        secret = secret.draw(st.from_regex(pattern, fullmatch=True))  # type: ignore[attr-defined]
        assert pattern.search(secret)
    line = before + secret + after
    assert screened(line) == _full(line)
    assert screened(before + after) == _full(before + after)


def test_secrets_are_still_found() -> None:
    assert find_secrets("note: AKIAIOSFODNN7EXAMPLE") == ["AWS Access Key"]
    assert find_secrets('"password": "hunter2hunter2"')
    assert find_secrets("1AOA5cnchgS+lKdsv/Qhx9oH+pnkXaskVVRT6vYQM9FgZwA6BJOGVPAIpWe") == []
    assert re.fullmatch(r"[A-Za-z ]+", "plain") and not screened("plain text")


def _unscreened(text: str) -> list[str]:
    """detect-secrets run plainly: every detector on every line, no screen in front."""
    plugins = _detectors()[0]
    found: list[str] = []
    with transient_settings(_SETTINGS):
        for number, line in enumerate(_REFS.sub("sha256:ref", text).splitlines() or [text], start=1):
            for plugin in plugins:
                found.extend(s.type for s in plugin.analyze_line(filename="state", line=line, line_number=number))
    return found


_KEYWORD_PATTERNS = sorted(
    {regex.pattern: regex for table in [*keyword.REGEX_BY_FILETYPE.values(), keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP]
     for regex in table}.items()
)


@pytest.mark.parametrize("index", range(len(_KEYWORD_PATTERNS)))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_keyword_pattern_needs_an_operator(index: int, data: st.DataObject) -> None:
    """What `KEYWORD_OPERATORS` claims, on strings generated from the keyword detector's own patterns."""
    regex = _KEYWORD_PATTERNS[index][1]
    line = data.draw(st.from_regex(regex, fullmatch=True))
    assert regex.search(line)
    assert any(mark in line for mark in KEYWORD_OPERATORS), line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.one_of(st.sampled_from(_KNOWN), _ASCII, _FILLER,
                             st.sampled_from(["password", "api_key", " = ", ": ", "'", '"', ";", "(", "!=", "\n"])),
                   max_size=8),
)
def test_screened_scan_finds_what_plain_detect_secrets_finds(parts: list[str]) -> None:
    """The oracle is detect-secrets itself, every detector on every line."""
    text = "".join(parts)
    assert sorted(find_secrets(text)) == sorted(_unscreened(text))


@pytest.mark.parametrize("secret", _KNOWN)
def test_known_secrets_found_as_plain_detect_secrets_finds_them(secret: str) -> None:
    line = "1AOA5cnchgS+lKdsv/Qhx9oH " + secret + " Q9FgZwA6BJOGVPAIpWe"
    assert sorted(find_secrets(line)) == sorted(_unscreened(line))
