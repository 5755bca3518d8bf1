"""Fault schedules: which fault fires where, drawn from a seed, small enough to shrink.

A fault names its trigger by a count the simulation keeps, so a schedule means
the same thing whenever it is replayed (and after shrinking):

| kind            | trigger `at`                          | `arg`                              |
|-----------------|---------------------------------------|------------------------------------|
| crash           | the n-th store write by a worker      | `before` or `after` the commit     |
| stall           | the n-th store write by a worker      | seconds the process is frozen      |
| skew            | the n-th worker process started       | seconds its wall clock is off      |
| handoff         | the n-th store write by a worker      | a chaos reason (`baton.chaos`)     |
| drop_request    | the n-th message to a target          | -                                  |
| drop_response   | the n-th message to a target          | - (the target committed: ambiguous)|
| duplicate       | the n-th message to a target          | -                                  |
| delay           | the n-th message to a target          | seconds until it arrives           |
| doc_change      | the n-th store write by a worker      | the corpus document to change      |
| doc_secret      | the n-th store write by a worker      | the corpus document that gets a credential |
| hold            | the n-th store write by a worker      | seconds that one worker waits there, its heartbeat going on |
| catalog_change  | the n-th store write by a worker      | a sec.-27 catalog case (`baton.sim.catalog_faults`) |
| owner_rule      | - (0: in force from the launch)       | the run owner's rule (`OWNER_RULES`)|
| replan          | the n-th store write by a worker      | - (a second writer re-plans the deploy run at VERIFIED) |
| legacy_import   | - (0: at the launch)                  | the fleet's policy on schema transforms (`""` allows, `no_transform`) |

A write fault may name a store call in `on`: its `at` then counts only the workers' writes of that call (`on:
claim_operation`, at 1: the first claim of a side effect in the world, wherever other runs' writes fall).
Or it may name a seal, `on: sealed:<run kind>:<BOUNDARY>` (`sealed_on`): `at` then counts the seals of that boundary
by runs of that kind, and the fault strikes right after the n-th one is durable, the live matrix's
`sealed:<BOUNDARY>` fault point. A seal is what every strategy makes at the same point of a run (Baton's checkpoint,
a control's transcript written at that step), so such a fault lands at the same point of the run for every
strategy, however many other writes each makes (a control makes about a third of Baton's: a plain write count that
is Baton's VERIFIED seal is never reached by a control's run). A crash there is the kill at that point (`before`
and `after` alike: the seal is already durable).

A stall longer than the lease makes the lease expire during a long step; a
handoff with reason `better_model_released` changes the release mid-run and
`doc_change` changes the environment (the corpus) under a research run;
`doc_secret` pastes a credential (`PLANTED_KEY`) into a corpus document, as an operator might, and records
what it planted for the oracle (`planted-secrets.json`); it is never drawn at random (`generate` keeps its
draws), only named by a scenario (`baton.sim.sec27_plans`), as is `hold`: unlike `stall`, which freezes
the whole process, it holds only the worker about to write, while its heartbeat keeps the lease (the live
matrix's hold at a fault point), so what it holds (a capability, an approval) can run out under a live lease;
`catalog_change` changes the placement and release catalog under the runs (a
release withdrawn, a placement re-homed, moved to another provider, losing a
schema, verifier or tool contract, its ceiling lowered, its environment or
runtime changed) and asks to move them onto what changed.

`replan` is a second writer holding the deploy run's epoch (the live matrix's `replanned-after-verify`,
`baton.faults.replan_side`): on top of the run's VERIFIED checkpoint it seals one more VERIFIED checkpoint whose current
candidate is a re-planned spec nobody verified (`baton.faults.cases_binding.replanned_spec`), its evidence still the
first spec's passing verdict. The SDK never seals such a checkpoint; it comes from outside it, sealed with a good hash,
chain and epoch. Never drawn by `generate`; a plan names it (`baton.sim.sec27_plans.APART`).

`legacy_import` (`baton.sim.legacy_import`): the deploy run was started by an older Baton (checkpoint schema 2) and
exported; the operator imports the bundle onto local-gpu-eu and moves the run to cloud-eu before any worker here
seals it again. Never drawn by `generate`; the swarm mix adds it on its own stream (`scenarios.draw_legacy_import`).

`owner_rule` is not an event but a standing rule the runs' owner set before launching them, as a deployment's run
owner does: keep the run in the region (`same_region`) or with the provider (`same_provider`) of the placement it
was launched on (the fleet's handoff policy then sets `require_same_region` / `require_same_provider`, as the live
matrix's `FaultCase.handoff_policy`), or the run's portability constraints: state that may not leave the trust
domain it was created in (`non_exportable`), attested hardware (`attested`), a data scope (`data_scope`), or both
of the first two (`unsafe`); or (`approval_lapsed`, drawn apart from the owner's rules) its only approval of the
v7 -> v8 migration the fleet policy allows ran out before launch (`APPROVALS_FILE`); or (`downgrade_allowed`, drawn
on its own stream too) a move may go on with the run's authority lowered to a lower ceiling of its target (the fleet
policy's `allow_authority_downgrade`, as the live case `ceiling-lowered-downgrade-allowed`). The owner writes the rule in its own words (`OWNER_RULES_FILE`) and the operator its
inventory of placements (`INVENTORY_FILE`) before the runs start; the oracle (`baton.sim.oracles.owner_rule_kept`)
reads the targets' own logs against those. It is never drawn by `generate` (`DRAWN_KINDS` keeps its draws): the
swarm mix (`baton.sim.scenarios.mixed`) adds one to a share of seeds from its own stream.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass

from baton.chaos import ChaosReason
from baton.sim.catalog_faults import CATALOG_CHANGE, SUBKINDS
from baton.sim.legacy_import import LEGACY_IMPORT
from baton.targets.corpus_documents import INITIAL_DOCUMENTS

MESSAGE_KINDS = ("drop_request", "drop_response", "duplicate", "delay")
DOC_SECRET = "doc_secret"
HOLD = "hold"
REPLAN = "replan"
OWNER_RULE = "owner_rule"
OWNER_RULES: tuple[str, ...] = ("same_region", "same_provider", "non_exportable", "attested", "data_scope", "unsafe")
APPROVAL_LAPSED = "approval_lapsed"
"""The fleet policy allows the v7 -> v8 migration, but the owner's only approval of it has expired (drawn on its own
stream, `baton.sim.scenarios.draw_lapsed_approval`)."""
DOWNGRADE_ALLOWED = "downgrade_allowed"
"""The runs' owner lets a move go on with less authority than the run had when the target placement's ceiling is
lower (the fleet's handoff policy then sets `allow_authority_downgrade`, as the live matrix's
`ceiling-lowered-downgrade-allowed`): drawn on its own stream, `baton.sim.scenarios.draw_downgrade_allowed`."""
APPROVALS_FILE = "owner/approvals.json"
"""The owner's record: the release its runs are pinned to and the migrations off it it approved, with expiries."""
OWNER_RULES_FILE = "owner/rules.json"
"""run id -> the rule its owner set, in the owner's words (region, provider, trust domain, attestation, scope)."""
INVENTORY_FILE = "operator/inventory.json"
"""The operator's own inventory of its placements (what it seeded the catalog from), written before the runs start."""
DATA_SCOPE = "eu-customer-records"
"""The data scope a `data_scope` owner requires (no placement of the default catalog holds it)."""
SEALED = "sealed:"
"""The prefix of a write fault's `on` that names a seal instead of a store call (`sealed_on`)."""
WRITE_KINDS = ("crash", "stall", "handoff", "doc_change", CATALOG_CHANGE, DOC_SECRET, HOLD, REPLAN)
PAUSE_KINDS = ("stall", HOLD, "delay")
"""The faults whose argument is a pause in virtual seconds."""
DRAWN_KINDS = ("crash", "stall", "handoff", "doc_change", CATALOG_CHANGE, *MESSAGE_KINDS, "skew")
"""The kinds `generate` draws from (a seed's random faults); adding one here would change every seed's schedule."""
KINDS = (*DRAWN_KINDS, DOC_SECRET, HOLD, OWNER_RULE, REPLAN, LEGACY_IMPORT)
PLANTED_KEY = "AKIAZ7BATONSIMULATE1"
"""The credential `doc_secret` plants: AWS access-key form, 'AKIA' and 16 of [0-9A-Z]."""
PLANTED_FILE = "planted-secrets.json"
_WRITE_SPAN = 90
_MESSAGE_SPAN = 10
_CATALOG_SPAN = 24
"""A deploy run makes about 20 worker writes: a catalog change later than that finds every run ended."""


@dataclass(frozen=True, order=True)
class Fault:
    """One fault: what, at which count, with which argument."""

    kind: str
    at: int
    arg: str = ""
    on: str = ""
    """A write fault's store call: `at` counts the workers' writes of that call only ("" counts every write)."""

    def describe(self) -> str:
        return f"{self.kind}@{self.at}" + (f"[{self.on}]" if self.on else "") + (f"({self.arg})" if self.arg else "")

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "at": self.at, "arg": self.arg, **({"on": self.on} if self.on else {})}


@dataclass(frozen=True)
class FaultPlan:
    """A seed's faults, in a fixed order."""

    faults: tuple[Fault, ...] = ()

    def __post_init__(self) -> None:
        for fault in self.faults:
            if fault.kind not in KINDS:
                raise ValueError(f"unknown fault kind {fault.kind!r}; known: {', '.join(KINDS)}")
            if fault.on and fault.kind not in WRITE_KINDS:
                raise ValueError(f"{fault.describe()}: only a write fault names a store call")

    def message_fault(self, seq: int) -> Fault | None:
        return next((f for f in self.faults if f.kind in MESSAGE_KINDS and f.at == seq), None)

    def write_faults(self, n: int, caller: str = "", n_caller: int = 0) -> list[Fault]:
        """The write faults of the n-th worker write, the `n_caller`-th of its call `caller`."""
        return [f for f in self.faults if f.kind in WRITE_KINDS and (f.at, f.on) in ((n, ""), (n_caller, caller))]

    def seal_faults(self, kind: str, boundary: str, n: int) -> list[Fault]:
        """The write faults of the n-th seal of `boundary` by a run of `kind` (`sealed_on`)."""
        return [f for f in self.faults if f.kind in WRITE_KINDS and f.on == sealed_on(kind, boundary) and f.at == n]

    def paused_s(self) -> float:
        """Virtual seconds the schedule keeps actors still (stalls, holds and message delays), all added up."""
        return sum(float(f.arg) for f in self.faults if f.kind in PAUSE_KINDS and f.arg)

    def skew_for(self, n: int) -> float:
        return sum(float(f.arg) for f in self.faults if f.kind == "skew" and f.at == n)

    def without(self, drop: Iterable[int]) -> FaultPlan:
        gone = set(drop)
        return FaultPlan(tuple(f for i, f in enumerate(self.faults) if i not in gone))

    def to_json(self) -> str:
        return json.dumps([f.as_dict() for f in self.faults], sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FaultPlan:
        try:
            items = json.loads(text)
            return cls(tuple(Fault(str(i["kind"]), int(i["at"]), str(i.get("arg", "")), str(i.get("on", "")))
                             for i in items))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a fault schedule (a JSON list of {{kind, at, arg}}): {exc}") from exc


def sealed_on(kind: str, boundary: str) -> str:
    """The `on` of a write fault that strikes right after a run of `kind` seals `boundary` (not a store call)."""
    return f"{SEALED}{kind}:{boundary}"


def generate(seed: int, count: int, *, kinds: tuple[str, ...] = DRAWN_KINDS) -> FaultPlan:
    """`count` faults drawn from `seed` (the same seed, the same schedule)."""
    rng = random.Random(f"faults:{seed}")
    faults = [_draw(rng, rng.choice(kinds)) for _ in range(count)]
    return FaultPlan(tuple(sorted(faults, key=lambda f: (f.at, f.kind, f.arg))))


def _draw(rng: random.Random, kind: str) -> Fault:
    if kind in MESSAGE_KINDS:
        at = rng.randint(1, _MESSAGE_SPAN)
        return Fault(kind, at, f"{rng.choice((0.5, 2.0, 8.0, 40.0))}" if kind == "delay" else "")
    if kind == "skew":
        return Fault(kind, rng.randint(1, 4), f"{rng.choice((-90.0, -5.0, 5.0, 90.0, 400.0))}")
    if kind == CATALOG_CHANGE:
        return Fault(kind, rng.randint(1, _CATALOG_SPAN), rng.choice(SUBKINDS))
    at = rng.randint(1, _WRITE_SPAN)
    if kind == "crash":
        return Fault(kind, at, rng.choice(("before", "after")))
    if kind == "stall":
        return Fault(kind, at, f"{rng.choice((2.0, 12.0, 40.0, 400.0))}")
    if kind == "handoff":
        return Fault(kind, at, rng.choice(sorted(r.value for r in ChaosReason)))
    return Fault(kind, at, rng.choice(sorted(INITIAL_DOCUMENTS)))
