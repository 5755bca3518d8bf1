"""The seeded workload and fault schedule: generated once per seed, replayed by every strategy.

A run has a length (steps), a per-step duration and model spend, an evidence phase, and maybe one
consequential side effect. Its fault schedule is a stream of faults, each due after a number of
executed steps (counted across re-executions, so a strategy that redoes work meets more faults),
with the outage facts every strategy sees alike: how long any placement, the same pool or the same
placement takes to come back, whether the evidence source changed meanwhile, and so on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

AGENT_KINDS = ("coding", "research", "browser", "deploy")
FAULT_KINDS = ("crash", "ambiguous", "stale_wakes", "reply_lost", "placement_lost", "evidence_changed")
MAX_FAULTS = 48


@dataclass(frozen=True)
class Parameters:
    """Workload and strategy parameters (the ones not measured from Baton: the world's and the controls')."""

    short_share: float = 0.6
    short_steps: tuple[int, int] = (3, 12)
    long_steps: tuple[int, int] = (60, 240)
    short_step_s: float = 1.0
    long_step_s: float = 20.0
    short_step_usd: float = 0.001
    long_step_usd: float = 0.04
    evidence_share: float = 0.4          # long runs: the first 40% of steps gather evidence
    fault_rate: float = 0.01             # per executed step
    consequential_share: float = 0.3
    scarcity: float = 0.3                # chance a fault finds no free placement at once
    placement_wait_s: float = 30.0       # mean wait for any free placement when scarce
    pool_wait_factor: float = 6.0        # the same pool is scarcer: its wait is this many times longer
    same_placement_wait_s: float = 60.0  # a crashed worker's restart on its own placement
    placement_lost_wait_s: float = 1800.0  # a placement that left: when (if) it returns
    compute_usd_per_s: float = 0.0005
    human_delay_s: float = 900.0
    human_cost_usd: float = 5.0
    coarse_every: int = 10
    deterministic_every: int = 8
    attempt_limit: float = 8.0           # a run is escalated after executing this many times its steps
    fault_weights: tuple[float, ...] = (0.35, 0.15, 0.1, 0.1, 0.15, 0.15)
    fixed_length: int | None = None      # the sweep fixes the length of every run

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Workload:
    """Per-run arrays (index = run) and the fault stream (run, ordinal) -> fault facts."""

    kind: np.ndarray           # index into AGENT_KINDS
    long: np.ndarray           # bool
    steps: np.ndarray          # int
    step_s: np.ndarray
    step_usd: np.ndarray
    evidence_steps: np.ndarray  # steps [0, evidence_steps) gather evidence
    effect_step: np.ndarray    # -1: no consequential side effect
    gap: np.ndarray            # [run, k]: executed steps between fault k-1 and fault k
    fault_kind: np.ndarray     # [run, k] index into FAULT_KINDS
    any_wait_s: np.ndarray     # [run, k] wait for any free placement
    pool_wait_s: np.ndarray    # [run, k] wait for the same pool
    same_wait_s: np.ndarray    # [run, k] wait for the same placement
    committed: np.ndarray      # [run, k] an ambiguous effect had committed at the target
    downgrade: np.ndarray      # [run, k] the target placement's ceiling is lower
    incompatible: np.ndarray   # [run, k] the first placement offered runs a withdrawn release
    seal_draw: np.ndarray      # [run, k] uniform draw, picks the handoff latency sample

    @property
    def runs(self) -> int:
        return int(self.steps.size)

    def fingerprint(self) -> str:
        """A hash of every array, to show two strategies saw the same workload and schedule."""
        import hashlib
        digest = hashlib.sha256()
        for name in self.__dataclass_fields__:
            digest.update(np.ascontiguousarray(getattr(self, name)).tobytes())
        return digest.hexdigest()


def generate(seed: int, runs: int, params: Parameters) -> Workload:
    """The workload and fault schedule of one seed."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    if not 0.0 <= params.fault_rate < 1.0:
        raise ValueError(f"fault_rate must be in [0, 1), got {params.fault_rate}")
    rng = np.random.default_rng(seed)
    long = rng.random(runs) >= params.short_share
    steps = np.where(long, rng.integers(*params.long_steps, size=runs, endpoint=True),
                     rng.integers(*params.short_steps, size=runs, endpoint=True))
    if params.fixed_length is not None:
        steps = np.full(runs, params.fixed_length)
        long = steps > params.short_steps[1]
    kind = rng.integers(0, len(AGENT_KINDS), size=runs)
    step_s = np.where(long, params.long_step_s, params.short_step_s) * rng.uniform(0.5, 1.5, size=runs)
    step_usd = np.where(long, params.long_step_usd, params.short_step_usd) * rng.uniform(0.5, 1.5, size=runs)
    evidence_steps = np.maximum(1, (steps * params.evidence_share).astype(int))
    consequential = rng.random(runs) < params.consequential_share
    effect_step = np.where(consequential, rng.integers(evidence_steps, np.maximum(evidence_steps + 1, steps)), -1)
    effect_step = np.minimum(effect_step, steps - 1)
    shape = (runs, MAX_FAULTS)
    rate = max(params.fault_rate, 1e-12)
    gap = rng.geometric(rate, size=shape) if params.fault_rate > 0 else np.full(shape, np.iinfo(np.int64).max // 4)
    weights = np.asarray(params.fault_weights, dtype=float)
    fault_kind = rng.choice(len(FAULT_KINDS), size=shape, p=weights / weights.sum())
    scarce = rng.random(shape) < params.scarcity
    any_wait = np.where(scarce, rng.exponential(params.placement_wait_s, size=shape), 0.0)
    pool_wait = np.where(scarce | (rng.random(shape) < params.scarcity),
                         rng.exponential(params.placement_wait_s * params.pool_wait_factor, size=shape), 0.0)
    lost = fault_kind == FAULT_KINDS.index("placement_lost")
    same_wait = np.where(lost, rng.exponential(params.placement_lost_wait_s, size=shape),
                         rng.exponential(params.same_placement_wait_s, size=shape))
    return Workload(
        kind=kind, long=long, steps=steps.astype(np.int64), step_s=step_s, step_usd=step_usd,
        evidence_steps=evidence_steps.astype(np.int64), effect_step=effect_step.astype(np.int64),
        gap=gap.astype(np.int64), fault_kind=fault_kind, any_wait_s=any_wait, pool_wait_s=pool_wait,
        same_wait_s=same_wait, committed=rng.random(shape) < 0.5, downgrade=rng.random(shape) < 0.1,
        incompatible=rng.random(shape) < 0.1, seal_draw=rng.random(shape),
    )
