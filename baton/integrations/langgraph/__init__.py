"""Baton as a LangGraph checkpointer (needs the optional extra: ``pip install 'baton[langgraph]'``).

``graph.compile(checkpointer=BatonSaver(store))`` is the one-line change.
"""

from baton.integrations.langgraph.platform import run_id_for
from baton.integrations.langgraph.saver import BatonSaver
from baton.integrations.langgraph.serde import SafeSerde, UnsafePayloadError, UnsafeValueError

__all__ = ["BatonSaver", "SafeSerde", "UnsafePayloadError", "UnsafeValueError", "run_id_for"]
