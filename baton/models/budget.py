"""Budget ledger: consumption belongs to the logical run and travels with it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pydantic import Field

from baton.models.base import Record


class BudgetLimits(Record):
    """Ceilings a run must stay under."""

    model_spend_usd: Decimal = Field(ge=0)
    model_calls: int = Field(ge=0)
    search_expansions: int = Field(ge=0)
    tool_calls: int = Field(ge=0)
    browser_seconds: float = Field(ge=0)
    sandbox_seconds: float = Field(ge=0)
    verification_reserve_usd: Decimal = Field(ge=0)
    retries: int = Field(ge=0)
    deadline: dt.datetime


class BudgetUsage(Record):
    """What a run has consumed so far. Every field only grows."""

    model_spend_usd: Decimal = Field(default=Decimal("0"), ge=0)
    model_calls: int = Field(default=0, ge=0)
    search_expansions: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)
    browser_seconds: float = Field(default=0.0, ge=0)
    sandbox_seconds: float = Field(default=0.0, ge=0)
    verification_spend_usd: Decimal = Field(default=Decimal("0"), ge=0)
    retries: int = Field(default=0, ge=0)

    def plus(self, charge: BudgetUsage) -> BudgetUsage:
        """The usage after adding `charge`."""
        return BudgetUsage(
            model_spend_usd=self.model_spend_usd + charge.model_spend_usd,
            model_calls=self.model_calls + charge.model_calls,
            search_expansions=self.search_expansions + charge.search_expansions,
            tool_calls=self.tool_calls + charge.tool_calls,
            browser_seconds=self.browser_seconds + charge.browser_seconds,
            sandbox_seconds=self.sandbox_seconds + charge.sandbox_seconds,
            verification_spend_usd=self.verification_spend_usd + charge.verification_spend_usd,
            retries=self.retries + charge.retries,
        )

    def covers(self, earlier: BudgetUsage) -> bool:
        """True when no field is below `earlier` (usage never decreases)."""
        return all(
            getattr(self, name) >= getattr(earlier, name) for name in BudgetUsage.model_fields
        )


class BudgetLedger(Record):
    """Limits and usage of one run."""

    limits: BudgetLimits
    used: BudgetUsage = Field(default_factory=BudgetUsage)

    def charge(self, charge: BudgetUsage) -> BudgetLedger:
        """A new ledger with `charge` added to usage."""
        return self.model_copy(update={"used": self.used.plus(charge)})

    @property
    def verification_reserve_remaining_usd(self) -> Decimal:
        return max(Decimal("0"), self.limits.verification_reserve_usd - self.used.verification_spend_usd)

    def exhausted(self, now: dt.datetime) -> tuple[str, ...]:
        """Names of the limits this ledger has reached or passed at `now`."""
        used, limits = self.used, self.limits
        reasons = [
            name
            for name in (
                "model_spend_usd",
                "model_calls",
                "search_expansions",
                "tool_calls",
                "browser_seconds",
                "sandbox_seconds",
                "retries",
            )
            if getattr(used, name) > getattr(limits, name)
        ]
        if used.verification_spend_usd > limits.verification_reserve_usd:
            reasons.append("verification_reserve_usd")
        if now >= limits.deadline:
            reasons.append("deadline")
        return tuple(reasons)
