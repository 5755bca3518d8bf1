"""Effects as the targets' own record files show them, for the duplicate-side-effect metric."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from baton.checker import TargetEffect
from baton.metrics.load import EffectRecord
from baton.targets import corpus_service, deploy_service

# One line per target that keeps an effect file under BATON_HOME/targets/<name>/.
READERS: dict[str, Callable[[Path], list[TargetEffect]]] = {
    "deploy": deploy_service.read_effects,
    "corpus": corpus_service.read_effects,
}


def target_effects(home: Path) -> list[EffectRecord]:
    """Every effect the targets recorded; a logical operation is the operation id the effect names."""
    records: list[EffectRecord] = []
    for name, read in READERS.items():
        directory = home / "targets" / name
        for effect in read(directory):
            records.append(EffectRecord(run_id=effect.run_id, target=name,
                                        logical_operation=effect.operation_id,
                                        idempotency_key=effect.idempotency_key))
    return records
