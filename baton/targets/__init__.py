"""Real systems that agents act on, each behind the gateway's `MutationTarget` protocol."""
