"""Budget across owners: usage is the larger of what the checkpoint and the store's ledger say.

Charges are appended to the store as they happen, and the checkpointed ledger
is sealed at boundaries, so after a crash the store may know of spend that no
checkpoint holds yet. A resumed run takes, field by field, the larger of the
two: usage never decreases across a handoff (invariant 8).
"""

from __future__ import annotations

from baton.ablation import Ablation, is_ablated
from baton.models import BudgetLedger, BudgetUsage


def usage_max(first: BudgetUsage, second: BudgetUsage) -> BudgetUsage:
    """Field-wise maximum of two usages."""
    return BudgetUsage(**{name: max(getattr(first, name), getattr(second, name)) for name in BudgetUsage.model_fields})


def resumed_ledger(checkpointed: BudgetLedger, charged: BudgetUsage) -> BudgetLedger:
    """The ledger a new owner continues with: same limits, usage never below either record."""
    if is_ablated(Ablation.BUDGET_CARRY_OVER):  # the new owner starts from a fresh budget
        return checkpointed.model_copy(update={"used": BudgetUsage()})
    return checkpointed.model_copy(update={"used": usage_max(checkpointed.used, charged)})
