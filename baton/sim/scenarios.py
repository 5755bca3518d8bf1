"""Swarm-style fault mix: a seed's random faults, and sometimes one named sec.-27 scenario on top.

A seed draws (from its own seeded stream, so replay and shrinking see the same schedule) whether to add
a scenario; if so, which named plan of `baton.sim.sec27_plans` whose runs are all in the world, and a
scale for its write counts. The plans pin the write where the live case strikes in a world of one run;
other runs in the same world interleave their own writes, so the n-th write of the run is somewhere
between about the n-th and the 2n-th write of the world, and the scale spreads the scenario over that
range (a first write stays among the first two; a count of one store call, `Fault.on`, is kept). The result is still a plain
`FaultPlan`: a tuple of `Fault`, replayed and shrunk like any other.
"""

from __future__ import annotations

import random

from baton.models import RunKind
from baton.sim.catalog_faults import CATALOG_CHANGE, RETIRED
from baton.sim.faults import APPROVAL_LAPSED, DOWNGRADE_ALLOWED, OWNER_RULE, OWNER_RULES, WRITE_KINDS, Fault, FaultPlan, generate
from baton.sim.legacy_import import LEGACY_IMPORT, NO_TRANSFORM
from baton.sim.sec27_plans import APART, PLANS, Sec27Plan

SCENARIO_SHARE = 0.5
"""The share of seeds that add a named scenario to their random faults."""
OWNER_RULE_SHARE = 0.25
"""The share of seeds whose runs' owner set a rule (`baton.sim.faults.OWNER_RULES`) before launching them."""
LAPSED_SHARE = 0.15
"""The share of seeds whose owner's only approval of the v7 -> v8 migration has expired."""
DOWNGRADE_SHARE = 0.25
"""The share of seeds whose runs' owner lets a move lower their authority to a placement's lowered ceiling."""
APART_DRAWS: dict[str, tuple[str, float]] = {
    "ended-run-moved-to-unfit": ("ended_run_moved", 0.1),
    "approval-expired-in-hand": ("approval-expired-in-hand", 0.08),
    "replanned-after-verify": ("replanned-after-verify", 0.08),
}
"""Each plan of `sec27_plans.APART` -> the name of its own stream and the share of seeds that draw it (in a world
with its runs). Stop 32's; the names were chosen so that the seeds drawing them leave the first seeds stop 31's sweep
caught each ablation at as they were (seed 197 draws `ended_run_moved`)."""
LEGACY_STREAM, LEGACY_SHARE = "legacy_imported", 0.05
"""The stream and share of seeds (in a world with a deploy run) whose deploy run an older Baton started and the
operator imports (`faults.LEGACY_IMPORT`). Stop 32's schema plan; the name was chosen so that no seed below 24, nor
seed 30, nor any first seed of stop 31's and stop 32's sweeps draws it (the first seeds that do: 28, 38, 57)."""
PROVIDER_SHARE = 0.2
"""The share of seeds in which, on its own stream, the provider retires the runs' release (model-v7) mid-run."""
PROVIDER_SPAN = 24
"""The writes such a change falls among (a deploy run makes about 20)."""
SCALES = (0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
"""By how much a scenario's write counts are multiplied in a world of several runs."""


def scenarios_for(kinds: tuple[RunKind, ...]) -> tuple[Sec27Plan, ...]:
    """The named plans whose runs a world of `kinds` has, in a fixed order."""
    return tuple(PLANS[case] for case in sorted(PLANS) if set(PLANS[case].kinds) <= set(kinds))


def draw_scenario(seed: int, kinds: tuple[RunKind, ...]) -> tuple[str, tuple[Fault, ...]] | None:
    """The named scenario seed `seed` adds (its case id and its faults, write counts scaled), or None (the same seed, the same draw)."""
    rng = random.Random(f"scenario:{seed}")
    candidates = scenarios_for(kinds)
    if not candidates or rng.random() >= SCENARIO_SHARE:
        return None
    named = rng.choice(candidates)
    scale = rng.choice(SCALES)
    return named.case_id, tuple(Fault(f.kind, max(1, round(f.at * scale)), f.arg)
                                if f.kind in WRITE_KINDS and not f.on else f
                                for f in named.plan.faults)


def _own_stream(name: str, seed: int, share: float) -> random.Random | None:
    """Seed `seed`'s own stream for the draw `name` when the seed draws it (a `share` of seeds), else None; on its
    own stream, a draw leaves every other draw of the seed as it was."""
    rng = random.Random(f"{name}:{seed}")
    return rng if rng.random() < share else None


def draw_owner_rule(seed: int) -> Fault | None:
    """The rule the runs' owner set in seed `seed`'s world, or None."""
    rng = _own_stream("owner", seed, OWNER_RULE_SHARE)
    return None if rng is None else Fault(OWNER_RULE, 0, rng.choice(OWNER_RULES))


def draw_retirement(seed: int) -> Fault | None:
    """The provider retiring the runs' release (`catalog_faults.RETIRED`) in seed `seed`'s world, or None."""
    rng = _own_stream("retire", seed, PROVIDER_SHARE)
    return None if rng is None else Fault(CATALOG_CHANGE, rng.randint(1, PROVIDER_SPAN), RETIRED)


def draw_lapsed_approval(seed: int) -> Fault | None:
    """The owner's lapsed approval in seed `seed`'s world (`faults.APPROVAL_LAPSED`), or None."""
    return None if _own_stream("approval", seed, LAPSED_SHARE) is None else Fault(OWNER_RULE, 0, APPROVAL_LAPSED)


def draw_downgrade_allowed(seed: int) -> Fault | None:
    """The owner allowing its runs' authority downgraded on a move in seed `seed`'s world
    (`faults.DOWNGRADE_ALLOWED`), or None."""
    drawn = _own_stream("downgrade_allowed", seed, DOWNGRADE_SHARE) is not None
    return Fault(OWNER_RULE, 0, DOWNGRADE_ALLOWED) if drawn else None


def draw_legacy_import(seed: int, kinds: tuple[RunKind, ...]) -> Fault | None:
    """The operator's import of an older site's deploy run in seed `seed`'s world (`faults.LEGACY_IMPORT`), under a
    fleet policy that allows or forbids schema transforms (drawn on the same stream), or None."""
    rng = _own_stream(LEGACY_STREAM, seed, LEGACY_SHARE) if RunKind.DEPLOY in kinds else None
    return None if rng is None else Fault(LEGACY_IMPORT, 0, rng.choice(("", NO_TRANSFORM)))


def draw_apart(seed: int, kinds: tuple[RunKind, ...]) -> tuple[Fault, ...]:
    """The faults of the plans of `sec27_plans.APART` seed `seed` draws, each on its own stream (`APART_DRAWS`)."""
    drawn: list[Fault] = []
    for case_id, (stream, share) in APART_DRAWS.items():
        named = APART[case_id]
        if set(named.kinds) <= set(kinds) and _own_stream(stream, seed, share) is not None:
            drawn.extend(named.plan.faults)
    return tuple(drawn)


def mixed(seed: int, count: int, kinds: tuple[RunKind, ...]) -> FaultPlan:
    """`count` random faults of `seed` (`baton.sim.faults.generate`) plus the scenario it draws, if any, and the
    owner's rule, the provider's release retirement, the owner's lapsed approval, its allowed downgrade, the operator's import of an older site's run (`draw_legacy_import`) and the plans apart (`draw_apart`) it draws, if any (none when `count` is 0: a fault-free world stays fault-free)."""
    plan = generate(seed, count)
    scenario = draw_scenario(seed, kinds) if count > 0 else None
    rule = draw_owner_rule(seed) if count > 0 else None
    retired = draw_retirement(seed) if count > 0 else None
    lapsed = draw_lapsed_approval(seed) if count > 0 else None
    downgrade = draw_downgrade_allowed(seed) if count > 0 else None
    apart = draw_apart(seed, kinds) if count > 0 else ()
    legacy = draw_legacy_import(seed, kinds) if count > 0 else None
    extra = (*(scenario[1] if scenario is not None else ()),
             *(f for f in (rule, retired, lapsed, downgrade, legacy) if f is not None), *apart)
    if not extra:
        return plan
    return FaultPlan(tuple(sorted((*plan.faults, *extra), key=lambda f: (f.at, f.kind, f.arg))))
