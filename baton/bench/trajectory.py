"""The shared workload: one incompressible 2 KB observation per step.

Every compared system is fed exactly the same observations. Observation `i`
of seed `s` is the base64 text of 1,536 bytes drawn from a generator seeded
with (s, i): 2,048 ASCII characters, so each observation is exactly 2 KB as
stored, identical across systems and runs, and no storage engine can shrink it
meaningfully (base64 of random bytes carries 6 bits per character; general
purpose compressors gain at most a quarter and in practice almost nothing).
"""

from __future__ import annotations

import base64
import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass

OBSERVATION_BYTES = 2048
"""Size of one observation as stored (ASCII characters = bytes)."""

_RANDOM_BYTES = OBSERVATION_BYTES * 3 // 4
DEFAULT_SEED = 20240607


def observation(index: int, seed: int = DEFAULT_SEED) -> str:
    """The `index`-th observation of the trajectory seeded with `seed`."""
    digest = hashlib.sha256(f"baton-bench:{seed}:{index}".encode()).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    text = base64.b64encode(rng.randbytes(_RANDOM_BYTES)).decode("ascii")
    assert len(text) == OBSERVATION_BYTES
    return text


@dataclass(frozen=True)
class Trajectory:
    """N steps of one observation each."""

    steps: int
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"a trajectory needs at least one step, not {self.steps}")

    def observations(self) -> Iterator[str]:
        for index in range(self.steps):
            yield observation(index, self.seed)

    def materialize(self) -> tuple[str, ...]:
        """Every observation, computed up front so generating them is never timed."""
        return tuple(self.observations())

    @property
    def observation_bytes(self) -> int:
        """Raw bytes of all observations: the floor any system must store."""
        return self.steps * OBSERVATION_BYTES
