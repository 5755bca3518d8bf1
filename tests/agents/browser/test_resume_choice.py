"""The sec. 13 class choice as a plain function: every class reachable, each for its own reason."""

from __future__ import annotations

import pytest

from baton.agents.browser_agent import check_submission, default_answers, durable_path
from baton.agents.browser_resume import ConfirmedDraft, DraftVersion, ServerDraft, choose_resume
from baton.models import Boundary, OperationLedger, ResumabilityClass, RunKind
from baton.resumability import BrowserResumeClass as C, classify_resumability, sealed_browser_class
from baton.targets.webapp_form import snapshot_bytes

RUN = "run-b"
CONFIRMED = ConfirmedDraft("d_1", 2, "sha256:" + "2" * 64, 3)


def _v(version: int, writer: str | None = RUN, person: str | None = None) -> DraftVersion:
    return DraftVersion(version, "sha256:" + str(version) * 64, writer, writer or person or "?")


def _server(*versions: DraftVersion, submitted_by: str | None = None) -> ServerDraft:
    return ServerDraft("d_1", tuple(versions), submitted_by)


@pytest.mark.parametrize(("confirmed", "server", "live", "expected", "says"), [
    (None, None, True, C.REOPEN_DURABLE_URL, "nothing confirmed"),
    (None, None, False, C.RECONSTRUCT_SESSION, "nothing confirmed"),
    (CONFIRMED, _server(_v(0), _v(1), _v(2)), True, C.REOPEN_DURABLE_URL, "live"),
    (CONFIRMED, _server(_v(0), _v(1), _v(2)), False, C.RECONSTRUCT_SESSION, "scoped credential"),
    (CONFIRMED, _server(_v(0), _v(1), _v(2), _v(3)), False, C.RESTART_FROM_SERVER_STATE, "version 3"),
    (CONFIRMED, _server(_v(0), _v(1), _v(2), _v(3)), True, C.RESTART_FROM_SERVER_STATE, "version 3"),
    (CONFIRMED, None, False, C.NOT_RESUMABLE, "gone"),
    (CONFIRMED, _server(_v(0), _v(1), _v(2), submitted_by="run-other"), False, C.NOT_RESUMABLE, "run-other"),
    (CONFIRMED, _server(_v(0), _v(1), _v(2), _v(3, None, "alice")), True, C.NOT_RESUMABLE, "alice"),
    (CONFIRMED, _server(_v(0), _v(1), _v(2), _v(3, "run-other")), False, C.NOT_RESUMABLE, "run-other"),
    (CONFIRMED, _server(_v(0), _v(1)), False, C.NOT_RESUMABLE, "not the one confirmed"),
    (CONFIRMED, _server(_v(0), _v(1), DraftVersion(2, "sha256:" + "9" * 64, RUN, RUN)), False, C.NOT_RESUMABLE,
     "not the one confirmed"),
])
def test_each_class_holds_for_its_own_facts(
    confirmed: ConfirmedDraft | None, server: ServerDraft | None, live: bool, expected: C, says: str,
) -> None:
    choice = choose_resume(RUN, confirmed, server, session_live=live)
    assert choice.resume is expected
    assert says in choice.reason


def test_every_class_is_reachable() -> None:
    seen = {choose_resume(RUN, c, s, session_live=live).resume for c, s, live in [
        (CONFIRMED, _server(_v(0), _v(1), _v(2)), True), (CONFIRMED, _server(_v(0), _v(1), _v(2)), False),
        (CONFIRMED, _server(_v(0), _v(1), _v(2), _v(3)), False), (CONFIRMED, None, False)]}
    assert seen == set(C)


def test_a_server_view_is_read_with_its_writers_and_submission() -> None:
    view = {"draft_id": "d_1", "history": [
        {"version": 0, "hash": "sha256:" + "0" * 64, "writer": {"run_id": RUN, "epoch": 2}},
        {"version": 1, "hash": "sha256:" + "1" * 64, "writer": {"user": "alice"}}],
        "submitted": {"run_id": "run-other"}}
    server = ServerDraft.from_view(view)
    assert [v.writer_run for v in server.history] == [RUN, None]
    assert server.history[1].writer == "alice" and server.submitted_by == "run-other"


def test_browser_checkpoints_declare_a_rebuilt_session_not_a_dead_end() -> None:
    assert sealed_browser_class(RunKind.BROWSER) is C.RECONSTRUCT_SESSION
    assert sealed_browser_class(RunKind.DEPLOY) is None
    sealed = classify_resumability(Boundary.GENERATING, RunKind.BROWSER, OperationLedger(),
                                   browser=sealed_browser_class(RunKind.BROWSER))
    assert sealed.resumability is ResumabilityClass.R4  # movable; R0 would make every browser run immovable


def test_durable_urls_name_only_the_draft_and_the_step() -> None:
    assert durable_path(ConfirmedDraft("d_1", 1, "sha256:" + "1" * 64, 2)) == "/drafts/d_1/page/2"
    assert durable_path(ConfirmedDraft("d_1", 3, "sha256:" + "3" * 64, 4)) == "/drafts/d_1/review"


def test_the_verifier_accepts_only_the_tasks_complete_answers() -> None:
    answers = default_answers("Acme")
    good = snapshot_bytes("d_1", "acme", 3, answers)
    assert check_submission(good, "acme", answers).passed
    assert not check_submission(snapshot_bytes("d_1", "globex", 3, answers), "acme", answers).passed
    assert not check_submission(snapshot_bytes("d_1", "acme", 3, {**answers, "seats": "13"}), "acme", answers).passed
    partial = {k: v for k, v in answers.items() if k != "contact_email"}
    assert "contact_email" in check_submission(snapshot_bytes("d_1", "acme", 2, partial), "acme", answers).detail
    assert not check_submission(b"not json", "acme", answers).passed
