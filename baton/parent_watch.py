"""Child services that a Ctrl-C meant for their parent does not reach, and that never outlive their parent.

A fleet starts target services and the authority beside its workers. When all of them share the fleet's
process group, one Ctrl-C (from a terminal, or `baton platform` stopping the fleet's group) reaches every
process at once: the targets exit while the workers are still finishing their step, and runs end failed
because a target vanished. A child started with `detached_child()` gets its own process group, so only its
parent stops it, after the workers; and it calls `die_with_parent()` first thing, so Linux sends it SIGTERM
if the parent dies without stopping it (a SIGKILLed fleet leaves no service behind).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

PARENT_PID_ENV = "BATON_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def detached_child(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`subprocess.Popen` keyword arguments for a child in its own process group, told who its parent is."""
    child_env = dict(os.environ if env is None else env)
    child_env[PARENT_PID_ENV] = str(os.getpid())
    return {"process_group": 0, "env": child_env}


def die_with_parent() -> None:
    """In a child started with `detached_child`: SIGTERM when the parent exits (Linux); nothing otherwise.

    The request binds to the parent thread that started the child, so a parent starts such children from a
    thread that lives as long as they should (the fleet: its main thread)."""
    expected = os.environ.pop(PARENT_PID_ENV, None)  # not for this child's own children
    if not expected:
        return
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != int(expected):  # the parent died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)
