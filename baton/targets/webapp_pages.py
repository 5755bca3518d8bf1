"""HTML of the web application's pages (plain forms, no scripts; every value escaped)."""

from __future__ import annotations

from html import escape
from typing import Any

from baton.targets.webapp_form import PAGES, page_fields


def _document(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
            f"<body><h1>{escape(title)}</h1>{body}</body></html>")


def login_page(next_path: str = "/drafts") -> str:
    """The login form: an account and either a scoped credential (agents) or a password (people)."""
    return _document("Log in", (
        "<form id='login' method='post' action='/login'>"
        f"<input type='hidden' name='next' value='{escape(next_path, quote=True)}'>"
        "<label>Account <input id='account' name='account'></label>"
        "<label>User <input id='user' name='user'></label>"
        "<label>Password <input id='password' name='password' type='password'></label>"
        "<label>Scoped credential <input id='credential' name='credential' type='password'></label>"
        "<button id='login-submit' type='submit'>Log in</button></form>"
    ))


def drafts_page(account: str, csrf_token: str) -> str:
    """The start page of a logged-in account: start a new draft."""
    return _document(f"Drafts of {account}", (
        "<form id='new-draft' method='post' action='/drafts'>"
        f"<input type='hidden' name='csrf_token' value='{escape(csrf_token, quote=True)}'>"
        "<button id='new-draft-submit' type='submit'>Start a new application</button></form>"
    ))


def form_page(draft: dict[str, Any], page: int, csrf_token: str) -> str:
    """Page `page` of the form for `draft`, prefilled with the server's answers."""
    inputs = "".join(
        f"<label>{escape(field.label)} <input id='field-{field.name}' name='{field.name}' "
        f"value='{escape(str(draft['answers'].get(field.name, '')), quote=True)}'></label>"
        for field in page_fields(page)
    )
    return _document(f"Step {page} of {len(PAGES)}", (
        f"<p id='draft' data-draft-id='{escape(draft['draft_id'], quote=True)}' "
        f"data-version='{draft['version']}'>Draft {escape(draft['draft_id'])}, version {draft['version']}</p>"
        f"<form id='page-form' method='post' action='/drafts/{escape(draft['draft_id'], quote=True)}/page/{page}'>"
        f"<input type='hidden' name='csrf_token' value='{escape(csrf_token, quote=True)}'>"
        f"<input type='hidden' name='base_version' value='{draft['version']}'>"
        f"{inputs}<button id='page-submit' type='submit'>Save and continue</button></form>"
    ))


def review_page(draft: dict[str, Any], submitted: bool) -> str:
    """The answers as saved, and whether the application was submitted."""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in sorted(draft["answers"].items()))
    state = "submitted" if submitted else "ready for submission (through the approval gateway)"
    return _document("Review", (
        f"<p id='draft' data-draft-id='{escape(draft['draft_id'], quote=True)}' data-version='{draft['version']}' "
        f"data-hash='{escape(draft['hash'], quote=True)}'>Draft {escape(draft['draft_id'])}: {state}</p>"
        f"<table id='answers'>{rows}</table>"
    ))
