"""Which agent runs which kind of run (imported lazily: agents depend on the SDK, not the reverse)."""

from __future__ import annotations

from collections.abc import Callable

from baton.models import RunKind
from baton.runtime.sdk import RunContext

Agent = Callable[[RunContext], None]


def agent_for(kind: RunKind) -> Agent:
    """The reference agent for `kind`; KeyError for kinds without one yet."""
    if kind is RunKind.RESEARCH:
        from baton.agents.research_agent import research_agent

        return research_agent
    if kind is RunKind.DEPLOY:
        from baton.agents.deploy_agent import deploy_agent

        return deploy_agent
    if kind is RunKind.BROWSER:
        from baton.agents.browser_agent import browser_agent

        return browser_agent
    if kind is RunKind.CODING:
        from baton.agents.coding_agent import coding_agent

        return coding_agent
    raise KeyError(f"no agent runs {kind.value} runs yet")
