"""Dagster assets over Baton's execution state.

One dynamic partition per agent run; the assets ``observations``,
``candidates``, ``verifier_evidence`` and ``checkpoints`` carry that run's
lineage in this order, each version identified by its content hash
(``data_version``) with the run, release, environment, epoch and boundary as
metadata. Asset checks flag evidence not bound to the current candidate hash,
checkpoints whose hash does not verify, and budgets that went down. The
assets stay thin: they read and write through ``baton`` and hold no logic of
their own.
"""
