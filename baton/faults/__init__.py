"""The fault matrix: seeded fault cases run against Baton and against simpler strategies."""
