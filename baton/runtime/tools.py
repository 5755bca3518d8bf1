"""What agent code gets from `ctx.tool(name)`: the read side of a target, never its mutation side.

A target client can apply mutations and raise fences; agent code must do
neither except through the gateway (`ctx.mutate`). `ReadOnlyTool` hands out
only the methods listed for that tool and refuses everything else by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

READ_METHODS: dict[str, tuple[str, ...]] = {
    "corpus": ("fetch", "list_documents", "publications", "source", "observation", "health"),
    "deploy": ("deployments", "health"),
    "webapp": ("submissions", "health"),
    "browser": ("session", "held", "discard", "base_url"),
    "git": ("repository", "head", "pushes", "health"),
    "patch_model": ("propose", "calls"),
}


class ReadOnlyTool:
    """A view of `client` with only `allowed` attributes."""

    __slots__ = ("_allowed", "_client", "name")

    def __init__(self, name: str, client: object, allowed: Iterable[str]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_allowed", frozenset(allowed))

    def __getattr__(self, attribute: str) -> Any:
        if attribute not in self._allowed:
            raise AttributeError(
                f"tool {self.name!r} offers {sorted(self._allowed)} to agent code; {attribute!r} is not among them "
                "(mutations go through the gateway, and fences are raised by the coordinator)"
            )
        return getattr(self._client, attribute)

    def __setattr__(self, attribute: str, value: object) -> None:
        raise AttributeError(f"tool {self.name!r} is read-only")

    def __dir__(self) -> list[str]:
        return sorted(self._allowed)


def read_only_tools(clients: dict[str, object]) -> dict[str, ReadOnlyTool]:
    """Read-only views of the worker's target clients (a tool with no listed reads exposes nothing)."""
    return {name: ReadOnlyTool(name, client, READ_METHODS.get(name, ())) for name, client in clients.items()}
