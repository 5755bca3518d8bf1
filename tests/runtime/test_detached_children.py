"""A fleet's services are out of reach of the Ctrl-C meant for the fleet, and never outlive it.

A real parent process (in its own process group, as `baton platform` starts the fleet) starts a real deploy
service; the test then interrupts the parent's whole group, or SIGKILLs the parent, and watches the service's
own process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PARENT = r"""
import signal, sys, time
from baton.targets.service_process import ServiceProcess

# A shell's background job (`cmd &` without job control) starts with SIGINT ignored, and that is inherited: then
# neither this parent nor the service it starts would see the interrupt. A terminal's Ctrl-C reaches a process with
# the default disposition, which is what this test is about.
signal.signal(signal.SIGINT, signal.default_int_handler)
service = ServiceProcess.deploy(sys.argv[1]).start(detached=sys.argv[2] == "detached")
try:
    print(service.pid, flush=True)  # inside the try: the interrupt may come as soon as the test reads it
    while True:
        time.sleep(0.1)
except KeyboardInterrupt:
    # Interrupted with its group: is the service still serving? (wait up to 5 s for it to go, if it is going)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and service.running:
        time.sleep(0.05)
    print("alive" if service.running else "gone", flush=True)
    service.stop()
"""


def _parent(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], int]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "deploy"), mode], stdout=subprocess.PIPE,
                              text=True, process_group=0)
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


def _gone(pid: int, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(("mode", "after_interrupt"), [("detached", "alive"), ("attached", "gone")])
def test_an_interrupt_to_the_parents_group_reaches_only_attached_services(
        tmp_path: Path, mode: str, after_interrupt: str) -> None:
    parent, service_pid = _parent(tmp_path, mode)
    try:
        os.killpg(parent.pid, signal.SIGINT)
        out, _ = parent.communicate(timeout=60)
        assert out.strip() == after_interrupt
    finally:
        parent.kill()
    assert _gone(service_pid)  # stopped by its parent either way


def test_a_detached_service_dies_with_its_parent(tmp_path: Path) -> None:
    parent, service_pid = _parent(tmp_path, "detached")
    assert os.getpgid(service_pid) == service_pid != os.getpgid(parent.pid)  # a group of its own
    parent.kill()
    parent.wait(timeout=30)
    assert _gone(service_pid), "the service outlived its SIGKILLed parent"
