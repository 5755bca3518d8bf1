"""Deterministic simulation: the unchanged protocol on a virtual clock, seeded faults, independent oracles."""
