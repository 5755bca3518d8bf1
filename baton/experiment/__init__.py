"""The strategy experiment (sec. 26): Baton's safe handoff against simpler recovery strategies.

One seeded workload and one seeded fault schedule per seed; every strategy replays over both in
a fast discrete-event model; an oracle outside the strategies judges duplicates and stale evidence;
the sec.-25 metrics come from `baton.metrics.definitions` over each strategy's event log.
"""
